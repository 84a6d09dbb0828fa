//! `NCCL_ALGO`: restricting the tuner's choice the way NCCL users do.
//!
//! NCCL reads a comma-separated list of algorithm names (case-insensitive);
//! a leading `^` excludes the listed ones instead; NCCL 2.29 also takes
//! per-function entries (`"ring;allreduce:tree,nvls;allgather:^pat"`). NCCL's `ring` names our
//! ring family (the ring and, for broadcast and reduce, the pipelined
//! chain, which is NCCL's ring for rooted collectives); `tree` names the
//! double binary tree. Our own algorithm names are accepted too. When the
//! restriction leaves no algorithm for a collective, the tuner falls back to
//! all of them, as NCCL falls back for collectives an algorithm does not
//! support. An algorithm named in the scenario always wins.

use algorithms::{Algorithm, Collective, Registry};

use crate::nccl::env::{algo_entries, nccl_algorithm_named, unknown_name};
use crate::nccl::registry_name;

/// One `;`-separated entry of `NCCL_ALGO`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Clause {
    /// The function it applies to (`None`: every function).
    function: Option<Collective>,
    /// The names given, lower case: algorithm names or NCCL algorithm names
    /// ([`CollectiveAlgorithm::nccl_algorithm`](algorithms::CollectiveAlgorithm::nccl_algorithm)).
    named: Vec<String>,
    /// Whether the names exclude (`^...`) rather than include.
    exclude: bool,
}

/// Which algorithms the tuner may consider.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AlgoFilter {
    /// The entries, in order; a function's last prefixed entry wins over
    /// the unprefixed first one (NCCL 2.29's rule).
    clauses: Vec<Clause>,
    /// The text it was parsed from, for reports (`None`: no restriction).
    pub source: Option<String>,
}

impl AlgoFilter {
    /// Parses an `NCCL_ALGO` value: `;`-separated entries, each an
    /// optional `function:` prefix (`allreduce`, `AllGather`, ...; only
    /// the first entry may lack one) and a list of names, a leading `^`
    /// excluding them. Every name must be an algorithm of `registry`, the
    /// NCCL name of one, or one of NCCL's seven algorithms in any spelling
    /// (`NVLSTree`, `nvls_tree`, `CollNetDirect`, `pat`, ...), which
    /// names the registry's algorithms that run it, if any.
    pub fn parse(value: &str, registry: &Registry) -> Result<AlgoFilter, String> {
        let mut clauses = Vec::new();
        let valid = valid_names(registry);
        for entry in algo_entries("NCCL_ALGO", value)? {
            let mut named = Vec::new();
            for written in entry.names {
                let name = match nccl_algorithm_named(written) {
                    Some(a) => registry_name(a).to_string(),
                    None => written.to_ascii_lowercase().replace('-', "_"),
                };
                let known = nccl_algorithm_named(&name).is_some()
                    || registry.iter().any(|a| {
                        a.name() == name || a.facts().nccl_algorithm() == Some(name.as_str())
                    });
                if !known {
                    return Err(unknown_name("NCCL_ALGO", &name, &entry.place, &valid));
                }
                named.push(name);
            }
            clauses.push(Clause {
                function: entry.function,
                named,
                exclude: entry.exclude,
            });
        }
        Ok(AlgoFilter {
            clauses,
            source: Some(value.to_string()),
        })
    }

    /// The `NCCL_ALGO` restriction of an environment (`var` looks a
    /// variable up, as `|v| std::env::var(v).ok()`): none when unset.
    pub fn from_env(
        var: impl Fn(&str) -> Option<String>,
        registry: &Registry,
    ) -> Result<AlgoFilter, String> {
        var("NCCL_ALGO").map_or(Ok(AlgoFilter::default()), |v| {
            AlgoFilter::parse(&v, registry)
        })
    }

    /// The line a report's header gives the restriction, if there is one:
    /// `# NCCL_ALGO=ring restricts the tuner`.
    pub fn header_note(&self) -> Option<String> {
        let value = self.source.as_ref()?;
        Some(format!("# NCCL_ALGO={value} restricts the tuner"))
    }

    /// Whether the filter lets the tuner consider `algorithm`.
    pub fn allows(&self, algorithm: &Algorithm) -> bool {
        if self.source.is_none() {
            return true;
        }
        let collective = algorithm.collective();
        let clause = self
            .clauses
            .iter()
            .rev()
            .find(|c| c.function == Some(collective))
            .or_else(|| self.clauses.iter().find(|c| c.function.is_none()));
        let Some(clause) = clause else {
            return true;
        };
        let named = clause.named.iter().any(|n| {
            n == algorithm.name() || Some(n.as_str()) == algorithm.facts().nccl_algorithm()
        });
        named != clause.exclude
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
/// algorithm's, each once (NCCL's seven names are accepted besides).
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
                .contains("valid: collnet_chain, collnet_direct, nvls, nvls_tree, pat, ring, tree")
        );
        let e = AlgoFilter::parse(" , ", &registry).unwrap_err();
        assert!(
            e.contains("NCCL_ALGO: entry 1 at character 1 `,` names nothing"),
            "{e}"
        );
        // No restriction, or one that leaves none: every algorithm.
        assert_eq!(
            names(&AlgoFilter::default(), Collective::Allreduce).len(),
            11
        );
        assert_eq!(names(&mixed, Collective::Barrier), vec!["dissemination"]);
    }

    #[test]
    fn nccls_newer_names_and_per_function_entries() {
        let registry = Registry::builtin();
        // NCCL's names parse whether or not the registry runs them yet.
        for v in ["^nvls", "NVLSTree,ring", "^CollNetDirect,collnet_chain,PAT"] {
            assert!(AlgoFilter::parse(v, &registry).is_ok(), "{v}");
        }
        let not_nvls = AlgoFilter::parse("^NVLS", &registry).unwrap();
        assert!(names(&not_nvls, Collective::Allreduce).contains(&"nccl_ring".to_string()));
        let split = AlgoFilter::parse("ring;allreduce:tree", &registry).unwrap();
        assert_eq!(
            names(&split, Collective::Allreduce),
            vec!["tree", "nccl_tree"]
        );
        assert_eq!(
            names(&split, Collective::Allgather),
            names(
                &AlgoFilter::parse("ring", &registry).unwrap(),
                Collective::Allgather
            )
        );
        let e = AlgoFilter::parse("ring;tree", &registry).unwrap_err();
        assert!(
            e.contains("NCCL_ALGO: entry 2 at character 6 `tree`"),
            "{e}"
        );
        let e = AlgoFilter::parse("ring;allreduce:tree,sharp", &registry).unwrap_err();
        assert!(
            e.contains("NCCL_ALGO: unknown algorithm `sharp`; valid: ")
                && e.ends_with("(a leading ^ excludes; entry 2 at character 6)"),
            "{e}"
        );
        let e = AlgoFilter::parse("allsum:ring", &registry).unwrap_err();
        assert!(e.contains("unknown function `allsum`"), "{e}");
    }

    #[test]
    fn the_environment_restricts_only_when_nccl_algo_is_set() {
        let registry = Registry::builtin();
        let unset = AlgoFilter::from_env(|_| None, &registry).unwrap();
        assert_eq!(unset, AlgoFilter::default());
        assert_eq!(unset.header_note(), None);
        let env = |v: &str| (v == "NCCL_ALGO").then(|| "ring".to_string());
        let ring = AlgoFilter::from_env(env, &registry).unwrap();
        assert_eq!(ring, AlgoFilter::parse("ring", &registry).unwrap());
        assert_eq!(
            ring.header_note().as_deref(),
            Some("# NCCL_ALGO=ring restricts the tuner")
        );
        let bad = |v: &str| (v == "NCCL_ALGO").then(|| "^sharp".to_string());
        let e = AlgoFilter::from_env(bad, &registry).unwrap_err();
        assert!(e.starts_with("NCCL_ALGO: unknown algorithm `sharp`"), "{e}");
    }
}
