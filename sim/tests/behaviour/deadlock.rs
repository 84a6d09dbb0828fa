//! A rank waiting for a message nobody sends stops the run with a deadlock
//! report: what every blocked rank waits for, and the cycle if there is one.

use algorithms::{DType, Fabric, Payload, Shape, Tag};
use engine::{WorldConfig, run};

use crate::support::{link, sim};

fn config(n: usize) -> WorldConfig {
    WorldConfig::new(
        n,
        engine::network::NetworkConfig::Ideal(link(1_000, 1_000_000_000)),
    )
}

#[test]
fn two_ranks_receiving_first_form_a_cycle() {
    let exec = run(config(3), |fabric| async move {
        let me = fabric.rank();
        if me == 2 {
            return Ok(()); // rank 2 has nothing to do and finishes
        }
        let peer = 1 - me;
        fabric
            .recv(peer, Tag(7), Shape::new(DType::F64, 16))
            .await?;
        fabric
            .send(peer, Tag(7), Payload::phantom(DType::F64, 16))
            .await
    });
    let report = exec.deadlock.expect("the run deadlocks");
    assert_eq!(report.blocked.len(), 2);
    assert_eq!(report.cycle, Some(vec![0, 1]));
    assert!(exec.outputs[2].is_some(), "rank 2 finished");
    let text = report.to_string();
    assert!(
        text.contains("rank 0 waits for rank 1, tag 7, 128 bytes"),
        "{text}"
    );
    assert!(
        text.contains("rank 1 waits for rank 0, tag 7, 128 bytes"),
        "{text}"
    );
    assert!(text.contains("cycle: 0 -> 1 -> 0"), "{text}");
}

#[test]
fn waiting_on_a_finished_rank_is_a_chain_not_a_cycle() {
    let exec = run(config(2), |fabric| async move {
        if fabric.rank() == 1 {
            fabric.recv(0, Tag(1), Shape::new(DType::U8, 4)).await?;
        }
        Ok::<(), algorithms::FabricError>(())
    });
    let report = exec.deadlock.expect("rank 1 never gets its message");
    assert_eq!(report.cycle, None);
    let text = report.to_string();
    assert!(
        text.contains("rank 1 waits for rank 0, tag 1, 4 bytes (rank already returned)"),
        "{text}"
    );
}

#[test]
fn the_bundled_mismatched_scenario_reports_its_deadlock() {
    let out = sim(&["run", "scenarios/deadlock_extra_recv.toml"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(3),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert!(stdout.contains("deadlock at"), "{stdout}");
    assert!(stdout.contains("rank 2 waits for rank 5"), "{stdout}");
    assert!(
        stdout.contains("rank 3 waits for rank 2, timed call 1 of 1 (allreduce ring), 128 bytes"),
        "{stdout}"
    );
    assert!(stdout.contains("cycle: 2 -> 5 -> 4 -> 3 -> 2"), "{stdout}");
    assert!(
        stderr.contains("deadlocked") && stderr.contains("seed 1"),
        "{stderr}"
    );
}

#[test]
fn a_rank_that_skips_the_collective_leaves_a_chain_of_waits() {
    let dir = crate::support::temp_dir("skip");
    let path = dir.join("skip.toml");
    std::fs::write(
        &path,
        "world_size = 4\n[links]\nlatency_us = 1\nbandwidth_gb_per_s = 10\n\
         [[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\nmin_bytes = 64\nmax_bytes = 64\n\
         [[inject]]\nkind = \"skip\"\nrank = 1\n",
    )
    .unwrap();
    let out = sim(&["run", path.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(
        stdout.contains(
            "rank 2 waits for rank 1, warm-up call 1 of 5 (allreduce ring), 16 bytes (rank already returned)"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("no cycle"), "{stdout}");
}

/// Five switches in a ring, one GPU on each, small buffers on the
/// switch-to-switch links: an alltoall's two-hop flows fill those buffers
/// in a cycle and credit flow control can move nothing (a credit deadlock,
/// which real lossless fabrics avoid with up/down routing or virtual
/// lanes). The report must blame the network, not the ranks.
#[test]
fn a_credit_deadlock_is_reported_as_the_network_being_stuck() {
    let mut text =
        String::from("seed = 1\n[topology]\npreset = \"explicit\"\nmodel = \"packet\"\n");
    for i in 0..5 {
        text += &format!(
            "[[topology.vertex]]\nname = \"g{i}\"\nkind = \"gpu\"\n\
             [[topology.vertex]]\nname = \"s{i}\"\nkind = \"leaf\"\n"
        );
    }
    for i in 0..5 {
        text += &format!(
            "[[topology.link]]\nfrom = \"g{i}\"\nto = \"s{i}\"\nkind = \"ib_ndr\"\n\
             [[topology.link]]\nfrom = \"s{i}\"\nto = \"s{}\"\nkind = \"ib_ndr\"\nbuffer_bytes = 8192\n",
            (i + 1) % 5
        );
    }
    text += "[[collective]]\nkind = \"alltoall\"\nalgorithm = \"pairwise\"\n\
             min_bytes = \"1M\"\nmax_bytes = \"1M\"\niters = 1\nwarmup = 0\nphantom = true\n";
    let dir = crate::support::temp_dir("credit-deadlock");
    let path = dir.join("cycle.toml");
    std::fs::write(&path, text).unwrap();
    let (links, trace) = (dir.join("links.csv"), dir.join("trace.json"));
    let out = sim(&[
        "run",
        path.to_str().unwrap(),
        "--links-csv",
        links.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("the network is stuck: 5 message(s)"),
        "{stdout}"
    );
    assert!(stdout.contains("stuck: rank 0 -> rank 2"), "{stdout}");
    // The buffer-dependency cycle, from its lowest link id.
    assert!(
        stdout.contains("s0->s1 => s1->s2 => s2->s3 => s3->s4 => s4->s0 => s0->s1, each waiting for room on the next"),
        "{stdout}"
    );
    // The failed point's link counters and trace are written: the run a
    // user most wants to look at. The full switch-to-switch buffers show.
    let csv = std::fs::read_to_string(&links).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (from, to, max_queue) = (column("from"), column("to"), column("max_queue"));
    let full = csv.lines().skip(1).any(|l| {
        let cells: Vec<&str> = l.split(',').collect();
        cells[from].starts_with('s') && cells[to].starts_with('s') && cells[max_queue] == "8192"
    });
    assert!(
        full,
        "some switch-to-switch link holds a full 8 KiB buffer:\n{csv}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    assert!(events.iter().any(|e| e["name"] == "process_name"));
    assert!(
        events.iter().any(|e| e["ph"] == "C"),
        "link counters recorded"
    );
}
