//! `extrapolate_above`: sizes above it drawn on the line through two
//! simulated sizes of the same plan, against their full simulations; what
//! cannot be extrapolated refused saying why.

use engine::study::Row;

use crate::fold::{parse, rows};
use crate::support::{sim, study_links, sum_links, temp_dir};

/// NCCL's tree allreduce on a folded 2-node fat-tree (16 GPUs), 512 MiB
/// to `max` by doubling, with `extra` added to the collective.
fn tree(max: &str, extra: &str) -> String {
    format!(
        "seed = 5\n\
         [topology]\n\
         preset = \"fat_tree\"\n\
         nodes = 2\n\
         model = \"flow\"\n\
         spines = 2\n\
         oversubscription = 1\n\
         symmetry = \"fold\"\n\
         [[collective]]\n\
         kind = \"allreduce\"\n\
         algorithm = \"nccl_tree\"\n\
         min_bytes = \"512M\"\n\
         max_bytes = \"{max}\"\n\
         iters = 2\n\
         warmup = 1\n\
         phantom = true\n\
         {extra}"
    )
}

/// The value at `x` of the line through the rows at `a` and `b`.
fn on_line(a: &Row, b: &Row, x: u64) -> f64 {
    let slope = (b.time_ps as f64 - a.time_ps as f64) / (b.size_bytes - a.size_bytes) as f64;
    b.time_ps as f64 + slope * (x - b.size_bytes) as f64
}

#[test]
fn sizes_above_extrapolate_above_lie_on_the_line_and_match_their_full_runs() {
    let full_text = tree("2G", "");
    let extrapolated_text = tree("2G", "extrapolate_above = \"1G\"\n");
    let (full, full_links) = study_links(&parse(&full_text).unwrap());
    let (lined, lined_links) = study_links(&parse(&extrapolated_text).unwrap());
    assert_eq!(full.len(), 3);
    assert_eq!(lined.len(), 3);
    // The bases are simulated as they would be anyway.
    assert_eq!(full[..2], lined[..2]);
    assert!(lined[..2].iter().all(|r| r.extrapolated.is_none()));
    let row = &lined[2];
    let e = row
        .extrapolated
        .as_deref()
        .expect("2 GiB is above extrapolate_above");
    assert_eq!(
        (e.low_bytes, e.low_ps, e.high_bytes, e.high_ps),
        (1 << 29, lined[0].time_ps, 1 << 30, lined[1].time_ps)
    );
    assert_eq!(row.size_bytes, 1 << 31);
    assert_eq!(
        row.wrong, None,
        "results are not checked at an extrapolated size"
    );
    let line = on_line(&lined[0], &lined[1], 1 << 31);
    assert!(
        (row.time_ps as f64 - line).abs() <= 0.5,
        "{row:?} vs {line}"
    );
    assert_eq!(row.nccl, full[2].nccl);
    assert_eq!(row.model_ps, full[2].model_ps);
    // The steady state: within a millionth of the full simulation here
    // (24 ps of 11 ms when written).
    let error = (row.time_ps as f64 - full[2].time_ps as f64).abs() / full[2].time_ps as f64;
    assert!(
        error < 1e-6,
        "{} vs {}: {error}",
        row.time_ps,
        full[2].time_ps
    );
    assert!((row.busbw_gb_per_s - full[2].busbw_gb_per_s).abs() < 1e-3);
    // The link counters are carried along their own lines: the bytes
    // grow with the size exactly, so they equal the full run's.
    let bytes =
        |links: &[Vec<engine::network::LinkUsage>], i: usize| sum_links(&links[i..=i], |u| u.bytes);
    assert_eq!(bytes(&lined_links, 2), bytes(&full_links, 2));
}

#[test]
fn bases_that_are_not_listed_sizes_are_simulated_on_the_side() {
    let listed = rows(&parse(&tree("2G", "extrapolate_above = \"1G\"\n")).unwrap());
    // Only 2 GiB asked for: its bases run unlisted, the row is the same.
    let alone = rows(
        &parse(
            &tree("2G", "extrapolate_above = \"1G\"\n")
                .replace("min_bytes = \"512M\"", "min_bytes = \"2G\""),
        )
        .unwrap(),
    );
    assert_eq!(alone.len(), 1);
    assert_eq!(alone[0], listed[2]);
}

#[test]
fn what_cannot_be_extrapolated_is_refused_at_the_value() {
    // Nothing above it.
    let err = parse(&tree("1G", "extrapolate_above = \"1G\"\n")).unwrap_err();
    assert!(
        err.contains("f.toml:17:21")
            && err.contains("no size of this entry is above it (the largest is 1073741824 B)"),
        "{err}"
    );
    // No two sizes below it.
    let err = parse(&tree("1G", "extrapolate_above = 4\n")).unwrap_err();
    assert!(
        err.contains("leaves no two sizes to draw the line through")
            && err.contains("use at least 8"),
        "{err}"
    );
    // NCCL changes protocol between the bases and the sizes above: named,
    // with the doubling that keeps one plan.
    let err = parse(&tree("4G", "extrapolate_above = \"512M\"\n")).unwrap_err();
    assert!(
        err.contains("1073741824 B runs nccl_tree Simple on 16 channels (unit 524288 B), but the base 268435456 B runs nccl_tree LL128")
            && err.contains("extrapolate_above = 1073741824 keeps one plan"),
        "{err}"
    );
    // Faults act at fixed times (unfolded: a fold refuses rank faults).
    let faulty = format!(
        "{}[[fault]]\nkind = \"straggler\"\nrank = 1\ndelay_us = 5\n",
        tree("2G", "extrapolate_above = \"1G\"\n").replace("symmetry = \"fold\"\n", "")
    );
    let err = parse(&faulty).unwrap_err();
    assert!(
        err.contains("extrapolate_above needs a run without [[fault]]"),
        "{err}"
    );
}

#[test]
fn sim_run_marks_extrapolated_rows_in_the_table_and_the_csv() {
    let dir = temp_dir("extrapolation_cli");
    let path = dir.join("tree.toml");
    std::fs::write(&path, tree("2G", "extrapolate_above = \"1G\"\n")).unwrap();
    let csv = dir.join("out.csv");
    let out = sim(&[
        "run",
        path.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("sizes above 1073741824 B extrapolated from 536870912 B and 1073741824 B")
            && stdout.contains(
                "#   extrapolated (steady state): on the line through the runs simulated at 536870912 B"
            ),
        "{stdout}"
    );
    assert_eq!(stdout.matches("#   extrapolated").count(), 1, "{stdout}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].ends_with(",extrapolated_from"), "{text}");
    assert!(
        lines[1].ends_with(",16,") && lines[2].ends_with(",16,"),
        "{text}"
    );
    assert!(lines[3].ends_with(",16,536870912;1073741824"), "{text}");
}

#[test]
fn a_base_that_does_not_fold_is_refused_at_extrapolate_above() {
    // T/2 = 536870944 B is 134217736 elements: not 16 equal channel
    // blocks; the listed sizes (512 MiB, 1 GiB, 2 GiB) all fold.
    let err = parse(&tree("2G", "extrapolate_above = 1073741888\n")).unwrap_err();
    assert!(
        err.contains("f.toml:17:21") && err.contains("536870944 B"),
        "{err}"
    );
}
