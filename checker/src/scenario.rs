//! Check scenarios: TOML files (`scenarios/check/*.toml`) that say which
//! collective calls to model-check, over which parameters, under which
//! send semantics and faults, and how to search their schedules. They are
//! read into a [`CheckScenario`].
//!
//! ```toml
//! name = "ring_ok"             # optional, default: the file stem
//! expect = "verified"          # optional: the verdict the check should reach: verified,
//!                              # deadlock, error, wrong_result, nondeterministic,
//!                              # leftover, cost, assertion or fault_contract
//! concurrent = false           # optional: each rank runs its calls joined, not in sequence
//! cost = true                  # optional (default false): check the bytes and steps
//!                              # against the cost formulas (skipped, with a note, for
//!                              # an algorithm without one)
//!
//! [[call]]                     # at least one
//! id = "sum"                   # optional, default "call0", "call1", ... (unique)
//! collective = "allreduce"
//! algorithm = "ring"           # an algorithm of that collective in the registry (the
//!                              # catalogue's and a user program's), or a demo:
//!                              # buggy_ring, arrival_order_sum (allreduce),
//!                              # send_all_first (allgather)
//! op = "sum"                   # reducing collectives only; default sum
//! tag = 0                      # default: the call's index in the file (below 2^56)
//!
//! [[call]]
//! id = "bcast"
//! collective = "broadcast"
//! algorithm = "binomial"
//!
//! [order]                      # optional: the order each rank makes its calls, by id
//! default = ["bcast", "sum"]   # ranks not named (default: file order)
//! "0" = ["sum", "bcast"]       # a rank below the largest world size; an order may
//!                              # leave calls out (that rank skips them), not repeat one
//!
//! [params]                     # every key optional; each a value, a list, or (whole
//! world_size = [2, 3, 4]       # numbers) a range { from = 2, to = 5, step = 1 },
//! count = { from = 2, to = 4 } # inclusive, step optional
//! chunks = [1, 2]              # world_size: 1..=16, default [2, 3, 4]
//! root = 0                     # count (elements per rank buffer): 0..=4096, default [4]
//! in_place = [true, false]     # chunks: 1..=4096, default [1]; root: default [0]
//! buffering = ["eager:1", "rendezvous", "unbounded"]
//!                              # in_place: default [true]; buffering: "eager:K"
//!                              # (K slots per connection, "eager:0" = "rendezvous"),
//!                              # "rendezvous" or "unbounded", default ["eager:8"]
//!
//! [faults]                     # optional; how many of each fault one schedule may hold
//! drops = 1                    # messages lost (0..=64)
//! retransmit = true            # the transport resends a lost message (RDMA RC)
//! retry_count = 7              # resends per message, 0..=7 (NCCL_IB_RETRY_CNT, default 7);
//!                              # used only with retransmit = true
//! crashes = 0                  # ranks that stop (at most the largest world size)
//! timeouts = 0                 # receives that time out spuriously (0..=64)
//!
//! [search]                     # optional; default an exhaustive search
//! kind = "random"              # "exhaustive", "random" or "pct"
//! schedules = 1000             # random and pct: schedules per point, default 1000
//! seed = 1                     # random and pct: default 1
//! # depth = 3                  # pct only: the bug depth, default 3
//! max_schedules = 100000       # schedules per point before giving up (default 100000)
//! max_depth = 10000            # steps per schedule (default 10000)
//! delay_bound = 2              # optional: most deviations from the default schedule
//!
//! [[assert]]                   # optional, any number, checked on every schedule
//! kind = "max_bytes_sent"      # needs bytes (an integer or "4K"); optional rank
//! bytes = 64
//! # kind = "max_messages_sent" # needs messages; optional rank
//! # kind = "max_steps"         # needs steps: the longest causal chain of messages
//! ```
//!
//! Every problem (an unknown key, collective, algorithm, op, verdict,
//! buffering, search or assert kind; an algorithm of another collective; a
//! repeated call id; an order naming an unknown call, a call twice, or a
//! rank that no world size has; an empty list; a backwards range or a zero
//! step; a root missing at the smallest world size of a rooted call; an
//! alltoall count that some world size does not divide; more than
//! [`POINTS_MAX`] parameter points;
//! zero schedules or depth) is a [`ScenarioError`] at the offending value's
//! line and column, saying what was expected.

mod params;
mod raw;
mod search;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::Path;

use algorithms::{Algorithm, Collective, DType, Rank, ReduceOp, Registry};
use toml::Spanned;

use crate::spec::{CallSpec, CheckScenario, Verdict};
use engine::scenario::{ScenarioError, Source};

use raw::{RawCall, RawCheck, RawOrder};

/// The largest world a check may ask for: the state space grows too fast
/// beyond it.
pub const WORLD_SIZE_MAX: usize = 16;

/// The most elements per rank buffer.
pub const COUNT_MAX: usize = 4096;

/// The most parameter points (the product of the axes' lengths).
pub const POINTS_MAX: usize = 10_000;

/// The most eager buffer slots per connection (`"eager:K"`).
pub const BUFFER_SLOTS_MAX: usize = 1 << 16;

/// The most drops, or spurious timeouts, one schedule may contain.
pub const FAULTS_MAX: usize = 64;

/// The most retransmissions per message (NCCL_IB_RETRY_CNT's range).
pub const RETRY_COUNT_MAX: usize = 7;

/// The most schedules per point (`schedules`, `max_schedules`).
pub const SCHEDULES_MAX: u64 = 1_000_000_000;

/// The most steps per schedule (`max_depth`, `delay_bound`).
pub const STEPS_MAX: usize = 1_000_000;

/// The deepest bug PCT may target.
pub const PCT_DEPTH_MAX: usize = 64;

/// Reads and validates the check scenario at `path`; its algorithm names
/// are resolved in `registry` and, for names it does not have, among the
/// demonstration algorithms ([`crate::demo`]).
pub fn load(path: &Path, registry: &Registry) -> Result<CheckScenario, ScenarioError> {
    let text = engine::scenario::read_file(path)?;
    parse(path, &text, registry)
}

/// Parses and validates check scenario `text`, reporting errors against
/// `path` (names resolved as [`load`] does).
pub fn parse(path: &Path, text: &str, registry: &Registry) -> Result<CheckScenario, ScenarioError> {
    let src = Source { path, text };
    let mut registry = registry.clone();
    for demo in crate::demo::algorithms() {
        // A user's algorithm of the same name takes precedence.
        let _ = registry.insert(demo);
    }
    let raw: RawCheck = toml::from_str(text)
        .map_err(|e| src.error(e.span(), e.message().trim_end().to_string()))?;
    let name = match &raw.name {
        Some(n) if n.get_ref().trim().is_empty() => {
            return Err(src.at(n, "name must not be empty"));
        }
        Some(n) => n.get_ref().clone(),
        None => path
            .file_stem()
            .map_or_else(|| "check".to_string(), |s| s.to_string_lossy().into_owned()),
    };
    let expect = match &raw.expect {
        Some(e) => Some(verdict(&src, e)?),
        None => None,
    };
    let check_cost = raw.cost.as_ref().is_some_and(|c| *c.get_ref());
    if raw.call.is_empty() {
        return Err(src.error(
            None,
            "the check has no [[call]]; add at least one (collective and algorithm)",
        ));
    }
    let calls = raw
        .call
        .iter()
        .enumerate()
        .map(|(i, c)| call(&src, i, c, &registry))
        .collect::<Result<Vec<_>, _>>()?;
    let notes = if check_cost {
        calls
            .iter()
            .filter(|c| c.algorithm.facts().formula().is_none())
            .map(|c| {
                format!(
                    "call `{}`: {} {} has no cost formula; its cost property is skipped",
                    c.id, c.collective, c.algorithm
                )
            })
            .collect()
    } else {
        Vec::new()
    };
    unique_ids(&src, &raw.call, &calls)?;
    let axes = params::axes(&src, raw.params.as_ref(), &raw.call, &calls)?;
    let world_size_max = *axes.world_size.iter().max().expect("axes are never empty");
    let (order, default_order) = order(&src, raw.order.as_ref(), &calls, world_size_max)?;
    let faults = search::faults(&src, raw.faults.as_ref(), world_size_max)?;
    let (search, bounds) = search::search(&src, raw.search.as_ref())?;
    let asserts = raw
        .asserts
        .iter()
        .map(|a| search::assertion(&src, a, world_size_max))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CheckScenario {
        name,
        path: path.to_path_buf(),
        calls,
        order,
        default_order,
        concurrent: raw.concurrent.unwrap_or(false),
        axes,
        faults,
        search,
        bounds,
        check_cost,
        expect,
        asserts,
        notes,
    })
}

fn verdict(src: &Source, v: &Spanned<String>) -> Result<Verdict, ScenarioError> {
    Verdict::ALL
        .into_iter()
        .find(|x| x.name() == v.get_ref())
        .ok_or_else(|| {
            let names: Vec<&str> = Verdict::ALL.iter().map(|x| x.name()).collect();
            src.at(
                v,
                format!(
                    "unknown verdict `{}`; expected one of {}",
                    v.get_ref(),
                    names.join(", ")
                ),
            )
        })
}

/// One `[[call]]`, the `index`-th in the file.
fn call(
    src: &Source,
    index: usize,
    spanned: &Spanned<RawCall>,
    registry: &Registry,
) -> Result<CallSpec, ScenarioError> {
    let c = spanned.get_ref();
    let id = match &c.id {
        Some(id) if id.get_ref().trim().is_empty() => {
            return Err(src.at(id, "a call id must not be empty"));
        }
        Some(id) => id.get_ref().clone(),
        None => format!("call{index}"),
    };
    let collective: Collective = c
        .collective
        .get_ref()
        .parse()
        .map_err(|e| src.at(&c.collective, e))?;
    let algorithm = algorithm(src, registry, collective, &c.algorithm)?;
    let op = match &c.op {
        None => ReduceOp::Sum,
        Some(o) if !collective.reduces() => {
            return Err(src.at(
                o,
                format!("{collective} does not reduce, so it takes no op"),
            ));
        }
        Some(o) => {
            let op: ReduceOp = o.get_ref().parse().map_err(|e| src.at(o, e))?;
            // Checks run on float data, so this is the nominal test.
            if !op.supports(DType::F32) {
                return Err(src.at(o, format!("op `{op}` is not defined for float")));
            }
            op
        }
    };
    let tag = match &c.tag {
        Some(t) => src.count(t, "tag", 0, (1 << 56) - 1)? as u64,
        None => index as u64,
    };
    Ok(CallSpec {
        id,
        collective,
        algorithm,
        op,
        tag,
    })
}

/// The algorithm `a` names for `collective` in `registry`.
fn algorithm(
    src: &Source,
    registry: &Registry,
    collective: Collective,
    a: &Spanned<String>,
) -> Result<Algorithm, ScenarioError> {
    let name = a.get_ref().as_str();
    registry.find(collective, name).map_err(|unknown| {
        let what = if registry.knows_name(name) {
            format!("algorithm `{name}` does not implement {collective}")
        } else {
            format!("unknown algorithm `{name}`")
        };
        src.at(
            a,
            format!(
                "{what}; expected one of {} for {collective}",
                unknown.valid.join(", ")
            ),
        )
    })
}

/// No two calls share an id (given or default).
fn unique_ids(
    src: &Source,
    raw_calls: &[Spanned<RawCall>],
    calls: &[CallSpec],
) -> Result<(), ScenarioError> {
    for (i, c) in calls.iter().enumerate() {
        if let Some(j) = calls[..i].iter().position(|d| d.id == c.id) {
            let raw = &raw_calls[i];
            let at = raw.get_ref().id.as_ref().map_or(raw.span(), |id| id.span());
            return Err(src.error(
                Some(at),
                format!(
                    "call id `{}` is already used by call {j} (line {}); ids must be unique",
                    c.id,
                    src.line_of(&raw_calls[j])
                ),
            ));
        }
    }
    Ok(())
}

/// The per-rank call orders and the default order.
type Orders = (BTreeMap<Rank, Vec<usize>>, Vec<usize>);

/// `[order]`: per-rank call orders, and the default order (file order
/// unless given).
fn order(
    src: &Source,
    raw: Option<&RawOrder>,
    calls: &[CallSpec],
    world_size_max: usize,
) -> Result<Orders, ScenarioError> {
    let mut default_order: Vec<usize> = (0..calls.len()).collect();
    let mut order = BTreeMap::new();
    let Some(raw) = raw else {
        return Ok((order, default_order));
    };
    // Check the entries in the order written, so the first mistake is the
    // one reported.
    let mut entries: Vec<_> = raw.iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    for (key, list) in entries {
        let ids = order_list(src, key, list, calls)?;
        if key.get_ref() == "default" {
            default_order = ids;
            continue;
        }
        let rank = key
            .get_ref()
            .parse::<Rank>()
            .ok()
            .filter(|r| r.to_string() == *key.get_ref())
            .ok_or_else(|| {
                src.at(
                    key,
                    format!(
                        "order key `{}` is neither `default` nor a rank number",
                        key.get_ref()
                    ),
                )
            })?;
        if rank >= world_size_max {
            return Err(src.at(
                key,
                format!(
                    "rank {rank} does not exist: the largest world size is {world_size_max}, so ranks go up to {}",
                    world_size_max - 1
                ),
            ));
        }
        order.insert(rank, ids);
    }
    Ok((order, default_order))
}

/// One order: call ids, each known and named once, as call indices.
fn order_list(
    src: &Source,
    key: &Spanned<String>,
    list: &Spanned<Vec<Spanned<String>>>,
    calls: &[CallSpec],
) -> Result<Vec<usize>, ScenarioError> {
    let whose = match key.get_ref().as_str() {
        "default" => "the default order".to_string(),
        rank => format!("the order of rank {rank}"),
    };
    if list.get_ref().is_empty() {
        return Err(src.at(list, format!("{whose} is empty; name at least one call")));
    }
    let mut ids = Vec::with_capacity(list.get_ref().len());
    for id in list.get_ref() {
        let Some(i) = calls.iter().position(|c| c.id == *id.get_ref()) else {
            let known: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
            return Err(src.at(
                id,
                format!(
                    "no call has id `{}`; expected one of {}",
                    id.get_ref(),
                    known.join(", ")
                ),
            ));
        };
        if ids.contains(&i) {
            return Err(src.at(
                id,
                format!(
                    "{whose} names call `{}` twice; each call is made at most once",
                    id.get_ref()
                ),
            ));
        }
        ids.push(i);
    }
    Ok(ids)
}
