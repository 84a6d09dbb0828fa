//! Lossy and lossless behaviour end to end: packet loss and the RDMA
//! transport's recovery, retry exhaustion, PFC pauses and drops, and the
//! PFC deadlock scenario.

use std::ops::ControlFlow;
use std::path::Path;

use engine::network::LinkUsage;
use engine::scenario::Scenario;
use engine::study::{Options, Row, run_scenario};
use engine::tuning::AlgoFilter;

use crate::support::{repo_root, sim, study_links, sum_links as sum, temp_dir};

/// Four hosts, two per leaf, one spine, 100 GbE RoCE; a ring allreduce of
/// real data (so results are checked), plus `extra`.
fn leaf_spine(seed: u64, extra: &str) -> String {
    format!(
        r#"seed = {seed}
[topology]
preset = "leaf_spine"
hosts = 4
hosts_per_leaf = 2
spines = 1
nic = "roce100"
model = "packet"
{extra}
[[collective]]
kind = "allreduce"
algorithm = "ring"
min_bytes = "2M"
max_bytes = "2M"
iters = 1
warmup = 0
"#
    )
}

fn lossy(rate: f64) -> String {
    format!(
        "[[link_fault]]\nkind = \"lossy\"\nfrom = \"leaf0\"\nto = \"spine0\"\nat_us = 0\nloss_rate = {rate}\n"
    )
}

/// The rows and every point's link counters.
fn study(text: &str) -> (Vec<Row>, Vec<Vec<LinkUsage>>) {
    let s = Scenario::parse(
        Path::new("loss.toml"),
        text,
        &algorithms::Registry::builtin(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    study_links(&s)
}

#[test]
fn a_loss_rate_of_zero_reproduces_the_lossless_run_exactly() {
    let plain = study(&leaf_spine(3, ""));
    let zero = study(&leaf_spine(3, &lossy(0.0)));
    assert_eq!(plain, zero);
    assert_eq!(sum(&plain.1, |u| u.retransmitted), 0);
}

#[test]
fn lost_packets_are_resent_results_stay_correct_and_time_grows_with_loss() {
    let (clean, _) = study(&leaf_spine(3, ""));
    let (light, light_usage) = study(&leaf_spine(3, &lossy(0.002)));
    let (heavy, heavy_usage) = study(&leaf_spine(3, &lossy(0.02)));
    for (rows, usage) in [(&light, &light_usage), (&heavy, &heavy_usage)] {
        assert_eq!(
            rows[0].wrong,
            Some(0),
            "retransmission delivers every byte once"
        );
        assert!(sum(usage, |u| u.lost) > 0);
        assert!(sum(usage, |u| u.retransmitted) > 0);
    }
    assert!(clean[0].time_ps < light[0].time_ps);
    assert!(light[0].time_ps < heavy[0].time_ps);
    // A fixed seed reproduces the drops, the retransmissions and the
    // times; another seed draws other drops.
    assert_eq!(
        study(&leaf_spine(3, &lossy(0.02))),
        (heavy.clone(), heavy_usage.clone())
    );
    assert_ne!(study(&leaf_spine(4, &lossy(0.02))).1, heavy_usage);
}

#[test]
fn past_the_retry_budget_the_run_reports_a_timeout_naming_link_and_ranks() {
    let dir = temp_dir("retry-budget");
    let path = dir.join("dark.toml");
    let extra = format!("{}[rdma]\nib_timeout = 4\nib_retry_cnt = 2\n", lossy(1.0));
    std::fs::write(&path, leaf_spine(3, &extra)).unwrap();
    let out = sim(&["run", path.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(6), "{stdout}");
    assert!(
        stdout.contains("RDMA transport: timeout 4.096 us x 2^4"),
        "{stdout}"
    );
    // The ring's only spine crossings are rank 1 -> 2 and 3 -> 0; the
    // first to give up is reported, with the link that lost its packets.
    assert!(stdout.contains("timed out waiting on rank"), "{stdout}");
    assert!(
        stdout.contains("after 2 retries without progress"),
        "{stdout}"
    );
    // The leaf-spine preset has parallel uplinks, named with their ids.
    let blamed = stdout
        .lines()
        .find(|l| l.contains("last packet lost on link"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        blamed.contains("leaf0 #") && blamed.contains("spine0") && blamed.contains("(random loss)"),
        "{blamed}"
    );
    assert!(
        stdout.contains("the other ranks were then left waiting"),
        "{stdout}"
    );
    // The report of what the others wait for lists the failures too.
    assert!(
        stdout.contains("  the RDMA transport from rank"),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("a transport timed out"), "{stderr}");
}

/// Three hosts send 4 MiB each to host 0 on one 100 GbE switch (a linear
/// gather: 3:1 incast on the switch's port to host 0), with `pfc`.
fn incast(pfc: &str) -> String {
    format!(
        r#"seed = 1
[topology]
preset = "leaf_spine"
hosts = 4
hosts_per_leaf = 4
spines = 1
nic = "roce100"
model = "packet"
[pfc]
{pfc}
[[collective]]
kind = "gather"
algorithm = "linear"
min_bytes = "16M"
max_bytes = "16M"
iters = 1
warmup = 0
"#
    )
}

#[test]
fn pfc_with_its_headroom_never_drops_and_an_undersized_one_does() {
    let (rows, usage) = study(&incast("xoff_bytes = \"32K\""));
    assert_eq!(rows[0].wrong, Some(0));
    assert_eq!(sum(&usage, |u| u.overflow_drops), 0);
    assert!(sum(&usage, |u| u.pause_frames) > 0);
    assert!(sum(&usage, |u| u.paused_ps) > 0);

    let text = incast("xoff_bytes = \"32K\"\nheadroom_bytes = 1");
    let (rows, usage) = study(&text);
    assert_eq!(rows[0].wrong, Some(0), "the transport recovers the drops");
    assert!(sum(&usage, |u| u.overflow_drops) > 0);
    assert!(sum(&usage, |u| u.retransmitted) > 0);
    // And `sim run` reports them, naming the links.
    let dir = temp_dir("headroom");
    let path = dir.join("incast.toml");
    std::fs::write(&path, &text).unwrap();
    let out = sim(&["run", path.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("dropped (overflow)"), "{stdout}");
    assert!(
        stdout.contains("/nic->leaf0: dropped (overflow)"),
        "{stdout}"
    );
}

#[test]
fn the_pfc_deadlock_scenario_is_reported_with_its_cycle() {
    let path = repo_root().join("scenarios/pfc_deadlock.toml");
    let out = sim(&["run", path.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(
        stdout.contains(
            "a PFC deadlock: a cycle of paused links s0->s1 => s1->s2 => s2->s3 => s3->s4 => s4->s0 => s0->s1"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("the network is stuck: 5 message(s)"),
        "{stdout}"
    );

    // The same topology and traffic with loop-free (up*/down*) routing
    // pauses but completes.
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("model = \"packet\"\n"));
    let text = text.replace(
        "model = \"packet\"\n",
        "model = \"packet\"\nrouting = \"up_down\"\n",
    );
    let dir = temp_dir("pfc-up-down");
    let path = dir.join("pfc_up_down.toml");
    std::fs::write(&path, text).unwrap();
    let out = sim(&["run", path.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("up_down routing"), "{stdout}");
    assert!(stdout.contains("PFC pause frame(s)"), "{stdout}");
}

#[test]
fn a_run_with_loss_compares_itself_with_the_healthy_network() {
    let dir = temp_dir("compare");
    let path = dir.join("compare.toml");
    let text = format!(
        "compare_without_link_faults = true\n{}",
        leaf_spine(3, &lossy(0.02))
    );
    std::fs::write(&path, text).unwrap();
    let out = sim(&["run", path.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let (clean, _) = study(&leaf_spine(3, ""));
    let line = stdout
        .lines()
        .find(|l| l.contains("without link faults:"))
        .unwrap_or_else(|| panic!("{stdout}"));
    // The healthy time printed is the lossless run's.
    let us = format!("{:.2} us", clean[0].time_ps as f64 / 1e6);
    assert!(line.contains(&us), "{line} vs {us}");
    assert!(stdout.contains("#     leaf0->spine0 #16: lost"), "{stdout}");
}

/// A leaf-spine study with random loss on random links, a small retry
/// budget and a random collective, from `seed`.
fn random_lossy_study(seed: u64) -> String {
    // SplitMix64: a few numbers from the seed, no RNG crate needed here.
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut faults = String::new();
    for (from, to) in [("leaf0", "spine0"), ("spine0", "leaf1")] {
        if next() % 2 == 0 {
            let rate = (next() % 300) as f64 / 1000.0;
            faults += &format!(
                "[[link_fault]]\nkind = \"lossy\"\nfrom = \"{from}\"\nto = \"{to}\"\nat_us = 0\nloss_rate = {rate}\n"
            );
        }
    }
    let (kind, algorithm) = [
        ("allreduce", "ring"),
        ("alltoall", "pairwise"),
        ("allgather", "ring"),
    ][(next() % 3) as usize];
    let timeout = 1 + next() % 4;
    let retries = next() % 8;
    format!(
        r#"seed = {seed}
[topology]
preset = "leaf_spine"
hosts = 4
hosts_per_leaf = 2
spines = 1
nic = "roce100"
model = "packet"
{faults}
[rdma]
ib_timeout = {timeout}
ib_retry_cnt = {retries}
[[collective]]
kind = "{kind}"
algorithm = "{algorithm}"
min_bytes = "64K"
max_bytes = "256K"
iters = 2
warmup = 0
"#
    )
}

#[test]
fn random_lossy_studies_complete_correctly_or_report_a_transport_timeout() {
    for seed in 0..16 {
        let text = random_lossy_study(seed);
        let s = Scenario::parse(
            Path::new("random.toml"),
            &text,
            &algorithms::Registry::builtin(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let run = |s: &Scenario| {
            run_scenario(s, &AlgoFilter::default(), Options::default(), |_| {
                ControlFlow::Continue(())
            })
        };
        let result = run(&s);
        match &result {
            Ok(rows) => assert!(rows.iter().all(|r| r.wrong == Some(0)), "{text}"),
            Err(failed) => match &failed.1 {
                engine::study::Failure::TransportTimeout { error, .. } => assert!(
                    matches!(error, algorithms::FabricError::Timeout { .. }),
                    "{text}\n{error:?}"
                ),
                other => panic!("{text}\n{other:?}"),
            },
        }
        assert_eq!(run(&s), result, "not deterministic:\n{text}");
    }
}
