//! Scheduled link faults (`[[link_fault]]`): down, degraded and flapping
//! links, in both network models, and their mistakes.

use std::ops::ControlFlow;
use std::path::Path;

use engine::scenario::{Scenario, ScenarioError};
use engine::study::{Options, Row, run_scenario};
use engine::tuning::AlgoFilter;

/// Two GPUs joined by one IB NDR link, one 64 MiB message each way (a
/// two-rank ring allreduce in one chunk), plus `extra`.
fn scenario(model: &str, extra: &str) -> String {
    format!(
        r#"seed = 1
[topology]
preset = "explicit"
model = "{model}"
[[topology.vertex]]
name = "gpu0"
kind = "gpu"
[[topology.vertex]]
name = "gpu1"
kind = "gpu"
[[topology.link]]
from = "gpu0"
to = "gpu1"
kind = "ib_ndr"
{extra}
[[collective]]
kind = "allgather"
algorithm = "ring"
min_bytes = "64M"
max_bytes = "64M"
chunk_bytes = "64M"
iters = 1
warmup = 0
phantom = true
"#
    )
}

fn time_ps(text: &str) -> u64 {
    let s = Scenario::parse(Path::new("lf.toml"), text, &algorithms::Registry::builtin())
        .unwrap_or_else(|e| panic!("{e}"));
    let rows: Vec<Row> = run_scenario(&s, &AlgoFilter::default(), Options::default(), |_| {
        ControlFlow::Continue(())
    })
    .unwrap_or_else(|f| panic!("{:?}", f.1));
    rows[0].time_ps
}

#[test]
fn a_link_down_for_a_while_delays_the_transfer_by_that_while() {
    // 32 MiB each way at 50 GB/s takes 671 us; the link is down from 100
    // to 300 us, in the middle of it: both messages arrive 200 us later
    // (the packet on the wire at 100 us finishes first and the one after
    // it waits, so the shift is exact to one packet's serialization).
    for model in ["packet", "flow"] {
        let base = time_ps(&scenario(model, ""));
        let down = time_ps(&scenario(
            model,
            "[[link_fault]]\nkind = \"down\"\nfrom = \"gpu0\"\nto = \"gpu1\"\nat_us = 100\nuntil_us = 300\n",
        ));
        let shift = down as i64 - base as i64 - 200_000_000;
        assert!(shift.abs() <= 82_000, "{model}: {base} -> {down} ps");
    }
}

#[test]
fn a_degraded_link_runs_the_rest_of_the_transfer_at_its_lower_rate() {
    // From 100 us on, half the bandwidth: the remaining bytes take twice
    // as long, so the total is 100 + 2 x (T - 100) us.
    for model in ["packet", "flow"] {
        let base = time_ps(&scenario(model, ""));
        let slow = time_ps(&scenario(
            model,
            "[[link_fault]]\nkind = \"degraded\"\nfrom = \"gpu0\"\nto = \"gpu1\"\nat_us = 100\nbandwidth_factor = 0.5\n",
        ));
        let expected = 100_000_000 + 2 * (base - 100_000_000);
        let off = slow as i64 - expected as i64;
        assert!(off.abs() <= 200_000, "{model}: {slow} ps vs {expected} ps");
    }
}

#[test]
fn a_flapping_link_loses_its_down_time() {
    // Down 20 us in every 100 us from 0 to 500 us: 100 us lost.
    for model in ["packet", "flow"] {
        let base = time_ps(&scenario(model, ""));
        let flap = time_ps(&scenario(
            model,
            "[[link_fault]]\nkind = \"flapping\"\nfrom = \"gpu0\"\nto = \"gpu1\"\nat_us = 0\nuntil_us = 500\nperiod_us = 100\ndown_us = 20\n",
        ));
        let lost = flap as i64 - base as i64 - 100_000_000;
        assert!(lost.abs() <= 5 * 82_000, "{model}: {base} -> {flap} ps");
    }
}

#[test]
fn link_fault_mistakes_are_located() {
    let fault = |body: &str| format!("[[link_fault]]\n{body}\n");
    let cases: &[(String, usize, usize, &str)] = &[
        (
            fault("kind = \"down\"\nfrom = \"gpu0\"\nto = \"gpu9\"\nat_us = 1"),
            18,
            6,
            "no vertex named `gpu9` in the topology",
        ),
        (
            fault("kind = \"melt\"\nfrom = \"gpu0\"\nto = \"gpu1\"\nat_us = 1"),
            16,
            8,
            "unknown link fault kind `melt`; expected down, degraded, flapping or lossy",
        ),
        (
            fault("kind = \"degraded\"\nfrom = \"gpu0\"\nto = \"gpu1\"\nat_us = 1"),
            15,
            1,
            "a degraded link needs bandwidth_factor",
        ),
        (
            fault("kind = \"down\"\nfrom = \"gpu0\"\nto = \"gpu1\"\nat_us = 5\nuntil_us = 2"),
            20,
            12,
            "until_us must be after at_us",
        ),
        (
            fault(
                "kind = \"flapping\"\nfrom = \"gpu0\"\nto = \"gpu1\"\nat_us = 0\nperiod_us = 10\ndown_us = 2",
            ),
            15,
            1,
            "a flapping link needs until_us",
        ),
        (
            fault(
                "kind = \"down\"\nfrom = \"gpu0\"\nto = \"gpu1\"\nat_us = 1\nbandwidth_factor = 0.5",
            ),
            16,
            8,
            "`bandwidth_factor` does not apply to a down link fault",
        ),
        (
            fault(
                "kind = \"flapping\"\nfrom = \"gpu0\"\nto = \"gpu1\"\nat_us = 0\nuntil_us = 1e9\nperiod_us = 1\ndown_us = 0.5",
            ),
            15,
            1,
            "more than 100000 link changes",
        ),
    ];
    for (extra, line, column, needle) in cases {
        let text = scenario("packet", extra);
        match Scenario::parse(
            Path::new("lf.toml"),
            &text,
            &algorithms::Registry::builtin(),
        ) {
            Err(ScenarioError::Invalid {
                line: l,
                column: c,
                message,
                ..
            }) => {
                assert!(message.contains(needle), "{message} lacks {needle}");
                assert_eq!((l, c), (*line, *column), "{message}\n{text}");
            }
            other => panic!("{extra}: {other:?}"),
        }
    }
    // Ideal links have no links to name.
    let ideal = "world_size = 2\n[links]\nlatency_us = 1\nbandwidth_gb_per_s = 1\n\
                 [[link_fault]]\nkind = \"down\"\nfrom = \"a\"\nto = \"b\"\nat_us = 1\n\
                 [[collective]]\nkind = \"barrier\"\nmin_bytes = 0\nmax_bytes = 0\n";
    match Scenario::parse(Path::new("i.toml"), ideal, &algorithms::Registry::builtin()) {
        Err(ScenarioError::Invalid { line, message, .. }) => {
            assert_eq!(line, 5);
            assert!(
                message.contains("link faults need a [topology]"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_fault_after_the_run_neither_changes_nor_stretches_it() {
    // The run ends with its last rank: a link change scheduled long after
    // must not move its end (which the links CSV's utilisation divides by).
    let end = |text: &str| {
        let s =
            Scenario::parse(Path::new("lf.toml"), text, &algorithms::Registry::builtin()).unwrap();
        let mut end = None;
        run_scenario(&s, &AlgoFilter::default(), Options::default(), |p| {
            if let engine::study::Progress::Row(_, row, detail) = p {
                end = Some((row.time_ps, detail.end_time));
            }
            ControlFlow::Continue(())
        })
        .unwrap();
        end.unwrap()
    };
    for model in ["packet", "flow"] {
        let base = end(&scenario(model, ""));
        let late = end(&scenario(
            model,
            "[[link_fault]]\nkind = \"down\"\nfrom = \"gpu0\"\nto = \"gpu1\"\nat_us = 1000000\nuntil_us = 2000000\n",
        ));
        assert_eq!(base, late, "{model}");
    }
}

#[test]
fn overlapping_faults_on_one_link_are_rejected_and_meeting_ones_hand_over() {
    let down = |at: u32, until: u32| {
        format!(
            "[[link_fault]]\nkind = \"down\"\nfrom = \"gpu0\"\nto = \"gpu1\"\nat_us = {at}\nuntil_us = {until}\n"
        )
    };
    let text = scenario("flow", &format!("{}{}", down(100, 500), down(200, 300)));
    match Scenario::parse(
        Path::new("lf.toml"),
        &text,
        &algorithms::Registry::builtin(),
    ) {
        Err(ScenarioError::Invalid { line, message, .. }) => {
            assert_eq!(line, 25, "{message}");
            assert!(
                message.contains("overlaps the fault on gpu0->gpu1 at line 15"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    // Two windows that meet: down 100-300 then 300-500, in either order,
    // is one 400 us outage.
    for model in ["packet", "flow"] {
        let base = time_ps(&scenario(model, ""));
        let ab = time_ps(&scenario(
            model,
            &format!("{}{}", down(100, 300), down(300, 500)),
        ));
        let ba = time_ps(&scenario(
            model,
            &format!("{}{}", down(300, 500), down(100, 300)),
        ));
        assert_eq!(ab, ba, "{model}");
        // Within two packets: the one on the wire at 100 us, and one the
        // port may start at 300 us between the restore and the new outage.
        let shift = ab as i64 - base as i64 - 400_000_000;
        assert!(shift.abs() <= 2 * 82_000, "{model}: {base} -> {ab}");
    }
}

#[test]
fn a_link_that_never_comes_back_is_named_in_the_deadlock_report() {
    let text = scenario(
        "packet",
        "[[link_fault]]\nkind = \"down\"\nfrom = \"gpu0\"\nto = \"gpu1\"\nat_us = 100\n\
         [[link_fault]]\nkind = \"down\"\nfrom = \"gpu1\"\nto = \"gpu0\"\nboth_directions = false\nat_us = 9000000\n",
    )
    .replace(
        "[[link_fault]]\nkind = \"down\"\nfrom = \"gpu1\"\nto = \"gpu0\"\nboth_directions = false\nat_us = 9000000\n",
        "",
    );
    let dir = crate::support::temp_dir("never-back");
    let path = dir.join("s.toml");
    std::fs::write(&path, text).unwrap();
    let out = crate::support::sim(&["run", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("held behind link(s) that are down: gpu0->gpu1, gpu1->gpu0"),
        "{stdout}"
    );
    // Reported when the last packet crossed before the outage, not later.
    assert!(stdout.contains("deadlock at 100."), "{stdout}");
}
