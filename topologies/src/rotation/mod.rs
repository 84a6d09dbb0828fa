//! [`Rotation`]: a symmetry of a topology and its ranks, for folded runs.
//!
//! A rotation by `shift` ranks maps rank `r` to rank `(r + shift) mod N`
//! and every vertex and link direction to its image, so that the hardware
//! looks the same from every rank of an orbit: rank `r`'s links, switches
//! and neighbours are rank `r + shift`'s, moved over. A preset that has
//! such a symmetry builds it (for example a rail-optimised fat-tree
//! rotated by one node); [`Rotation::new`] checks that it really is one.
//!
//! Two things use it:
//!
//! - **Symmetric routes.** The route of ranks `(s + k·shift, d + k·shift)`
//!   is the route of `(s, d)` with every link moved `k` times
//!   ([`Rotation::link_power`]): ECMP then treats every rotated copy of a
//!   flow alike, and a run is symmetric under the rotation.
//! - **Folding.** With symmetric routes and a collective whose ranks all
//!   do the same thing shifted, every rank of an orbit lives through the
//!   same timeline. A folded run simulates only ranks `0..shift` and puts
//!   the traffic of every link on its orbit's representative
//!   ([`Rotation::link_orbits`]). That is exact when every link's orbit
//!   has [`Rotation::order`] members (no link is fixed by a smaller
//!   rotation), which `link_orbits` checks.
//!
//! **Partial rotations.** A map of the ranks and vertices that is a
//! symmetry of every link but a few (turning a DGX node's GPUs by a
//! quarter moves PCIe switch 1 onto socket 1's switch 2 while switch 0
//! stays on socket 0: no image of the sockets fits) can still fold a run
//! whose routes never cross those few. [`Rotation::permuting_partial`]
//! builds one: the links it does not *carry* are their own images and
//! are exempt from the checks; [`Rotation::carries`] tells them apart,
//! and whoever moves a route by the rotation must refuse one that
//! crosses an uncarried link (the engine's folded and symmetric runs do,
//! naming the link).

use crate::TopologyError;
use crate::graph::{LinkId, Topology, VertexId};

/// A rotation of `ranks` ranks by `shift` (or, built by
/// [`Rotation::permuting`], a permutation of them) together with the
/// automorphism of the topology that carries each rank's vertex to the
/// next one's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rotation {
    shift: usize,
    ranks: usize,
    /// Steps until every rank and vertex is back.
    order: usize,
    /// `rank_images[r]`: where rank `r` goes, when the rotation permutes
    /// ranks otherwise than by `shift`.
    rank_images: Option<Vec<usize>>,
    /// `vertices[v]`: the image of vertex `v`.
    vertices: Vec<VertexId>,
    /// `links[l]`: the image of link direction `l`.
    links: Vec<LinkId>,
    /// `carried[l]`: whether the rotation carries link direction `l`, for
    /// a partial rotation ([`Rotation::permuting_partial`]); `None`: every
    /// link is carried.
    carried: Option<Vec<bool>>,
}

/// A [`TopologyError::Symmetry`] with `message`.
pub(crate) fn symmetry(message: impl Into<String>) -> TopologyError {
    TopologyError::Symmetry(message.into())
}

/// Checks that `images` (indexed by position) is a permutation of
/// `0..images.len()`, naming `what` in the error.
fn check_permutation(images: &[usize], what: &str) -> Result<(), TopologyError> {
    let mut seen = vec![false; images.len()];
    for (i, &image) in images.iter().enumerate() {
        if image >= images.len() {
            return Err(symmetry(format!(
                "the image of {what} {i} is {image}, not one of the {} {what}s",
                images.len()
            )));
        }
        if std::mem::replace(&mut seen[image], true) {
            return Err(symmetry(format!(
                "two {what}s have {what} {image} as their image"
            )));
        }
    }
    Ok(())
}

/// The length of the cycle through each element of the permutation
/// `images` (one walk per cycle: `O(len)` in all).
fn cycle_lengths(images: &[usize]) -> Vec<usize> {
    let mut length = vec![0; images.len()];
    for start in 0..images.len() {
        if length[start] != 0 {
            continue;
        }
        let mut members = vec![start];
        let mut next = images[start];
        while next != start {
            members.push(next);
            next = images[next];
        }
        for &m in &members {
            length[m] = members.len();
        }
    }
    length
}

impl Rotation {
    /// The rotation of ranks `0..ranks` (placed on `placement`) by `shift`
    /// whose images of the vertices and link directions are `vertices` and
    /// `links` (indexed by [`VertexId::index`] and [`LinkId::index`]).
    ///
    /// Checked: `shift` divides `ranks` and `placement` has `ranks`
    /// entries; both maps are permutations; each link direction's image
    /// joins the images of its ends, has the same parameters, and the
    /// image of its reverse is the reverse of its image; each vertex's
    /// image has the same kind, forwards traffic exactly when it does, and
    /// has the same forwarding latency (so routes through it rotate into
    /// routes); rank `r`'s vertex
    /// goes to rank `(r + shift) mod ranks`'s; and rotating
    /// `ranks / shift` times is the identity. Errors name the first
    /// vertex, link or rank that breaks a rule.
    pub fn new(
        topology: &Topology,
        placement: &[VertexId],
        ranks: usize,
        shift: usize,
        vertices: Vec<VertexId>,
        links: Vec<LinkId>,
    ) -> Result<Rotation, TopologyError> {
        if shift == 0 || ranks == 0 || !ranks.is_multiple_of(shift) {
            return Err(symmetry(format!(
                "a rotation's shift ({shift}) must be positive and divide the number of ranks ({ranks})"
            )));
        }
        let images: Vec<usize> = (0..ranks).map(|r| (r + shift) % ranks).collect();
        Rotation::checked(
            topology, placement, shift, images, None, vertices, links, None,
        )
    }

    /// The rotation that takes rank `r` (on `placement[r]`) to rank
    /// `rank_images[r]`, with the vertex and link maps of
    /// [`Rotation::new`] and the same checks, the ranks' permutation in
    /// place of the shift: it must be a permutation whose cycles all have
    /// one length, its order (for example every node's GPUs turned
    /// together, leaving the nodes in place). [`Rotation::shift`] is then
    /// 0; [`Rotation::rank_image`] says where each rank goes.
    pub fn permuting(
        topology: &Topology,
        placement: &[VertexId],
        rank_images: Vec<usize>,
        vertices: Vec<VertexId>,
        links: Vec<LinkId>,
    ) -> Result<Rotation, TopologyError> {
        Rotation::permuting_with(topology, placement, rank_images, vertices, links, None)
    }

    /// [`Rotation::permuting`] of a map that is a symmetry of the links
    /// `carried` marks only (indexed by [`LinkId::index`]; see the module
    /// docs): each uncarried link direction must be its own image, and its
    /// reverse uncarried too; the carried ones must go to carried ones and
    /// pass every check of [`Rotation::new`] (ends, parameters, reverse);
    /// vertices are all checked. Routes moved by it are routes only where
    /// they cross carried links: see [`Rotation::carries`].
    pub fn permuting_partial(
        topology: &Topology,
        placement: &[VertexId],
        rank_images: Vec<usize>,
        vertices: Vec<VertexId>,
        links: Vec<LinkId>,
        carried: Vec<bool>,
    ) -> Result<Rotation, TopologyError> {
        if carried.len() != topology.link_direction_count() {
            return Err(symmetry(format!(
                "a partial rotation marks {} link directions; the topology has {}",
                carried.len(),
                topology.link_direction_count()
            )));
        }
        for l in topology.link_ids() {
            if carried[l.index()] {
                continue;
            }
            let image = links.get(l.index()).copied();
            if image != Some(l) || carried[topology.reverse(l).index()] {
                return Err(symmetry(format!(
                    "link {} is not carried, so it must stay in place with its reverse",
                    topology.link_name(l)
                )));
            }
        }
        Rotation::permuting_with(
            topology,
            placement,
            rank_images,
            vertices,
            links,
            Some(carried),
        )
    }

    /// [`Rotation::permuting`], with `carried` as in
    /// [`Rotation::permuting_partial`].
    fn permuting_with(
        topology: &Topology,
        placement: &[VertexId],
        rank_images: Vec<usize>,
        vertices: Vec<VertexId>,
        links: Vec<LinkId>,
        carried: Option<Vec<bool>>,
    ) -> Result<Rotation, TopologyError> {
        check_permutation(&rank_images, "rank")?;
        let lengths = cycle_lengths(&rank_images);
        let order = lengths.first().copied().unwrap_or(1);
        if let Some(r) = lengths.iter().position(|&l| l != order) {
            return Err(symmetry(format!(
                "rank {r} comes back after {} steps, rank 0 after {order}: every rank's cycle \
                 must be as long",
                lengths[r]
            )));
        }
        let images = rank_images.clone();
        Rotation::checked(
            topology,
            placement,
            0,
            images,
            Some(rank_images),
            vertices,
            links,
            carried,
        )
    }

    /// The checks of [`Rotation::new`] for ranks going to `images`, the
    /// links `carried` leaves out exempt from the link checks.
    #[allow(clippy::too_many_arguments)]
    fn checked(
        topology: &Topology,
        placement: &[VertexId],
        shift: usize,
        images: Vec<usize>,
        rank_images: Option<Vec<usize>>,
        vertices: Vec<VertexId>,
        links: Vec<LinkId>,
        carried: Option<Vec<bool>>,
    ) -> Result<Rotation, TopologyError> {
        let ranks = images.len();
        if placement.len() != ranks {
            return Err(symmetry(format!(
                "the placement has {} ranks, the rotation {ranks}",
                placement.len()
            )));
        }
        if vertices.len() != topology.vertex_count()
            || links.len() != topology.link_direction_count()
        {
            return Err(symmetry(format!(
                "a rotation maps {} vertices and {} link directions; the topology has {} and {}",
                vertices.len(),
                links.len(),
                topology.vertex_count(),
                topology.link_direction_count()
            )));
        }
        let vs: Vec<usize> = vertices.iter().map(|v| v.index()).collect();
        check_permutation(&vs, "vertex")?;
        let ls: Vec<usize> = links.iter().map(|l| l.index()).collect();
        check_permutation(&ls, "link direction")?;
        for v in topology.vertex_ids() {
            let (a, b) = (topology.vertex(v), topology.vertex(vertices[v.index()]));
            if a.kind != b.kind
                || a.forwards != b.forwards
                || a.forward_latency_ps != b.forward_latency_ps
            {
                return Err(symmetry(format!(
                    "vertex {} goes to {}, which is a different device",
                    a.name, b.name
                )));
            }
        }
        let carries = |l: LinkId| carried.as_ref().is_none_or(|c| c[l.index()]);
        for l in topology.link_ids() {
            let image = links[l.index()];
            if !carries(l) {
                continue; // its own image, checked by `permuting_partial`
            }
            if !carries(image) {
                return Err(symmetry(format!(
                    "link {} goes to {}, which the rotation does not carry",
                    topology.link_name(l),
                    topology.link_name(image)
                )));
            }
            let (a, b) = topology.ends(l);
            let ends = (vertices[a.index()], vertices[b.index()]);
            if topology.ends(image) != ends
                || topology.link(image) != topology.link(l)
                || links[topology.reverse(l).index()] != topology.reverse(image)
            {
                return Err(symmetry(format!(
                    "link {} goes to {}, which does not join the images of its ends with the same link",
                    topology.link_name(l),
                    topology.link_name(image)
                )));
            }
        }
        for (r, &v) in placement.iter().enumerate() {
            let next = placement[images[r]];
            if vertices[v.index()] != next {
                return Err(symmetry(format!(
                    "rank {r} is on {} but the rotation takes it to {}, not to rank {}'s {}",
                    topology.vertex(v).name,
                    topology.vertex(vertices[v.index()]).name,
                    images[r],
                    topology.vertex(next).name
                )));
            }
        }
        let order = cycle_lengths(&images).first().copied().unwrap_or(1);
        let rotation = Rotation {
            shift,
            ranks,
            order,
            rank_images,
            vertices,
            links,
            carried,
        };
        let cycle = cycle_lengths(&vs).into_iter().enumerate();
        if let Some((v, len)) = cycle.clone().find(|&(_, len)| !order.is_multiple_of(len)) {
            return Err(symmetry(format!(
                "rotating {order} times does not bring vertex {} back (it comes back after {len})",
                topology.vertex(VertexId::new(v)).name
            )));
        }
        let cycle = cycle_lengths(&ls).into_iter().enumerate();
        if let Some((l, len)) = cycle.clone().find(|&(_, len)| !order.is_multiple_of(len)) {
            return Err(symmetry(format!(
                "rotating {order} times does not bring link {} back (it comes back after {len})",
                topology.link_name(LinkId::new(l))
            )));
        }
        Ok(rotation)
    }

    /// How many ranks one step moves each rank by (0 for a rotation
    /// built by [`Rotation::permuting`]).
    pub fn shift(&self) -> usize {
        self.shift
    }

    /// Where one step takes rank `r`.
    pub fn rank_image(&self, r: usize) -> usize {
        match &self.rank_images {
            Some(images) => images[r],
            None => (r + self.shift) % self.ranks,
        }
    }

    /// The ranks' permutation of a rotation built by
    /// [`Rotation::permuting`] (`None`: a shift).
    pub fn rank_images(&self) -> Option<&[usize]> {
        self.rank_images.as_deref()
    }

    /// The number of ranks it rotates.
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// Steps until every rank is back: `ranks / shift`, or the length of
    /// the ranks' cycles.
    pub fn order(&self) -> usize {
        self.order
    }

    /// The image of vertex `v` after one step.
    pub fn vertex(&self, v: VertexId) -> VertexId {
        self.vertices[v.index()]
    }

    /// The image of link direction `l` after one step.
    pub fn link(&self, l: LinkId) -> LinkId {
        self.links[l.index()]
    }

    /// Whether the rotation carries link direction `l`: always, but for
    /// the links a partial rotation leaves out
    /// ([`Rotation::permuting_partial`]), which are their own images and
    /// which no route moved by the rotation may cross.
    pub fn carries(&self, l: LinkId) -> bool {
        self.carried.as_ref().is_none_or(|c| c[l.index()])
    }

    /// Whether some link is not carried (a partial rotation).
    pub fn is_partial(&self) -> bool {
        self.carried.as_ref().is_some_and(|c| c.contains(&false))
    }

    /// The image of link direction `l` after `k` steps (`O(k)`).
    pub fn link_power(&self, l: LinkId, k: usize) -> LinkId {
        (0..k % self.order()).fold(l, |l, _| self.link(l))
    }

    /// Checks that the rotation keeps the up*/down* orientation `up`
    /// (see [`Router::up_directions`](crate::Router::up_directions)):
    /// every link direction's image is up exactly when it is. Only then is
    /// a rotated up*/down* route an up*/down* route again, so symmetric
    /// routes keep the routing policy (and its freedom from deadlock). An
    /// error names the first link direction whose image points the other
    /// way (a rotation that moves the up*/down* root, for example).
    pub fn check_orientation(&self, topology: &Topology, up: &[bool]) -> Result<(), TopologyError> {
        if up.len() != self.links.len() {
            return Err(symmetry(format!(
                "an up*/down* orientation of {} link directions for a rotation of {}",
                up.len(),
                self.links.len()
            )));
        }
        let way = |up: bool| if up { "up" } else { "down" };
        match topology
            .link_ids()
            .find(|&l| up[l.index()] != up[self.link(l).index()])
        {
            None => Ok(()),
            Some(l) => Err(symmetry(format!(
                "link {} is {} but its image {} is {} in the up*/down* order: rotated routes \
                 would not be up*/down* routes",
                topology.link_name(l),
                way(up[l.index()]),
                topology.link_name(self.link(l)),
                way(up[self.link(l).index()])
            ))),
        }
    }

    /// Each link direction's orbit: its representative (the orbit's
    /// smallest id) and how many members it has (a divisor of
    /// [`Rotation::order`]), indexed by [`LinkId::index`]. A link the
    /// rotation does not carry is its own orbit of one.
    pub fn link_orbit_sizes(&self, topology: &Topology) -> Vec<(LinkId, usize)> {
        let mut orbit: Vec<Option<(LinkId, usize)>> = vec![None; self.links.len()];
        for l in topology.link_ids() {
            if orbit[l.index()].is_some() {
                continue;
            }
            let mut members = vec![l];
            let mut next = self.link(l);
            while next != l {
                members.push(next);
                next = self.link(next);
            }
            for m in &members {
                orbit[m.index()] = Some((l, members.len()));
            }
        }
        orbit
            .into_iter()
            .map(|o| o.expect("every link direction was visited"))
            .collect()
    }

    /// The representative of each link direction's orbit (its smallest
    /// id), indexed by [`LinkId::index`]: what a folded run puts each
    /// link's traffic on. An error names a link direction whose orbit is
    /// shorter than [`Rotation::order`] (a link some smaller rotation
    /// leaves in place, which several copies of one flow would share: a
    /// packet-level run cannot fold it; a flow-level one weighs it, see
    /// [`Rotation::link_orbit_sizes`]). Links the rotation does not carry
    /// are their own representatives and are not counted: no route moved
    /// by the rotation crosses them.
    pub fn link_orbits(&self, topology: &Topology) -> Result<Vec<LinkId>, TopologyError> {
        let orbits = self.link_orbit_sizes(topology);
        if let Some(&(l, members)) = orbits
            .iter()
            .find(|&&(l, m)| m != self.order() && self.carries(l))
        {
            return Err(symmetry(format!(
                "link {} comes back after {members} of the rotation's {} steps; folding needs every link moved by every step",
                topology.link_name(l),
                self.order()
            )));
        }
        Ok(orbits.into_iter().map(|(l, _)| l).collect())
    }
}

#[cfg(test)]
mod tests;
