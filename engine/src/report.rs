//! Results as people and programs read them: the nccl-tests table on
//! stdout and the same rows as CSV.
//!
//! Columns follow nccl-tests: size (bytes), count (elements), type, redop,
//! root, time (us), algbw and busbw (GB/s, 1 GB = 1e9 bytes) and #wrong,
//! then the algorithm used (marked `*` when the tuner chose it; an NCCL
//! algorithm also shows its protocol and channels, `nccl_ring* LL128 24ch`).
//! algbw is
//! `size / time`; busbw is algbw times the collective's bus factor
//! ([`algorithms::Collective::busbw_factor`]). Every number is formatted
//! with a fixed number of decimals, so the output is byte-identical for the
//! same scenario and seed.

use std::io::{self, Write};

use algorithms::Collective;
use algorithms::nccl::{NcclAlgorithm, Protocol};

use crate::nccl::NcclSystem;
use crate::study::Row;

/// The table's column headers, two lines as nccl-tests prints them.
pub fn table_header() -> String {
    format!(
        "#{:>11} {:>13} {:>9} {:>6} {:>5} {:>10} {:>9} {:>9} {:>7}  {}\n#{:>11} {:>13} {:>9} {:>6} {:>5} {:>10} {:>9} {:>9} {:>7}  {}\n",
        "size",
        "count",
        "type",
        "redop",
        "root",
        "time",
        "algbw",
        "busbw",
        "#wrong",
        "algorithm",
        "(B)",
        "(elements)",
        "",
        "",
        "",
        "(us)",
        "(GB/s)",
        "(GB/s)",
        "",
        "(* tuned)"
    )
}

/// One table line.
pub fn table_row(row: &Row) -> String {
    format!(
        "{:>12} {:>13} {:>9} {:>6} {:>5} {:>10.2} {:>9.2} {:>9.2} {:>7}  {}{}{}\n",
        row.size_bytes,
        row.count,
        row.dtype,
        row.redop,
        root_text(row),
        row.time_ps as f64 / 1e6,
        row.algbw_gb_per_s,
        row.busbw_gb_per_s,
        wrong_text(row),
        row.algorithm,
        if row.tuned { "*" } else { "" },
        row.nccl.map_or_else(String::new, |n| {
            let heads = if n.heads > 0 {
                format!(" {}h", n.heads)
            } else {
                String::new()
            };
            format!(" {} {}ch{heads}", n.protocol, n.channels)
        })
    )
}

/// The header and one line per row: the table `sim run` prints for one
/// collective.
pub fn table(rows: &[Row]) -> String {
    rows.iter()
        .map(table_row)
        .fold(table_header(), |t, r| t + &r)
}

fn wrong_text(row: &Row) -> String {
    row.wrong
        .map_or_else(|| "N/A".to_string(), |w| w.to_string())
}

fn root_text(row: &Row) -> String {
    row.root.map_or_else(|| "-1".to_string(), |r| r.to_string())
}

/// The CSV column names, in order.
pub const CSV_HEADER: [&str; 19] = [
    "collective",
    "algorithm",
    "tuned",
    "chunk_bytes",
    "ranks",
    "size_bytes",
    "count",
    "type",
    "redop",
    "root",
    "time_us",
    "algbw_gb_per_s",
    "busbw_gb_per_s",
    "wrong",
    "time_ps",
    "model_time_us",
    "protocol",
    "channels",
    "extrapolated_from",
];

/// Writes `rows` as CSV with a header line. Times keep picosecond
/// precision (six decimals of a microsecond, and `time_ps` exactly);
/// `model_time_us` is the algorithm's closed-form time on the tuner's
/// link (empty where its formula does not apply), or for an NCCL
/// algorithm NCCL's own predicted time; `protocol` and `channels` are an
/// NCCL algorithm's (empty otherwise).
pub fn write_csv(out: impl Write, rows: &[Row]) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(CSV_HEADER)?;
    for r in rows {
        w.write_record(csv_record(r))?;
    }
    w.flush()
}

/// One row's CSV fields, in the order of [`CSV_HEADER`] (`sim sweep`
/// writes the same fields after its own).
pub fn csv_record(r: &Row) -> [String; CSV_HEADER.len()] {
    [
        r.collective.to_string(),
        r.algorithm.to_string(),
        r.tuned.to_string(),
        r.chunk_bytes.to_string(),
        r.ranks.to_string(),
        r.size_bytes.to_string(),
        r.count.to_string(),
        r.dtype.to_string(),
        r.redop.to_string(),
        root_text(r),
        format!("{:.6}", r.time_ps as f64 / 1e6),
        format!("{:.6}", r.algbw_gb_per_s),
        format!("{:.6}", r.busbw_gb_per_s),
        wrong_text(r),
        r.time_ps.to_string(),
        r.model_ps
            .map_or_else(String::new, |ps| format!("{:.6}", ps as f64 / 1e6)),
        r.nccl.map_or_else(String::new, |n| n.protocol.to_string()),
        r.nccl.map_or_else(String::new, |n| n.channels.to_string()),
        r.extrapolated
            .as_ref()
            .map_or_else(String::new, |e| format!("{};{}", e.low_bytes, e.high_bytes)),
    ]
}

/// A comment line under a row drawn on the line through two simulated
/// sizes (`extrapolate_above`) saying which; `None` for a simulated row.
pub fn extrapolation_line(row: &Row) -> Option<String> {
    let e = row.extrapolated.as_ref()?;
    Some(format!(
        "#   extrapolated (steady state): on the line through the runs simulated at {} B \
         ({:.2} us) and {} B ({:.2} us), the link counters likewise\n",
        e.low_bytes,
        e.low_ps as f64 / 1e6,
        e.high_bytes,
        e.high_ps as f64 / 1e6
    ))
}

/// A comment line with NCCL's own predicted time of every algorithm and
/// protocol it would consider for `row` (fastest first, `*` on the one that
/// ran), for NCCL versions that model more than Ring and Tree; `None`
/// otherwise, and for rows NCCL did not choose.
pub fn nccl_table_line(row: &Row, system: &NcclSystem) -> Option<String> {
    let ran = row.nccl?;
    system.constants().newer?;
    let collective: Collective = row.collective.parse().ok()?;
    let table = system.table(collective, row.size_bytes);
    let mut cells: Vec<(f64, NcclAlgorithm, Protocol)> = Vec::new();
    for a in NcclAlgorithm::ALL {
        for p in Protocol::ALL {
            if let Some(t) = table[crate::nccl::model::a_index(a)][crate::nccl::model::p_index(p)] {
                cells.push((t, a, p));
            }
        }
    }
    cells.sort_by(|x, y| x.0.total_cmp(&y.0));
    let list: Vec<String> = cells
        .iter()
        .map(|&(t, a, p)| {
            let mark = if a == ran.algorithm && p == ran.protocol {
                "*"
            } else {
                ""
            };
            format!("{a}/{p} {t:.1}{mark}")
        })
        .collect();
    Some(format!(
        "#   NCCL {} predicts (us): {}\n",
        system.version,
        list.join(", ")
    ))
}

/// A comment line comparing a row with the same point without link faults.
pub fn comparison_line(row: &Row, healthy: &Row) -> String {
    let ratio = row.time_ps as f64 / healthy.time_ps.max(1) as f64;
    format!(
        "#   without link faults: {:.2} us, busbw {:.2} GB/s; with them {:.2}x the time\n",
        healthy.time_ps as f64 / 1e6,
        healthy.busbw_gb_per_s,
        ratio
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> Row {
        Row {
            collective: "allreduce",
            algorithm: "ring".into(),
            tuned: true,
            chunk_bytes: 524288,
            ranks: 8,
            size_bytes: 1024,
            count: 256,
            dtype: "float",
            redop: "sum",
            root: None,
            time_ps: 12_345_678,
            algbw_gb_per_s: 0.0829,
            busbw_gb_per_s: 0.146,
            wrong: Some(0),
            model_ps: Some(11_000_000),
            nccl: None,
            extrapolated: None,
        }
    }

    #[test]
    fn table_and_csv_have_fixed_formats() {
        assert_eq!(
            table_row(&row()),
            "        1024           256     float    sum    -1      12.35      0.08      0.15       0  ring*\n"
        );
        let mut out = Vec::new();
        write_csv(&mut out, &[row()]).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "collective,algorithm,tuned,chunk_bytes,ranks,size_bytes,count,type,redop,root,time_us,algbw_gb_per_s,busbw_gb_per_s,wrong,time_ps,model_time_us,protocol,channels,extrapolated_from\n\
             allreduce,ring,true,524288,8,1024,256,float,sum,-1,12.345678,0.082900,0.146000,0,12345678,11.000000,,,\n"
        );
        assert_eq!(table_header().lines().count(), 2);
    }
}
