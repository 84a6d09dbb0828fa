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

    /// Flushes the rows to the output.
    pub fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }

    /// The output.
    pub fn get_ref(&self) -> &W {
        self.writer.get_ref()
    }

    /// Flushes the rows and returns the output (to close or mark it).
    pub fn into_inner(self) -> io::Result<W> {
        self.writer.into_inner().map_err(|e| e.into_error())
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

/// The most rows a links timeline file holds by default (about 140 MB of
/// CSV); a run that would take the file past its cap is left out, and so
/// are the runs after it.
pub const TIMELINE_ROWS_MAX: u64 = 1 << 20;

/// Writes `--links-timeline` rows as the study produces them: per study
/// point, per link direction with traffic, per time bin, the bytes it
/// carried and that as a fraction of what its bandwidth could carry in
/// the bin. The file holds at most its cap of rows.
pub struct LinkTimelineCsv<W: Write> {
    writer: csv::Writer<W>,
    rows: u64,
    rows_max: u64,
    capped: bool,
}

/// What [`LinkTimelineCsv::write_point`] did with a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimelineWritten {
    /// The point has no timeline (ideal links, or no timeline recorded).
    Nothing,
    /// Its rows are in the file; `truncated` if the run stopped recording
    /// at [`crate::network::timeline::TIMELINE_ENTRIES_MAX`] entries.
    Written {
        /// Whether the run's own timeline was truncated.
        truncated: bool,
    },
    /// Its rows would take the file past its cap: neither they nor any
    /// later point's are written.
    OverCap,
}

/// A time bin too fine for a run: one link's bins over the run alone
/// exceed the file's cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BinTooFine {
    /// How long the run lasted, in ps.
    pub run_ps: u64,
    /// The bin, in ps.
    pub bin_ps: u64,
    /// Bins per link over the run.
    pub bins_per_link: u64,
    /// Link directions that carried traffic (at least 1).
    pub links: u64,
    /// The file's cap, in rows.
    pub rows_max: u64,
}

impl BinTooFine {
    /// The smallest bin, in ps, with which every link's bins over the run
    /// fit in the cap.
    pub fn min_bin_ps(&self) -> u64 {
        let needed = u128::from(self.run_ps) * u128::from(self.links);
        u64::try_from(needed.div_ceil(u128::from(self.rows_max.max(1)))).unwrap_or(u64::MAX)
    }
}

impl<W: Write> LinkTimelineCsv<W> {
    /// A timeline CSV on `out` holding at most [`TIMELINE_ROWS_MAX`]
    /// rows, header written.
    pub fn new(out: W) -> io::Result<LinkTimelineCsv<W>> {
        LinkTimelineCsv::with_cap(out, TIMELINE_ROWS_MAX)
    }

    /// A timeline CSV on `out` holding at most `rows_max` rows, header
    /// written.
    pub fn with_cap(out: W, rows_max: u64) -> io::Result<LinkTimelineCsv<W>> {
        let mut writer = csv::Writer::from_writer(out);
        writer.write_record(LINKS_TIMELINE_HEADER)?;
        Ok(LinkTimelineCsv {
            writer,
            rows: 0,
            rows_max,
            capped: false,
        })
    }

    /// The most rows the file holds.
    pub fn rows_max(&self) -> u64 {
        self.rows_max
    }

    /// Checks the point's bin against its run length: refused when a
    /// single link's bins over the run would exceed the file's cap (the
    /// bin is too fine for the run, whatever the traffic).
    pub fn check_bin(&self, detail: &Detail) -> Result<(), BinTooFine> {
        let Some(timeline) = &detail.link_timeline else {
            return Ok(());
        };
        let (run_ps, bin_ps) = (detail.end_time.as_ps(), timeline.bin_ps());
        let bins_per_link = run_ps.div_ceil(bin_ps);
        if bins_per_link <= self.rows_max {
            return Ok(());
        }
        Err(BinTooFine {
            run_ps,
            bin_ps,
            bins_per_link,
            links: timeline.links_used().max(1) as u64,
            rows_max: self.rows_max,
        })
    }

    /// The rows of one study point, if they fit under the cap (and no
    /// earlier point was left out).
    pub fn write_point(
        &mut self,
        section: usize,
        point: &Point,
        detail: &Detail,
        topology: &Topology,
    ) -> io::Result<TimelineWritten> {
        let Some(timeline) = &detail.link_timeline else {
            return Ok(TimelineWritten::Nothing);
        };
        let bins = timeline.bins();
        if self.capped || self.rows + bins.len() as u64 > self.rows_max {
            self.capped = true;
            return Ok(TimelineWritten::OverCap);
        }
        self.rows += bins.len() as u64;
        let bin_ps = timeline.bin_ps();
        for bin in bins {
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
        Ok(TimelineWritten::Written {
            truncated: timeline.truncated,
        })
    }

    /// Flushes the rows to the output.
    pub fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }

    /// The output.
    pub fn get_ref(&self) -> &W {
        self.writer.get_ref()
    }

    /// Flushes the rows and returns the output (to close or mark it).
    pub fn into_inner(self) -> io::Result<W> {
        self.writer.into_inner().map_err(|e| e.into_error())
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

#[cfg(test)]
mod tests {
    use algorithms::Time;
    use topologies::presets::{RingParams, ring};

    use super::*;
    use crate::network::timeline::LinkTimeline;

    /// A point of `run_ps` whose timeline in bins of `bin_ps` has traffic
    /// on `links` link directions, one bin each.
    fn detail(run_ps: u64, bin_ps: u64, links: usize) -> Detail {
        let mut timeline = LinkTimeline::new(4, bin_ps);
        for l in 0..links {
            timeline.add(l, Time(0), Time(0), 8.0);
        }
        Detail {
            algorithm: "ring".to_string(),
            ranks: 2,
            end_time: Time(run_ps),
            link_timeline: Some(timeline),
            ..Detail::default()
        }
    }

    #[test]
    fn a_bin_too_fine_for_the_run_is_refused_with_the_bin_that_fits() {
        let w = LinkTimelineCsv::with_cap(Vec::new(), 100).unwrap();
        // 1000 bins of 10 ps per link fit no cap of 100 rows.
        let err = w.check_bin(&detail(10_000, 10, 2)).unwrap_err();
        assert_eq!((err.bins_per_link, err.links, err.rows_max), (1000, 2, 100));
        // Two links' bins over 10 ns in 100 rows: bins of 200 ps.
        assert_eq!(err.min_bin_ps(), 200);
        assert!(w.check_bin(&detail(10_000, 100, 2)).is_ok());
        assert!(w.check_bin(&Detail::default()).is_ok());
    }

    #[test]
    fn the_file_stops_at_its_cap_and_leaves_later_points_out() {
        let topology = ring(&RingParams {
            gpus: 2,
            ..RingParams::default()
        })
        .unwrap();
        let point = Point {
            collective: "allreduce",
            size_bytes: 8,
        };
        let mut w = LinkTimelineCsv::with_cap(Vec::new(), 3).unwrap();
        let two = detail(100, 10, 2);
        assert_eq!(
            w.write_point(0, &point, &two, &topology).unwrap(),
            TimelineWritten::Written { truncated: false }
        );
        assert_eq!(
            w.write_point(0, &point, &two, &topology).unwrap(),
            TimelineWritten::OverCap
        );
        // A point that would fit is still left out: the file holds a prefix.
        let one = detail(100, 10, 1);
        assert_eq!(
            w.write_point(0, &point, &one, &topology).unwrap(),
            TimelineWritten::OverCap
        );
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
    }
}
