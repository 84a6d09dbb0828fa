//! Plain Ethernet against RoCE end to end: an incast is lossless under
//! PFC and lossy on plain Ethernet, whose TCP-like transport recovers
//! without waiting out the RDMA timer (the 8-node cluster whose 16 MiB
//! allreduce took 2.15 s); `[tcp]` is validated like `[rdma]`, and each
//! table says when no link of the topology uses its transport.

use std::path::Path;

use engine::network::{LinkUsage, NetworkConfig, TcpConfig};
use engine::scenario::{Scenario, ScenarioError};
use engine::study::Row;

use crate::support::{sim, study_links, sum_links as sum, temp_dir};

/// One 200 ms minimum timeout, in ps.
const RTO_MIN_PS: u64 = 200_000_000_000;

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    Scenario::parse(
        Path::new("ethernet.toml"),
        text,
        &algorithms::Registry::builtin(),
    )
}

/// The rows and every point's link counters.
fn study(text: &str) -> (Vec<Row>, Vec<Vec<LinkUsage>>) {
    study_links(&parse(text).unwrap_or_else(|e| panic!("{e}")))
}

/// Seven hosts send 4 MiB each to host 0 (a linear gather of real data)
/// on a leaf-spine of `nic` links, four hosts per leaf.
fn incast(nic: &str) -> String {
    format!(
        r#"seed = 1
[topology]
preset = "leaf_spine"
hosts = 8
hosts_per_leaf = 4
spines = 2
nic = "{nic}"
model = "packet"
[[collective]]
kind = "gather"
algorithm = "linear"
min_bytes = "32M"
max_bytes = "32M"
iters = 1
warmup = 0
"#
    )
}

#[test]
fn an_incast_on_roce_pauses_and_drops_nothing() {
    let (rows, usage) = study(&incast("roce400"));
    assert_eq!(rows[0].wrong, Some(0));
    assert_eq!(sum(&usage, |u| u.overflow_drops), 0);
    assert_eq!(sum(&usage, |u| u.lost), 0);
    assert_eq!(sum(&usage, |u| u.retransmitted), 0);
    assert!(sum(&usage, |u| u.pause_frames) > 0);
}

#[test]
fn an_incast_on_plain_ethernet_drops_and_tcp_recovers_within_the_lossless_time() {
    let (roce, _) = study(&incast("roce400"));
    let (rows, usage) = study(&incast("ethernet400"));
    assert_eq!(rows[0].wrong, Some(0), "every drop is recovered");
    assert!(sum(&usage, |u| u.overflow_drops) > 0);
    assert!(sum(&usage, |u| u.retransmitted) > 0);
    assert_eq!(sum(&usage, |u| u.pause_frames), 0);
    // No timeout was waited out: about the lossless time.
    assert!(
        rows[0].time_ps < 2 * roce[0].time_ps,
        "{} ps on Ethernet, {} ps on RoCE",
        rows[0].time_ps,
        roce[0].time_ps
    );
}

#[test]
fn the_8_node_ethernet_fat_tree_allreduce_takes_milliseconds_not_seconds() {
    // The issue: a 16 MiB allreduce on 8 DGX nodes with 400 GbE NICs took
    // 2.15 s in the packet model, two 1.07 s RDMA timeouts.
    let text = r#"seed = 1
[topology]
preset = "fat_tree"
nodes = 8
nic = "ethernet400"
model = "packet"
[[collective]]
kind = "allreduce"
min_bytes = "16M"
max_bytes = "16M"
iters = 1
warmup = 0
phantom = true
"#;
    let (rows, usage) = study(text);
    assert!(sum(&usage, |u| u.overflow_drops) > 0, "the incasts drop");
    assert!(
        rows[0].time_ps < RTO_MIN_PS / 20,
        "{} ps: a timeout was waited out",
        rows[0].time_ps
    );
}

#[test]
fn a_dark_ethernet_link_fails_the_tcp_transport_after_tcp_retries2() {
    let dir = temp_dir("tcp-retries2");
    let path = dir.join("dark.toml");
    let text = incast("ethernet100").replace(
        "[[collective]]",
        "[[link_fault]]\nkind = \"lossy\"\nfrom = \"leaf0\"\nto = \"host0/nic\"\nat_us = 0\n\
         loss_rate = 1.0\n[tcp]\nrto_min_ms = 1\nretries2 = 2\n[[collective]]",
    );
    std::fs::write(&path, text).unwrap();
    let out = sim(&["run", path.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(6), "{stdout}");
    assert!(
        stdout.contains(
            "TCP transport (plain Ethernet): timeout at least 1.00 ms, backed off up to 120 s, \
             gives up after 2 timeouts without progress (7.00 ms of timeouts at the minimum)"
        ),
        "{stdout}"
    );
    // A sender's first packet at 0 ps times out at 1, 3 and 7 ms: it is
    // sent again twice, then the transport gives up.
    assert!(
        stdout.contains("TCP transport from rank 1 to rank 0 gave up at 7000.000 us"),
        "{stdout}"
    );
    assert!(
        stdout.contains("after 2 retries without progress (tcp_retries2)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("leaf0->host0/nic (random loss)"),
        "{stdout}"
    );
}

/// A two-host leaf-spine of `nic` links with `extra` tables.
fn pair(nic: &str, model: &str, extra: &str) -> String {
    format!(
        "[topology]\npreset = \"leaf_spine\"\nhosts = 2\nnic = \"{nic}\"\n\
         model = \"{model}\"\n{extra}\n[[collective]]\nkind = \"allreduce\"\n\
         min_bytes = \"1M\"\nmax_bytes = \"1M\"\nphantom = true\n"
    )
}

fn tcp_of(s: &Scenario) -> TcpConfig {
    match &s.network {
        NetworkConfig::Topology(t) => t.tcp,
        NetworkConfig::Ideal(_) => panic!("a topology scenario"),
    }
}

#[test]
fn tcp_defaults_to_linuxs_and_takes_overrides() {
    let s = parse(&pair("ethernet100", "packet", "")).unwrap();
    assert_eq!(tcp_of(&s), TcpConfig::default());
    assert_eq!(
        (
            TcpConfig::default().rto_min_ps,
            TcpConfig::default().retries2
        ),
        (RTO_MIN_PS, 15)
    );
    assert!(s.network_notes.is_empty());

    let extra = "[tcp]\nrto_min_ms = 0.5\nrto_max_ms = 1000\nretries2 = 8";
    let s = parse(&pair("ethernet100", "packet", extra)).unwrap();
    assert_eq!(
        tcp_of(&s),
        TcpConfig {
            rto_min_ps: 500_000_000,
            rto_max_ps: 1_000_000_000_000,
            retries2: 8,
        }
    );
    assert_eq!(
        s.network_notes,
        [
            "TCP transport (plain Ethernet): timeout at least 500 us, backed off up to 1.00 s, \
          gives up after 8 timeouts without progress (256 ms of timeouts at the minimum)"
        ]
    );
}

#[test]
fn each_transport_table_says_when_no_link_uses_it() {
    let s = parse(&pair("roce100", "packet", "[tcp]\nretries2 = 3")).unwrap();
    assert!(
        s.network_notes[0].ends_with("; no effect: the topology has no plain Ethernet link"),
        "{:?}",
        s.network_notes
    );
    let s = parse(&pair("ethernet100", "packet", "[rdma]\nib_timeout = 10")).unwrap();
    assert!(
        s.network_notes[0].ends_with("; no effect: the topology has no InfiniBand or RoCE link"),
        "{:?}",
        s.network_notes
    );
    let s = parse(&pair("ethernet100", "flow", "[tcp]\nretries2 = 3")).unwrap();
    assert!(
        s.network_notes[0].ends_with("; no effect in the flow model, which loses nothing"),
        "{:?}",
        s.network_notes
    );
    // Where the transport acts, no remark.
    let s = parse(&pair("ib_ndr", "packet", "[rdma]\nib_timeout = 10")).unwrap();
    assert!(!s.network_notes[0].contains("no effect"));
}

/// The 1-based line and column of the first `needle` in `text`, `skip`
/// characters into it.
fn place(text: &str, needle: &str, skip: usize) -> (usize, usize) {
    let offset = text.find(needle).unwrap() + skip;
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[test]
fn tcp_mistakes_are_located() {
    let ethernet = |extra: &str| pair("ethernet100", "packet", extra);
    let cases: Vec<(String, (&str, usize), &str)> = vec![
        (
            ethernet("[tcp]\nrto_min_ms = 0"),
            ("rto_min_ms = 0", 13),
            "rto_min_ms must be a positive number, got 0",
        ),
        (
            ethernet("[tcp]\nrto_min_ms = 0.0001"),
            ("rto_min_ms = 0.0001", 13),
            "rto_min_ms must be between 0.001 (Linux's tcp_rto_min_us takes 1 us) and rto_max_ms \
             (120000), got 0.0001",
        ),
        (
            ethernet("[tcp]\nrto_min_ms = 2000\nrto_max_ms = 1000"),
            ("rto_min_ms = 2000", 13),
            "and rto_max_ms (1000), got 2000",
        ),
        (
            ethernet("[tcp]\nrto_max_ms = 999"),
            ("rto_max_ms = 999", 13),
            "rto_max_ms must be between 1000 and 120000, got 999",
        ),
        (
            ethernet("[tcp]\nretries2 = 256"),
            ("retries2 = 256", 11),
            "retries2 must be between 0 and 255, got 256",
        ),
        (
            ethernet("[tcp]\nretries2 = 1.5"),
            ("retries2 = 1.5", 11),
            "invalid type",
        ),
        (
            ethernet("[tcp]\nrto_min = 5"),
            ("rto_min = ", 0),
            "unknown field `rto_min`",
        ),
        (
            "world_size = 2\n[links]\nlatency_us = 1\nbandwidth_gb_per_s = 10\n[tcp]\n\
             retries2 = 3\n[[collective]]\nkind = \"barrier\"\nmin_bytes = 0\nmax_bytes = 0\n"
                .to_string(),
            ("[tcp]", 0),
            "[tcp] needs a [topology]: ideal links have no transport",
        ),
    ];
    for (text, (needle, skip), message) in &cases {
        match parse(text) {
            Err(ScenarioError::Invalid {
                line,
                column,
                message: got,
                ..
            }) => {
                assert!(got.contains(message), "`{got}` lacks `{message}`");
                assert_eq!((line, column), place(text, needle, *skip), "{got}\n{text}");
            }
            other => panic!("expected `{message}`, got {other:?}\n{text}"),
        }
    }
}
