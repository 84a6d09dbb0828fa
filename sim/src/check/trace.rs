//! A Chrome trace (JSON, for Perfetto or chrome://tracing) of a replayed
//! schedule: one track per rank, one slice per step on the rank it
//! changes, an arrow from the step that sent each delivered message, and
//! each rank's state at the end. Time is the step number (1 us per step):
//! the checker does not model time.

use std::io::{self, Write};

use super::exec::Execution;
use super::world::Choice;

fn escape(text: &str) -> String {
    serde_json::to_string(text).expect("a string always serialises")
}

/// Writes the trace of `exec` (its steps and final state) to `out`.
pub fn write_trace(
    exec: &Execution,
    final_state: &[String],
    mut out: impl Write,
) -> io::Result<()> {
    let n = exec.world.borrow().world_size;
    let mut events: Vec<String> = Vec::new();
    for rank in 0..n {
        events.push(format!(
            r#"{{"name":"thread_name","ph":"M","pid":0,"tid":{rank},"args":{{"name":"rank {rank}"}}}}"#
        ));
    }
    for (i, step) in exec.steps.iter().enumerate() {
        let rank = step.choice.affected(exec.world.borrow().buffering).0;
        let ts = i + 1;
        events.push(format!(
            r#"{{"name":{},"ph":"X","ts":{ts},"dur":1,"pid":0,"tid":{rank},"args":{{"step":{ts}}}}}"#,
            escape(&step.choice.to_string())
        ));
        if let (Choice::Deliver(key), Some(sent)) = (step.choice, step.causes.sent_at) {
            // The message was sent while step `sent` ran on its sender.
            let id = i + 1;
            events.push(format!(
                r#"{{"name":"message","cat":"message","ph":"s","id":{id},"ts":{},"pid":0,"tid":{}}}"#,
                sent + 1,
                key.src
            ));
            events.push(format!(
                r#"{{"name":"message","cat":"message","ph":"f","bp":"e","id":{id},"ts":{ts},"pid":0,"tid":{}}}"#,
                key.dst
            ));
        }
    }
    let end = exec.steps.len() + 1;
    for line in final_state {
        let rank = line
            .split_whitespace()
            .nth(1)
            .and_then(|r| r.parse::<usize>().ok())
            .filter(|&r| r < n)
            .unwrap_or(0);
        events.push(format!(
            r#"{{"name":{},"ph":"i","s":"t","ts":{end},"pid":0,"tid":{rank}}}"#,
            escape(line)
        ));
    }
    writeln!(out, r#"{{"displayTimeUnit":"ns","traceEvents":["#)?;
    for (i, e) in events.iter().enumerate() {
        let comma = if i + 1 < events.len() { "," } else { "" };
        writeln!(out, "{e}{comma}")?;
    }
    writeln!(out, "]}}")
}
