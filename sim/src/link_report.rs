//! Per-link results of topology models: the `--links-csv` file and the
//! busiest-links summary printed under each table.
//!
//! One CSV row per link direction per study point (collective entry and
//! size), link directions in id order; a point that failed (deadlock,
//! wrong sizes) still gets its rows, counted up to the failure. `utilisation` is the link's average
//! throughput over the whole run of that point (all warm-up and timed
//! calls) as a fraction of its bandwidth: `bytes / (bandwidth * run time)`.
//! `busy_us` is the time it spent transmitting (packet model) or carrying
//! at least one flow (flow model). `max_queue` is the largest egress
//! backlog in bytes (packet model) or the most flows sharing it (flow
//! model); `units` counts packets or flows.

use std::io::{self, Write};

use topologies::{LinkId, Topology};

use crate::network::LinkUsage;
use crate::study::{Detail, Point};

/// Column names of the links CSV.
pub const LINKS_CSV_HEADER: [&str; 16] = [
    "section",
    "collective",
    "algorithm",
    "ranks",
    "size_bytes",
    "link_id",
    "from",
    "to",
    "kind",
    "bandwidth_gb_per_s",
    "bytes",
    "units",
    "busy_us",
    "utilisation",
    "max_queue",
    "run_us",
];

/// Writes link rows as the study produces them.
pub struct LinkCsv<W: Write> {
    writer: csv::Writer<W>,
}

impl<W: Write> LinkCsv<W> {
    /// A links CSV on `out`, header written.
    pub fn new(out: W) -> io::Result<LinkCsv<W>> {
        let mut writer = csv::Writer::from_writer(out);
        writer.write_record(LINKS_CSV_HEADER)?;
        Ok(LinkCsv { writer })
    }

    /// The rows of one study point (nothing for ideal links).
    pub fn write_point(
        &mut self,
        section: usize,
        point: &Point,
        detail: &Detail,
        topology: &Topology,
    ) -> io::Result<()> {
        let Some(usage) = &detail.link_usage else {
            return Ok(());
        };
        let run_ps = detail.end_time.as_ps();
        for link in topology.link_ids() {
            let u = usage[link.index()];
            let spec = topology.link(link);
            let (from, to) = topology.ends(link);
            self.writer.write_record([
                section.to_string(),
                point.collective.to_string(),
                detail.algorithm.to_string(),
                detail.ranks.to_string(),
                point.size_bytes.to_string(),
                link.index().to_string(),
                topology.vertex(from).name.clone(),
                topology.vertex(to).name.clone(),
                spec.kind.to_string(),
                format!("{:.3}", spec.bandwidth_bytes_per_s / 1e9),
                u.bytes.to_string(),
                u.units.to_string(),
                format!("{:.6}", u.busy_ps as f64 / 1e6),
                format!("{:.6}", utilisation(&u, spec.bandwidth_bytes_per_s, run_ps)),
                u.max_queue.to_string(),
                format!("{:.6}", run_ps as f64 / 1e6),
            ])?;
        }
        self.writer.flush()
    }
}

/// Average throughput over `run_ps` as a fraction of `bandwidth`.
pub fn utilisation(u: &LinkUsage, bandwidth_bytes_per_s: f64, run_ps: u64) -> f64 {
    if run_ps == 0 {
        return 0.0;
    }
    u.bytes as f64 / (bandwidth_bytes_per_s * run_ps as f64 / 1e12)
}

/// The `n` link directions with the highest utilisation in `detail`
/// (ties broken by link id), with that utilisation.
pub fn busiest(detail: &Detail, topology: &Topology, n: usize) -> Vec<(LinkId, f64)> {
    let Some(usage) = &detail.link_usage else {
        return Vec::new();
    };
    let run_ps = detail.end_time.as_ps();
    let mut links: Vec<(LinkId, f64)> = topology
        .link_ids()
        .filter(|l| usage[l.index()].bytes > 0)
        .map(|l| {
            let bw = topology.link(l).bandwidth_bytes_per_s;
            (l, utilisation(&usage[l.index()], bw, run_ps))
        })
        .collect();
    links.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    links.truncate(n);
    links
}
