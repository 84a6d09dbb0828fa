//! Traces: what each rank did and how each link's backlog changed, written
//! as Chrome trace JSON (open it in Perfetto or `chrome://tracing`).
//!
//! A run records [`Span`]s (a send from post to delivery, a receive from
//! post to completion, a reduction, a whole collective call) and the
//! network model's [`LinkSample`]s. [`ChromeTraceWriter`] turns the runs of
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

use crate::network::{LinkChange, LinkSample};

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
    /// A straggler's delay before a call (a scheduled fault).
    Delay,
    /// The rank crashed here (a scheduled fault; zero length).
    Crash,
    /// The transport (RDMA or TCP) from the span's peer to this rank gave
    /// up here (zero length).
    TransportTimeout,
}

impl SpanKind {
    fn name(self) -> &'static str {
        match self {
            SpanKind::Send => "send",
            SpanKind::Recv => "recv",
            SpanKind::Reduce => "reduce",
            SpanKind::Call(name) => name,
            SpanKind::Delay => "straggler delay",
            SpanKind::Crash => "crash",
            SpanKind::TransportTimeout => "transport timeout",
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

/// The most spans one run records; beyond it the trace is truncated (and
/// says so) rather than exhausting memory.
pub const TRACE_SPANS_MAX: usize = 1 << 20;

/// Everything one run recorded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceLog {
    /// Rank spans, in the order they ended.
    pub spans: Vec<Span>,
    /// Link backlog changes, in time order.
    pub links: Vec<LinkSample>,
    /// Whether spans or link samples were dropped at their limits
    /// ([`TRACE_SPANS_MAX`], [`crate::network::LINK_SAMPLES_MAX`]).
    pub truncated: bool,
    /// Scheduled link faults that took effect during the run.
    pub link_changes: Vec<LinkChange>,
}

impl TraceLog {
    /// Records `span`, or notes the truncation once the limit is reached.
    pub fn push_span(&mut self, span: Span) {
        if self.spans.len() < TRACE_SPANS_MAX {
            self.spans.push(span);
        } else {
            self.truncated = true;
        }
    }
}

/// Microseconds, the Chrome trace time unit.
fn us(t: Time) -> f64 {
    t.as_ps() as f64 / 1e6
}

/// The most events one trace file holds (about half a gigabyte of JSON);
/// runs beyond it are listed but not traced.
pub const TRACE_EVENTS_MAX: u64 = 1 << 22;

/// Writes a Chrome trace JSON document one run at a time, so that only
/// the run being written is held in memory.
pub struct ChromeTraceWriter<W: Write> {
    out: W,
    events: u64,
    runs: usize,
    /// Link direction names, computed once per writer.
    link_names: Vec<String>,
    /// The most events the file may hold.
    events_max: u64,
}

/// Whether [`ChromeTraceWriter::write_run`] traced the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// Its spans and counters are in the file (maybe truncated, see
    /// [`TraceLog::truncated`]).
    Traced,
    /// Only its name is: the file had reached its event budget.
    OverBudget,
}

impl<W: Write> ChromeTraceWriter<W> {
    /// Starts the document on `out`, holding at most [`TRACE_EVENTS_MAX`]
    /// events.
    pub fn new(out: W) -> io::Result<ChromeTraceWriter<W>> {
        ChromeTraceWriter::with_budget(out, TRACE_EVENTS_MAX)
    }

    /// Starts the document on `out`, holding at most `events_max` events.
    pub fn with_budget(mut out: W, events_max: u64) -> io::Result<ChromeTraceWriter<W>> {
        out.write_all(br#"{"displayTimeUnit":"ns","traceEvents":["#)?;
        Ok(ChromeTraceWriter {
            out,
            events: 0,
            runs: 0,
            link_names: Vec::new(),
            events_max,
        })
    }

    fn event(&mut self, event: &Value) -> io::Result<()> {
        if self.events > 0 {
            self.out.write_all(b",\n")?;
        }
        self.events += 1;
        serde_json::to_writer(&mut self.out, event).map_err(io::Error::from)
    }

    /// Adds one run as a process labelled `label` with `ranks` rank
    /// tracks; link counters are named after `topology`'s link directions.
    /// A run that would take the file past its event budget is listed by
    /// name only.
    pub fn write_run(
        &mut self,
        label: &str,
        ranks: usize,
        log: &TraceLog,
        topology: Option<&Topology>,
    ) -> io::Result<Written> {
        self.runs += 1;
        let pid = self.runs;
        let needed = (log.spans.len() + log.links.len() + 2 * ranks) as u64;
        let over = self.events + needed > self.events_max;
        let label = if over {
            format!(
                "{label} (not traced: the file reached {} events)",
                self.events_max
            )
        } else if log.truncated {
            format!("{label} (truncated)")
        } else {
            label.to_string()
        };
        self.event(&json!({"name": "process_name", "ph": "M", "pid": pid,
            "args": {"name": label}}))?;
        self.event(&json!({"name": "process_sort_index", "ph": "M", "pid": pid,
            "args": {"sort_index": pid}}))?;
        if over {
            return Ok(Written::OverBudget);
        }
        rank_tracks(pid, ranks, &log.spans, &mut |e| self.event(e))?;
        if let Some(t) = topology
            && self.link_names.len() != t.link_direction_count()
        {
            self.link_names = t.link_ids().map(|l| t.link_name(l)).collect();
        }
        for s in &log.links {
            let name = match self.link_names.get(s.link.index()) {
                Some(name) => name.clone(),
                None => format!("link {}", s.link.index()),
            };
            self.event(
                &json!({"name": name, "ph": "C", "pid": pid, "ts": us(s.time),
                "args": {"backlog": s.queue}}),
            )?;
        }
        // Links that have had a lossy change: their return to no loss
        // is drawn too.
        let mut lossy = std::collections::BTreeSet::new();
        for c in &log.link_changes {
            let name = match self.link_names.get(c.link.index()) {
                Some(name) => name.clone(),
                None => format!("link {}", c.link.index()),
            };
            self.event(
                &json!({"name": format!("{name} bandwidth factor"), "ph": "C", "pid": pid,
                "ts": us(c.time), "args": {"factor": c.bandwidth_factor}}),
            )?;
            if c.loss_rate > 0.0 || c.corruption_rate > 0.0 || lossy.contains(&c.link) {
                lossy.insert(c.link);
                self.event(
                    &json!({"name": format!("{name} loss"), "ph": "C", "pid": pid,
                    "ts": us(c.time),
                    "args": {"loss_rate": c.loss_rate, "corruption_rate": c.corruption_rate}}),
                )?;
            }
        }
        Ok(Written::Traced)
    }

    /// Ends the document and returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.close(None)?;
        Ok(self.out)
    }

    /// Ends the document of a study that stopped early (see
    /// [`ChromeTraceWriter::close`]) and returns the output.
    pub fn finish_partial(mut self, note: &str) -> io::Result<W> {
        self.close(Some(note))?;
        Ok(self.out)
    }

    /// Closes the event list and the document, flushed; a study that
    /// stopped early (interrupted, or another output failed) says why in
    /// the trace's `otherData` (`{"partial": note}`, which Perfetto shows
    /// as the trace's metadata). The writer keeps its output, for
    /// [`ChromeTraceWriter::into_inner`] or to name it in an error.
    pub fn close(&mut self, partial: Option<&str>) -> io::Result<()> {
        self.out.write_all(b"]")?;
        if let Some(note) = partial {
            self.out.write_all(b",\"otherData\":")?;
            serde_json::to_writer(&mut self.out, &json!({ "partial": note }))
                .map_err(io::Error::from)?;
        }
        self.out.write_all(b"}\n")?;
        self.out.flush()
    }

    /// The output.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// The output (after [`ChromeTraceWriter::close`]).
    pub fn into_inner(self) -> W {
        self.out
    }

    /// The most events the file may hold.
    pub fn events_max(&self) -> u64 {
        self.events_max
    }
}

/// Lanes per rank at most; further overlapping spans share the last lane.
const LANES_MAX: usize = 16;

/// Emits the trace events of `spans` on `ranks` rank tracks, dealt into
/// non-overlapping lanes per rank, one at a time.
fn rank_tracks(
    pid: usize,
    ranks: usize,
    spans: &[Span],
    emit: &mut impl FnMut(&Value) -> io::Result<()>,
) -> io::Result<()> {
    // Sort indices, not spans: a run may hold a million of them.
    let mut order: Vec<u32> = (0..spans.len() as u32).collect();
    // Longer spans first among equal starts, so a call encloses its parts.
    order.sort_by_key(|&i| {
        let s = &spans[i as usize];
        (s.rank, s.start, std::cmp::Reverse(s.end))
    });
    let mut lanes_end: Vec<Vec<Time>> = vec![Vec::new(); ranks];
    for &i in &order {
        let s = &spans[i as usize];
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
        emit(
            &json!({"name": s.kind.name(), "ph": "X", "pid": pid, "tid": tid,
            "ts": us(s.start), "dur": us(s.end) - us(s.start), "args": args}),
        )?;
    }
    for (rank, ends) in lanes_end.iter().enumerate() {
        for lane in 0..ends.len() {
            let tid = rank * LANES_MAX + lane;
            let name = if lane == 0 {
                format!("rank {rank}")
            } else {
                format!("rank {rank} +{lane}")
            };
            emit(
                &json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                "args": {"name": name}}),
            )?;
            emit(
                &json!({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                "args": {"sort_index": tid}}),
            )?;
        }
    }
    Ok(())
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
        let log = TraceLog {
            spans: vec![
                span(SpanKind::Send, 1_000_000, 5_000_000),
                span(SpanKind::Recv, 2_000_000, 3_000_000),
                span(SpanKind::Call("allreduce"), 0, 6_000_000),
                span(SpanKind::Reduce, 5_000_000, 6_000_000),
            ],
            ..TraceLog::default()
        };
        let mut out = Vec::new();
        let mut writer = ChromeTraceWriter::new(&mut out).unwrap();
        writer
            .write_run("allreduce ring 8 B", 2, &log, None)
            .unwrap();
        writer.finish().unwrap();
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

    fn log(spans: usize) -> TraceLog {
        let mut log = TraceLog::default();
        for i in 0..spans as u64 {
            log.push_span(Span {
                rank: 0,
                kind: SpanKind::Send,
                peer: Some(1),
                bytes: 1,
                start: Time(i),
                end: Time(i + 1),
            });
        }
        log
    }

    #[test]
    fn a_run_past_the_budget_is_named_but_not_traced_and_the_json_stays_valid() {
        let mut out = Vec::new();
        let mut w = ChromeTraceWriter::with_budget(&mut out, 100).unwrap();
        assert_eq!(
            w.write_run("a", 2, &log(50), None).unwrap(),
            Written::Traced
        );
        assert_eq!(
            w.write_run("b", 2, &log(50), None).unwrap(),
            Written::OverBudget
        );
        w.finish().unwrap();
        let doc: Value = serde_json::from_slice(&out).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        let names: Vec<&str> = events
            .iter()
            .filter(|e| e["name"] == "process_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "b (not traced: the file reached 100 events)"]);
        let slices = events.iter().filter(|e| e["ph"] == "X").count();
        assert_eq!(slices, 50, "only the first run's spans");
    }

    #[test]
    fn a_partial_trace_is_valid_json_and_says_why() {
        let mut out = Vec::new();
        let mut w = ChromeTraceWriter::new(&mut out).unwrap();
        w.write_run("a", 1, &log(3), None).unwrap();
        w.finish_partial("interrupted by SIGINT \"quoted\"")
            .unwrap();
        let doc: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            doc["otherData"]["partial"],
            "interrupted by SIGINT \"quoted\""
        );
        assert_eq!(
            doc["traceEvents"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["ph"] == "X")
                .count(),
            3
        );
        let mut whole = Vec::new();
        ChromeTraceWriter::new(&mut whole)
            .unwrap()
            .finish()
            .unwrap();
        let doc: Value = serde_json::from_slice(&whole).unwrap();
        assert!(doc.get("otherData").is_none());
    }

    #[test]
    fn a_log_stops_recording_spans_at_its_limit_and_says_so() {
        let full = log(TRACE_SPANS_MAX);
        assert!(!full.truncated);
        let over = log(TRACE_SPANS_MAX + 1);
        assert!(over.truncated);
        assert_eq!(over.spans.len(), TRACE_SPANS_MAX);
    }
}
