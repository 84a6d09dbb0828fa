//! Traces: what each rank did and how each link's backlog changed, written
//! as Chrome trace JSON (open it in Perfetto or `chrome://tracing`).
//!
//! A run records [`Span`]s (a send from post to delivery, a receive from
//! post to completion, a reduction, a whole collective call) and the
//! network model's [`LinkSample`]s. [`write_chrome_trace`] turns the runs of
//! a study into one file: one process per run (a collective at one size),
//! one track per rank, and one counter per link direction.
//!
//! Spans of one rank may overlap (sends are eager, receives are posted
//! ahead); the Chrome format wants the slices of one thread properly
//! nested, so a rank's spans are dealt into lanes ("rank 3", "rank 3 +1",
//! ...) such that spans on one lane never overlap.

use std::io::{self, Write};

use algorithms::{Rank, Time};
use serde_json::{Value, json};
use topologies::Topology;

use crate::network::LinkSample;

/// What a span is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    /// A message from its send to its arrival (on the sender's track).
    Send,
    /// A receive from its post to its completion.
    Recv,
    /// A reduction on the rank's compute engine.
    Reduce,
    /// One call of a collective, named.
    Call(&'static str),
}

impl SpanKind {
    fn name(self) -> &'static str {
        match self {
            SpanKind::Send => "send",
            SpanKind::Recv => "recv",
            SpanKind::Reduce => "reduce",
            SpanKind::Call(name) => name,
        }
    }
}

/// Something one rank did over an interval of virtual time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// The rank whose track it is on.
    pub rank: Rank,
    /// What it was.
    pub kind: SpanKind,
    /// The other rank of a send or receive.
    pub peer: Option<Rank>,
    /// Bytes moved or reduced.
    pub bytes: u64,
    /// When it began.
    pub start: Time,
    /// When it ended.
    pub end: Time,
}

/// Everything one run recorded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceLog {
    /// Rank spans, in the order they ended.
    pub spans: Vec<Span>,
    /// Link backlog changes, in time order.
    pub links: Vec<LinkSample>,
}

/// One run of a study, labelled, with its trace.
#[derive(Clone, Debug)]
pub struct TracedRun {
    /// Shown as the process name, e.g. `allreduce ring 1048576 B`.
    pub label: String,
    /// Number of ranks.
    pub ranks: usize,
    /// What it recorded.
    pub log: TraceLog,
}

/// Microseconds, the Chrome trace time unit.
fn us(t: Time) -> f64 {
    t.as_ps() as f64 / 1e6
}

/// Writes `runs` as one Chrome trace JSON document; link counters are
/// named after `topology`'s link directions.
pub fn write_chrome_trace(
    out: &mut impl Write,
    runs: &[TracedRun],
    topology: Option<&Topology>,
) -> io::Result<()> {
    let mut events: Vec<Value> = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        let pid = i + 1;
        events.push(json!({"name": "process_name", "ph": "M", "pid": pid,
            "args": {"name": run.label}}));
        events.push(json!({"name": "process_sort_index", "ph": "M", "pid": pid,
            "args": {"sort_index": pid}}));
        rank_tracks(&mut events, pid, run);
        for s in &run.log.links {
            let name = match topology {
                Some(t) => t.link_name(s.link),
                None => format!("link {}", s.link.index()),
            };
            events.push(
                json!({"name": name, "ph": "C", "pid": pid, "ts": us(s.time),
                "args": {"backlog": s.queue}}),
            );
        }
    }
    let doc = json!({"traceEvents": events, "displayTimeUnit": "ns"});
    serde_json::to_writer(&mut *out, &doc)?;
    writeln!(out)
}

/// Lanes per rank at most; further overlapping spans share the last lane.
const LANES_MAX: usize = 16;

/// The spans of `run`, dealt into non-overlapping lanes per rank.
fn rank_tracks(events: &mut Vec<Value>, pid: usize, run: &TracedRun) {
    let mut spans = run.log.spans.clone();
    // Longer spans first among equal starts, so a call encloses its parts.
    spans.sort_by_key(|s| (s.rank, s.start, std::cmp::Reverse(s.end)));
    let mut lanes_end: Vec<Vec<Time>> = vec![Vec::new(); run.ranks];
    for s in &spans {
        let ends = &mut lanes_end[s.rank];
        let lane = match ends.iter().position(|&end| end <= s.start) {
            Some(lane) => lane,
            None if ends.len() < LANES_MAX => {
                ends.push(Time::ZERO);
                ends.len() - 1
            }
            None => LANES_MAX - 1,
        };
        ends[lane] = ends[lane].max(s.end);
        let tid = s.rank * LANES_MAX + lane;
        let mut args = json!({"bytes": s.bytes});
        if let Some(peer) = s.peer {
            args["peer"] = json!(peer);
        }
        events.push(
            json!({"name": s.kind.name(), "ph": "X", "pid": pid, "tid": tid,
            "ts": us(s.start), "dur": us(s.end) - us(s.start), "args": args}),
        );
    }
    for (rank, ends) in lanes_end.iter().enumerate() {
        for lane in 0..ends.len() {
            let tid = rank * LANES_MAX + lane;
            let name = if lane == 0 {
                format!("rank {rank}")
            } else {
                format!("rank {rank} +{lane}")
            };
            events.push(
                json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                "args": {"name": name}}),
            );
            events.push(
                json!({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                "args": {"sort_index": tid}}),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_spans_go_to_separate_lanes_and_the_json_parses() {
        let span = |kind, start, end| Span {
            rank: 1,
            kind,
            peer: Some(0),
            bytes: 8,
            start: Time(start),
            end: Time(end),
        };
        let run = TracedRun {
            label: "allreduce ring 8 B".into(),
            ranks: 2,
            log: TraceLog {
                spans: vec![
                    span(SpanKind::Send, 1_000_000, 5_000_000),
                    span(SpanKind::Recv, 2_000_000, 3_000_000),
                    span(SpanKind::Call("allreduce"), 0, 6_000_000),
                    span(SpanKind::Reduce, 5_000_000, 6_000_000),
                ],
                links: vec![],
            },
        };
        let mut out = Vec::new();
        write_chrome_trace(&mut out, &[run], None).unwrap();
        let doc: Value = serde_json::from_slice(&out).unwrap();
        let slices: Vec<&Value> = doc["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .collect();
        let tid_of = |name: &str| {
            slices.iter().find(|e| e["name"] == name).unwrap()["tid"]
                .as_u64()
                .unwrap()
        };
        // The call encloses everything: lane 0. Send and recv overlap: two
        // lanes. The reduce starts when the send ends: it reuses its lane.
        assert_eq!(tid_of("allreduce"), 16);
        assert_eq!(tid_of("send"), 17);
        assert_eq!(tid_of("recv"), 18);
        assert_eq!(tid_of("reduce"), 17);
        let send = slices.iter().find(|e| e["name"] == "send").unwrap();
        assert_eq!(send["ts"].as_f64(), Some(1.0));
        assert_eq!(send["dur"].as_f64(), Some(4.0));
    }
}
