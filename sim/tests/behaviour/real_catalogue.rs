//! Every collective and algorithm of the catalogue, as separate processes
//! on shared memory and on TCP, for 2 to 8 ranks (non-powers of two
//! included): `sim launch -n N --fabric F -- run SCENARIO --fabric F` on a
//! scenario listing the whole catalogue, every result checked.

use std::time::Duration;

use algorithms::Registry;

use super::real_support::{spawn, text, wait_within};

/// A scenario with every catalogue entry on `n` ranks: two small sizes,
/// the second larger than one pipeline chunk, a non-zero root.
fn catalogue_scenario(n: usize) -> String {
    let mut s = format!(
        "name = \"catalogue_{n}\"\nworld_size = {n}\nseed = 1\n\n[links]\nlatency_us = 1.0\nbandwidth_gb_per_s = 10.0\n"
    );
    // NVLS and CollNet need a switch that reduces: real fabrics refuse
    // them (see `in_network_algorithms_are_refused_on_real_fabrics`).
    for e in Registry::builtin()
        .iter()
        .filter(|e| !e.facts().reduces_in_network())
    {
        // Alltoall needs a multiple of the world size: 8 B x n x 4 elements.
        let (min, max) = (4 * 4 * n, 4 * 4 * n * 64);
        s.push_str(&format!(
            "\n[[collective]]\nkind = \"{}\"\nalgorithm = \"{}\"\nmin_bytes = {min}\nmax_bytes = {max}\nstep_factor = 64\n\
             dtype = \"int32\"\nop = \"sum\"\nroot = {}\nranks_per_node = 2\nchunk_bytes = 256\niters = 1\nwarmup = 0\ncheck = true\n",
            e.collective(),
            e.name(),
            n - 1
        ));
    }
    s
}

fn run_catalogue(fabric: &str, n: usize) {
    let dir = std::env::temp_dir().join(format!(
        "sim_real_catalogue_{}_{fabric}_{n}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("catalogue.toml");
    std::fs::write(&path, catalogue_scenario(n)).unwrap();
    let n_text = n.to_string();
    let path_text = path.to_string_lossy().into_owned();
    let child = spawn(
        &[
            "launch",
            "-n",
            &n_text,
            "--fabric",
            fabric,
            "--",
            "run",
            &path_text,
            "--fabric",
            fabric,
            "--timeout-s",
            "20",
        ],
        &[],
    );
    let out = wait_within(
        child,
        Duration::from_secs(120),
        &format!("the catalogue on {n} {fabric} ranks"),
    );
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "{fabric}, {n} ranks: {:?}\n{stdout}\n{}",
        out.status,
        text(&out.stderr)
    );
    // One checked row per entry and size (the barrier moves no data: one
    // row), each with #wrong 0.
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(
        rows.len(),
        2 * Registry::builtin()
            .iter()
            .filter(|e| !e.facts().reduces_in_network())
            .count()
            - 1,
        "{fabric}, {n} ranks:\n{stdout}"
    );
    for row in &rows {
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            fields.get(8),
            Some(&"0"),
            "{fabric}, {n} ranks, a row with wrong elements: {row}"
        );
    }
    for e in Registry::builtin()
        .iter()
        .filter(|e| !e.facts().reduces_in_network())
    {
        let section = format!("# {} on {n} ranks", e.collective());
        let algorithm = format!("algorithm {},", e.name());
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&section) && l.contains(&algorithm)),
            "{fabric}, {n} ranks: no section of {e:?}:\n{stdout}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_whole_catalogue_is_correct_on_shared_memory_processes() {
    for n in 2..=8 {
        run_catalogue("shm", n);
    }
}

#[test]
fn the_whole_catalogue_is_correct_on_tcp_processes() {
    for n in 2..=8 {
        run_catalogue("tcp", n);
    }
}
