//! Building a preset's [`Rotation`] from where its vertices go.
//!
//! A preset says where each vertex goes, by name (`node3/gpu5` to
//! `node4/gpu5`); the link directions follow: a direction's image joins
//! the images of its ends. Parallel links between two vertices are told
//! apart by their position in insertion order, and the `p`-th link
//! between `a` and `b` goes to the `p`-th between their images. A leaf's
//! uplinks (its links to spines) are one group in insertion order instead,
//! which the preset may rotate ([`Uplinks`]); a spine's downlink is the
//! reverse of an uplink and goes to the reverse of that uplink's image.
//!
//! The maps are only proposed here: [`Rotation::new`] checks them, so a
//! preset that gets its symmetry wrong, or a placement that does not
//! rotate with it, is an error and never a rotation.

use rustc_hash::FxHashMap as HashMap;

use crate::TopologyError;
use crate::graph::{LinkId, Topology, VertexId};
use crate::rotation::Rotation;
use crate::vertex::VertexKind;

pub(super) use crate::rotation::symmetry;

/// Where a leaf's uplinks go, by their position `i` among the leaf's `u`
/// uplinks in insertion order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Uplinks {
    /// Uplink `i` goes to uplink `i` of the leaf's image.
    Keep,
    /// Uplink `i` goes to uplink `(i + 1) mod u` of the leaf's image.
    Next,
}

impl Uplinks {
    /// The image's position of uplink `i` of `u`.
    fn image(self, i: usize, u: usize) -> usize {
        match self {
            Uplinks::Keep => i,
            Uplinks::Next => (i + 1) % u,
        }
    }
}

/// `name` read as `<prefix><index><rest>`: `indexed("node12/gpu3",
/// "node")` is `Some((12, "/gpu3"))`. `None` when `name` does not start
/// with `prefix` and a decimal index.
pub(super) fn indexed<'a>(name: &'a str, prefix: &str) -> Option<(usize, &'a str)> {
    let tail = name.strip_prefix(prefix)?;
    let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
    let index = tail[..digits].parse().ok()?;
    Some((index, &tail[digits..]))
}

/// The image of every vertex (indexed by [`VertexId::index`]):
/// `image(name)` names where the vertex called `name` goes, or says why it
/// cannot. A name the topology does not have is an error too.
pub(super) fn vertex_map(
    topology: &Topology,
    image: impl Fn(&str) -> Result<String, TopologyError>,
) -> Result<Vec<VertexId>, TopologyError> {
    topology
        .vertex_ids()
        .map(|v| {
            let name = &topology.vertex(v).name;
            let target = image(name)?;
            topology.find(&target).ok_or_else(|| {
                symmetry(format!(
                    "{name} would go to {target}, which the topology does not have"
                ))
            })
        })
        .collect()
}

/// A group of parallel link directions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Group {
    /// The directions from the first vertex to the second.
    Between(VertexId, VertexId),
    /// A leaf's uplinks (towards spines).
    Uplinks(VertexId),
}

/// Whether direction `l` goes from a vertex of kind `from` to one of kind
/// `to`.
fn joins(topology: &Topology, l: LinkId, from: VertexKind, to: VertexKind) -> bool {
    let (a, b) = topology.ends(l);
    topology.vertex(a).kind == from && topology.vertex(b).kind == to
}

/// The rotation of the ranks on `placement` by `shift` in which vertex `v`
/// goes to `vertices[v]` and link directions follow as the module docs
/// say, checked by [`Rotation::new`]. An error names a link with no image
/// or the first rule the maps break.
pub(super) fn rotation(
    topology: &Topology,
    placement: &[VertexId],
    shift: usize,
    vertices: Vec<VertexId>,
    uplinks: Uplinks,
) -> Result<Rotation, TopologyError> {
    let links = link_map(topology, &vertices, uplinks, |_| true)?;
    Rotation::new(topology, placement, placement.len(), shift, vertices, links)
}

/// The rotation taking rank `r` (on `placement[r]`) to rank
/// `rank_images[r]`, vertex `v` to `vertices[v]`, and link directions as
/// the module docs say, checked by [`Rotation::permuting`].
pub(super) fn permuting_rotation(
    topology: &Topology,
    placement: &[VertexId],
    rank_images: Vec<usize>,
    vertices: Vec<VertexId>,
    uplinks: Uplinks,
) -> Result<Rotation, TopologyError> {
    let links = link_map(topology, &vertices, uplinks, |_| true)?;
    Rotation::permuting(topology, placement, rank_images, vertices, links)
}

/// [`permuting_rotation`] of a map that carries only the link directions
/// `carried` accepts (the others stay in place), checked by
/// [`Rotation::permuting_partial`].
pub(super) fn partial_permuting_rotation(
    topology: &Topology,
    placement: &[VertexId],
    rank_images: Vec<usize>,
    vertices: Vec<VertexId>,
    uplinks: Uplinks,
    carried: impl Fn(LinkId) -> bool,
) -> Result<Rotation, TopologyError> {
    let links = link_map(topology, &vertices, uplinks, &carried)?;
    let carried = topology.link_ids().map(carried).collect();
    Rotation::permuting_partial(topology, placement, rank_images, vertices, links, carried)
}

/// The image of every link direction when vertex `v` goes to
/// `vertices[v]` (see the module docs), a direction `carried` refuses
/// staying in place; an error names a link with no image.
fn link_map(
    topology: &Topology,
    vertices: &[VertexId],
    uplinks: Uplinks,
    carried: impl Fn(LinkId) -> bool,
) -> Result<Vec<LinkId>, TopologyError> {
    let group = |l: LinkId| {
        let (a, b) = topology.ends(l);
        if joins(topology, l, VertexKind::Leaf, VertexKind::Spine) {
            Group::Uplinks(a)
        } else {
            Group::Between(a, b)
        }
    };
    // Link ids are insertion order, so each group's list is too.
    let mut groups: HashMap<Group, Vec<LinkId>> = HashMap::default();
    let mut position = vec![0; topology.link_direction_count()];
    for l in topology.link_ids() {
        let members = groups.entry(group(l)).or_default();
        position[l.index()] = members.len();
        members.push(l);
    }
    // The image of a direction that is not a spine's downlink.
    let image = |l: LinkId| {
        let (target, index) = match group(l) {
            Group::Between(a, b) => (
                Group::Between(vertices[a.index()], vertices[b.index()]),
                position[l.index()],
            ),
            Group::Uplinks(leaf) => {
                let u = groups[&Group::Uplinks(leaf)].len();
                (
                    Group::Uplinks(vertices[leaf.index()]),
                    uplinks.image(position[l.index()], u),
                )
            }
        };
        groups
            .get(&target)
            .and_then(|members| members.get(index))
            .copied()
            .ok_or_else(|| {
                let (a, b) = topology.ends(l);
                let (a, b) = (vertices[a.index()], vertices[b.index()]);
                symmetry(format!(
                    "link {} has no image: {} has no link number {} to {}",
                    topology.link_name(l),
                    topology.vertex(a).name,
                    index + 1,
                    topology.vertex(b).name
                ))
            })
    };
    topology
        .link_ids()
        .map(|l| {
            if !carried(l) {
                Ok(l)
            } else if joins(topology, l, VertexKind::Spine, VertexKind::Leaf) {
                Ok(topology.reverse(image(topology.reverse(l))?))
            } else {
                image(l)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kind::{Link, LinkKind};
    use crate::vertex::Vertex;

    #[test]
    fn names_split_into_prefix_index_and_rest() {
        assert_eq!(indexed("node12/gpu3", "node"), Some((12, "/gpu3")));
        assert_eq!(indexed("leaf7", "leaf"), Some((7, "")));
        assert_eq!(indexed("leaf", "leaf"), None);
        assert_eq!(indexed("spine2", "leaf"), None);
        assert_eq!(indexed("nodex/gpu0", "node"), None);
    }

    /// Two leaves, each with two hosts and two uplinks to one spine (two
    /// parallel links): the swap of the leaves with their hosts.
    fn two_leaves() -> (Topology, Vec<VertexId>) {
        let mut t = Topology::new();
        let ib = Link::bundle(LinkKind::parse("ib_ndr").unwrap(), 1);
        let mut hosts = Vec::new();
        let mut leaves = Vec::new();
        for l in 0..2 {
            let leaf = t
                .add_vertex(Vertex::new(format!("leaf{l}"), VertexKind::Leaf))
                .unwrap();
            for h in 0..2 {
                let host = t
                    .add_vertex(Vertex::new(format!("host{}", 2 * l + h), VertexKind::Cpu))
                    .unwrap();
                t.add_link(host, leaf, ib).unwrap();
                hosts.push(host);
            }
            leaves.push(leaf);
        }
        let spine = t
            .add_vertex(Vertex::new("spine0", VertexKind::Spine))
            .unwrap();
        for &leaf in &leaves {
            t.add_link(leaf, spine, ib).unwrap();
            t.add_link(leaf, spine, ib).unwrap();
        }
        (t, hosts)
    }

    fn swap_leaves(name: &str) -> Result<String, TopologyError> {
        if let Some((h, "")) = indexed(name, "host") {
            Ok(format!("host{}", (h + 2) % 4))
        } else if let Some((l, "")) = indexed(name, "leaf") {
            Ok(format!("leaf{}", 1 - l))
        } else {
            Ok(name.to_string())
        }
    }

    #[test]
    fn uplinks_keep_or_advance_their_position() {
        let (t, hosts) = two_leaves();
        let vertices = vertex_map(&t, swap_leaves).unwrap();
        let up = |leaf: &str| {
            let leaf = t.find(leaf).unwrap();
            t.out_links(leaf)
                .into_iter()
                .filter(|&l| joins(&t, l, VertexKind::Leaf, VertexKind::Spine))
                .collect::<Vec<_>>()
        };
        let (up0, up1) = (up("leaf0"), up("leaf1"));
        let keep = rotation(&t, &hosts, 2, vertices.clone(), Uplinks::Keep).unwrap();
        assert_eq!(keep.link(up0[0]), up1[0]);
        assert_eq!(keep.link(up0[1]), up1[1]);
        assert_eq!(keep.link(t.reverse(up1[1])), t.reverse(up0[1]));
        keep.link_orbits(&t).unwrap();
        let next = rotation(&t, &hosts, 2, vertices, Uplinks::Next).unwrap();
        assert_eq!(next.link(up0[0]), up1[1]);
        assert_eq!(next.link(up0[1]), up1[0]);
        assert_eq!(next.link(t.reverse(up1[0])), t.reverse(up0[1]));
    }

    #[test]
    fn a_vertex_map_with_no_image_or_a_wrong_one_is_an_error() {
        let (t, hosts) = two_leaves();
        let err = vertex_map(&t, |name| Ok(format!("{name}x"))).unwrap_err();
        assert!(err.to_string().contains("leaf0x"), "{err}");
        // Swapping the hosts but not the leaves breaks the host links.
        let vertices = vertex_map(&t, |name| match indexed(name, "host") {
            Some((h, "")) => Ok(format!("host{}", (h + 2) % 4)),
            _ => Ok(name.to_string()),
        })
        .unwrap();
        let err = rotation(&t, &hosts, 2, vertices, Uplinks::Keep).unwrap_err();
        assert!(
            err.to_string().contains("host0->leaf0 has no image"),
            "{err}"
        );
    }
}
