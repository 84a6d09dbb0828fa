//! NCCL's environment variables and their `[nccl]` keys: `NCCL_ALGO`
//! (with 2.29.7's per-function prefixes, `"allreduce:tree,nvls;allgather:^pat"`,
//! `src/graph/tuning.cc:36-132` @b91894bd), `NCCL_PROTO`,
//! `NCCL_MIN_NCHANNELS`, `NCCL_MAX_NCHANNELS`, `NCCL_NVLS_ENABLE`,
//! `NCCL_NVLS_NCHANNELS`, `NCCL_COLLNET_ENABLE`, `NCCL_PAT_ENABLE`.

use algorithms::Collective;
use algorithms::nccl::NcclAlgorithm;

use super::NcclConfig;
use super::model::{FUNCTIONS, f_index};

/// The name of NCCL's algorithm `a` among the registry's algorithms:
/// what a runnable algorithm's `nccl_algorithm()` returns (`"tree"`,
/// `"ring"`, `"collnet_direct"`, `"collnet_chain"`, `"nvls"`,
/// `"nvls_tree"`, `"pat"`).
pub fn registry_name(a: NcclAlgorithm) -> &'static str {
    match a {
        NcclAlgorithm::Tree => "tree",
        NcclAlgorithm::Ring => "ring",
        NcclAlgorithm::CollNetDirect => "collnet_direct",
        NcclAlgorithm::CollNetChain => "collnet_chain",
        NcclAlgorithm::Nvls => "nvls",
        NcclAlgorithm::NvlsTree => "nvls_tree",
        NcclAlgorithm::Pat => "pat",
    }
}

/// A name compared NCCL's way: any case; `_` and `-` ignored, so that
/// `NVLSTree`, `nvls_tree` and `nvls-tree` are one name.
fn folded(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The NCCL algorithm `name` names, in any of its spellings.
pub(crate) fn nccl_algorithm_named(name: &str) -> Option<NcclAlgorithm> {
    let wanted = folded(name);
    NcclAlgorithm::ALL
        .into_iter()
        .find(|a| folded(a.name()) == wanted)
}

/// The NCCL function a prefix names (`allreduce`, `AllGather`,
/// `reduce_scatter`, ...).
pub(crate) fn function_named(name: &str) -> Option<Collective> {
    let wanted = folded(name);
    FUNCTIONS.into_iter().find(|f| folded(f.name()) == wanted)
}

/// One `;`-separated entry of an `NCCL_ALGO` value, as written: which
/// function it applies to and the names it lists (see [`algo_entries`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AlgoEntry<'v> {
    /// The function its `function:` prefix names (`None`: the unprefixed
    /// first entry, every function).
    pub function: Option<Collective>,
    /// The names listed, trimmed, none empty, as written.
    pub names: Vec<&'v str>,
    /// Whether a leading `^` excludes the names rather than includes them.
    pub exclude: bool,
    /// Where the entry stands, for errors: `entry 2 at character 6`.
    pub place: String,
}

/// Splits an `NCCL_ALGO`-style value (`what` names the variable or key in
/// errors) NCCL's way: `;`-separated entries, each an optional `function:`
/// prefix (`allreduce`, `AllGather`, ...; only the first entry may lack
/// one, and it applies to every function) and a comma-separated list of
/// names, a leading `^` excluding them instead. The names are left to the
/// caller to resolve ([`unknown_name`] words its error). Errors name
/// `what`, the entry (number and character offset) and the bad token.
pub(crate) fn algo_entries<'v>(what: &str, value: &'v str) -> Result<Vec<AlgoEntry<'v>>, String> {
    let mut entries = Vec::new();
    let mut offset = 0;
    for (i, entry) in value.split(';').enumerate() {
        let place = format!("entry {} at character {}", i + 1, offset + 1);
        offset += entry.len() + 1;
        let (function, list) = match entry.split_once(':') {
            Some((p, l)) => {
                let p = p.trim();
                let f = function_named(p).ok_or_else(|| {
                    format!(
                        "{what}: unknown function `{p}` in {place}; valid: Broadcast, Reduce, AllGather, ReduceScatter, AllReduce"
                    )
                })?;
                (Some(f), l)
            }
            None if i == 0 => (None, entry),
            None => {
                return Err(format!(
                    "{what}: {place} `{}` has no `function:` prefix; only the first entry may lack one",
                    entry.trim()
                ));
            }
        };
        let (exclude, names) = name_list(list);
        if names.is_empty() {
            return Err(format!("{what}: {place} `{}` names nothing", entry.trim()));
        }
        entries.push(AlgoEntry {
            function,
            names,
            exclude,
            place,
        });
    }
    Ok(entries)
}

/// The error for a name in `place` (an [`AlgoEntry`]'s) that `what`'s
/// value does not know: the name and the `valid` ones.
pub(crate) fn unknown_name(what: &str, name: &str, place: &str, valid: &[&str]) -> String {
    format!(
        "{what}: unknown algorithm `{name}`; valid: {} (a leading ^ excludes; {place})",
        valid.join(", ")
    )
}

/// A comma-separated list of names, a leading `^` excluding them: whether
/// it excludes, and the names, trimmed, empty ones dropped.
fn name_list(list: &str) -> (bool, Vec<&str>) {
    let (exclude, list) = match list.trim().strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, list.trim()),
    };
    let names = list
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    (exclude, names)
}

/// Parses an `NCCL_ALGO` value ([`algo_entries`]) into which of NCCL's
/// algorithms each function may use: names are NCCL's, in any spelling;
/// a later entry replaces its function's row.
pub(crate) fn parse_algo_map(what: &str, value: &str) -> Result<[[bool; 7]; 5], String> {
    let mut rows = [[true; 7]; 5];
    let known: Vec<&str> = NcclAlgorithm::ALL.iter().map(|a| a.name()).collect();
    for entry in algo_entries(what, value)? {
        let mut named = [false; 7];
        for name in entry.names {
            let a = nccl_algorithm_named(name)
                .ok_or_else(|| unknown_name(what, name, &entry.place, &known))?;
            named[super::model::a_index(a)] = true;
        }
        let functions: Vec<usize> = match entry.function {
            None => (0..5).collect(),
            Some(f) => vec![f_index(f)],
        };
        for f in functions {
            rows[f] = named.map(|n| n != entry.exclude);
        }
    }
    Ok(rows)
}

/// Parses an `NCCL_PROTO`-style list: names separated by commas, any
/// case, a leading `^` excluding them instead.
fn parse_list<const N: usize>(
    what: &str,
    value: &str,
    names: &[&str],
) -> Result<[bool; N], String> {
    let (exclude, tokens) = name_list(value);
    if tokens.is_empty() {
        return Err(format!("{what}: `{value}` names nothing"));
    }
    let mut named = [false; N];
    for token in tokens {
        let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(token)) else {
            return Err(format!(
                "{what}: unknown name `{token}`; valid: {} (a leading ^ excludes)",
                names.join(", ")
            ));
        };
        if i < N {
            named[i] = true;
        }
    }
    Ok(named.map(|n| n != exclude))
}

/// An `NCCL_*_ENABLE` value: `0` off, `1` on, `2` NCCL's automatic rule
/// (`None`).
fn enable(name: &str, value: &str) -> Result<Option<bool>, String> {
    match value.trim() {
        "0" => Ok(Some(false)),
        "1" => Ok(Some(true)),
        "2" => Ok(None),
        other => Err(format!(
            "{name}: `{other}` is not 0 (off), 1 (on) or 2 (automatic)"
        )),
    }
}

/// A channel count in `1..=max`.
fn channel_count(name: &str, value: &str, max: usize) -> Result<usize, String> {
    value
        .trim()
        .parse()
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| format!("{name}: `{value}` is not a channel count between 1 and {max}"))
}

impl NcclConfig {
    /// Applies an `NCCL_ALGO` value: NCCL's names `Tree`, `Ring`,
    /// `CollNetDirect`, `CollNetChain`, `NVLS`, `NVLSTree`, `PAT` (any
    /// case, `_` or `-` allowed: `nvls_tree`), `^` exclusions and
    /// per-function prefixes (2.29.7's syntax; 2.21.5's NCCL reads one
    /// list for every function). Versions without the newer algorithms
    /// accept their names and never run them.
    pub fn set_algo(&mut self, value: &str) -> Result<(), String> {
        self.allowed.algorithms = parse_algo_map("NCCL_ALGO", value)?;
        Ok(())
    }

    /// Applies an `NCCL_PROTO` value: `LL`, `LL128`, `Simple`.
    pub fn set_proto(&mut self, value: &str) -> Result<(), String> {
        self.allowed.protocols = parse_list::<3>("NCCL_PROTO", value, &["LL", "LL128", "Simple"])?;
        Ok(())
    }

    /// Applies `NCCL_NVLS_ENABLE` (0, 1, 2).
    pub fn set_nvls_enable(&mut self, value: &str) -> Result<(), String> {
        self.nvls_enable = enable("NCCL_NVLS_ENABLE", value)?;
        Ok(())
    }

    /// Applies `NCCL_PAT_ENABLE` (0, 1, 2).
    pub fn set_pat_enable(&mut self, value: &str) -> Result<(), String> {
        self.pat_enable = enable("NCCL_PAT_ENABLE", value)?;
        Ok(())
    }

    /// Applies `NCCL_COLLNET_ENABLE` (0 or 1).
    pub fn set_collnet_enable(&mut self, value: &str) -> Result<(), String> {
        self.collnet_enable = match value.trim() {
            "0" => false,
            "1" => true,
            other => return Err(format!("NCCL_COLLNET_ENABLE: `{other}` is not 0 or 1")),
        };
        Ok(())
    }

    /// Applies NCCL's environment variables from `var` (a lookup such as
    /// `std::env::var`): `NCCL_PROTO`, `NCCL_MIN_NCHANNELS`,
    /// `NCCL_MAX_NCHANNELS`, `NCCL_NVLS_ENABLE`, `NCCL_NVLS_NCHANNELS`,
    /// `NCCL_COLLNET_ENABLE`, `NCCL_PAT_ENABLE` (`NCCL_ALGO` restricts
    /// every tuner, so the study takes it as an
    /// [`AlgoFilter`](crate::tuning::AlgoFilter)). Returns the ones it
    /// applied, as `NAME=value`.
    pub fn apply_env(
        &mut self,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<String>, String> {
        let mut applied = Vec::new();
        if let Some(v) = var("NCCL_PROTO") {
            self.set_proto(&v)?;
            applied.push(format!("NCCL_PROTO={v}"));
        }
        for (name, slot) in [
            ("NCCL_MIN_NCHANNELS", &mut self.min_channels),
            ("NCCL_MAX_NCHANNELS", &mut self.max_channels),
        ] {
            if let Some(v) = var(name) {
                // 2.29.7's MAXCHANNELS; 2.21.5 caps the count at its 32.
                *slot = Some(channel_count(name, &v, 64)?);
                applied.push(format!("{name}={v}"));
            }
        }
        type Setter = fn(&mut NcclConfig, &str) -> Result<(), String>;
        let setters: [(&str, Setter); 3] = [
            ("NCCL_NVLS_ENABLE", NcclConfig::set_nvls_enable),
            ("NCCL_COLLNET_ENABLE", NcclConfig::set_collnet_enable),
            ("NCCL_PAT_ENABLE", NcclConfig::set_pat_enable),
        ];
        for (name, set) in setters {
            if let Some(v) = var(name) {
                set(self, &v)?;
                applied.push(format!("{name}={v}"));
            }
        }
        if let Some(v) = var("NCCL_NVLS_NCHANNELS") {
            self.nvls_channels = Some(channel_count("NCCL_NVLS_NCHANNELS", &v, 64)?);
            applied.push(format!("NCCL_NVLS_NCHANNELS={v}"));
        }
        Ok(applied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algo_names_in_any_spelling_and_per_function_prefixes() {
        let rows = parse_algo_map(
            "NCCL_ALGO",
            "ring,NVLSTree;allreduce:tree,nvls;allgather:^pat",
        )
        .unwrap();
        let on =
            |f: Collective, a: NcclAlgorithm| rows[f_index(f)][super::super::model::a_index(a)];
        assert!(on(Collective::Broadcast, NcclAlgorithm::Ring));
        assert!(on(Collective::Broadcast, NcclAlgorithm::NvlsTree));
        assert!(!on(Collective::Broadcast, NcclAlgorithm::Tree));
        assert!(on(Collective::Allreduce, NcclAlgorithm::Nvls));
        assert!(!on(Collective::Allreduce, NcclAlgorithm::Ring));
        assert!(!on(Collective::Allgather, NcclAlgorithm::Pat));
        assert!(on(Collective::Allgather, NcclAlgorithm::CollNetDirect));
        let spelled =
            parse_algo_map("NCCL_ALGO", "^nvls_tree,collnet-direct,CollNetChain,pat").unwrap();
        assert_eq!(spelled[4], [true, true, false, false, true, false, false]);
    }

    #[test]
    fn algo_errors_name_the_token_and_where() {
        let e = parse_algo_map("NCCL_ALGO", "ring;allreduce:sharp").unwrap_err();
        assert!(e.contains("`sharp`") && e.contains("character 6"), "{e}");
        let e = parse_algo_map("NCCL_ALGO", "ring;allreduce:tree;nvls").unwrap_err();
        assert!(e.contains("entry 3 at character 21 `nvls`"), "{e}");
        let e = parse_algo_map("NCCL_ALGO", "allsum:ring").unwrap_err();
        assert!(e.contains("unknown function `allsum`"), "{e}");
        let e = parse_algo_map("NCCL_ALGO", "ring;allreduce:^").unwrap_err();
        assert!(
            e.contains("entry 2 at character 6 `allreduce:^` names nothing"),
            "{e}"
        );
    }

    #[test]
    fn algo_entries_keep_the_names_as_written_and_say_where_they_stand() {
        let entries = algo_entries("NCCL_ALGO", " Ring , ;allreduce: ^ nvls_tree").unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].function, None);
        assert_eq!(
            (entries[0].names.clone(), entries[0].exclude),
            (vec!["Ring"], false)
        );
        assert_eq!(entries[1].function, Some(Collective::Allreduce));
        assert_eq!(
            (entries[1].names.clone(), entries[1].exclude),
            (vec!["nvls_tree"], true)
        );
        assert_eq!(entries[1].place, "entry 2 at character 10");
    }

    #[test]
    fn proto_errors_name_the_variable_and_the_token() {
        let mut c = NcclConfig::default();
        c.set_proto("^ll128").unwrap();
        assert_eq!(c.allowed.protocols, [true, false, true]);
        let e = c.set_proto("LL,fast").unwrap_err();
        assert!(
            e.starts_with("NCCL_PROTO: unknown name `fast`; valid: LL, LL128, Simple"),
            "{e}"
        );
        let e = c.set_proto(" ^ ").unwrap_err();
        assert!(e.contains("NCCL_PROTO: ` ^ ` names nothing"), "{e}");
    }

    #[test]
    fn enables_take_nccls_values() {
        let mut c = NcclConfig::default();
        let applied = c
            .apply_env(|v| match v {
                "NCCL_NVLS_ENABLE" => Some("0".into()),
                "NCCL_COLLNET_ENABLE" => Some("1".into()),
                "NCCL_PAT_ENABLE" => Some("2".into()),
                "NCCL_NVLS_NCHANNELS" => Some("8".into()),
                _ => None,
            })
            .unwrap();
        assert_eq!(applied.len(), 4);
        assert_eq!(c.nvls_enable, Some(false));
        assert!(c.collnet_enable);
        assert_eq!(c.pat_enable, None);
        assert_eq!(c.nvls_channels, Some(8));
        let e = c
            .apply_env(|v| (v == "NCCL_PAT_ENABLE").then(|| "yes".into()))
            .unwrap_err();
        assert!(e.contains("NCCL_PAT_ENABLE: `yes`"), "{e}");
    }
}
