//! A PCIe box: GPUs under PCIe switches under CPU sockets, the sockets
//! joined by SMP links, no NVLink.
//!
//! ```text
//!    socket0 ===== smp x4 ===== socket1
//!     /    \                    /    \
//!  pcie0  pcie1              pcie2  pcie3
//!  /  \    /  \              /  \    /  \
//! gpu0 gpu1 gpu2 gpu3     gpu4 gpu5 gpu6 gpu7
//! ```
//!
//! GPU-to-GPU traffic crosses the PCIe switch (same switch, `PIX` in
//! `nvidia-smi topo -m`), the socket's root complex (same socket, `PHB`),
//! or the SMP link between sockets (NUMA crossing, `SYS`).

use crate::TopologyError;
use crate::graph::Topology;
use crate::kind::{Link, LinkKind};
use crate::vertex::{Vertex, VertexKind};

use super::{check_size, dgx::SMP_LINKS, parameter};

/// The parameters of [`pcie_box`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PcieBox {
    /// CPU sockets (default 2).
    pub sockets: usize,
    /// PCIe switches under each socket (default 2).
    pub switches_per_socket: usize,
    /// GPUs under each PCIe switch (default 2).
    pub gpus_per_switch: usize,
    /// The PCIe link of every GPU and switch uplink (default `pcie4x16`).
    pub pcie: LinkKind,
    /// SMP links bundled between each pair of sockets (default 4: a
    /// 4th-generation Xeon Scalable has four UPI links).
    pub smp_links: u32,
}

impl Default for PcieBox {
    fn default() -> PcieBox {
        PcieBox {
            sockets: 2,
            switches_per_socket: 2,
            gpus_per_switch: 2,
            pcie: LinkKind::Pcie {
                generation: 4,
                width: 16,
            },
            smp_links: SMP_LINKS,
        }
    }
}

/// A PCIe box named `node0`: vertices `node0/gpu<g>`, `node0/pcie<p>`,
/// `node0/socket<s>`, GPUs numbered socket-major (GPU `g` is under switch
/// `g / gpus_per_switch`, switch `p` under socket `p / switches_per_socket`).
///
/// With `S` sockets, `P` switches per socket and `K` GPUs per switch:
/// `S + S·P + S·P·K` vertices and `S·P + S·P·K + S(S-1)/2` links (every
/// pair of sockets has one bundle of `smp_links` SMP links).
pub fn pcie_box(params: &PcieBox) -> Result<Topology, TopologyError> {
    let &PcieBox {
        sockets,
        switches_per_socket,
        gpus_per_switch,
        pcie,
        smp_links,
    } = params;
    for (name, value) in [
        ("sockets", sockets),
        ("switches_per_socket", switches_per_socket),
        ("gpus_per_switch", gpus_per_switch),
    ] {
        if value == 0 {
            return Err(parameter(format!("pcie_box: {name} must be at least 1")));
        }
    }
    if !matches!(pcie, LinkKind::Pcie { .. }) {
        return Err(parameter(format!(
            "pcie_box: pcie must be a PCIe link kind (e.g. pcie4x16), got {pcie}"
        )));
    }
    if sockets > 1 && smp_links == 0 {
        return Err(parameter("pcie_box: smp_links must be at least 1"));
    }
    let switches = sockets.checked_mul(switches_per_socket);
    let gpus = switches.and_then(|s| s.checked_mul(gpus_per_switch));
    let vertices = gpus
        .zip(switches)
        .and_then(|(g, s)| g.checked_add(s)?.checked_add(sockets));
    check_size("pcie_box", vertices)?;
    let (switches, gpus) = (
        sockets * switches_per_socket,
        sockets * switches_per_socket * gpus_per_switch,
    );

    let mut t = Topology::new();
    let pcie_link = Link::bundle(pcie, 1);
    let gpu_ids = (0..gpus)
        .map(|g| {
            t.add_vertex(Vertex::with_default_latency(
                format!("node0/gpu{g}"),
                VertexKind::Gpu,
            ))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let switch_ids = (0..switches)
        .map(|p| {
            t.add_vertex(Vertex::with_default_latency(
                format!("node0/pcie{p}"),
                VertexKind::PcieSwitch,
            ))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let socket_ids = (0..sockets)
        .map(|s| {
            t.add_vertex(Vertex::with_default_latency(
                format!("node0/socket{s}"),
                VertexKind::Socket,
            ))
        })
        .collect::<Result<Vec<_>, _>>()?;
    for (g, &gpu) in gpu_ids.iter().enumerate() {
        t.add_link(gpu, switch_ids[g / gpus_per_switch], pcie_link)?;
    }
    for (p, &switch) in switch_ids.iter().enumerate() {
        t.add_link(switch, socket_ids[p / switches_per_socket], pcie_link)?;
    }
    for a in 0..sockets {
        for b in a + 1..sockets {
            t.add_link(
                socket_ids[a],
                socket_ids[b],
                Link::bundle(LinkKind::Smp, smp_links),
            )?;
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::check::{bandwidth, links_between, well_formed};

    #[test]
    fn counts_follow_the_formulas() {
        for (s, p, k) in [(1, 1, 1), (2, 2, 2), (3, 1, 4), (4, 2, 1)] {
            let t = pcie_box(&PcieBox {
                sockets: s,
                switches_per_socket: p,
                gpus_per_switch: k,
                ..PcieBox::default()
            })
            .unwrap();
            assert_eq!(t.vertex_count(), s + s * p + s * p * k, "{s} {p} {k}");
            assert_eq!(
                t.link_count(),
                s * p + s * p * k + s * (s - 1) / 2,
                "{s} {p} {k}"
            );
            assert_eq!(t.endpoints().len(), s * p * k);
            well_formed(&t);
        }
    }

    #[test]
    fn gpus_hang_off_the_right_switch_and_socket() {
        let t = pcie_box(&PcieBox::default()).unwrap();
        assert_eq!(links_between(&t, "node0/gpu5", "node0/pcie2"), 1);
        assert_eq!(links_between(&t, "node0/pcie2", "node0/socket1"), 1);
        assert_eq!(links_between(&t, "node0/pcie1", "node0/socket0"), 1);
        assert_eq!(bandwidth(&t, "node0/socket0", "node0/socket1"), 4.0 * 32e9);
        // PCIe Gen4 x16 at NCCL's 1.5 GB/s per lane.
        let gen4 = 24e9;
        assert!((bandwidth(&t, "node0/gpu0", "node0/pcie0") - gen4).abs() < 1.0);
        // Three sockets: every pair joined.
        let t3 = pcie_box(&PcieBox {
            sockets: 3,
            ..PcieBox::default()
        })
        .unwrap();
        assert_eq!(links_between(&t3, "node0/socket0", "node0/socket2"), 1);
        assert_eq!(links_between(&t3, "node0/socket1", "node0/socket2"), 1);
    }

    #[test]
    fn bad_parameters_are_named() {
        let bad = [
            (
                PcieBox {
                    sockets: 0,
                    ..PcieBox::default()
                },
                "sockets",
            ),
            (
                PcieBox {
                    switches_per_socket: 0,
                    ..PcieBox::default()
                },
                "switches_per_socket",
            ),
            (
                PcieBox {
                    gpus_per_switch: 0,
                    ..PcieBox::default()
                },
                "gpus_per_switch",
            ),
            (
                PcieBox {
                    smp_links: 0,
                    ..PcieBox::default()
                },
                "smp_links",
            ),
            (
                PcieBox {
                    pcie: LinkKind::Smp,
                    ..PcieBox::default()
                },
                "pcie",
            ),
            (
                PcieBox {
                    gpus_per_switch: usize::MAX,
                    ..PcieBox::default()
                },
                "vertices",
            ),
        ];
        for (params, name) in bad {
            let err = pcie_box(&params).unwrap_err();
            assert!(
                matches!(&err, TopologyError::Parameter(m) if m.contains(name)),
                "{err}"
            );
        }
    }
}
