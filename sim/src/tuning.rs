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

use algorithms::{Algorithm, Collective};

/// Which algorithms the tuner may consider.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AlgoFilter {
    /// The algorithms named.
    named: Vec<Algorithm>,
    /// Whether the names exclude (`^...`) rather than include.
    exclude: bool,
    /// The text it was parsed from, for reports (`None`: no restriction).
    pub source: Option<String>,
}

impl AlgoFilter {
    /// Parses an `NCCL_ALGO` value.
    pub fn parse(value: &str) -> Result<AlgoFilter, String> {
        let (exclude, list) = match value.trim().strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, value.trim()),
        };
        let mut named = Vec::new();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match name.to_ascii_lowercase().as_str() {
                "ring" => named.extend([Algorithm::Ring, Algorithm::Chain]),
                "tree" => named.push(Algorithm::Tree),
                other => named.push(other.parse().map_err(|_| {
                    let ours: Vec<&str> = Algorithm::ALL.iter().map(|a| a.name()).collect();
                    format!(
                        "NCCL_ALGO: unknown algorithm `{name}`; valid: ring, tree, {} (a leading ^ excludes)",
                        ours.join(", ")
                    )
                })?),
            }
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

    /// The algorithms of `collective` the tuner may consider (empty: no
    /// restriction applies, consider all).
    pub fn allowed(&self, collective: Collective) -> Vec<Algorithm> {
        if self.source.is_none() {
            return Vec::new();
        }
        collective
            .algorithms()
            .into_iter()
            .filter(|a| self.named.contains(a) != self.exclude)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_names_map_to_families() {
        let ring = AlgoFilter::parse("Ring").unwrap();
        assert_eq!(ring.allowed(Collective::Allreduce), vec![Algorithm::Ring]);
        assert_eq!(ring.allowed(Collective::Broadcast), vec![Algorithm::Chain]);
        let not_tree = AlgoFilter::parse("^tree").unwrap();
        assert!(
            !not_tree
                .allowed(Collective::Allreduce)
                .contains(&Algorithm::Tree)
        );
        assert!(
            not_tree
                .allowed(Collective::Allreduce)
                .contains(&Algorithm::Ring)
        );
        let mixed = AlgoFilter::parse("tree, rabenseifner").unwrap();
        assert_eq!(
            mixed.allowed(Collective::Allreduce),
            vec![Algorithm::Rabenseifner, Algorithm::Tree]
        );
        assert!(
            AlgoFilter::parse("collnet")
                .unwrap_err()
                .contains("valid: ring, tree")
        );
        assert!(AlgoFilter::parse(" , ").is_err());
        assert_eq!(AlgoFilter::default().allowed(Collective::Allreduce), vec![]);
    }
}
