//! Real rows in the simulator's formats: [`engine::report`]'s table and CSV,
//! so that `sim bench` and `sim run --fabric` print exactly the columns of
//! `sim run`.

use realnet::bench::BenchRow;

use engine::study::Row;

/// The simulator's row for a real measurement (no closed-form time: the
/// CSV's `model_time_us` is empty).
pub fn to_row(r: &BenchRow) -> Row {
    Row {
        collective: r.collective.name(),
        algorithm: r.algorithm.name().to_string(),
        tuned: r.tuned,
        chunk_bytes: r.chunk_bytes,
        ranks: r.ranks,
        size_bytes: r.size_bytes,
        count: r.count,
        dtype: r.dtype.name(),
        redop: r.op.map_or("none", |op| op.name()),
        root: r.root,
        time_ps: r.time_ps,
        algbw_gb_per_s: r.algbw_gb_per_s,
        busbw_gb_per_s: r.busbw_gb_per_s,
        wrong: r.wrong,
        model_ps: None,
        nccl: None,
        extrapolated: None,
    }
}

/// [`to_row`] with the median call's time instead of the mean
/// ([`BenchRow::median_time_ps`]) and the bandwidths of that time: what
/// `sim validate` compares with the simulator, whose calibration is fitted
/// to medians too.
pub fn to_median_row(r: &BenchRow) -> Row {
    let time_ps = r.median_time_ps;
    let algbw = if time_ps == 0 {
        0.0
    } else {
        r.size_bytes as f64 / (time_ps as f64 / 1e12) / 1e9
    };
    Row {
        time_ps,
        algbw_gb_per_s: algbw,
        busbw_gb_per_s: algbw * r.collective.busbw_factor(r.ranks),
        ..to_row(r)
    }
}

/// The closing lines nccl-tests prints: wrong values and the average bus
/// bandwidth over the rows.
pub fn footer(rows: &[Row]) -> String {
    let wrong: u64 = rows.iter().filter_map(|r| r.wrong).sum();
    let verdict = if wrong == 0 { "OK" } else { "FAILED" };
    let avg = if rows.is_empty() {
        0.0
    } else {
        rows.iter().map(|r| r.busbw_gb_per_s).sum::<f64>() / rows.len() as f64
    };
    format!("# Out of bounds values : {wrong} {verdict}\n# Avg bus bandwidth    : {avg:.3}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use algorithms::{Collective, DType, ReduceOp, catalogue_algorithm};

    #[test]
    fn a_real_row_prints_in_the_simulators_columns() {
        let real = BenchRow {
            collective: Collective::Allreduce,
            algorithm: catalogue_algorithm(Collective::Allreduce, "ring"),
            tuned: false,
            chunk_bytes: 524288,
            ranks: 2,
            size_bytes: 1024,
            count: 256,
            dtype: DType::F32,
            op: Some(ReduceOp::Sum),
            root: None,
            time_ps: 12_345_678,
            rank_time_ps: vec![12_345_678, 1],
            median_time_ps: 1_024_000,
            algbw_gb_per_s: 0.0829,
            busbw_gb_per_s: 0.0829,
            wrong: Some(0),
        };
        let row = to_row(&real);
        assert_eq!(
            engine::report::table_row(&row),
            "        1024           256     float    sum    -1      12.35      0.08      0.08       0  ring\n"
        );
        // The median row: 1024 B in 1.024 us is 1 GB/s (2 ranks: busbw too).
        let median = to_median_row(&real);
        assert_eq!(median.time_ps, 1_024_000);
        assert!((median.algbw_gb_per_s - 1.0).abs() < 1e-12);
        assert!((median.busbw_gb_per_s - 1.0).abs() < 1e-12);
        assert_eq!(median.algorithm, row.algorithm);
        assert_eq!(
            footer(&[row]),
            "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.083\n"
        );
    }
}
