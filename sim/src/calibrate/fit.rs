//! Fitting the simulator's ideal-link parameters to probe measurements,
//! and the residuals of a fit (the same probes run on the fitted
//! simulator).
//!
//! The ideal links with overheads `o` (per message sent) and `r` (per
//! message received), latency `L`, pair bandwidth `B`
//! and per-rank rate `I` (see `engine::links`) give the probes these
//! times, which the fit inverts step by step:
//! - a shift of `b` bytes (every rank sends to the next and receives from
//!   the previous at once, as a collective's steps do): `o + L + r + b/B`; the
//!   median slope between the larger half of the sizes (Theil-Sen, robust
//!   to one size slowed by noise) gives `B`,
//!   and the smaller half (weighted by `1/t²`, relative errors) gives
//!   `o + L + r`. The
//!   ping-pong (two ranks busy, the others idle) has the same form; it is
//!   fitted only without shifts, and otherwise shows in the residuals how
//!   much faster a lone pair is than a busy job;
//! - a stream of `k` small messages: `k o` plus constants; the slope
//!   between two counts gives `o` (the slower end's time per message, if
//!   the receiver's is larger), and `L` is the intercept less `o` and the
//!   receiver's time per message `r`;
//! - the software costs, the receiver's `r` per message and a call's `c`,
//!   from a fan-in and a run of calls beside the shift (see
//!   [`super::software`]); the shift's fixed cost is then
//!   `o + L + r`;
//! - flows to `p` peers at once: `o + L + r + (p-1) b/I + b/B` when the
//!   rank's rate `I` (at least `B`) is what limits them, `o + L + r + p b/I`
//!   when `I` is below `B`; that gives `I` at each large size (the median
//!   is kept; `B` is the pair's bandwidth at the flows' size where it
//!   depends on the size); flows that show no shared limit (`I` above
//!   `p B`) leave `I` unset;
//! - a rate `S` all ranks share (the machine's cores and memory, when
//!   the ranks share one host): when the shifts' slope (every rank
//!   sending at once) is [`SHARING_RATIO_MIN`](super::sharing::SHARING_RATIO_MIN) times a lone pair's
//!   ping-pong slope or more, `B` and the bandwidth per size come from the
//!   ping-pongs (their own line) instead, and `S` is the rate whose
//!   simulated shifts have the measured shifts' slope (about `N` times
//!   the shifts' per-pair rate; see [`shared_rate`]); the fixed costs stay
//!   the shifts', what a collective's steps pay. Flows no slower than `S`
//!   makes them then set no `I`. Measured on 4 TCP namespaces of one
//!   2-core VM: a lone pair 1.62 GB/s, the shift 0.545 GB/s per pair, `S`
//!   1.9 GB/s;
//! - a reduction of `b` bytes: `b/R`; the median of `b/t` over the sizes
//!   of each element type;
//! - the bandwidth per message size: a host's path is not one line (TCP's
//!   windows and copies, cache sizes), so besides `B` the fit keeps
//!   `b / (t(b) - o - L - r)` at each shift size where the bytes are a tenth
//!   of the fixed cost or more (`[[model.bandwidth_by_size]]`); the
//!   simulator interpolates between them (`topologies::SizeBandwidth`).
//!   `B` stays the large sizes' slope (the tuner's figure).

use std::collections::BTreeMap;

use algorithms::{DType, Time};
use engine::calibration::{FitSummary, FittedModel, Measurement, SizeRate};
use engine::executor;
use engine::network::NetworkConfig;
use engine::world::WorldConfig;
use topologies::{LinkSpec, SizeBandwidth};

use super::probe::{Probe, run_calls, run_once};
use super::sharing::{machine_sharing, shared_rate};
use super::software;

/// One probe's measured time (the median of its timed runs), in ps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// What was measured.
    pub probe: Probe,
    /// Rank 0's median time.
    pub time_ps: u64,
}

/// Why a fit could not be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FitError {
    /// A probe the fit needs is missing.
    #[error("the fit needs {0}; calibrate on at least 2 ranks with sizes from 8 B")]
    Missing(&'static str),
    /// The measurements give a parameter no link can have.
    #[error("the measurements give {0}; measure again on a quieter machine")]
    Unphysical(String),
}

/// Fits the model to `samples` taken on `world_size` ranks.
///
/// A shared rate is kept only if it is no slower than the lone pair's
/// bandwidth it came with: below that a lone message would go at the
/// shared rate, not at the ping-pong's, so the ping-pong is faster for
/// some other reason (on shared memory it sends one clean buffer over and
/// over: 4 shm ranks measured 13-15 GB/s against a shift's 2-12 GB/s and
/// fitted shared rates of 3-9 GB/s, which raised the median |error| of a
/// validation from 30-33% to 38-54%); the fit is then made without one.
pub fn fit(samples: &[Sample], world_size: usize) -> Result<FittedModel, FitError> {
    let model = fit_with(samples, world_size, true)?;
    match model.shared_gb_per_s {
        Some(s) if s < model.bandwidth_gb_per_s => fit_with(samples, world_size, false),
        _ => Ok(model),
    }
}

/// [`fit`], with a shared rate where the probes show one if
/// `allow_sharing`.
fn fit_with(
    samples: &[Sample],
    world_size: usize,
    allow_sharing: bool,
) -> Result<FittedModel, FitError> {
    let points = |shift: bool| -> Vec<(f64, f64)> {
        samples
            .iter()
            .filter_map(|s| match (s.probe, shift) {
                (Probe::Shift { bytes }, true) | (Probe::PingPong { bytes }, false) => {
                    Some((bytes as f64, s.time_ps as f64))
                }
                _ => None,
            })
            .collect()
    };
    let shifts = points(true);
    let pings = if shifts.len() >= 2 {
        shifts
    } else {
        points(false)
    };
    if pings.len() < 2 {
        return Err(FitError::Missing(
            "shifts or ping-pongs at two sizes or more",
        ));
    }
    let (intercept_ps, slope_ps_per_byte) = two_stage_line(&pings);
    if slope_ps_per_byte <= 0.0 {
        return Err(FitError::Unphysical(format!(
            "a ping-pong time that does not grow with size (slope {slope_ps_per_byte:.3e} ps/B)"
        )));
    }
    let intercept_ps = intercept_ps.max(0.0);
    let sharing = machine_sharing(&pings, &points(false), slope_ps_per_byte, world_size)
        .filter(|_| allow_sharing);
    // With a shared rate, a pair's own bandwidth (and its curve over the
    // sizes) is what a lone pair gets: the ping-pong's.
    let (bandwidth, size_points, size_intercept_ps) = match &sharing {
        Some(m) => (
            1e12 / m.pair_slope_ps_per_byte,
            m.pair_points.as_slice(),
            m.pair_intercept_ps,
        ),
        None => (1e12 / slope_ps_per_byte, pings.as_slice(), intercept_ps),
    };
    let overhead_ps = stream_gap_ps(samples)?.clamp(0.0, intercept_ps);
    let shift_line = |bytes: u64| intercept_ps + slope_ps_per_byte * bytes as f64;
    let receive_ps = software::receive_overhead_ps(samples, world_size, shift_line)
        .min(intercept_ps - overhead_ps);
    let latency_ps = intercept_ps - overhead_ps - receive_ps;
    let bandwidth_by_size = size_rates(size_points, size_intercept_ps, bandwidth);
    let pair_rate = |bytes: u64| match bandwidth_by_size.iter().find(|a| a.bytes == bytes) {
        Some(a) => a.gb_per_s * 1e9,
        None => bandwidth,
    };
    let mut reduce: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for s in samples {
        if let Probe::Reduce { dtype, bytes } = s.probe {
            let rate = bytes as f64 * 1e12 / s.time_ps.max(1) as f64;
            reduce
                .entry(dtype.name().to_string())
                .or_default()
                .push(rate / 1e9);
        }
    }
    let mut model = FittedModel {
        latency_us: latency_ps / 1e6,
        bandwidth_gb_per_s: bandwidth / 1e9,
        overhead_us: overhead_ps / 1e6,
        receive_overhead_us: receive_ps / 1e6,
        call_overhead_us: software::call_overhead_ps(samples, shift_line) / 1e6,
        injection_gb_per_s: None,
        shared_gb_per_s: None,
        reduce_gb_per_s: reduce
            .into_iter()
            .map(|(name, mut rates)| (name, median(&mut rates)))
            .collect(),
        bandwidth_by_size: bandwidth_by_size.clone(),
    };
    if let Some(m) = &sharing {
        let link = model.link_spec().map_err(FitError::Unphysical)?;
        let rate = shared_rate(
            &pings,
            slope_ps_per_byte,
            link,
            world_size,
            m.shared_bytes_per_s,
        )?;
        model.shared_gb_per_s = Some(round_sig(rate / 1e9));
    }
    let shared = model.shared_gb_per_s.map(|s| s * 1e9);
    let injection = injection_rate(
        samples,
        world_size,
        (overhead_ps, latency_ps + receive_ps),
        (bandwidth, shared),
        pair_rate,
    );
    model.injection_gb_per_s = injection.map(|i| i / 1e9);
    Ok(model)
}

/// The pair bandwidth at each measured size, `b / (t(b) - a)` with `a`
/// the fitted fixed cost, for the sizes whose bytes take at least a tenth
/// of `a` (below that the difference is mostly noise, and the bytes matter
/// little), and at most `sustained`, the large sizes' bandwidth: a shift of
/// a few mid-size messages can go faster than that (socket buffers
/// absorb a burst), but a collective's stream of such messages does not
/// (measured on TCP: a 64 MiB ring allreduce's 512 KiB chunks went at the
/// large shifts' rate, not at the 512 KiB shift's). None unless two sizes
/// or more qualify (one would be the single bandwidth again).
fn size_rates(points: &[(f64, f64)], intercept_ps: f64, sustained: f64) -> Vec<SizeRate> {
    let mut sorted = points.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut rates: Vec<SizeRate> = Vec::new();
    for &(bytes, time_ps) in &sorted {
        let bytes_ps = time_ps - intercept_ps;
        // Whether a size counts is judged by its bytes at the sustained
        // rate, not by its measured excess: a small size delayed by noise
        // would otherwise enter with a rate of a few bytes per microsecond
        // and, as the table's last entry, slow every larger message.
        let sustained_ps = bytes * 1e12 / sustained;
        if bytes < 1.0 || sustained_ps < 0.1 * intercept_ps.max(1.0) || bytes_ps <= 0.0 {
            continue;
        }
        let size = bytes as u64;
        if rates.last().is_some_and(|r| r.bytes >= size) || rates.len() == SizeBandwidth::MAX {
            continue;
        }
        rates.push(SizeRate {
            bytes: size,
            gb_per_s: round_sig((bytes * 1e12 / bytes_ps).min(sustained) / 1e9),
        });
    }
    if rates.len() < 2 {
        rates.clear();
    }
    rates
}

/// `x` to six significant digits, so the file's rates read back as
/// written and stay short.
fn round_sig(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(5 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

/// The line `t = a + s x` of the shifts: the slope from the larger half
/// of the sizes (where the bytes dominate), the intercept from the smaller
/// half (the mean of `t - s x` weighted by `1/t²`, where the fixed costs
/// dominate). One line through every size weighted by relative error
/// follows the small sizes and misses the bandwidth of the large ones when
/// the fabric's bandwidth changes with size; this splits the two.
///
/// The slope is Theil and Sen's: the median of the slopes between every
/// two of the larger sizes, so one size slowed by a descheduled rank moves
/// it little (a least-squares line through four sizes turned negative when
/// one run of a mid size took hundreds of microseconds too long). Where
/// even that is not positive (the bytes drown in noise), the slope between
/// the smallest and the largest size is kept: positive whenever the largest
/// message took longer than the smallest.
pub(super) fn two_stage_line(points: &[(f64, f64)]) -> (f64, f64) {
    let mut sorted = points.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let half = sorted.len().div_ceil(2).max(2).min(sorted.len());
    let large = &sorted[sorted.len() - half..];
    let mut slope = median_slope(large);
    if let (true, Some(first), Some(last)) = (slope <= 0.0, sorted.first(), sorted.last())
        && last.0 > first.0
    {
        slope = (last.1 - first.1) / (last.0 - first.0);
    }
    let small = &sorted[..half];
    let (mut sw, mut sum) = (0.0, 0.0);
    for &(x, y) in small {
        let w = 1.0 / (y * y).max(1.0);
        sw += w;
        sum += w * (y - slope * x);
    }
    (sum / sw, slope)
}

/// The median of the slopes between every two points of different `x`
/// (0 for fewer than two such points).
fn median_slope(points: &[(f64, f64)]) -> f64 {
    let mut slopes = Vec::new();
    for (i, a) in points.iter().enumerate() {
        for b in &points[i + 1..] {
            if b.0 != a.0 {
                slopes.push((b.1 - a.1) / (b.0 - a.0));
            }
        }
    }
    if slopes.is_empty() {
        return 0.0;
    }
    slopes.sort_by(f64::total_cmp);
    let n = slopes.len();
    if n % 2 == 1 {
        slopes[n / 2]
    } else {
        (slopes[n / 2 - 1] + slopes[n / 2]) / 2.0
    }
}

/// The per-message gap of the smallest streams: the time between two
/// message counts over their difference.
fn stream_gap_ps(samples: &[Sample]) -> Result<f64, FitError> {
    let mut streams: Vec<(u64, u32, u64)> = samples
        .iter()
        .filter_map(|s| match s.probe {
            Probe::Stream { bytes, messages } => Some((bytes, messages, s.time_ps)),
            _ => None,
        })
        .collect();
    streams.sort_unstable();
    let smallest = streams
        .first()
        .ok_or(FitError::Missing("streams of small messages"))?
        .0;
    let at: Vec<&(u64, u32, u64)> = streams.iter().filter(|s| s.0 == smallest).collect();
    let (Some(few), Some(many)) = (at.first(), at.last()) else {
        return Err(FitError::Missing("streams of two message counts"));
    };
    if many.1 == few.1 {
        return Err(FitError::Missing("streams of two message counts"));
    }
    Ok((many.2 as f64 - few.2 as f64) / f64::from(many.1 - few.1))
}

/// Each rank's shared rate from the flows, if they show one, with
/// `pair_rate(b)` a pair's bandwidth for messages of `b` bytes,
/// `bandwidth` the one for large messages and `machine` the rate all
/// ranks share, if any: flows no slower than that rate makes them (all
/// `N (N-1)` messages one after another on it, within a tenth) show no
/// rate of a rank's own.
fn injection_rate(
    samples: &[Sample],
    world_size: usize,
    (overhead_ps, latency_ps): (f64, f64),
    (bandwidth, machine): (f64, Option<f64>),
    pair_rate: impl Fn(u64) -> f64,
) -> Option<f64> {
    let peers = world_size.checked_sub(1).filter(|&p| p >= 2)? as f64;
    let mut rates: Vec<f64> = samples
        .iter()
        .filter_map(|s| match s.probe {
            Probe::Flows { bytes } => {
                let b = bytes as f64;
                let pair = pair_rate(bytes);
                let after_ps = s.time_ps as f64 - overhead_ps - latency_ps;
                let shared_ps = after_ps - b * 1e12 / pair;
                let above_pair = (peers - 1.0) * b * 1e12 / shared_ps;
                let machine_ps = machine.map_or(0.0, |m| world_size as f64 * peers * b * 1e12 / m);
                Some(if shared_ps <= 0.0 || after_ps <= 1.1 * machine_ps {
                    f64::INFINITY
                } else if above_pair >= pair {
                    above_pair
                } else {
                    // Slower than one pair's link: every message holds
                    // the port for b/I, so p b/I in all.
                    peers * b * 1e12 / after_ps.max(1.0)
                })
            }
            _ => None,
        })
        .collect();
    if rates.is_empty() {
        return None;
    }
    let rate = median(&mut rates);
    // Past one flow per peer the links do not share anything. Below one
    // pair's bandwidth the concurrent flows are slower than a lone one
    // (ranks sharing cores, memory): the rate is kept, and it slows a lone
    // message too, which the ping-pong residuals then show.
    (rate < peers * bandwidth).then_some(rate)
}

/// The median of `values` (sorted in place; the lower middle of an even
/// count).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values
        .get(values.len().saturating_sub(1) / 2)
        .copied()
        .unwrap_or(0.0)
}

/// The simulator's ideal link for a fitted model.
pub fn simulated_link(model: &FittedModel) -> Result<LinkSpec, String> {
    model.link_spec()
}

/// Runs each probe on a simulated world of `world_size` ranks with `link`,
/// `call_ps` of software time per call and the reduction rate
/// `reduce(dtype)`, and returns rank 0's time.
pub fn simulate(
    probes: &[Probe],
    world_size: usize,
    link: LinkSpec,
    call_ps: u64,
    reduce: impl Fn(DType) -> Option<f64>,
) -> Result<Vec<Sample>, String> {
    probes
        .iter()
        .map(|&probe| {
            let rate = match probe {
                Probe::Reduce { dtype, .. } => reduce(dtype),
                _ => None,
            };
            let config =
                WorldConfig::new(world_size, NetworkConfig::Ideal(link)).reduce_bytes_per_s(rate);
            let exec = executor::run(config, |f| async move {
                match probe {
                    Probe::Calls { bytes } => run_calls(&f, bytes, true, call_ps).await,
                    _ => run_once(&f, probe, true).await,
                }
            });
            match exec.outputs.into_iter().next().flatten() {
                Some(Ok(Time(time_ps))) => Ok(Sample { probe, time_ps }),
                Some(Err(e)) => Err(format!("simulating {}: {e}", probe.name())),
                None => Err(format!(
                    "simulating {}: rank 0 did not finish",
                    probe.name()
                )),
            }
        })
        .collect()
}

/// The measurements beside the fitted simulator's times, and the summary
/// of their residuals.
pub fn residuals(
    measured: &[Sample],
    fitted: &[Sample],
    world_size: usize,
) -> (Vec<Measurement>, FitSummary) {
    let rows: Vec<Measurement> = measured
        .iter()
        .zip(fitted)
        .map(|(m, f)| {
            let measured_us = m.time_ps as f64 / 1e6;
            let fitted_us = f.time_ps as f64 / 1e6;
            Measurement {
                probe: m.probe.name().to_string(),
                bytes: m.probe.bytes(),
                messages: m.probe.messages(),
                peers: m.probe.peers(world_size),
                dtype: match m.probe {
                    Probe::Reduce { dtype, .. } => Some(dtype.name().to_string()),
                    _ => None,
                },
                measured_us,
                fitted_us,
                residual_pct: round3(percent_error(fitted_us, measured_us)),
            }
        })
        .collect();
    let mut abs: Vec<f64> = rows.iter().map(|r| r.residual_pct.abs()).collect();
    let worst = abs.iter().copied().fold(0.0, f64::max);
    let summary = FitSummary {
        median_abs_residual_pct: round3(median(&mut abs)),
        worst_abs_residual_pct: round3(worst),
    };
    (rows, summary)
}

/// `(predicted - measured) / measured` in percent (0 for two zeros).
pub fn percent_error(predicted: f64, measured: f64) -> f64 {
    if measured == 0.0 {
        return if predicted == 0.0 { 0.0 } else { 100.0 };
    }
    (predicted - measured) / measured * 100.0
}

/// Three decimals, so the file's figures read back as written.
fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shift sizes and times in microseconds as `(bytes, ps)` points.
    fn points(us: &[(u64, f64)]) -> Vec<(f64, f64)> {
        us.iter().map(|&(b, t)| (b as f64, t * 1e6)).collect()
    }

    #[test]
    fn a_clean_line_is_recovered_exactly() {
        // 5 us fixed, 2 GB/s = 500 ps per byte.
        let clean: Vec<(u64, f64)> = [8u64, 32, 128, 512, 2048, 8192, 32768]
            .iter()
            .map(|&b| (b, 5.0 + b as f64 * 500e-6))
            .collect();
        let (a, s) = two_stage_line(&points(&clean));
        assert!((s - 500.0).abs() < 1e-6, "{s}");
        assert!((a - 5e6).abs() < 1e-3, "{a}");
    }

    #[test]
    fn one_slow_size_does_not_turn_the_bandwidth_negative() {
        // As on a loaded machine: one run of the 2 KiB shift took 300 us
        // too long. A least-squares line through the larger half turns
        // negative here; the median slope stays near 500 ps/B.
        let noisy = points(&[
            (8, 5.0),
            (32, 5.0),
            (128, 5.1),
            (512, 5.3),
            (2048, 306.0),
            (8192, 9.1),
            (32768, 21.4),
        ]);
        let (_, least_squares) = least_squares_line(&noisy[3..]);
        assert!(least_squares < 0.0, "{least_squares}");
        let (_, s) = two_stage_line(&noisy);
        assert!(s > 300.0 && s < 700.0, "{s}");
    }

    #[test]
    fn bytes_lost_in_noise_fall_back_to_the_span_of_the_sizes() {
        let flat = points(&[
            (8, 50.0),
            (512, 40.0),
            (2048, 90.0),
            (8192, 45.0),
            (32768, 60.0),
        ]);
        let (_, s) = two_stage_line(&flat);
        assert!((s - 10e6 / 32760.0).abs() < 1e-6, "{s}");
    }

    #[test]
    fn noisy_small_shifts_do_not_enter_the_bandwidth_by_size() {
        // The TCP shifts of a CI run (us): the small sizes were delayed by
        // hundreds of microseconds. Before sizes were judged by their
        // bytes, 8 B entered the table at a few bytes per microsecond and
        // slowed every larger message.
        let ci = points(&[
            (8, 333.0),
            (32, 894.0),
            (128, 627.0),
            (512, 71.0),
            (2048, 42.0),
            (8192, 51.0),
            (32768, 81.0),
        ]);
        let (a, s) = two_stage_line(&ci);
        assert!(s > 0.0, "{s}");
        let sustained = 1e12 / s;
        for rate in size_rates(&ci, a, sustained) {
            // Every entry is a size whose bytes at the sustained rate are
            // a tenth of the fixed cost or more, and none is faster.
            assert!(rate.bytes as f64 * 1e12 / sustained >= 0.1 * a, "{rate:?}");
            assert!(rate.gb_per_s * 1e9 <= sustained * 1.000_01, "{rate:?}");
            assert!(rate.bytes >= 512, "{rate:?}");
        }
    }

    /// An unweighted least-squares line `(intercept, slope)`, what the fit
    /// used before the median slope.
    fn least_squares_line(points: &[(f64, f64)]) -> (f64, f64) {
        let n = points.len() as f64;
        let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
        let my = points.iter().map(|p| p.1).sum::<f64>() / n;
        let (mut sxy, mut sxx) = (0.0, 0.0);
        for p in points {
            sxy += (p.0 - mx) * (p.1 - my);
            sxx += (p.0 - mx) * (p.0 - mx);
        }
        let slope = sxy / sxx;
        (my - slope * mx, slope)
    }
}
