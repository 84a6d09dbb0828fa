//! The scenario side of packet loss: `[[link_fault]] kind = "lossy"`
//! expanded into timed link changes, the `[rdma]` transport and `[pfc]`
//! thresholds, and every mistake in them located at line:column.

use std::path::Path;

use engine::network::{LinkChange, NetworkConfig, PfcConfig, TopologyConfig, TransportConfig};
use engine::scenario::{Scenario, ScenarioError};

/// Two GPUs joined by one RoCE link, plus an NVSwitch on gpu0 (an
/// on-board link where loss makes no sense), in the `model` level, plus
/// `extra` before the collective.
fn scenario(model: &str, extra: &str) -> String {
    format!(
        r#"seed = 77
[topology]
preset = "explicit"
model = "{model}"
[[topology.vertex]]
name = "gpu0"
kind = "gpu"
[[topology.vertex]]
name = "gpu1"
kind = "gpu"
[[topology.vertex]]
name = "nvswitch0"
kind = "nvswitch"
[[topology.link]]
from = "gpu0"
to = "gpu1"
kind = "roce200"
[[topology.link]]
from = "gpu0"
to = "nvswitch0"
kind = "nvlink4"
{extra}
[[collective]]
kind = "allgather"
min_bytes = "1M"
max_bytes = "1M"
phantom = true
"#
    )
}

/// The same collective on ideal links, plus `extra`.
fn ideal(extra: &str) -> String {
    format!(
        "world_size = 2\n[links]\nlatency_us = 1\nbandwidth_gb_per_s = 10\n{extra}\n\
         [[collective]]\nkind = \"barrier\"\nmin_bytes = 0\nmax_bytes = 0\n"
    )
}

/// One `[[link_fault]]` between gpu0 and gpu1 with `body` after its ends.
fn fault(kind: &str, body: &str) -> String {
    format!("[[link_fault]]\nkind = \"{kind}\"\nfrom = \"gpu0\"\nto = \"gpu1\"\n{body}\n")
}

fn parse(text: &str) -> Scenario {
    Scenario::parse(
        Path::new("loss.toml"),
        text,
        &algorithms::Registry::builtin(),
    )
    .unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn topology(s: &Scenario) -> &TopologyConfig {
    match &s.network {
        NetworkConfig::Topology(t) => t,
        NetworkConfig::Ideal(_) => panic!("a topology scenario"),
    }
}

/// The 1-based line and column where `needle` first occurs in `text`,
/// moved `skip` characters into it (to the value after `key = `).
fn place(text: &str, needle: &str, skip: usize) -> (usize, usize) {
    let offset = text
        .find(needle)
        .unwrap_or_else(|| panic!("{needle} not in the scenario"))
        + skip;
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Asserts `text` is rejected at `at` with a message containing `needle`.
fn rejected(text: &str, at: (usize, usize), needle: &str) {
    match Scenario::parse(
        Path::new("loss.toml"),
        text,
        &algorithms::Registry::builtin(),
    ) {
        Err(ScenarioError::Invalid {
            path,
            line,
            column,
            message,
        }) => {
            assert_eq!(path, "loss.toml");
            assert!(message.contains(needle), "`{message}` lacks `{needle}`");
            assert_eq!((line, column), at, "{message}\n{text}");
        }
        other => panic!("expected an error containing `{needle}`, got {other:?}\n{text}"),
    }
}

/// `(from, to)` vertex names of a change's link direction.
fn ends(t: &TopologyConfig, c: &LinkChange) -> (String, String) {
    let (a, b) = t.topology.ends(c.link);
    (
        t.topology.vertex(a).name.clone(),
        t.topology.vertex(b).name.clone(),
    )
}

/// The (bandwidth factor, loss, corruption) of the link direction
/// `from -> to` once every change up to and including `time_ps` applied.
fn state_at(t: &TopologyConfig, from: &str, to: &str, time_ps: u64) -> (f64, f64, f64) {
    let mut state = (1.0, 0.0, 0.0);
    for c in t.changes.iter().filter(|c| c.time.0 <= time_ps) {
        if ends(t, c) == (from.to_string(), to.to_string()) {
            state = (c.bandwidth_factor, c.loss_rate, c.corruption_rate);
        }
    }
    state
}

#[test]
fn a_lossy_window_sets_the_rates_on_both_directions_then_restores_them() {
    let s = parse(&scenario(
        "packet",
        &fault(
            "lossy",
            "at_us = 0\nuntil_us = 2000\nloss_rate = 1e-3\ncorruption_rate = 2e-4",
        ),
    ));
    let t = topology(&s);
    // "time_ps from->to factor loss corruption" of each change, in order.
    let got: Vec<String> = t
        .changes
        .iter()
        .map(|c| {
            let (a, b) = ends(t, c);
            format!(
                "{} {a}->{b} {} {} {}",
                c.time.0, c.bandwidth_factor, c.loss_rate, c.corruption_rate
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            "0 gpu0->gpu1 1 0.001 0.0002",
            "0 gpu1->gpu0 1 0.001 0.0002",
            "2000000000 gpu0->gpu1 1 0 0",
            "2000000000 gpu1->gpu0 1 0 0",
        ]
    );
    assert_eq!(
        s.link_fault_notes,
        vec![
            "link fault: gpu0<->gpu1 (2 link direction(s)) lossy: loss 0.1%, corruption 0.02% \
             from 0.000 us to 2000.000 us"
                .to_string()
        ]
    );
    // The losses are drawn from the scenario's seed.
    assert_eq!(t.loss_seed, 77);
}

#[test]
fn a_lossy_link_without_an_end_stays_lossy_and_one_direction_is_one_change() {
    let s = parse(&scenario(
        "packet",
        &fault(
            "lossy",
            "both_directions = false\nat_us = 5\ncorruption_rate = 0.5",
        ),
    ));
    let t = topology(&s);
    assert_eq!(t.changes.len(), 1);
    let c = t.changes[0];
    assert_eq!(ends(t, &c), ("gpu0".to_string(), "gpu1".to_string()));
    assert_eq!(
        (c.time.0, c.bandwidth_factor, c.loss_rate, c.corruption_rate),
        (5_000_000, 1.0, 0.0, 0.5)
    );
    assert!(
        s.link_fault_notes[0].ends_with(
            "gpu0->gpu1 (1 link direction(s)) lossy: loss 0%, corruption 50% from 5.000 us on"
        ),
        "{}",
        s.link_fault_notes[0]
    );
}

#[test]
fn steady_loss_then_a_bad_window_hands_over_in_either_file_order() {
    let steady = fault("lossy", "at_us = 0\nuntil_us = 1000\nloss_rate = 1e-4");
    let bad = fault("lossy", "at_us = 1000\nuntil_us = 2000\nloss_rate = 0.05");
    for extra in [format!("{steady}{bad}"), format!("{bad}{steady}")] {
        let s = parse(&scenario("packet", &extra));
        let t = topology(&s);
        assert_eq!(t.changes.len(), 8, "{extra}");
        for (a, b) in [("gpu0", "gpu1"), ("gpu1", "gpu0")] {
            assert_eq!(state_at(t, a, b, 0), (1.0, 1e-4, 0.0));
            assert_eq!(state_at(t, a, b, 999_999_999), (1.0, 1e-4, 0.0));
            // At 1000 us the first window's end applies before the second's
            // start, whatever their order in the file.
            assert_eq!(state_at(t, a, b, 1_000_000_000), (1.0, 0.05, 0.0));
            assert_eq!(state_at(t, a, b, 2_000_000_000), (1.0, 0.0, 0.0));
        }
        // Changes come in time order.
        assert!(t.changes.windows(2).all(|w| w[0].time <= w[1].time));
    }
}

#[test]
fn overlapping_lossy_windows_are_rejected_at_the_second() {
    let first = fault("lossy", "at_us = 0\nuntil_us = 1500\nloss_rate = 1e-4");
    let second = fault("lossy", "at_us = 1000\nuntil_us = 2000\nloss_rate = 0.05");
    let text = scenario("packet", &format!("{first}{second}"));
    let (first_line, _) = place(&text, "[[link_fault]]", 0);
    rejected(
        &text,
        place(&text, "at_us = 1000", 8),
        &format!("overlaps the fault on gpu0->gpu1 at line {first_line}"),
    );
    // A lossy window inside an outage of the same link overlaps it too.
    let down = fault("down", "at_us = 100\nuntil_us = 300");
    let lossy = fault("lossy", "at_us = 200\nloss_rate = 0.01");
    let text = scenario("packet", &format!("{down}{lossy}"));
    rejected(
        &text,
        place(&text, "at_us = 200", 8),
        "this fault overlaps the fault on gpu0->gpu1",
    );
}

#[test]
fn lossy_fault_mistakes_are_located() {
    let lossy = |body: &str| scenario("packet", &fault("lossy", body));
    // (scenario, where: (needle, characters into it), message)
    let cases: Vec<(String, (&str, usize), &str)> = vec![
        (
            lossy("at_us = 0\nloss_rate = 1.5"),
            ("loss_rate = 1.5", 12),
            "loss_rate must be between 0 and 1 (a probability per packet), got 1.5",
        ),
        (
            lossy("at_us = 0\ncorruption_rate = -0.1"),
            ("corruption_rate = -0.1", 18),
            "corruption_rate must be between 0 and 1",
        ),
        (
            lossy("at_us = 0\nloss_rate = nan"),
            ("loss_rate = nan", 12),
            "loss_rate must be between 0 and 1 (a probability per packet), got NaN",
        ),
        (
            lossy("at_us = 0"),
            ("[[link_fault]]", 0),
            "a lossy link needs loss_rate or corruption_rate",
        ),
        (
            lossy("at_us = 0\nloss_rate = 0.1\nbandwidth_factor = 0.5"),
            ("\"lossy\"", 0),
            "`bandwidth_factor` does not apply to a lossy link fault",
        ),
        (
            lossy("at_us = 0\nloss_rate = 0.1\nperiod_us = 5"),
            ("\"lossy\"", 0),
            "`period_us` does not apply to a lossy link fault",
        ),
        (
            lossy("at_us = 0\nloss_rate = 0.1\ndown_us = 5"),
            ("\"lossy\"", 0),
            "`down_us` does not apply to a lossy link fault",
        ),
        (
            lossy("at_us = 5\nuntil_us = 5\nloss_rate = 0.1"),
            ("until_us = 5", 11),
            "until_us must be after at_us",
        ),
        (
            lossy("loss_rate = 0.1"),
            ("[[link_fault]]", 0),
            "missing field `at_us`",
        ),
        (
            scenario(
                "packet",
                "[[link_fault]]\nkind = \"lossy\"\nfrom = \"gpu0\"\nto = \"nvswitch0\"\nat_us = 0\nloss_rate = 0.1\n",
            ),
            ("\"nvswitch0\"\nat_us", 0),
            "loss can only be set on network links (InfiniBand, RoCE, Ethernet); \
             `gpu0`-`nvswitch0` is nvlink4: link-level retry makes its losses invisible",
        ),
        (
            scenario("flow", &fault("lossy", "at_us = 0\nloss_rate = 0.1")),
            ("\"lossy\"", 0),
            "packet loss needs model = \"packet\": the flow model has no packets",
        ),
        (
            scenario("packet", &fault("down", "at_us = 0\nloss_rate = 0.1")),
            ("\"down\"", 0),
            "`loss_rate` does not apply to a down link fault",
        ),
        (
            scenario(
                "packet",
                &fault(
                    "degraded",
                    "at_us = 0\nbandwidth_factor = 0.5\ncorruption_rate = 0.1",
                ),
            ),
            ("\"degraded\"", 0),
            "`corruption_rate` does not apply to a degraded link fault",
        ),
        (
            scenario(
                "packet",
                &fault(
                    "flapping",
                    "at_us = 0\nuntil_us = 10\nperiod_us = 5\ndown_us = 1\nloss_rate = 0.1",
                ),
            ),
            ("\"flapping\"", 0),
            "`loss_rate` does not apply to a flapping link fault",
        ),
        (
            scenario("packet", &fault("leaky", "at_us = 0")),
            ("\"leaky\"", 0),
            "unknown link fault kind `leaky`; expected down, degraded, flapping or lossy",
        ),
    ];
    for (text, (needle, skip), message) in &cases {
        rejected(text, place(text, needle, *skip), message);
    }
}

#[test]
fn rdma_defaults_to_nccls_and_takes_overrides() {
    // Without [rdma]: NCCL's defaults and no header note.
    let s = parse(&scenario("packet", ""));
    assert_eq!(
        topology(&s).transport,
        TransportConfig {
            ib_timeout: 18,
            ib_retry_cnt: 7
        }
    );
    assert!(s.network_notes.is_empty());

    let s = parse(&scenario(
        "packet",
        "[rdma]\nib_timeout = 4\nib_retry_cnt = 2",
    ));
    assert_eq!(
        topology(&s).transport,
        TransportConfig {
            ib_timeout: 4,
            ib_retry_cnt: 2
        }
    );
    assert_eq!(
        s.network_notes,
        vec!["RDMA transport: timeout 4.096 us x 2^4 = 65.5 us, 2 retries".to_string()]
    );

    // One key given: the other keeps its default.
    let s = parse(&scenario("flow", "[rdma]\nib_retry_cnt = 0"));
    assert_eq!(
        topology(&s).transport,
        TransportConfig {
            ib_timeout: 18,
            ib_retry_cnt: 0
        }
    );
    assert_eq!(
        s.network_notes,
        vec![
            "RDMA transport: timeout 4.096 us x 2^18 = 1.07 s, 0 retries; \
             no effect in the flow model, which loses nothing"
                .to_string()
        ]
    );
}

#[test]
fn rdma_mistakes_are_located() {
    let cases: Vec<(String, (&str, usize), &str)> = vec![
        (
            scenario("packet", "[rdma]\nib_timeout = 0"),
            ("ib_timeout = 0", 13),
            "ib_timeout must be between 1 and 31, got 0: NCCL_IB_TIMEOUT is ibverbs' 5-bit",
        ),
        (
            scenario("packet", "[rdma]\nib_timeout = 32"),
            ("ib_timeout = 32", 13),
            "ib_timeout must be between 1 and 31, got 32",
        ),
        (
            scenario("packet", "[rdma]\nib_retry_cnt = 8"),
            ("ib_retry_cnt = 8", 15),
            "ib_retry_cnt must be between 0 and 7, got 8: NCCL_IB_RETRY_CNT is ibverbs' 3-bit retry count",
        ),
        (
            scenario("packet", "[rdma]\nib_retry_cnt = -1"),
            ("ib_retry_cnt = -1", 15),
            "ib_retry_cnt must be between 0 and 7, got -1",
        ),
        (
            scenario("packet", "[rdma]\nib_timeout = 1.5"),
            ("ib_timeout = 1.5", 13),
            "invalid type",
        ),
        (
            scenario("packet", "[rdma]\nib_sl = 3"),
            ("ib_sl", 0),
            "unknown field `ib_sl`",
        ),
        (
            ideal("[rdma]\nib_timeout = 20"),
            ("[rdma]", 0),
            "[rdma] needs a [topology]: ideal links have no transport",
        ),
    ];
    for (text, (needle, skip), message) in &cases {
        rejected(text, place(text, needle, *skip), message);
    }
}

#[test]
fn pfc_thresholds_parse_as_sizes() {
    let s = parse(&scenario(
        "packet",
        "[pfc]\nxoff_bytes = \"64K\"\nxon_bytes = 32768\nheadroom_bytes = \"1M\"",
    ));
    assert_eq!(
        topology(&s).pfc,
        PfcConfig {
            xoff_bytes: Some(64 << 10),
            xon_bytes: Some(32 << 10),
            headroom_bytes: Some(1 << 20),
        }
    );
    assert_eq!(
        s.network_notes,
        vec![
            "PFC on RoCE links: XOFF 64 KiB, XON 32 KiB, headroom 1 MiB (per ingress port)"
                .to_string()
        ]
    );
    // Keys left out keep the per-link defaults; [rdma] comes first.
    let s = parse(&scenario(
        "packet",
        "[pfc]\nxon_bytes = \"8K\"\n[rdma]\nib_timeout = 20",
    ));
    assert_eq!(
        topology(&s).pfc,
        PfcConfig {
            xoff_bytes: None,
            xon_bytes: Some(8 << 10),
            headroom_bytes: None,
        }
    );
    assert_eq!(s.network_notes.len(), 2);
    assert!(s.network_notes[0].starts_with("RDMA transport: timeout 4.096 us x 2^20 = 4.29 s"));
    assert_eq!(
        s.network_notes[1],
        "PFC on RoCE links: XOFF per-link default, XON 8 KiB, headroom per-link default (per ingress port)"
    );
    // Without [pfc] nothing is set.
    assert_eq!(
        topology(&parse(&scenario("packet", ""))).pfc,
        PfcConfig::default()
    );
    // Where PFC cannot act, the note says so.
    let s = parse(&scenario("flow", "[pfc]\nxoff_bytes = \"64K\""));
    assert!(
        s.network_notes[0].ends_with("no effect in the flow model, which has no buffers"),
        "{:?}",
        s.network_notes
    );
    let no_roce = scenario("packet", "[pfc]\nxoff_bytes = \"64K\"").replace("roce200", "ib_ndr");
    let s = parse(&no_roce);
    assert!(
        s.network_notes[0].ends_with("no effect: the topology has no RoCE link"),
        "{:?}",
        s.network_notes
    );
}

#[test]
fn pfc_mistakes_are_located() {
    let cases: Vec<(String, (&str, usize), &str)> = vec![
        (
            scenario("packet", "[pfc]\nxoff_bytes = \"64K\"\nxon_bytes = \"64K\""),
            ("xon_bytes = \"64K\"", 12),
            "xon_bytes (65536) must be below xoff_bytes (65536)",
        ),
        (
            scenario("packet", "[pfc]\nxon_bytes = \"1M\"\nxoff_bytes = \"512K\""),
            ("xon_bytes = \"1M\"", 12),
            "xon_bytes (1048576) must be below xoff_bytes (524288)",
        ),
        (
            scenario("packet", "[pfc]\nheadroom_bytes = 0"),
            ("headroom_bytes = 0", 17),
            "headroom_bytes must be at least 1",
        ),
        (
            scenario("packet", "[pfc]\nxoff_bytes = 0"),
            ("xoff_bytes = 0", 13),
            "xoff_bytes must be at least 1",
        ),
        (
            scenario("packet", "[pfc]\nxoff_bytes = \"64Q\""),
            ("xoff_bytes = \"64Q\"", 13),
            "invalid size `64Q`",
        ),
        (
            scenario("packet", "[pfc]\nxoff_bytes = -5"),
            ("xoff_bytes = -5", 13),
            "a size cannot be negative, got -5",
        ),
        (
            scenario("packet", "[pfc]\nxoff = \"64K\""),
            ("xoff = ", 0),
            "unknown field `xoff`",
        ),
        (
            ideal("[pfc]\nxoff_bytes = \"64K\""),
            ("[pfc]", 0),
            "[pfc] needs a [topology]: ideal links have no switches to pause",
        ),
    ];
    for (text, (needle, skip), message) in &cases {
        rejected(text, place(text, needle, *skip), message);
    }
}
