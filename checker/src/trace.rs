//! A Chrome trace (JSON, for Perfetto or chrome://tracing) of a replayed
//! schedule: one track per rank, one slice per step on the rank it
//! changes first (category `step`), a slice on each other rank the step
//! changed (category `woken`: a send of it completed or a slot freed), a
//! `start` slice per rank for what it did before the first step, an arrow
//! from the slice that sent each delivered message to its delivery, and
//! each rank's state at the end. Time is the step number (1 us per step,
//! the start at 0): the checker does not model time.

use std::io::{self, Write};

use super::exec::Execution;
use super::world::Choice;

fn escape(text: &str) -> String {
    serde_json::to_string(text).expect("a string always serialises")
}

/// A one-unit slice on `rank`'s lane at `ts`.
fn slice(name: &str, cat: &str, ts: usize, rank: usize, step: Option<usize>) -> String {
    let args = match step {
        Some(step) => format!(r#"{{"step":{step}}}"#),
        None => "{}".into(),
    };
    format!(
        r#"{{"name":{},"cat":"{cat}","ph":"X","ts":{ts},"dur":1,"pid":0,"tid":{rank},"args":{args}}}"#,
        escape(name)
    )
}

/// Writes the trace of `exec` (its steps and final state) to `out`.
pub fn write_trace(
    exec: &Execution,
    final_state: &[String],
    mut out: impl Write,
) -> io::Result<()> {
    let world = exec.world.borrow();
    let n = world.world_size;
    let mut events: Vec<String> = Vec::new();
    for rank in 0..n {
        events.push(format!(
            r#"{{"name":"thread_name","ph":"M","pid":0,"tid":{rank},"args":{{"name":"rank {rank}"}}}}"#
        ));
        // What the rank did before the first step (its first sends).
        events.push(slice("start", "start", 0, rank, None));
    }
    for (i, step) in exec.steps.iter().enumerate() {
        let rank = step.choice.affected(world.buffering).0;
        let ts = i + 1;
        let name = step.choice.to_string();
        events.push(slice(&name, "step", ts, rank, Some(ts)));
        let mut woken: Vec<usize> = step.effect.touched_ranks().collect();
        woken.sort_unstable();
        woken.dedup();
        for other in woken.into_iter().filter(|&r| r != rank && r < n) {
            events.push(slice(&name, "woken", ts, other, Some(ts)));
        }
        if let Choice::Deliver(key) = step.choice {
            // The message was sent while step `sent` ran on its sender, or
            // before the first step (time 0).
            let sent_ts = step.causes.sent_at.map_or(0, |sent| sent + 1);
            let id = i + 1;
            events.push(format!(
                r#"{{"name":"message","cat":"message","ph":"s","id":{id},"ts":{sent_ts},"pid":0,"tid":{}}}"#,
                key.src
            ));
            events.push(format!(
                r#"{{"name":"message","cat":"message","ph":"f","bp":"e","id":{id},"ts":{ts},"pid":0,"tid":{}}}"#,
                key.dst
            ));
        }
    }
    drop(world);
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
    writeln!(out, "]}}")?;
    // A buffered writer dropped unflushed would lose a write error.
    out.flush()
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::rc::Rc;

    use super::*;
    use crate::explore::{Target, replay};
    use crate::scenario::parse;

    /// The ring allreduce on 3 ranks along its default schedule under
    /// `buffering`: every rank sends before the first step, and more
    /// messages are sent later.
    fn ring_trace(buffering: &str) -> (usize, serde_json::Value) {
        let text = format!(
            "[[call]]\ncollective = \"allreduce\"\nalgorithm = \"ring\"\n\
             [params]\nworld_size = 3\ncount = 3\nbuffering = \"{buffering}\"\n"
        );
        let program = Rc::new(
            parse(
                Path::new("ring.toml"),
                &text,
                &algorithms::Registry::builtin(),
            )
            .expect("a valid scenario"),
        );
        let point = program.points()[0];
        let target = Target {
            program: &program,
            point,
            faults: program.faults,
            bounds: program.bounds,
        };
        let mut exec = replay(&target, &[]).expect("the empty schedule replays");
        while let Some(&c) = exec.enabled().first() {
            exec.apply(c);
        }
        let mut out = Vec::new();
        write_trace(&exec, &[], &mut out).expect("writing to memory");
        let json = serde_json::from_slice(&out).expect("valid JSON");
        (exec.steps.len(), json)
    }

    fn count(json: &serde_json::Value, ph: &str) -> usize {
        let events = json["traceEvents"].as_array().expect("an event array");
        events.iter().filter(|e| e["ph"] == ph).count()
    }

    #[test]
    fn every_delivery_has_an_arrow_even_from_before_the_first_step() {
        for buffering in ["eager:8", "rendezvous"] {
            let (steps, json) = ring_trace(buffering);
            // 2(N-1) = 4 messages per rank, every step a delivery.
            assert_eq!(steps, 12);
            let arrows = (count(&json, "s"), count(&json, "f"));
            assert_eq!(arrows, (steps, steps), "{buffering}: an arrow per delivery");
            let events = json["traceEvents"].as_array().expect("an event array");
            let step_slices = events.iter().filter(|e| e["cat"] == "step").count();
            assert_eq!(step_slices, steps, "{buffering}: one step slice per step");
        }
    }

    #[test]
    fn arrows_start_inside_a_slice_of_their_sender() {
        for buffering in ["eager:8", "rendezvous"] {
            let (_, json) = ring_trace(buffering);
            assert_bound(&json, buffering);
        }
    }

    /// Every arrow starts at a time a slice of its sender's lane covers.
    fn assert_bound(json: &serde_json::Value, buffering: &str) {
        let events = json["traceEvents"].as_array().expect("an event array");
        let slices: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
        for arrow in events.iter().filter(|e| e["ph"] == "s") {
            let ts = arrow["ts"].as_u64().expect("a time");
            let inside = slices.iter().any(|s| {
                let start = s["ts"].as_u64().expect("a time");
                let dur = s["dur"].as_u64().expect("a duration");
                s["tid"] == arrow["tid"] && start <= ts && ts < start + dur
            });
            assert!(inside, "{buffering}: {arrow} binds to no slice of its lane");
        }
    }
}
