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
//! model); `units` counts packets or flows. The packet model also counts,
//! per link direction, packets `lost` on the wire, `corrupted` (dropped by
//! the receiver's CRC check), `overflow_drops` (a full buffer behind a
//! lossy link or past the PFC headroom), `retransmitted` packets carried,
//! PFC `pause_frames` the link's receiver sent and `paused_us` its sender
//! spent paused.

use std::io::{self, Write};

use topologies::{LinkId, Topology};

use crate::network::LinkUsage;
use crate::study::{Detail, Point};

/// Column names of the links CSV.
pub const LINKS_CSV_HEADER: [&str; 22] = [
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
    "lost",
    "corrupted",
    "overflow_drops",
    "retransmitted",
    "pause_frames",
    "paused_us",
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
            let mut row = link_columns(section, point, detail, topology, link);
            row.extend([
                u.bytes.to_string(),
                u.units.to_string(),
                format!("{:.6}", u.busy_ps as f64 / 1e6),
                format!("{:.6}", utilisation(&u, spec.bandwidth_bytes_per_s, run_ps)),
                u.max_queue.to_string(),
                format!("{:.6}", run_ps as f64 / 1e6),
                u.lost.to_string(),
                u.corrupted.to_string(),
                u.overflow_drops.to_string(),
                u.retransmitted.to_string(),
                u.pause_frames.to_string(),
                format!("{:.6}", u.paused_ps as f64 / 1e6),
            ]);
            self.writer.write_record(&row)?;
        }
        self.writer.flush()
    }
}

/// The columns both link CSVs start with: the study point (section,
/// collective, algorithm, ranks, size) and the link (id, ends, kind,
/// bandwidth).
fn link_columns(
    section: usize,
    point: &Point,
    detail: &Detail,
    topology: &Topology,
    link: LinkId,
) -> Vec<String> {
    let spec = topology.link(link);
    let (from, to) = topology.ends(link);
    vec![
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
    ]
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

/// The links of `detail` that lost, dropped, retransmitted or were paused,
/// most troubled first (by packets lost or dropped, then retransmitted,
/// then time paused by PFC, then pause frames; ties by link id), at most
/// `n`.
pub fn troubled(detail: &Detail, topology: &Topology, n: usize) -> Vec<(LinkId, LinkUsage)> {
    let Some(usage) = &detail.link_usage else {
        return Vec::new();
    };
    let mut links: Vec<(LinkId, LinkUsage)> = topology
        .link_ids()
        .map(|l| (l, usage[l.index()]))
        .filter(|(_, u)| dropped(u) + u.retransmitted + u.pause_frames > 0)
        .collect();
    links.sort_by_key(|(l, u)| {
        (
            std::cmp::Reverse((dropped(u), u.retransmitted, u.paused_ps, u.pause_frames)),
            *l,
        )
    });
    links.truncate(n);
    links
}

/// Packets that did not arrive over a link, for any reason.
pub fn dropped(u: &LinkUsage) -> u64 {
    u.lost + u.corrupted + u.overflow_drops
}

/// One link's troubles in words: `leaf0->spine0: lost 3, retransmitted
/// 40, 2 PFC pauses (paused 1.2 us)`, naming only what happened.
pub fn describe_troubles(topology: &Topology, link: LinkId, u: &LinkUsage) -> String {
    let mut parts = Vec::new();
    for (n, what) in [
        (u.lost, "lost"),
        (u.corrupted, "corrupted"),
        (u.overflow_drops, "dropped (overflow)"),
        (u.retransmitted, "retransmitted"),
    ] {
        if n > 0 {
            parts.push(format!("{what} {n}"));
        }
    }
    if u.pause_frames > 0 {
        parts.push(format!(
            "{} PFC pause(s) (paused {})",
            u.pause_frames,
            algorithms::Time(u.paused_ps)
        ));
    }
    format!("{}: {}", topology.link_name(link), parts.join(", "))
}

/// Column names of the links timeline CSV.
pub const LINKS_TIMELINE_HEADER: [&str; 14] = [
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
    "bin_start_us",
    "bin_us",
    "bytes",
    "utilisation",
];

/// Writes `--links-timeline` rows as the study produces them: per study
/// point, per link direction with traffic, per time bin, the bytes it
/// carried and that as a fraction of what its bandwidth could carry in
/// the bin.
pub struct LinkTimelineCsv<W: Write> {
    writer: csv::Writer<W>,
}

impl<W: Write> LinkTimelineCsv<W> {
    /// A timeline CSV on `out`, header written.
    pub fn new(out: W) -> io::Result<LinkTimelineCsv<W>> {
        let mut writer = csv::Writer::from_writer(out);
        writer.write_record(LINKS_TIMELINE_HEADER)?;
        Ok(LinkTimelineCsv { writer })
    }

    /// The rows of one study point (nothing without a timeline); returns
    /// whether the point's timeline was truncated.
    pub fn write_point(
        &mut self,
        section: usize,
        point: &Point,
        detail: &Detail,
        topology: &Topology,
    ) -> io::Result<bool> {
        let Some(timeline) = &detail.link_timeline else {
            return Ok(false);
        };
        let bin_ps = timeline.bin_ps();
        for bin in timeline.bins() {
            let spec = topology.link(bin.link);
            let capacity = spec.bandwidth_bytes_per_s * bin_ps as f64 / 1e12;
            let mut row = link_columns(section, point, detail, topology, bin.link);
            row.extend([
                format!("{:.6}", bin.start.as_ps() as f64 / 1e6),
                format!("{:.6}", bin_ps as f64 / 1e6),
                format!("{:.0}", bin.bytes),
                format!("{:.6}", bin.bytes / capacity),
            ]);
            self.writer.write_record(&row)?;
        }
        self.writer.flush()?;
        Ok(timeline.truncated)
    }
}

/// Comment lines on what went wrong in the network during a point: the
/// totals, then the three most troubled links (nothing if all was well).
pub fn trouble_lines(size_bytes: u64, detail: &Detail, topology: &Topology) -> String {
    let Some(usage) = &detail.link_usage else {
        return String::new();
    };
    let sum = |f: fn(&LinkUsage) -> u64| usage.iter().map(f).sum::<u64>();
    let (lost, retransmitted, pauses) = (
        sum(dropped),
        sum(|u| u.retransmitted),
        sum(|u| u.pause_frames),
    );
    if lost + retransmitted + pauses == 0 {
        return String::new();
    }
    let mut text = format!(
        "#   network at {size_bytes} B: {lost} packet(s) lost or dropped, {retransmitted} retransmitted \
         (counted per link crossed), {pauses} PFC pause frame(s)\n"
    );
    for (link, u) in troubled(detail, topology, 3) {
        text += &format!("#     {}\n", describe_troubles(topology, link, &u));
    }
    text
}
