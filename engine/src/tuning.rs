//! `NCCL_ALGO`: restricting the tuner's choice the way NCCL users do.
//!
//! NCCL reads a comma-separated list of algorithm names (case-insensitive);
//! a leading `^` excludes the listed ones instead. NCCL's `ring` names our
//! ring family (the ring and, for broadcast and reduce, the pipelined
//! chain, which is NCCL's ring for rooted collectives); `tree` names the
//! double binary tree. Our own algorithm names are accepted too. When the
//! restriction leaves no algorithm for a collective, the tuner falls back to
//! all of them, as NCCL falls back for collectives an algorithm does not
//! support. An algorithm named in the scenario always wins.

use algorithms::{Algorithm, Registry};

/// Which algorithms the tuner may consider.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AlgoFilter {
    /// The names given, lower case: algorithm names or NCCL algorithm names
    /// ([`CollectiveAlgorithm::nccl_algorithm`](algorithms::CollectiveAlgorithm::nccl_algorithm)).
    named: Vec<String>,
    /// Whether the names exclude (`^...`) rather than include.
    exclude: bool,
    /// The text it was parsed from, for reports (`None`: no restriction).
    pub source: Option<String>,
}

impl AlgoFilter {
    /// Parses an `NCCL_ALGO` value; every name must be an algorithm of
    /// `registry` or the NCCL name of one.
    pub fn parse(value: &str, registry: &Registry) -> Result<AlgoFilter, String> {
        let (exclude, list) = match value.trim().strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, value.trim()),
        };
        let mut named = Vec::new();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let name = name.to_ascii_lowercase().replace('-', "_");
            let known = registry
                .iter()
                .any(|a| a.name() == name || a.facts().nccl_algorithm() == Some(name.as_str()));
            if !known {
                return Err(format!(
                    "NCCL_ALGO: unknown algorithm `{name}`; valid: {} (a leading ^ excludes)",
                    valid_names(registry).join(", ")
                ));
            }
            named.push(name);
        }
        if named.is_empty() {
            return Err(format!("NCCL_ALGO: `{value}` names no algorithm"));
        }
        Ok(AlgoFilter {
            named,
            exclude,
            source: Some(value.to_string()),
        })
    }

    /// Whether the filter lets the tuner consider `algorithm`.
    pub fn allows(&self, algorithm: &Algorithm) -> bool {
        if self.source.is_none() {
            return true;
        }
        let named = self.named.iter().any(|n| {
            n == algorithm.name() || Some(n.as_str()) == algorithm.facts().nccl_algorithm()
        });
        named != self.exclude
    }

    /// The algorithms of `candidates` the tuner may consider; all of them
    /// when the filter leaves none, as NCCL falls back for collectives an
    /// algorithm does not support.
    pub fn allowed<'a>(&self, candidates: impl Iterator<Item = &'a Algorithm>) -> Vec<Algorithm> {
        let all: Vec<Algorithm> = candidates.cloned().collect();
        let allowed: Vec<Algorithm> = all.iter().filter(|a| self.allows(a)).cloned().collect();
        if allowed.is_empty() { all } else { allowed }
    }
}

/// The names `NCCL_ALGO` accepts: the NCCL names first, then every
/// algorithm's, each once.
fn valid_names(registry: &Registry) -> Vec<&str> {
    let mut names: Vec<&str> = registry
        .iter()
        .filter_map(|a| a.facts().nccl_algorithm())
        .collect();
    names.sort_unstable();
    names.dedup();
    for a in registry.iter() {
        if !names.contains(&a.name()) {
            names.push(a.name());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use algorithms::Collective;

    fn names(filter: &AlgoFilter, collective: Collective) -> Vec<String> {
        filter
            .allowed(Registry::builtin().of(collective))
            .iter()
            .map(|a| a.name().to_string())
            .collect()
    }

    #[test]
    fn nccl_names_map_to_families() {
        let registry = Registry::builtin();
        let ring = AlgoFilter::parse("Ring", &registry).unwrap();
        assert_eq!(
            names(&ring, Collective::Allreduce),
            vec!["ring", "nccl_ring"]
        );
        assert_eq!(
            names(&ring, Collective::Broadcast),
            vec!["chain", "nccl_ring"]
        );
        let not_tree = AlgoFilter::parse("^tree", &registry).unwrap();
        assert!(!names(&not_tree, Collective::Allreduce).contains(&"tree".to_string()));
        assert!(names(&not_tree, Collective::Allreduce).contains(&"ring".to_string()));
        let mixed = AlgoFilter::parse("tree, rabenseifner", &registry).unwrap();
        assert_eq!(
            names(&mixed, Collective::Allreduce),
            vec!["rabenseifner", "tree", "nccl_tree"]
        );
        assert!(
            AlgoFilter::parse("collnet", &registry)
                .unwrap_err()
                .contains("valid: collnet_chain, collnet_direct, nvls, ring, tree")
        );
        assert!(AlgoFilter::parse(" , ", &registry).is_err());
        // No restriction, or one that leaves none: every algorithm.
        assert_eq!(
            names(&AlgoFilter::default(), Collective::Allreduce).len(),
            10
        );
        assert_eq!(names(&mixed, Collective::Barrier), vec!["dissemination"]);
    }
}
