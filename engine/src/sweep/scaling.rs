//! The scaling columns, computed from the table's text alone so that a
//! full run and a merge of shards share this code and give the same bytes.
//!
//! The rank-count axis is `nodes` if the sweep has it, else `world_size`.
//! A row's baseline is the row of the same collective entry and size (the
//! k-th row of that collective and size within its point) at the point
//! with the same values on every other axis and the smallest value on the
//! rank-count axis (where the size rounds with the rank count, as
//! alltoall's does, the row at the same position among the rows of that
//! collective, if both points have as many). With aggregate throughput
//! `ranks x size_bytes / time`:
//!
//! ```text
//! speedup    = throughput / throughput of the baseline
//! efficiency = speedup / (ranks / ranks of the baseline)
//! ```
//!
//! so a collective that keeps its time per call as ranks double has
//! efficiency 1. Both are empty without a rank-count axis, or where this
//! row or its baseline has no time (a failed point).

use std::collections::BTreeMap;

use super::table::Table;

/// Fills `speedup` and `efficiency` of every row of `table` (six decimals).
pub fn fill(table: &mut Table) {
    let (Some(status), Some(speedup), Some(efficiency)) = (
        table.column("status"),
        table.column("speedup"),
        table.column("efficiency"),
    ) else {
        return;
    };
    for row in &mut table.rows {
        row[speedup].clear();
        row[efficiency].clear();
    }
    let axes = 1..status;
    let Some(rank_axis) = table.rank_axis() else {
        return;
    };
    let results = scaled(table, axes, rank_axis);
    for (i, s, e) in results {
        table.rows[i][speedup] = format!("{s:.6}");
        table.rows[i][efficiency] = format!("{e:.6}");
    }
}

/// `(row, speedup, efficiency)` for every row that has both.
fn scaled(table: &Table, axes: std::ops::Range<usize>, rank_axis: usize) -> Vec<(usize, f64, f64)> {
    let col = |name: &str| {
        table
            .column(name)
            .expect("a sweep table has the run columns")
    };
    let (collective, size, ranks, time) = (
        col("collective"),
        col("size_bytes"),
        col("ranks"),
        col("time_ps"),
    );
    let others = |row: &[String]| -> Vec<String> {
        axes.clone()
            .filter(|&c| c != rank_axis)
            .map(|c| row[c].clone())
            .collect()
    };
    // The baseline point of each group: the smallest rank-count value.
    let mut baseline: BTreeMap<Vec<String>, (u64, &str)> = BTreeMap::new();
    for row in &table.rows {
        let Ok(value) = row[rank_axis].parse::<u64>() else {
            continue;
        };
        let entry = baseline.entry(others(row)).or_insert((value, &row[0]));
        if value < entry.0 {
            *entry = (value, &row[0]);
        }
    }
    // Each row's identity within its point: collective, size, and how
    // many rows of that collective and size came before it.
    let mut seen: BTreeMap<(&str, &str, &str), usize> = BTreeMap::new();
    let keys: Vec<(&str, &str, &str, usize)> = table
        .rows
        .iter()
        .map(|row| {
            let k = (
                row[0].as_str(),
                row[collective].as_str(),
                row[size].as_str(),
            );
            let n = seen.entry(k).or_insert(0);
            *n += 1;
            (k.0, k.1, k.2, *n - 1)
        })
        .collect();
    let index: BTreeMap<_, usize> = keys.iter().enumerate().map(|(i, k)| (*k, i)).collect();
    // Each row's position among the rows of its collective within its
    // point, and how many such rows each point has: where a size rounds
    // differently with the rank count (alltoall sizes are whole elements
    // per rank), the row at the same position of a point with as many rows
    // of that collective ran the same entry and requested size.
    let mut per_collective: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    let positions: Vec<usize> = table
        .rows
        .iter()
        .map(|row| {
            let n = per_collective
                .entry((row[0].as_str(), row[collective].as_str()))
                .or_insert(0);
            *n += 1;
            *n - 1
        })
        .collect();
    let by_position: BTreeMap<(&str, &str, usize), usize> = table
        .rows
        .iter()
        .zip(&positions)
        .enumerate()
        .map(|(i, (row, &n))| ((row[0].as_str(), row[collective].as_str(), n), i))
        .collect();
    let throughput = |row: &[String]| -> Option<(f64, f64)> {
        let r: u64 = row[ranks].parse().ok()?;
        let s: u64 = row[size].parse().ok()?;
        let t: u64 = row[time].parse().ok()?;
        (r > 0 && s > 0 && t > 0).then(|| (r as f64, r as f64 * s as f64 / t as f64))
    };
    let mut out = Vec::new();
    for (i, row) in table.rows.iter().enumerate() {
        let Some(&(_, base_point)) = baseline.get(&others(row)) else {
            continue;
        };
        let (point, c, s, k) = keys[i];
        let same_shape = per_collective.get(&(point, c)) == per_collective.get(&(base_point, c));
        let found = index
            .get(&(base_point, c, s, k))
            .or_else(|| same_shape.then(|| by_position.get(&(base_point, c, positions[i])))?);
        let Some(&j) = found else {
            continue;
        };
        if let (Some((r, x)), Some((r0, x0))) = (throughput(row), throughput(&table.rows[j])) {
            let speedup = x / x0;
            out.push((i, speedup, speedup / (r / r0)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::table::SCALING_COLUMNS;

    /// A table with columns point, world_size, seed, status, collective,
    /// size_bytes, ranks, time_ps, speedup, efficiency.
    fn table(rows: &[[&str; 8]]) -> Table {
        let header = [
            "point",
            "world_size",
            "seed",
            "status",
            "collective",
            "size_bytes",
            "ranks",
            "time_ps",
        ];
        Table {
            header: header
                .iter()
                .chain(SCALING_COLUMNS.iter())
                .map(|s| s.to_string())
                .collect(),
            rows: rows
                .iter()
                .map(|r| {
                    r.iter()
                        .map(|s| s.to_string())
                        .chain([String::new(), String::new()])
                        .collect()
                })
                .collect(),
        }
    }

    #[test]
    fn without_a_rank_count_axis_the_columns_stay_empty() {
        let mut t = table(&[
            ["0", "2", "1", "ok", "allreduce", "64", "2", "100"],
            ["1", "2", "9", "ok", "allreduce", "64", "2", "50"],
        ]);
        t.header[1] = "bytes".to_string();
        t.rows[0][8] = "stale".to_string();
        fill(&mut t);
        assert!(t.rows.iter().all(|r| r[8].is_empty() && r[9].is_empty()));
    }

    #[test]
    fn rows_scale_against_the_smallest_rank_count_of_their_group() {
        let mut t = table(&[
            ["0", "2", "1", "ok", "allreduce", "64", "2", "100"],
            ["1", "2", "9", "ok", "allreduce", "64", "2", "50"],
            ["2", "4", "1", "ok", "allreduce", "64", "4", "200"],
            ["3", "4", "9", "deadlock", "allreduce", "64", "", ""],
        ]);
        fill(&mut t);
        let cols: Vec<(&str, &str)> = t
            .rows
            .iter()
            .map(|r| (r[8].as_str(), r[9].as_str()))
            .collect();
        // Point 2: twice the ranks, twice the time: throughput 4*64/200
        // against 2*64/100, speedup 1, efficiency 0.5.
        assert_eq!(
            cols,
            [
                ("1.000000", "1.000000"),
                ("1.000000", "1.000000"),
                ("1.000000", "0.500000"),
                ("", "")
            ]
        );
    }

    #[test]
    fn rows_whose_size_rounds_with_the_rank_count_still_have_a_baseline() {
        // Alltoall sizes are whole elements per rank: 1 MiB is 1048572 B
        // on 3 ranks. Same entry, same requested size: compared all the same.
        let mut t = table(&[
            ["0", "2", "1", "ok", "alltoall", "64", "2", "100"],
            ["0", "2", "1", "ok", "alltoall", "1048576", "2", "1000"],
            ["1", "3", "1", "ok", "alltoall", "60", "3", "100"],
            ["1", "3", "1", "ok", "alltoall", "1048572", "3", "1000"],
            // A point with fewer rows of the collective is not guessed at.
            ["2", "6", "1", "ok", "alltoall", "1048560", "6", "1000"],
        ]);
        fill(&mut t);
        let speedups: Vec<&str> = t.rows.iter().map(|r| r[8].as_str()).collect();
        let x = |r: f64, s: f64| r * s / 1000.0;
        let expected = format!("{:.6}", x(3.0, 1048572.0) / x(2.0, 1048576.0));
        assert_eq!(speedups[3], expected);
        assert_eq!(speedups[2], format!("{:.6}", (3.0 * 60.0) / (2.0 * 64.0)));
        assert_eq!(speedups[4], "");
    }
}
