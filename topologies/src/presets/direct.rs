//! GPUs linked directly to each other: a ring and a 2-D torus.
//!
//! Non-neighbours are reached through other GPUs, so these GPUs forward
//! traffic ([`Vertex::with_forwarding`]); as endpoints they do so with no
//! added latency.
//!
//! Small dimensions: a ring of one GPU has no link, a ring of two has one
//! link (not two parallel ones: the "wraparound" would duplicate it), and a
//! ring of `n >= 3` has `n`. A torus applies the same rule to each row and
//! each column, so a dimension of 2 has no duplicate wraparound link and a
//! dimension of 1 has no link in that dimension.
//!
//! **Rotations.** [`ring_rotation`] turns the ring by one GPU and
//! [`torus2d_rotation`] moves the torus down by one row (GPU `i` to GPU
//! `i + x`): row-major ranks then move on by one row's worth, and every
//! link moves with every step (a two-GPU ring's single link is turned
//! round, which is a move of each direction), so both fold.

use crate::TopologyError;
use crate::graph::{Topology, VertexId};
use crate::kind::{Link, LinkKind};
use crate::rotation::Rotation;
use crate::vertex::{Vertex, VertexKind};

use super::symmetry::{Uplinks, indexed, rotation, symmetry, vertex_map};
use super::{check_size, parameter};

/// The parameters of [`ring`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RingParams {
    /// GPUs (default 8).
    pub gpus: usize,
    /// The kind of each link (default `nvlink4`).
    pub link: LinkKind,
    /// Physical links bundled between neighbours (default 1).
    pub links_per_pair: u32,
}

impl Default for RingParams {
    fn default() -> RingParams {
        RingParams {
            gpus: 8,
            link: LinkKind::NvLink { generation: 4 },
            links_per_pair: 1,
        }
    }
}

/// The parameters of [`torus2d`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Torus {
    /// GPUs per row (default 4).
    pub x: usize,
    /// Rows (default 4).
    pub y: usize,
    /// The kind of each link (default `nvlink4`).
    pub link: LinkKind,
    /// Physical links bundled between neighbours (default 1).
    pub links_per_pair: u32,
}

impl Default for Torus {
    fn default() -> Torus {
        Torus {
            x: 4,
            y: 4,
            link: LinkKind::NvLink { generation: 4 },
            links_per_pair: 1,
        }
    }
}

/// Links in a ring of `n`: `n` for `n >= 3`, else `n - 1` (0 or 1).
fn ring_links(n: usize) -> usize {
    if n >= 3 { n } else { n.saturating_sub(1) }
}

/// Links `ids` (in order) into a ring with the small-size rule above.
fn link_ring(t: &mut Topology, ids: &[VertexId], link: Link) -> Result<(), TopologyError> {
    let n = ids.len();
    for i in 0..ring_links(n) {
        t.add_link(ids[i], ids[(i + 1) % n], link)?;
    }
    Ok(())
}

/// Adds `count` forwarding GPUs named `gpu<i>`.
fn add_gpus(t: &mut Topology, count: usize) -> Result<Vec<VertexId>, TopologyError> {
    (0..count)
        .map(|i| {
            t.add_vertex(
                Vertex::with_default_latency(format!("gpu{i}"), VertexKind::Gpu)
                    .with_forwarding(true),
            )
        })
        .collect()
}

/// `gpus` GPUs `gpu0..` in a ring, `gpu<i>` linked to `gpu<i+1 mod n>` by a
/// bundle of `links_per_pair` links.
///
/// `n` vertices and `n` links for `n >= 3`; `n - 1` links for `n` = 1 or 2.
pub fn ring(params: &RingParams) -> Result<Topology, TopologyError> {
    if params.gpus == 0 {
        return Err(parameter("ring: gpus must be at least 1"));
    }
    if params.links_per_pair == 0 {
        return Err(parameter("ring: links_per_pair must be at least 1"));
    }
    check_size("ring", Some(params.gpus))?;
    let mut t = Topology::new();
    let ids = add_gpus(&mut t, params.gpus)?;
    link_ring(
        &mut t,
        &ids,
        Link::bundle(params.link, params.links_per_pair),
    )?;
    Ok(t)
}

/// An `x` by `y` torus of GPUs `gpu<i>`, GPU `i` at column `i % x`, row
/// `i / x` (row-major), each row and each column a ring.
///
/// `x·y` vertices and `y·r(x) + x·r(y)` links, where `r(n) = n` for
/// `n >= 3` and `n - 1` otherwise.
pub fn torus2d(params: &Torus) -> Result<Topology, TopologyError> {
    let &Torus {
        x,
        y,
        link,
        links_per_pair,
    } = params;
    if x == 0 || y == 0 {
        return Err(parameter(format!(
            "torus2d: x and y must be at least 1, got x = {x}, y = {y}"
        )));
    }
    if links_per_pair == 0 {
        return Err(parameter("torus2d: links_per_pair must be at least 1"));
    }
    check_size("torus2d", x.checked_mul(y))?;
    let mut t = Topology::new();
    let ids = add_gpus(&mut t, x * y)?;
    let link = Link::bundle(link, links_per_pair);
    for row in ids.chunks(x) {
        link_ring(&mut t, row, link)?;
    }
    for col in 0..x {
        let column: Vec<VertexId> = (0..y).map(|r| ids[r * x + col]).collect();
        link_ring(&mut t, &column, link)?;
    }
    Ok(t)
}

/// The image of every `gpu<i>` of a `gpus`-GPU preset: `gpu<(i + step)
/// mod gpus>`.
fn shift_gpus(
    preset: &str,
    topology: &Topology,
    gpus: usize,
    step: usize,
) -> Result<Vec<VertexId>, TopologyError> {
    vertex_map(topology, |name| match indexed(name, "gpu") {
        Some((i, "")) if i < gpus => Ok(format!("gpu{}", (i + step) % gpus)),
        _ => Err(symmetry(format!(
            "{preset}: the topology has {name}, which a preset of {gpus} GPUs does not build; \
             was it built from these parameters?"
        ))),
    })
}

/// The rotation of a [`ring`] built from `params` by one GPU (`shift` 1):
/// `gpu<i>` goes to `gpu<i+1 mod n>` and each link to the next one, with
/// ranks on `placement` (usually `topology.endpoints()`).
///
/// A parameter out of range is a [`TopologyError::Parameter`]; maps that
/// [`Rotation::new`] refuses (a placement that does not go round the ring
/// in order, a topology not built from `params`) are its
/// [`TopologyError::Symmetry`].
pub fn ring_rotation(
    params: &RingParams,
    topology: &Topology,
    placement: &[VertexId],
) -> Result<Rotation, TopologyError> {
    if params.gpus == 0 {
        return Err(parameter("ring: gpus must be at least 1"));
    }
    let vertices = shift_gpus("ring_rotation", topology, params.gpus, 1)?;
    rotation(topology, placement, 1, vertices, Uplinks::Keep)
}

/// The rotation of a [`torus2d`] built from `params` by one row (`shift`
/// `x` ranks): GPU `i` (column `i % x`, row `i / x`) goes to GPU
/// `i + x mod x·y`, the same column one row down, with ranks on
/// `placement` (usually `topology.endpoints()`, row-major).
///
/// A parameter out of range is a [`TopologyError::Parameter`]; maps that
/// [`Rotation::new`] refuses (a placement that is not row-major, a
/// topology not built from `params`) are its [`TopologyError::Symmetry`].
pub fn torus2d_rotation(
    params: &Torus,
    topology: &Topology,
    placement: &[VertexId],
) -> Result<Rotation, TopologyError> {
    let &Torus { x, y, .. } = params;
    if x == 0 || y == 0 {
        return Err(parameter(format!(
            "torus2d: x and y must be at least 1, got x = {x}, y = {y}"
        )));
    }
    let gpus = x
        .checked_mul(y)
        .ok_or_else(|| parameter(format!("torus2d: x·y overflows, got x = {x}, y = {y}")))?;
    let vertices = shift_gpus("torus2d_rotation", topology, gpus, x)?;
    rotation(topology, placement, x, vertices, Uplinks::Keep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::check::{bandwidth, links_between, well_formed};

    #[test]
    fn ring_counts_and_small_sizes() {
        for (n, links) in [(1, 0), (2, 1), (3, 3), (8, 8), (17, 17)] {
            let t = ring(&RingParams {
                gpus: n,
                ..RingParams::default()
            })
            .unwrap();
            assert_eq!((t.vertex_count(), t.link_count()), (n, links), "{n}");
            well_formed(&t);
            assert!(t.vertex_ids().all(|v| t.vertex(v).forwards));
        }
        let t = ring(&RingParams::default()).unwrap();
        assert_eq!(links_between(&t, "gpu7", "gpu0"), 1);
        assert_eq!(links_between(&t, "gpu0", "gpu2"), 0);
        let t = ring(&RingParams {
            links_per_pair: 2,
            ..RingParams::default()
        })
        .unwrap();
        // Two NVLink 4 links at NCCL's 20.6 GB/s.
        assert_eq!(bandwidth(&t, "gpu3", "gpu4"), 41.2e9);
    }

    #[test]
    fn torus_counts_and_small_dimensions() {
        let r = |n: usize| if n >= 3 { n } else { n - 1 };
        for (x, y) in [
            (1, 1),
            (1, 2),
            (2, 2),
            (2, 3),
            (1, 5),
            (4, 4),
            (3, 5),
            (8, 2),
        ] {
            let t = torus2d(&Torus {
                x,
                y,
                ..Torus::default()
            })
            .unwrap();
            assert_eq!(t.vertex_count(), x * y, "{x}x{y}");
            assert_eq!(t.link_count(), y * r(x) + x * r(y), "{x}x{y}");
            well_formed(&t);
        }
        // 4x4: gpu5 (column 1, row 1) neighbours 4, 6, 1, 9; wraparound 4-7.
        let t = torus2d(&Torus::default()).unwrap();
        for n in ["gpu4", "gpu6", "gpu1", "gpu9"] {
            assert_eq!(links_between(&t, "gpu5", n), 1, "{n}");
        }
        assert_eq!(links_between(&t, "gpu4", "gpu7"), 1);
        assert_eq!(links_between(&t, "gpu1", "gpu13"), 1);
        assert_eq!(links_between(&t, "gpu5", "gpu10"), 0);
        // Dimension 2: one link between the pair, not two.
        let t = torus2d(&Torus {
            x: 2,
            y: 2,
            ..Torus::default()
        })
        .unwrap();
        assert_eq!(links_between(&t, "gpu0", "gpu1"), 1);
        assert_eq!(links_between(&t, "gpu0", "gpu2"), 1);
    }

    #[test]
    fn bad_parameters_are_named() {
        let err = |e: TopologyError, name: &str| {
            assert!(
                matches!(&e, TopologyError::Parameter(m) if m.contains(name)),
                "{e}"
            );
        };
        err(
            ring(&RingParams {
                gpus: 0,
                ..RingParams::default()
            })
            .unwrap_err(),
            "gpus",
        );
        err(
            ring(&RingParams {
                links_per_pair: 0,
                ..RingParams::default()
            })
            .unwrap_err(),
            "links_per_pair",
        );
        err(
            torus2d(&Torus {
                y: 0,
                ..Torus::default()
            })
            .unwrap_err(),
            "y",
        );
        err(
            torus2d(&Torus {
                x: 1 << 20,
                y: 1 << 20,
                ..Torus::default()
            })
            .unwrap_err(),
            "vertices",
        );
        err(
            torus2d(&Torus {
                x: usize::MAX,
                y: 2,
                ..Torus::default()
            })
            .unwrap_err(),
            "vertices",
        );
    }
}
