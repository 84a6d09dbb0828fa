//! Steady-state extrapolation: the sizes of a collective entry above its
//! `extrapolate_above = T` are not simulated; each is drawn on the line
//! through two simulated runs of the same plan, at `T / 2` and `T`.
//!
//! # Why a line
//! A pipelined collective whose plan (algorithm, protocol, channels,
//! pipeline unit) does not change with the size sends the same units
//! along the same routes at any size, only more of them: once the
//! pipeline is full, every further unit adds the same time on average
//! (the steady state), so the time of a call is an affine function of
//! its size up to the wiggles of the last partial unit. On the folded
//! 512-GPU fat-tree, NCCL's tree allreduce simulated at 1 GiB and 2 GiB
//! puts 4 GiB within 0.0053% and 32 GiB within 0.015% of their full
//! simulations (23 670.42 us and 180 255.09 us; README "Trees at scale").
//! Only the sizes' plans are checked (at validation with the default
//! filter, and again here, since `NCCL_ALGO`/`NCCL_PROTO` from the
//! environment can change them): that both bases are past the pipeline's
//! fill is the user's choice of `T`, and the README's figures show how
//! far off a line through too small bases lands.
//!
//! # What is carried
//! The time per call and the link counters that add up over a run
//! (bytes, units, busy time, drops, pauses), each on its own line, the
//! largest backlog as the bases' larger one, the run's end time on its
//! line; the engine counters are the larger base's (what was simulated),
//! and an extrapolated row has no trace or timeline. A size whose line
//! falls (the larger base faster than the smaller, never seen) or whose
//! plan differs from the bases' is simulated in full instead. Results are
//! not checked at an extrapolated size (`#wrong` is `N/A`).

use algorithms::Params;
use algorithms::nccl::{NcclAlgorithm, Protocol};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{Detail, Failure, Options, Point, Row, Selection, run_located, select};
use crate::network::LinkUsage;
use crate::scenario::{CollectiveSpec, Scenario};
use crate::tuning::AlgoFilter;

/// What a row was extrapolated from: the two simulated sizes and their
/// times per call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extrapolation {
    /// The smaller base size, bytes.
    pub low_bytes: u64,
    /// Its simulated time per call, ps.
    pub low_ps: u64,
    /// The larger base size, bytes.
    pub high_bytes: u64,
    /// Its simulated time per call, ps.
    pub high_ps: u64,
}

/// What must be the same at the bases and at a size the line is carried
/// to: the algorithm and its parameters, and NCCL's choice.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    algorithm: String,
    params: Params,
    nccl: Option<(NcclAlgorithm, Protocol, usize, u64, u32, usize)>,
}

impl Plan {
    /// The plan of a selection.
    pub fn of(selection: &Selection) -> Plan {
        Plan {
            algorithm: selection.algorithm.name().to_string(),
            params: selection.params,
            nccl: selection.nccl.map(|c| {
                (
                    c.algorithm,
                    c.protocol,
                    c.channels,
                    c.chunk_bytes,
                    c.threads,
                    c.heads,
                )
            }),
        }
    }

    /// The plan `spec` runs `size` bytes with.
    pub fn at(scenario: &Scenario, spec: &CollectiveSpec, filter: &AlgoFilter, size: u64) -> Plan {
        let count = usize::try_from(size / spec.dtype.size_bytes() as u64).unwrap_or(usize::MAX);
        Plan::of(&select(scenario, spec, filter, count))
    }

    /// The plan in words, for errors.
    pub fn describe(&self) -> String {
        match self.nccl {
            Some((_, protocol, channels, chunk, _, heads)) => {
                let heads = if heads > 0 {
                    format!(", {heads} heads")
                } else {
                    String::new()
                };
                format!(
                    "{} {protocol} on {channels} channels (unit {chunk} B{heads})",
                    self.algorithm
                )
            }
            None => format!(
                "{} (chunk {} B, {} slots)",
                self.algorithm, self.params.chunk_bytes, self.params.slots
            ),
        }
    }
}

/// A simulated run the line may go through: its row and what it measured
/// (without its trace and timeline).
#[derive(Clone, Debug)]
pub(super) struct Base {
    row: Row,
    detail: Detail,
}

impl Base {
    /// Keeps a simulated point for the lines through it.
    pub(super) fn new(row: &Row, detail: &Detail) -> Base {
        Base {
            row: row.clone(),
            detail: Detail {
                trace: None,
                link_timeline: None,
                ..detail.clone()
            },
        }
    }

    /// Its size, bytes.
    pub(super) fn size(&self) -> u64 {
        self.row.size_bytes
    }
}

/// A failed run: the point that failed (for a base, the base's size),
/// why, and what it measured.
pub(super) type PointFailure = Box<(Point, Failure, Detail)>;

/// One collective entry of a study, as its points run.
#[derive(Clone, Copy)]
pub(super) struct Entry<'a> {
    /// The scenario.
    pub scenario: &'a Scenario,
    /// The entry.
    pub spec: &'a CollectiveSpec,
    /// Its index among the scenario's entries (the base runs' random
    /// streams).
    pub index: usize,
    /// The tuner's filter.
    pub filter: &'a AlgoFilter,
    /// How runs are made.
    pub options: Options,
}

/// The row of `size`, an extrapolated size of `entry`: drawn on the line
/// through the runs at its bases (taken from `bases`, or simulated and
/// added there), or simulated in full where the line cannot be drawn (see
/// the module docs). `rng` is the size's own.
pub(super) fn point(
    entry: Entry,
    size: u64,
    bases: &mut Vec<Base>,
    rng: &mut ChaCha8Rng,
) -> Result<(Row, Detail), PointFailure> {
    let Entry {
        scenario,
        spec,
        index,
        filter,
        options,
    } = entry;
    let full = |rng: &mut ChaCha8Rng| run_located(scenario, spec, filter, options, size, rng);
    let Some((low, high)) = spec.extrapolation_bases() else {
        return full(rng);
    };
    let count = usize::try_from(size / spec.dtype.size_bytes() as u64).unwrap_or(usize::MAX);
    let selection = select(scenario, spec, filter, count);
    let plan = Plan::of(&selection);
    if [low, high]
        .iter()
        .any(|&b| Plan::at(scenario, spec, filter, b) != plan)
    {
        return full(rng);
    }
    for (k, base) in [low, high].into_iter().enumerate() {
        if bases.iter().any(|b| b.size() == base) {
            continue;
        }
        // A stream of its own, apart from the sizes' (`(entry, index)`).
        let mut base_rng = ChaCha8Rng::seed_from_u64(scenario.seed);
        base_rng.set_stream(((index as u64) << 32) | u64::from(u32::MAX - k as u32));
        let (row, detail) = run_located(scenario, spec, filter, options, base, &mut base_rng)?;
        bases.push(Base::new(&row, &detail));
    }
    let find = |s: u64| bases.iter().find(|b| b.size() == s).expect("run above");
    match draw(scenario, spec, &selection, size, find(low), find(high)) {
        Some(done) => Ok(done),
        None => full(rng),
    }
}

/// The row and detail of `size` (run with `selection`) on the line
/// through `low` and `high`; `None` when the line falls.
fn draw(
    scenario: &Scenario,
    spec: &CollectiveSpec,
    selection: &Selection,
    size: u64,
    low: &Base,
    high: &Base,
) -> Option<(Row, Detail)> {
    let (x1, x2) = (low.size(), high.size());
    let (t1, t2) = (low.row.time_ps, high.row.time_ps);
    if t2 < t1 {
        return None;
    }
    let on_line = |y1: u64, y2: u64| line(x1, y1, x2, y2, size);
    let count = usize::try_from(size / spec.dtype.size_bytes() as u64).unwrap_or(usize::MAX);
    let time_ps = on_line(t1, t2);
    let (algbw, busbw) = super::bandwidths(spec, count, time_ps);
    let row = Row {
        size_bytes: count as u64 * spec.dtype.size_bytes() as u64,
        count,
        time_ps,
        algbw_gb_per_s: algbw,
        busbw_gb_per_s: busbw,
        wrong: None,
        model_ps: super::model_ps(scenario, selection, spec, count),
        extrapolated: Some(Box::new(Extrapolation {
            low_bytes: x1,
            low_ps: t1,
            high_bytes: x2,
            high_ps: t2,
        })),
        ..high.row.clone()
    };
    let link_usage = match (&low.detail.link_usage, &high.detail.link_usage) {
        (Some(a), Some(b)) => Some(
            a.iter()
                .zip(b)
                .map(|(a, b)| LinkUsage {
                    bytes: on_line(a.bytes, b.bytes),
                    units: on_line(a.units, b.units),
                    busy_ps: on_line(a.busy_ps, b.busy_ps),
                    max_queue: a.max_queue.max(b.max_queue),
                    lost: on_line(a.lost, b.lost),
                    corrupted: on_line(a.corrupted, b.corrupted),
                    overflow_drops: on_line(a.overflow_drops, b.overflow_drops),
                    retransmitted: on_line(a.retransmitted, b.retransmitted),
                    pause_frames: on_line(a.pause_frames, b.pause_frames),
                    paused_ps: on_line(a.paused_ps, b.paused_ps),
                })
                .collect(),
        ),
        _ => None,
    };
    let detail = Detail {
        end_time: algorithms::Time(on_line(low.detail.end_time.0, high.detail.end_time.0)),
        link_usage,
        trace: None,
        link_timeline: None,
        ..high.detail.clone()
    };
    Some((row, detail))
}

/// The value at `x` of the line through `(x1, y1)` and `(x2, y2)`
/// (`x1 < x2`), rounded to the nearest integer, within `0..=u64::MAX`.
fn line(x1: u64, y1: u64, x2: u64, y2: u64, x: u64) -> u64 {
    let (x1, y1, x2, y2, x) = (
        i128::from(x1),
        i128::from(y1),
        i128::from(x2),
        i128::from(y2),
        i128::from(x),
    );
    let run = x2 - x1;
    let rise = (y2 - y1) * (x - x2);
    // Rounded to the nearest, halves away from zero.
    let step = if rise >= 0 {
        (2 * rise + run) / (2 * run)
    } else {
        -((-2 * rise + run) / (2 * run))
    };
    (y2 + step).clamp(0, i128::from(u64::MAX)) as u64
}

#[cfg(test)]
mod tests {
    use super::line;

    #[test]
    fn the_line_goes_through_both_points_and_rounds_to_the_nearest() {
        assert_eq!(line(10, 100, 20, 300, 10), 100);
        assert_eq!(line(10, 100, 20, 300, 20), 300);
        assert_eq!(line(10, 100, 20, 300, 40), 700);
        // 103 + 3 * 25 / 10 = 110.5, away from zero.
        assert_eq!(line(10, 100, 20, 103, 45), 111);
        assert_eq!(line(2, 0, 4, 1, 5), 2, "1 + 0.5 rounds up");
        // A falling line stops at zero.
        assert_eq!(line(1, 10, 2, 5, 10), 0);
        assert_eq!(line(1, 0, 2, u64::MAX, 4), u64::MAX);
    }
}
