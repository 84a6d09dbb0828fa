//! The properties checked at the end of every explored schedule, each
//! reported by name ([`Verdict`]): every rank finishes, results equal the
//! reference, results are bitwise identical on every rank and under every
//! schedule (compared as symbolic reduction trees), no message is left
//! unreceived, the cost formula holds, the user's assertions hold, and
//! after a fault the fault contract holds.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use algorithms::symbolic::{self, Sym};
use algorithms::{Collective, Payload, Rank, collective};

use super::exec::Execution;
use super::program::{Program, input, leaf_id, leaf_name};
use super::spec::{Assertion, Point, Verdict};
use super::world::{RankStatus, Wait, World};

/// A property that failed on a schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The property.
    pub verdict: Verdict,
    /// One line saying what went wrong.
    pub summary: String,
    /// Further lines: each rank's state, the cycle, the differing trees.
    pub details: Vec<String>,
}

/// Results of earlier schedules of the same point, for the cross-schedule
/// determinism check: (call, rank) -> output symbols.
#[derive(Clone, Debug, Default)]
pub struct Baseline {
    outputs: BTreeMap<(usize, Rank), Vec<Sym>>,
    /// Bytes and messages each rank sent on the first fault-free schedule.
    traffic: Option<Vec<(u64, u64)>>,
}

/// What a call's tag belongs to, for messages in reports.
pub fn describe_tag(program: &Program, tag: u64) -> String {
    let tag = algorithms::Tag(tag);
    match program.calls.iter().find(|c| c.tag == tag.base()) {
        Some(c) => format!("tag {tag} (call `{}`)", c.id),
        None => format!("tag {tag}"),
    }
}

/// One line per running rank saying what it waits for.
pub fn describe_waits(program: &Program, world: &World) -> Vec<String> {
    let waits = world.waits();
    let mut lines = Vec::new();
    for (rank, w) in waits.iter().enumerate() {
        if world.ranks[rank].status != RankStatus::Running {
            continue;
        }
        let what: Vec<String> = w
            .iter()
            .map(|w| match w {
                Wait::Recv(k) => format!(
                    "a message from rank {} {}",
                    k.src,
                    describe_tag(program, k.tag)
                ),
                Wait::Send(k) => format!(
                    "its send to rank {} {} to be taken",
                    k.dst,
                    describe_tag(program, k.tag)
                ),
            })
            .collect();
        if what.is_empty() {
            lines.push(format!("rank {rank} is blocked with nothing posted"));
        } else {
            lines.push(format!("rank {rank} waits for {}", what.join(" and ")));
        }
    }
    lines
}

/// The wait-for cycle among running ranks, if there is one.
pub fn wait_cycle(world: &World) -> Option<Vec<Rank>> {
    let edges: Vec<Vec<Rank>> = world
        .waits()
        .iter()
        .enumerate()
        .map(|(rank, ws)| {
            if world.ranks[rank].status != RankStatus::Running {
                return Vec::new();
            }
            let mut to: Vec<Rank> = ws
                .iter()
                .map(|w| match w {
                    Wait::Recv(k) => k.src,
                    Wait::Send(k) => k.dst,
                })
                .collect();
            to.dedup();
            to
        })
        .collect();
    engine::cycle::find_cycle(&edges, 0..edges.len())
}

fn symbols(p: &Payload) -> &[Sym] {
    p.as_slice::<Sym>().unwrap_or(&[])
}

/// Checks every property on a finished schedule (`cut`: it stopped at the
/// depth bound, so not finishing is not a deadlock).
pub fn evaluate(
    program: &Program,
    point: Point,
    exec: &Execution,
    cut: bool,
    baseline: &mut Baseline,
) -> Option<Violation> {
    let world = exec.world.borrow();
    let n = point.world_size;
    let name = |id: u64| leaf_name(program, id);
    let running: Vec<Rank> = (0..n)
        .filter(|&r| world.ranks[r].status == RankStatus::Running)
        .collect();
    let faulted = world.faulted();
    if !running.is_empty() {
        if cut {
            return None;
        }
        let mut details = Vec::new();
        if let Some(cycle) = wait_cycle(&world) {
            let mut text = String::from("cycle: ");
            for r in &cycle {
                let _ = write!(text, "{r} -> ");
            }
            let _ = write!(text, "{}", cycle[0]);
            details.push(text);
        }
        let verdict = if faulted {
            Verdict::FaultContract
        } else {
            Verdict::Deadlock
        };
        let list: Vec<String> = running.iter().map(|r| r.to_string()).collect();
        let summary = if faulted {
            format!("after a fault, rank(s) {} never finish", list.join(", "))
        } else {
            format!("rank(s) {} never finish", list.join(", "))
        };
        return Some(Violation {
            verdict,
            summary,
            details,
        });
    }
    // Errors.
    let mut causes: BTreeMap<String, Vec<Rank>> = BTreeMap::new();
    for rank in 0..n {
        if let RankStatus::Finished(Some(cause)) = &world.ranks[rank].status {
            causes.entry(cause.clone()).or_default().push(rank);
        }
    }
    if !causes.is_empty() && !faulted {
        let (cause, ranks) = causes.iter().next().expect("not empty");
        let errors: Vec<String> = (0..n)
            .filter_map(|r| {
                let results = exec.results[r].as_ref()?;
                let e = results.iter().flatten().find_map(|x| x.as_ref().err())?;
                // Fabric errors already say which rank saw them.
                let e = e.to_string();
                let named = e.starts_with(&format!("rank {r}:"));
                Some(if named { e } else { format!("rank {r}: {e}") })
            })
            .collect();
        return Some(Violation {
            verdict: Verdict::Error,
            summary: format!("rank {} failed with no fault: {cause}", ranks[0]),
            details: errors,
        });
    }
    if causes.len() > 1 {
        let details = causes
            .iter()
            .map(|(c, rs)| format!("ranks {rs:?} report: {c}"))
            .collect();
        return Some(Violation {
            verdict: Verdict::FaultContract,
            summary: "after a fault, the ranks' errors name different causes".into(),
            details,
        });
    }
    // Results.
    for (index, call) in program.calls.iter().enumerate() {
        let inputs: Vec<Payload> = (0..n).map(|r| input(index, r, point.count)).collect();
        let moved = (!call.collective.reduces() && call.collective != Collective::Barrier)
            .then(|| collective::movement_reference(call.collective, &inputs, point.root));
        let mut first: Option<(Rank, Vec<Sym>)> = None;
        for rank in 0..n {
            let Some(Some(Ok(out))) = exec.results[rank].as_ref().map(|r| r[index].as_ref()) else {
                continue;
            };
            let range =
                collective::defined_output(call.collective, rank, n, point.count, point.root);
            let got = &symbols(out)[range.clone()];
            for (offset, &sym) in got.iter().enumerate() {
                let e = range.start + offset;
                let wrong = match &moved {
                    Some(expected) => symbols(&expected[rank]).get(e) != Some(&sym),
                    None => {
                        let want: Vec<u64> = (0..n).map(|j| leaf_id(index, j, e)).collect();
                        symbolic::leaves(sym) != want
                    }
                };
                if wrong {
                    let expected = match &moved {
                        Some(m) => symbols(&m[rank])
                            .get(e)
                            .map(|&s| symbolic::describe(s, &name))
                            .unwrap_or_default(),
                        None => format!("a reduction of every rank's element {e}, each once"),
                    };
                    let verdict = if faulted {
                        Verdict::FaultContract
                    } else {
                        Verdict::WrongResult
                    };
                    return Some(Violation {
                        verdict,
                        summary: format!("call `{}`: rank {rank}'s element {e} is wrong", call.id),
                        details: vec![
                            format!("got      {}", symbolic::describe(sym, &name)),
                            format!("expected {expected}"),
                        ],
                    });
                }
            }
            // Bitwise identity: every rank holding the whole reduction
            // holds the same trees.
            if call.collective == Collective::Allreduce {
                match &first {
                    None => first = Some((rank, got.to_vec())),
                    Some((r0, syms)) => {
                        if let Some(e) = (0..got.len()).find(|&e| syms[e] != got[e]) {
                            return Some(nondeterministic(
                                format!(
                                    "call `{}`: ranks {r0} and {rank} hold different bits in element {e}",
                                    call.id
                                ),
                                syms[e],
                                got[e],
                                &name,
                            ));
                        }
                    }
                }
            }
            if call.collective.reduces() && !faulted {
                let key = (index, rank);
                match baseline.outputs.get(&key) {
                    None => {
                        baseline.outputs.insert(key, got.to_vec());
                    }
                    Some(before) => {
                        if let Some(e) = (0..got.len()).find(|&e| before[e] != got[e]) {
                            return Some(nondeterministic(
                                format!(
                                    "call `{}`: rank {rank}'s element {} differs from an earlier schedule's",
                                    call.id,
                                    range.start + e
                                ),
                                before[e],
                                got[e],
                                &name,
                            ));
                        }
                    }
                }
            }
        }
    }
    if !faulted {
        let left = world.leftovers();
        if !left.is_empty() {
            let details = left
                .iter()
                .map(|(k, count)| {
                    format!(
                        "{count} message(s) from rank {} to rank {} {} never received",
                        k.src,
                        k.dst,
                        describe_tag(program, k.tag)
                    )
                })
                .collect();
            return Some(Violation {
                verdict: Verdict::Leftover,
                summary: "messages were sent and never received".into(),
                details,
            });
        }
    }
    if program.check_cost && !faulted {
        let traffic: Vec<(u64, u64)> = world
            .ranks
            .iter()
            .map(|r| (r.bytes_sent, r.messages_sent))
            .collect();
        match &baseline.traffic {
            None => baseline.traffic = Some(traffic),
            Some(before) => {
                if let Some(r) = (0..n).find(|&r| before[r] != traffic[r]) {
                    return Some(Violation {
                        verdict: Verdict::Cost,
                        summary: format!(
                            "rank {r}'s traffic depends on the schedule: {} bytes in {} messages here, {} bytes in {} messages on another",
                            traffic[r].0, traffic[r].1, before[r].0, before[r].1
                        ),
                        details: Vec::new(),
                    });
                }
            }
        }
    }
    check_assertions(program, &world)
}

fn nondeterministic(summary: String, a: Sym, b: Sym, name: &dyn Fn(u64) -> String) -> Violation {
    Violation {
        verdict: Verdict::Nondeterministic,
        summary,
        details: vec![
            format!("one:   {}", symbolic::describe(a, name)),
            format!("other: {}", symbolic::describe(b, name)),
        ],
    }
}

fn check_assertions(program: &Program, world: &World) -> Option<Violation> {
    for a in &program.asserts {
        let ranks = |only: Option<Rank>| -> Vec<Rank> {
            (0..world.world_size)
                .filter(|&r| only.is_none_or(|o| o == r))
                .collect()
        };
        let failed = match *a {
            Assertion::MaxBytesSent { rank, bytes } => ranks(rank)
                .into_iter()
                .find(|&r| world.ranks[r].bytes_sent > bytes)
                .map(|r| {
                    format!(
                        "rank {r} sent {} bytes, more than {bytes}",
                        world.ranks[r].bytes_sent
                    )
                }),
            Assertion::MaxMessagesSent { rank, messages } => ranks(rank)
                .into_iter()
                .find(|&r| world.ranks[r].messages_sent > messages)
                .map(|r| {
                    format!(
                        "rank {r} sent {} messages, more than {messages}",
                        world.ranks[r].messages_sent
                    )
                }),
            Assertion::MaxSteps { steps } => {
                let depth = world.ranks.iter().map(|r| r.clock[0]).max().unwrap_or(0);
                (depth > steps).then(|| format!("a chain of {depth} messages, more than {steps}"))
            }
        };
        if let Some(summary) = failed {
            return Some(Violation {
                verdict: Verdict::Assertion,
                summary,
                details: Vec::new(),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::rc::Rc;

    use crate::run::{Options, check};
    use crate::scenario::parse;
    use crate::spec::Verdict;

    #[test]
    fn an_error_names_each_failing_rank_once() {
        // Two concurrent allreduces sharing a tag on 3 ranks with uneven
        // blocks: a receive takes the other call's message of another
        // length and fails.
        let text = r#"
            concurrent = true
            [[call]]
            collective = "allreduce"
            algorithm = "ring"
            tag = 7
            [[call]]
            collective = "allreduce"
            algorithm = "ring"
            tag = 7
            [params]
            world_size = 3
            count = 2
            buffering = "eager:1"
            [search]
            delay_bound = 2
        "#;
        let program = Rc::new(
            parse(Path::new("t.toml"), text, &algorithms::Registry::builtin()).expect("valid"),
        );
        let report = check(&program, Options::default()).expect("the search runs");
        assert_eq!(report.verdict, Verdict::Error);
        let cex = report.counterexample.expect("a counterexample");
        assert!(!cex.violation.details.is_empty());
        for line in &cex.violation.details {
            let (rank, rest) = line.split_once(": ").expect("`rank R: why`");
            assert!(rank.starts_with("rank "), "{line}");
            assert!(!rest.starts_with(&format!("{rank}:")), "{line}");
        }
    }
}
