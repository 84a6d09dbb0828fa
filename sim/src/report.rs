//! Results as people and programs read them: the nccl-tests table on
//! stdout and the same rows as CSV.
//!
//! Columns follow nccl-tests: size (bytes), count (elements), type, redop,
//! time (us), algbw and busbw (GB/s, 1 GB = 1e9 bytes) and #wrong. algbw is
//! `size / time`; busbw is algbw times the collective's bus factor (for
//! allreduce `2(N-1)/N`). Every number is formatted with a fixed number of
//! decimals, so the output is byte-identical for the same scenario and seed.

use std::io::{self, Write};

use crate::study::Row;

/// The table's column headers, two lines as nccl-tests prints them.
pub fn table_header() -> String {
    format!(
        "#{:>11} {:>13} {:>9} {:>6} {:>10} {:>9} {:>9} {:>7}\n#{:>11} {:>13} {:>9} {:>6} {:>10} {:>9} {:>9} {:>7}\n",
        "size",
        "count",
        "type",
        "redop",
        "time",
        "algbw",
        "busbw",
        "#wrong",
        "(B)",
        "(elements)",
        "",
        "",
        "(us)",
        "(GB/s)",
        "(GB/s)",
        ""
    )
}

/// One table line.
pub fn table_row(row: &Row) -> String {
    format!(
        "{:>12} {:>13} {:>9} {:>6} {:>10.2} {:>9.2} {:>9.2} {:>7}\n",
        row.size_bytes,
        row.count,
        row.dtype,
        row.redop,
        row.time_ps as f64 / 1e6,
        row.algbw_gb_per_s,
        row.busbw_gb_per_s,
        wrong_text(row)
    )
}

fn wrong_text(row: &Row) -> String {
    row.wrong
        .map_or_else(|| "N/A".to_string(), |w| w.to_string())
}

/// The CSV column names, in order.
pub const CSV_HEADER: [&str; 10] = [
    "collective",
    "algorithm",
    "size_bytes",
    "count",
    "type",
    "redop",
    "time_us",
    "algbw_gb_per_s",
    "busbw_gb_per_s",
    "wrong",
];

/// Writes `rows` as CSV with a header line. Times keep picosecond
/// precision (six decimals of a microsecond).
pub fn write_csv(out: impl Write, rows: &[Row]) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(CSV_HEADER)?;
    for r in rows {
        w.write_record([
            r.collective.to_string(),
            r.algorithm.to_string(),
            r.size_bytes.to_string(),
            r.count.to_string(),
            r.dtype.to_string(),
            r.redop.to_string(),
            format!("{:.6}", r.time_ps as f64 / 1e6),
            format!("{:.6}", r.algbw_gb_per_s),
            format!("{:.6}", r.busbw_gb_per_s),
            wrong_text(r),
        ])?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> Row {
        Row {
            collective: "allreduce",
            algorithm: "ring",
            size_bytes: 1024,
            count: 256,
            dtype: "float",
            redop: "sum",
            time_ps: 12_345_678,
            algbw_gb_per_s: 0.0829,
            busbw_gb_per_s: 0.146,
            wrong: Some(0),
        }
    }

    #[test]
    fn table_and_csv_have_fixed_formats() {
        assert_eq!(
            table_row(&row()),
            "        1024           256     float    sum      12.35      0.08      0.15       0\n"
        );
        let mut out = Vec::new();
        write_csv(&mut out, &[row()]).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "collective,algorithm,size_bytes,count,type,redop,time_us,algbw_gb_per_s,busbw_gb_per_s,wrong\n\
             allreduce,ring,1024,256,float,sum,12.345678,0.082900,0.146000,0\n"
        );
        assert_eq!(table_header().lines().count(), 2);
    }
}
