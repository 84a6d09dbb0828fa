//! The scaling story (`scenarios/scaling_8_to_16_nodes.toml`): doubling
//! the nodes of a job whose allreduce crosses an oversubscribed spine buys
//! no throughput; the same study without that cause scales.

use std::collections::BTreeMap;

use crate::support::{repo_root, sim, temp_dir};

/// `(algorithm, nodes) -> (speedup, efficiency)` of a scenario's sweep.
fn sweep(file: &str) -> BTreeMap<(String, String), (f64, f64)> {
    let path = repo_root().join("scenarios").join(file);
    let out = sim(&["sweep", path.to_str().unwrap(), "--quiet"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (alg, nodes, speedup, efficiency) = (
        col("algorithm"),
        col("nodes"),
        col("speedup"),
        col("efficiency"),
    );
    lines
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            (
                (c[alg].to_string(), c[nodes].to_string()),
                (c[speedup].parse().unwrap(), c[efficiency].parse().unwrap()),
            )
        })
        .collect()
}

#[test]
fn doubling_the_nodes_across_an_oversubscribed_spine_buys_no_throughput() {
    let degraded = sweep("scaling_8_to_16_nodes.toml");
    let healthy = sweep("scaling_8_to_16_nodes_healthy.toml");
    let key = |alg: &str| (alg.to_string(), "16".to_string());
    let (speedup, efficiency) = degraded[&key("rabenseifner")];
    // "Throughput rises by under 30% instead of nearly 2x."
    assert!(speedup < 1.3, "{speedup}");
    let (healthy_speedup, healthy_efficiency) = healthy[&key("rabenseifner")];
    assert!(healthy_speedup > 1.8, "{healthy_speedup}");
    // The margin the scenario documents.
    assert!(
        healthy_efficiency - efficiency >= 0.4,
        "{healthy_efficiency} vs {efficiency}"
    );
    // The rail-aligned allreduce crosses the spine only twice per rail: it
    // scales in both.
    for s in [&degraded, &healthy] {
        assert!(s[&key("hierarchical")].1 > 0.9);
    }
}

#[test]
fn the_links_csv_of_the_16_node_point_shows_the_spine_uplinks_saturated() {
    let path = repo_root().join("scenarios/scaling_8_to_16_nodes.toml");
    let out = sim(&["sweep", path.to_str().unwrap(), "--print-point", "1"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let dir = temp_dir("scaling-story");
    let point = dir.join("point1.toml");
    std::fs::write(&point, &out.stdout).unwrap();
    let links = dir.join("links.csv");
    let out = sim(&[
        "run",
        point.to_str().unwrap(),
        "--links-csv",
        links.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let csv = std::fs::read_to_string(&links).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (section, from, to, utilisation) =
        (col("section"), col("from"), col("to"), col("utilisation"));
    // The Rabenseifner section's busiest link joins a leaf and a spine
    // (up or down: both directions carry the crossing halves).
    let busiest = lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|c| c[section] == "0")
        .max_by(|a, b| {
            let u = |c: &Vec<&str>| c[utilisation].parse::<f64>().unwrap();
            u(a).total_cmp(&u(b))
        })
        .unwrap();
    let ends = [busiest[from], busiest[to]];
    assert!(
        ends.iter().any(|e| e.starts_with("leaf")) && ends.iter().any(|e| e.starts_with("spine")),
        "{busiest:?}"
    );
}

#[test]
fn nodes_per_leaf_sets_the_leaves_and_excludes_leaves() {
    use engine::network::NetworkConfig;
    use engine::scenario::Scenario;
    let text = |extra: &str| {
        format!(
            "[topology]\npreset = \"fat_tree\"\nnodes = 16\n{extra}\nmodel = \"flow\"\n\
             [[collective]]\nkind = \"allreduce\"\nmin_bytes = \"1M\"\nmax_bytes = \"1M\"\nphantom = true\n"
        )
    };
    let leaves = |extra: &str| {
        let s = Scenario::parse(
            std::path::Path::new("t.toml"),
            &text(extra),
            &algorithms::Registry::builtin(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let NetworkConfig::Topology(t) = &s.network else {
            panic!("a topology")
        };
        let t = &t.topology;
        t.vertex_ids()
            .filter(|&v| t.vertex(v).name.starts_with("leaf"))
            .count()
    };
    // 8 rails; 16 nodes, 8 per leaf: two leaves per rail.
    assert_eq!(leaves("nodes_per_leaf = 8"), 16);
    assert_eq!(leaves("nodes_per_leaf = 16"), 8);
    assert_eq!(leaves("nodes_per_leaf = 5"), 32);
    let err = Scenario::parse(
        std::path::Path::new("t.toml"),
        &text("leaves = 16\nnodes_per_leaf = 8"),
        &algorithms::Registry::builtin(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("t.toml:5:18"), "{err}");
    assert!(
        err.contains("give leaves or nodes_per_leaf, not both"),
        "{err}"
    );
}
