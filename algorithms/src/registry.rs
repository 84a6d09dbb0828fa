//! [`Registry`]: the algorithms a program knows, by collective and name.
//!
//! The catalogue is [`Registry::builtin`]; a user's program adds its own
//! algorithms with [`Registry::register`] and hands the registry to the
//! simulator, the model checker, the real fabrics or the `sim` command
//! line, which then accept the new names wherever they accept the
//! catalogue's. Registration order is listing order, and the tuner breaks
//! ties in favour of the earlier algorithm.

use std::fmt;

use crate::algorithm::{Algorithm, CollectiveAlgorithm, Inline};
use crate::collective::Collective;

/// Why an algorithm cannot be registered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The name is not usable in scenario files and flags.
    #[error(
        "algorithm name `{name}` for {collective} is not valid: {why} (use lower-case letters, digits and `_`, starting with a letter)"
    )]
    InvalidName {
        /// The collective.
        collective: Collective,
        /// The name given.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The collective already has an algorithm of that name.
    #[error("{collective} already has an algorithm `{name}` ({}): choose another name", if *.builtin { "built in" } else { "registered before" })]
    Duplicate {
        /// The collective.
        collective: Collective,
        /// The name.
        name: String,
        /// Whether the one already there is the catalogue's.
        builtin: bool,
    },
    /// Two names hash to the same wire identity (see
    /// [`Algorithm::wire_id`]); one must be renamed.
    #[error(
        "{collective} algorithm `{name}` has the same wire identity ({id:#06x}) as {other}: choose another name"
    )]
    WireIdCollision {
        /// The collective.
        collective: Collective,
        /// The name being registered.
        name: String,
        /// The registered algorithm it collides with ("allreduce ring").
        other: String,
        /// The shared identity.
        id: u16,
    },
}

/// A name that names no registered algorithm of a collective.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown algorithm `{name}` for {collective}; valid: {}", valid.join(", "))]
pub struct UnknownAlgorithm {
    /// The collective.
    pub collective: Collective,
    /// The name asked for.
    pub name: String,
    /// The collective's registered algorithms.
    pub valid: Vec<String>,
}

/// The catalogue's algorithm `name` of `collective`, for code that names a
/// built-in algorithm it always uses (a benchmark's barrier, tests).
///
/// # Panics
/// If the catalogue has no such algorithm: the name is fixed in the
/// calling code, so that is a bug there.
pub fn catalogue_algorithm(collective: Collective, name: &str) -> Algorithm {
    Registry::builtin()
        .get(collective, name)
        .unwrap_or_else(|| panic!("the catalogue has no {collective} algorithm `{name}`"))
}

/// The algorithms a program knows, in registration order.
#[derive(Clone, Default)]
pub struct Registry {
    algorithms: Vec<Algorithm>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// The catalogue: every built-in algorithm, in the order `sim
    /// algorithms` lists them.
    pub fn builtin() -> Registry {
        use crate::{
            allgather, allreduce, alltoall, barrier, broadcast, gather, nccl, reduce,
            reduce_scatter, scatter, sendrecv,
        };
        let mut registry = Registry::new();
        let catalogue = [
            Algorithm::builtin_inline(allreduce::ring::Ring, Inline::AllreduceRing),
            Algorithm::builtin_inline(
                allreduce::recursive_doubling::RecursiveDoubling,
                Inline::AllreduceRecursiveDoubling,
            ),
            Algorithm::builtin(allreduce::rabenseifner::Rabenseifner),
            Algorithm::builtin(allreduce::tree::Tree),
            Algorithm::builtin(allreduce::hierarchical::Hierarchical),
            Algorithm::builtin(reduce_scatter::ring::Ring),
            Algorithm::builtin(reduce_scatter::recursive_halving::RecursiveHalving),
            Algorithm::builtin(reduce_scatter::pat::Pat),
            Algorithm::builtin_inline(allgather::ring::Ring, Inline::AllgatherRing),
            Algorithm::builtin(allgather::recursive_doubling::RecursiveDoubling),
            Algorithm::builtin(allgather::bruck::Bruck),
            Algorithm::builtin(allgather::pat::Pat),
            Algorithm::builtin(broadcast::binomial::Binomial),
            Algorithm::builtin(broadcast::chain::Chain),
            Algorithm::builtin(reduce::binomial::Binomial),
            Algorithm::builtin(reduce::chain::Chain),
            Algorithm::builtin(alltoall::pairwise::Pairwise),
            Algorithm::builtin(alltoall::bruck::Bruck),
            Algorithm::builtin(barrier::dissemination::Dissemination),
            Algorithm::builtin(gather::binomial::Binomial),
            Algorithm::builtin(gather::linear::Linear),
            Algorithm::builtin(scatter::binomial::Binomial),
            Algorithm::builtin(scatter::linear::Linear),
            Algorithm::builtin(sendrecv::direct::Direct),
            Algorithm::builtin(nccl::ring::Allreduce),
            Algorithm::builtin(nccl::tree::Allreduce),
            Algorithm::builtin(nccl::ring::Allgather),
            Algorithm::builtin(nccl::ring::ReduceScatter),
            Algorithm::builtin(nccl::ring::Broadcast),
            Algorithm::builtin(nccl::ring::Reduce),
            Algorithm::builtin(nccl::pat::Allgather),
            Algorithm::builtin(nccl::pat::ReduceScatter),
            Algorithm::builtin(nccl::p2p::SendRecv),
            Algorithm::builtin(nccl::nvls::Allreduce),
            Algorithm::builtin(nccl::nvls_tree::Allreduce),
            Algorithm::builtin(nccl::collnet::Direct),
            Algorithm::builtin(nccl::collnet::Chain),
        ];
        for algorithm in catalogue {
            registry
                .insert(algorithm)
                .expect("the catalogue's names are valid and distinct");
        }
        registry
    }

    /// Adds `algorithm` and returns its handle; refuses a name that is not
    /// valid, that its collective already has, or whose wire identity
    /// another algorithm of the registry has.
    pub fn register(
        &mut self,
        algorithm: impl CollectiveAlgorithm,
    ) -> Result<Algorithm, RegistryError> {
        self.insert(Algorithm::new(algorithm))
    }

    /// [`register`](Self::register), in builder style.
    pub fn with(mut self, algorithm: impl CollectiveAlgorithm) -> Result<Registry, RegistryError> {
        self.register(algorithm)?;
        Ok(self)
    }

    /// Adds a handle (see [`register`](Self::register)).
    pub fn insert(&mut self, algorithm: Algorithm) -> Result<Algorithm, RegistryError> {
        let collective = algorithm.collective();
        let name = algorithm.name().to_string();
        if let Some(why) = name_problem(&name) {
            return Err(RegistryError::InvalidName {
                collective,
                name,
                why,
            });
        }
        if let Some(old) = self.get(collective, &name) {
            return Err(RegistryError::Duplicate {
                collective,
                name,
                builtin: old.is_builtin(),
            });
        }
        let id = algorithm.wire_id();
        if let Some(other) = self.algorithms.iter().find(|a| a.wire_id() == id) {
            return Err(RegistryError::WireIdCollision {
                collective,
                name,
                other: format!("{other:?}"),
                id,
            });
        }
        self.algorithms.push(algorithm.clone());
        Ok(algorithm)
    }

    /// The algorithm `name` of `collective`, if registered. Names match
    /// case-insensitively, with `-` for `_`.
    pub fn get(&self, collective: Collective, name: &str) -> Option<Algorithm> {
        let wanted = name.trim().to_ascii_lowercase().replace('-', "_");
        self.algorithms
            .iter()
            .find(|a| a.collective() == collective && a.name() == wanted)
            .cloned()
    }

    /// [`get`](Self::get), or an error listing the collective's algorithms.
    pub fn find(&self, collective: Collective, name: &str) -> Result<Algorithm, UnknownAlgorithm> {
        self.get(collective, name).ok_or_else(|| UnknownAlgorithm {
            collective,
            name: name.to_string(),
            valid: self.of(collective).map(|a| a.name().to_string()).collect(),
        })
    }

    /// The algorithms of `collective`, in registration order.
    pub fn of(&self, collective: Collective) -> impl Iterator<Item = &Algorithm> {
        self.algorithms
            .iter()
            .filter(move |a| a.collective() == collective)
    }

    /// Every algorithm, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &Algorithm> {
        self.algorithms.iter()
    }

    /// Whether some algorithm of any collective has this name.
    pub fn knows_name(&self, name: &str) -> bool {
        let wanted = name.trim().to_ascii_lowercase().replace('-', "_");
        self.algorithms.iter().any(|a| a.name() == wanted)
    }

    /// The algorithm with this wire identity (see [`Algorithm::wire_id`]).
    pub fn by_wire_id(&self, id: u16) -> Option<&Algorithm> {
        self.algorithms.iter().find(|a| a.wire_id() == id)
    }

    /// One line per algorithm (`collective name`), sorted: what the ranks
    /// of a real job compare before they run anything.
    pub fn listing(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.algorithms.iter().map(|a| format!("{a:?}")).collect();
        lines.sort();
        lines
    }

    /// Number of algorithms.
    pub fn len(&self) -> usize {
        self.algorithms.len()
    }

    /// Whether it has no algorithm.
    pub fn is_empty(&self) -> bool {
        self.algorithms.is_empty()
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.algorithms).finish()
    }
}

/// What is wrong with an algorithm name, if anything.
fn name_problem(name: &str) -> Option<&'static str> {
    let mut chars = name.chars();
    match chars.next() {
        None => return Some("it is empty"),
        Some(c) if !c.is_ascii_lowercase() => return Some("it does not start with a letter"),
        _ => {}
    }
    if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        return Some("it has a character other than a-z, 0-9 and `_`");
    }
    if name == "auto" {
        return Some("`auto` means the tuner's choice");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An algorithm of `collective` named `name` that does nothing.
    fn named(name: &str, collective: Collective) -> Algorithm {
        Algorithm::from_fn(name, collective, |_, _, _, _| Box::pin(async { Ok(()) }))
    }

    #[test]
    fn the_catalogue_has_its_37_algorithms_with_distinct_wire_ids() {
        let registry = Registry::builtin();
        // 24 of the research catalogue (PAT for allgather and
        // reduce-scatter, the direct sendrecv among them), 13 of NCCL's
        // (nccl_ring for five collectives; nccl_tree, nccl_nvls, nccl_nvls_tree,
        // nccl_collnet_direct and nccl_collnet_chain for allreduce;
        // nccl_pat for two; nccl_sendrecv).
        assert_eq!(registry.len(), 37);
        let mut ids: Vec<u16> = registry.iter().map(Algorithm::wire_id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 37);
        assert!(registry.iter().all(Algorithm::is_builtin));
        let ring = registry.get(Collective::Allreduce, "Ring").expect("ring");
        assert_eq!(ring.name(), "ring");
        assert_eq!(
            registry.by_wire_id(ring.wire_id()).map(|a| a.name()),
            Some("ring")
        );
    }

    #[test]
    fn a_name_taken_by_a_builtin_or_registered_twice_is_refused() {
        let mut registry = Registry::builtin();
        let e = registry
            .insert(named("ring", Collective::Allreduce))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "allreduce already has an algorithm `ring` (built in): choose another name"
        );
        // The same name for another collective is another algorithm.
        registry
            .insert(named("pairwise", Collective::Allreduce))
            .expect("allreduce has no pairwise");
        let e = registry
            .insert(named("pairwise", Collective::Allreduce))
            .unwrap_err();
        assert!(e.to_string().contains("(registered before)"), "{e}");
    }

    #[test]
    fn invalid_names_are_refused_with_the_reason() {
        let mut registry = Registry::new();
        for (name, why) in [
            ("", "empty"),
            ("Bidir", "start with a letter"),
            ("bi-dir", "other than"),
            ("auto", "tuner"),
        ] {
            let e = registry
                .insert(named(name, Collective::Allreduce))
                .unwrap_err();
            assert!(e.to_string().contains(why), "{name}: {e}");
        }
    }

    #[test]
    fn an_unknown_name_lists_the_valid_ones() {
        let e = Registry::builtin()
            .find(Collective::Broadcast, "ring")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown algorithm `ring` for broadcast; valid: binomial, chain, nccl_ring"
        );
    }
}
