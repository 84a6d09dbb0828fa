//! What `[topology]` scenarios report about their network: the
//! `--links-csv` rows account for every byte the ranks sent, and the
//! `--trace` has a process per point, a track per rank and a counter per
//! link direction.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use engine::link_report::LINKS_CSV_HEADER;
use serde_json::Value;

use crate::support::{sim, temp_dir};
use crate::topology_scenarios::{COLLECTIVE, run_in, table_rows, two_on_a_switch_run, wrong_of};

/// One links CSV, parsed: the header and each row's cells. (No cell of
/// these topologies holds a comma or a quote.)
fn read_links_csv(path: &Path) -> (String, Vec<Vec<String>>) {
    let text = fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = lines.next().expect("a header line").to_string();
    let rows = lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    (header, rows)
}

/// Column `name` of `row`.
fn cell<'a>(row: &'a [String], name: &str) -> &'a str {
    let i = LINKS_CSV_HEADER
        .iter()
        .position(|h| *h == name)
        .expect("a links CSV column");
    &row[i]
}

#[test]
fn placement_reverses_the_ring_direction_on_a_ring_of_gpus() {
    // A ring of four GPUs: link directions 0, 2, 4, 6 are gpu0->gpu1,
    // gpu1->gpu2, gpu2->gpu3, gpu3->gpu0 (clockwise), 1, 3, 5, 7 the
    // reverse. In order, rank r on gpu r sends to rank r+1 on gpu r+1:
    // clockwise. Reversed, rank r on gpu 3-r sends to gpu 2-r:
    // anticlockwise. A ring allreduce of n bytes on 4 ranks has each rank
    // send 2(4-1) segments of n/4 bytes: 1.5 n over its one outgoing link.
    let dir = temp_dir("placement");
    let size: u64 = 64 * 1024;
    let base = "seed = 2\n[topology]\npreset = \"ring\"\ngpus = 4\n";
    let collective = "[[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\n\
                      min_bytes = \"64K\"\nmax_bytes = \"64K\"\niters = 1\nwarmup = 0\n";
    let mut tables = Vec::new();
    for (name, placement, loaded) in [
        ("in_order", "", [0usize, 2, 4, 6]),
        ("reversed", "placement = [3, 2, 1, 0]\n", [1, 3, 5, 7]),
    ] {
        let csv = dir.join(format!("{name}.csv"));
        let text = format!("{base}{placement}{collective}");
        let (code, stdout, stderr) = run_in(
            &dir,
            &format!("{name}.toml"),
            &text,
            &["--links-csv", csv.to_str().unwrap()],
        );
        assert_eq!(code, Some(0), "{name}: {stdout}{stderr}");
        let rows = table_rows(&stdout);
        assert_eq!(rows.len(), 1, "{stdout}");
        assert_eq!(wrong_of(rows[0]), "0", "{name}: {}", rows[0]);
        tables.push(rows[0].to_string());

        let (_, links) = read_links_csv(&csv);
        assert_eq!(links.len(), 8, "{name}");
        for row in &links {
            let id: usize = cell(row, "link_id").parse().unwrap();
            let bytes: u64 = cell(row, "bytes").parse().unwrap();
            let expected = if loaded.contains(&id) {
                size * 3 / 2
            } else {
                0
            };
            assert_eq!(bytes, expected, "{name}: link {id} {row:?}");
        }
    }
    // The topology is symmetric: the same times, the same table row.
    assert_eq!(tables[0], tables[1]);
}

#[test]
fn the_links_csv_accounts_for_every_byte_the_ranks_sent() {
    // Ring allreduce on N ranks: each rank sends 2(N-1) segments of n/N
    // bytes per call, all over its one link into the switch; with one
    // warm-up and one timed call that is 2 calls. Two GPUs, 64K and 128K:
    // each GPU sends n per call. Four GPUs (flow model): 1.5 n per call.
    let dir = temp_dir("links-csv");
    let four = "seed = 4\n[topology]\npreset = \"explicit\"\nmodel = \"flow\"\n".to_string()
        + &(0..4)
            .map(|g| format!("[[topology.vertex]]\nname = \"gpu{g}\"\nkind = \"gpu\"\n"))
            .collect::<String>()
        + "[[topology.vertex]]\nname = \"sw\"\nkind = \"leaf\"\n"
        + &(0..4)
            .map(|g| {
                format!("[[topology.link]]\nfrom = \"gpu{g}\"\nto = \"sw\"\nkind = \"ib_ndr\"\n")
            })
            .collect::<String>()
        + "[[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\n\
           min_bytes = \"64K\"\nmax_bytes = \"128K\"\niters = 1\nwarmup = 1\n";
    // (name, text, ranks, link directions, bytes one rank sends per byte
    // of buffer per call, as a fraction num/den)
    let cases = [
        (
            "two",
            two_on_a_switch_run("packet"),
            2u64,
            4usize,
            (1u64, 1u64),
        ),
        ("four", four, 4, 8, (3, 2)),
    ];
    for (name, text, ranks, directions, (num, den)) in cases {
        let csv = dir.join(format!("{name}.csv"));
        let (code, stdout, stderr) = run_in(
            &dir,
            &format!("{name}.toml"),
            &text,
            &["--links-csv", csv.to_str().unwrap()],
        );
        assert_eq!(code, Some(0), "{name}: {stdout}{stderr}");
        let (header, rows) = read_links_csv(&csv);
        assert_eq!(header, LINKS_CSV_HEADER.join(","));
        let sizes = [64 * 1024u64, 128 * 1024];
        assert_eq!(rows.len(), directions * sizes.len(), "{name}");
        for row in &rows {
            assert_eq!(row.len(), LINKS_CSV_HEADER.len(), "{row:?}");
            assert_eq!(cell(row, "ranks"), ranks.to_string());
            let u: f64 = cell(row, "utilisation").parse().unwrap();
            assert!(
                (0.0..=1.0).contains(&u),
                "{name}: utilisation {u} in {row:?}"
            );
        }
        let calls = 2;
        for size in sizes {
            let point: Vec<&Vec<String>> = rows
                .iter()
                .filter(|r| cell(r, "size_bytes") == size.to_string())
                .collect();
            assert_eq!(point.len(), directions, "{name} {size}");
            let per_rank = calls * size * num / den;
            let mut from_gpus = 0;
            for row in &point {
                let bytes: u64 = cell(row, "bytes").parse().unwrap();
                if cell(row, "from").starts_with("gpu") {
                    assert_eq!(bytes, per_rank, "{name} {size}: {row:?}");
                    from_gpus += bytes;
                } else {
                    // What the switch delivers, each GPU receives.
                    assert!(cell(row, "to").starts_with("gpu"));
                    assert_eq!(bytes, per_rank, "{name} {size}: {row:?}");
                }
            }
            assert_eq!(from_gpus, ranks * per_rank, "{name} {size}");
        }
    }
}

#[test]
fn an_ideal_links_scenario_writes_only_the_links_csv_header() {
    let dir = temp_dir("links-csv-ideal");
    let csv = dir.join("links.csv");
    let text = "world_size = 2\n[links]\nlatency_us = 1.0\nbandwidth_gb_per_s = 10.0\n".to_string()
        + COLLECTIVE;
    let (code, stdout, stderr) = run_in(
        &dir,
        "ideal.toml",
        &text,
        &["--links-csv", csv.to_str().unwrap()],
    );
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert_eq!(
        fs::read_to_string(&csv).unwrap(),
        format!("{}\n", LINKS_CSV_HEADER.join(","))
    );
}

/// Runs `text` with `--trace` (and `--links-csv`); returns the trace and
/// the link direction names of the links CSV.
fn traced(dir: &Path, name: &str, text: &str) -> (Value, BTreeSet<String>) {
    let trace = dir.join(format!("{name}.json"));
    let csv = dir.join(format!("{name}.csv"));
    let (code, stdout, stderr) = run_in(
        dir,
        &format!("{name}.toml"),
        text,
        &[
            "--trace",
            trace.to_str().unwrap(),
            "--links-csv",
            csv.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{name}: {stdout}{stderr}");
    let doc: Value =
        serde_json::from_str(&fs::read_to_string(&trace).unwrap()).expect("the trace is JSON");
    let (_, rows) = read_links_csv(&csv);
    let links = rows
        .iter()
        .map(|r| format!("{}->{}", cell(r, "from"), cell(r, "to")))
        .collect();
    (doc, links)
}

#[test]
fn the_trace_has_a_process_per_point_a_track_per_rank_and_link_counters() {
    let dir = temp_dir("trace");
    let text = two_on_a_switch_run("packet").replace("iters = 1", "iters = 2");
    let (doc, links) = traced(&dir, "two", &text);
    let events = doc["traceEvents"].as_array().expect("traceEvents");

    // One process per point, labelled with the collective and size.
    let processes: BTreeMap<u64, &str> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| {
            (
                e["pid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        processes.values().copied().collect::<Vec<_>>(),
        ["allreduce ring 65536 B", "allreduce ring 131072 B"]
    );

    // Track names: `rank r` (and overflow lanes `rank r +k`), every rank.
    let mut rank_of: BTreeMap<(u64, u64), usize> = BTreeMap::new();
    for e in events.iter().filter(|e| e["name"] == "thread_name") {
        let name = e["args"]["name"].as_str().unwrap();
        let rank: usize = name
            .strip_prefix("rank ")
            .and_then(|r| r.split(' ').next())
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| panic!("track name `{name}`"));
        rank_of.insert(
            (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()),
            rank,
        );
    }
    for &pid in processes.keys() {
        let main_tracks: BTreeSet<&str> = events
            .iter()
            .filter(|e| e["name"] == "thread_name" && e["pid"] == pid)
            .filter_map(|e| e["args"]["name"].as_str())
            .filter(|n| !n.contains('+'))
            .collect();
        assert_eq!(
            main_tracks,
            BTreeSet::from(["rank 0", "rank 1"]),
            "pid {pid}"
        );
    }

    // Slices: sends, receives and the calls, none of negative length.
    let slices: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    for name in ["send", "recv", "allreduce"] {
        assert!(
            slices.iter().any(|e| e["name"] == name),
            "no `{name}` slice"
        );
    }
    for s in &slices {
        assert!(s["dur"].as_f64().unwrap() >= 0.0, "{s}");
        assert!(s["ts"].as_f64().unwrap() >= 0.0, "{s}");
    }

    // A rank's calls follow each other: 3 per point, never overlapping.
    let mut calls: BTreeMap<(u64, usize), Vec<(f64, f64)>> = BTreeMap::new();
    for s in slices.iter().filter(|e| e["name"] == "allreduce") {
        let key = (s["pid"].as_u64().unwrap(), s["tid"].as_u64().unwrap());
        let rank = *rank_of.get(&key).expect("every slice is on a named track");
        let (ts, dur) = (s["ts"].as_f64().unwrap(), s["dur"].as_f64().unwrap());
        calls.entry((key.0, rank)).or_default().push((ts, ts + dur));
    }
    assert_eq!(calls.len(), 2 * 2, "two points of two ranks");
    for ((pid, rank), mut spans) in calls {
        assert_eq!(spans.len(), 3, "pid {pid} rank {rank}: 1 warm-up + 2 timed");
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in spans.windows(2) {
            assert!(
                w[0].1 <= w[1].0 + 1e-9,
                "pid {pid} rank {rank}: calls {w:?} overlap"
            );
        }
    }

    // Link counters: in the packet model a packet crossing the switch
    // reserves room in the switch's port towards its destination, so both
    // switch-to-GPU directions change their backlog.
    let counters: BTreeSet<&str> = events
        .iter()
        .filter(|e| e["ph"] == "C")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(counters.contains("sw->gpu0"), "{counters:?}");
    assert!(counters.contains("sw->gpu1"), "{counters:?}");
    for c in &counters {
        assert!(links.contains(*c), "counter `{c}` is not a link direction");
    }
}

#[test]
fn trace_counters_of_a_preset_are_named_after_its_link_directions() {
    let dir = temp_dir("trace-preset");
    let text = "[topology]\npreset = \"dgx_h100\"\ngpus_per_node = 2\n".to_string()
        + &COLLECTIVE
            .replace("max_bytes = 8", "max_bytes = \"64K\"")
            .replace("min_bytes = 8", "min_bytes = \"64K\"");
    let (doc, links) = traced(&dir, "dgx", &text);
    let counters: BTreeSet<&str> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "C")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    // The two GPUs of a DGX talk through its NVSwitch.
    assert!(
        counters.contains("node0/nvswitch->node0/gpu0"),
        "{counters:?}"
    );
    assert!(
        counters.contains("node0/nvswitch->node0/gpu1"),
        "{counters:?}"
    );
    for c in &counters {
        assert!(links.contains(*c), "counter `{c}` is not a link direction");
    }
}

#[test]
fn an_unwritable_links_csv_or_trace_exits_1_before_running() {
    let dir = temp_dir("unwritable");
    let scenario = dir.join("ok.toml");
    fs::write(&scenario, two_on_a_switch_run("packet")).unwrap();
    let missing = dir.join("no/such/dir");
    for (flag, what) in [("--links-csv", "links CSV"), ("--trace", "trace")] {
        let target = missing.join("out");
        let out = sim(&[
            "run",
            scenario.to_str().unwrap(),
            flag,
            target.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flag}: {stderr}");
        assert!(
            stderr.contains(&format!("{}: cannot write {what}", target.display())),
            "{stderr}"
        );
        // Nothing ran: not even the table's header was printed.
        assert!(
            out.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}
