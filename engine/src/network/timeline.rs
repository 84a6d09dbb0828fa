//! Link traffic over time: bytes each link direction carried per time
//! bin, for `sim run --links-timeline` (utilisation over time).
//!
//! The packet model adds each packet over its serialization interval;
//! the flow model adds each flow's bytes over every interval of constant
//! rate, when the rate changes or the flow ends. Bytes of an interval that
//! spans several bins are split in proportion to the overlap, so the bins
//! of a link sum to the bytes it carried.

use algorithms::Time;
use topologies::LinkId;

/// The most (link, bin) entries one run keeps; past it the timeline
/// stops recording and says so.
pub const TIMELINE_ENTRIES_MAX: usize = 1 << 22;

/// Bytes one link direction carried in one time bin.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimelineBin {
    /// The link direction.
    pub link: LinkId,
    /// The start of the bin.
    pub start: Time,
    /// Bytes carried in the bin.
    pub bytes: f64,
}

/// The traffic of a run's links, binned in time.
#[derive(Clone, Debug)]
pub struct LinkTimeline {
    bin_ps: u64,
    /// Per link direction: `(bin index, bytes)`, sorted by bin, one
    /// entry per bin.
    per_link: Vec<Vec<(u64, f64)>>,
    entries: usize,
    /// Whether entries were dropped at [`TIMELINE_ENTRIES_MAX`].
    pub truncated: bool,
}

impl LinkTimeline {
    /// An empty timeline of `links` link directions in bins of `bin_ps`
    /// (at least 1 ps).
    pub fn new(links: usize, bin_ps: u64) -> LinkTimeline {
        LinkTimeline {
            bin_ps: bin_ps.max(1),
            per_link: vec![Vec::new(); links],
            entries: 0,
            truncated: false,
        }
    }

    /// The bin width in ps.
    pub fn bin_ps(&self) -> u64 {
        self.bin_ps
    }

    /// How many link directions have at least one bin with traffic.
    pub fn links_used(&self) -> usize {
        self.per_link.iter().filter(|bins| !bins.is_empty()).count()
    }

    /// `bytes` carried by `link` evenly over `[start, end]` (all in the
    /// bin of `start` if the interval is empty). Nothing once truncated:
    /// the timeline stops recording (and an interval of many fine bins
    /// stops its walk over them).
    pub fn add(&mut self, link: usize, start: Time, end: Time, bytes: f64) {
        if bytes <= 0.0 || self.truncated {
            return;
        }
        let (s, e) = (start.as_ps(), end.as_ps().max(start.as_ps()));
        let (first, last) = (s / self.bin_ps, e.saturating_sub(1).max(s) / self.bin_ps);
        if first == last || e == s {
            self.push(link, first, bytes);
            return;
        }
        let span = (e - s) as f64;
        for bin in first..=last {
            let lo = (bin * self.bin_ps).max(s);
            let hi = ((bin + 1).saturating_mul(self.bin_ps)).min(e);
            if hi > lo {
                self.push(link, bin, bytes * (hi - lo) as f64 / span);
                if self.truncated {
                    return;
                }
            }
        }
    }

    /// Adds `bytes` to `link`'s `bin`. Each link's list is kept sorted by
    /// bin with one entry per bin, so the cap counts distinct (link, bin)
    /// entries however the additions interleave (the flow model adds
    /// overlapping intervals of many flows to one link).
    fn push(&mut self, link: usize, bin: u64, bytes: f64) {
        let list = &mut self.per_link[link];
        let at = match list.last() {
            Some(last) if last.0 == bin => list.len() - 1,
            Some(last) if last.0 > bin => match list.binary_search_by_key(&bin, |e| e.0) {
                Ok(i) => i,
                Err(i) => {
                    if self.entries >= TIMELINE_ENTRIES_MAX {
                        self.truncated = true;
                        return;
                    }
                    self.entries += 1;
                    list.insert(i, (bin, 0.0));
                    i
                }
            },
            _ => {
                if self.entries >= TIMELINE_ENTRIES_MAX {
                    self.truncated = true;
                    return;
                }
                self.entries += 1;
                list.push((bin, 0.0));
                list.len() - 1
            }
        };
        list[at].1 += bytes;
    }

    /// The timeline of a folded run as the full run would have it: every
    /// link direction gets the bins of its orbit representative
    /// (`canonical[l]`), up to the cap (then it says it was truncated).
    pub fn unfold(&self, canonical: &[LinkId]) -> LinkTimeline {
        let mut full = LinkTimeline::new(canonical.len(), self.bin_ps);
        full.truncated = self.truncated;
        for (l, c) in canonical.iter().enumerate() {
            let bins = &self.per_link[c.index()];
            if full.entries + bins.len() > TIMELINE_ENTRIES_MAX {
                full.truncated = true;
                break;
            }
            full.entries += bins.len();
            full.per_link[l] = bins.clone();
        }
        full
    }

    /// The bins with traffic, by link id then time, one per (link, bin).
    pub fn bins(&self) -> Vec<TimelineBin> {
        let mut out = Vec::with_capacity(self.entries);
        for (l, list) in self.per_link.iter().enumerate() {
            out.extend(list.iter().map(|&(bin, bytes)| TimelineBin {
                link: LinkId::new(l),
                start: Time(bin * self.bin_ps),
                bytes,
            }));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_split_over_bins_and_merged() {
        let mut t = LinkTimeline::new(2, 100);
        // 300 bytes over [50, 350): 50 in bin 0, 100 in 1 and 2, 50 in 3.
        t.add(1, Time(50), Time(350), 300.0);
        // Later, out of order, into bin 1 again; and an empty interval.
        t.add(1, Time(120), Time(180), 6.0);
        t.add(0, Time(999), Time(999), 7.0);
        let bins: Vec<(usize, u64, f64)> = t
            .bins()
            .iter()
            .map(|b| (b.link.index(), b.start.as_ps(), b.bytes))
            .collect();
        assert_eq!(
            bins,
            vec![
                (0, 900, 7.0),
                (1, 0, 50.0),
                (1, 100, 106.0),
                (1, 200, 100.0),
                (1, 300, 50.0)
            ]
        );
        let total: f64 = t.bins().iter().map(|b| b.bytes).sum();
        assert_eq!(total, 313.0);
    }

    #[test]
    fn unfolding_gives_each_link_its_representative_bins() {
        let mut t = LinkTimeline::new(3, 100);
        t.add(0, Time(0), Time(100), 5.0);
        t.add(2, Time(100), Time(200), 7.0);
        // Links 0 and 1 form one orbit, link 2 its own.
        let full = t.unfold(&[LinkId::new(0), LinkId::new(0), LinkId::new(2)]);
        let bins: Vec<(usize, u64, f64)> = full
            .bins()
            .iter()
            .map(|b| (b.link.index(), b.start.as_ps(), b.bytes))
            .collect();
        assert_eq!(bins, vec![(0, 0, 5.0), (1, 0, 5.0), (2, 100, 7.0)]);
        assert!(!full.truncated);
    }

    #[test]
    fn interleaved_additions_to_the_same_bins_do_not_fill_the_cap() {
        // Two bins of one link, added to alternately (as overlapping flows
        // of the flow model do) far more often than the cap: still two
        // (link, bin) entries, nothing dropped.
        let mut t = LinkTimeline::new(1, 100);
        let adds = TIMELINE_ENTRIES_MAX / 2 + 1;
        for _ in 0..adds {
            t.add(0, Time(0), Time(200), 2.0);
        }
        assert!(!t.truncated);
        let bins = t.bins();
        assert_eq!(bins.len(), 2);
        assert_eq!(bins[0].bytes, adds as f64);
        assert_eq!(bins[1].bytes, adds as f64);
    }

    #[test]
    fn a_long_interval_in_fine_bins_stops_at_the_cap() {
        // 2^40 bins of 1 ps: the walk stops at the cap instead of visiting
        // every bin, and later additions are not recorded.
        let mut t = LinkTimeline::new(1, 1);
        t.add(0, Time(0), Time(1 << 40), 1.0);
        assert!(t.truncated);
        t.add(0, Time(0), Time(1 << 40), 1.0);
        let bins = t.bins();
        assert_eq!(bins.len(), TIMELINE_ENTRIES_MAX);
        assert_eq!(bins[0].bytes, 1.0 / (1u64 << 40) as f64);
    }
}
