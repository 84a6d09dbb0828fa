//! `sim run --links-timeline`: each link's traffic per time bin, which
//! must add up to the links CSV's totals in both models.

use std::collections::BTreeMap;

use crate::support::{sim, temp_dir};

fn scenario(model: &str) -> String {
    format!(
        r#"seed = 1
[topology]
preset = "leaf_spine"
hosts = 4
hosts_per_leaf = 2
spines = 1
nic = "ib_ndr"
model = "{model}"
[[collective]]
kind = "allreduce"
algorithm = "ring"
min_bytes = "1M"
max_bytes = "4M"
step_factor = 4
iters = 1
warmup = 0
phantom = true
"#
    )
}

/// `column -> value` maps of a CSV's rows.
fn rows(text: &str) -> Vec<BTreeMap<String, String>> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| {
            header
                .iter()
                .zip(l.split(','))
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

#[test]
fn the_bins_of_each_link_add_up_to_its_bytes_in_both_models() {
    for model in ["packet", "flow"] {
        let dir = temp_dir(&format!("timeline-{model}"));
        let path = dir.join("s.toml");
        std::fs::write(&path, scenario(model)).unwrap();
        let (links, timeline) = (dir.join("links.csv"), dir.join("timeline.csv"));
        let out = sim(&[
            "run",
            path.to_str().unwrap(),
            "--links-csv",
            links.to_str().unwrap(),
            "--links-timeline",
            timeline.to_str().unwrap(),
            "--timeline-bin-us",
            "20",
        ]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let timeline = rows(&std::fs::read_to_string(&timeline).unwrap());
        assert!(!timeline.is_empty());
        // (size, link) -> (bytes over the bins, number of bins)
        let mut binned: BTreeMap<(String, String), (f64, f64)> = BTreeMap::new();
        for r in &timeline {
            assert_eq!(r["bin_us"], "20.000000");
            let u: f64 = r["utilisation"].parse().unwrap();
            // A link never carries more than its bandwidth allows in a bin
            // (the packet model spreads a packet over its serialization).
            assert!(u > 0.0 && u <= 1.0 + 1e-6, "{model}: {r:?}");
            let e = binned
                .entry((r["size_bytes"].clone(), r["link_id"].clone()))
                .or_default();
            e.0 += r["bytes"].parse::<f64>().unwrap();
            e.1 += 1.0;
        }
        for r in rows(&std::fs::read_to_string(&links).unwrap()) {
            let key = (r["size_bytes"].clone(), r["link_id"].clone());
            let total: f64 = r["bytes"].parse().unwrap();
            let (got, bins) = binned.get(&key).copied().unwrap_or((0.0, 0.0));
            // Bins are printed as whole bytes: half a byte of rounding each.
            assert!(
                (got - total).abs() <= 0.5 * bins + 1e-6,
                "{model} {key:?}: {got} vs {total}"
            );
        }
    }
}

#[test]
fn a_bad_bin_is_refused() {
    let out = sim(&[
        "run",
        "x.toml",
        "--links-timeline",
        "t.csv",
        "--timeline-bin-us",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the timeline bin must be between"),
        "{stderr}"
    );
}
