//! The host's software costs beside the links: what the receiver's
//! software spends on each message (a collective's step waits for one)
//! and what every call of a collective costs before it moves data.
//!
//! Both are read off probes beside the shift's fitted line at the same
//! size (one round: `o + L + r + b/B`, see [`fit`](mod@super::fit); the line rather
//! than the one shift of that size, which noise moves more):
//! - a fan-in (every rank but 0 sends one message to rank 0 at once) ends
//!   when rank 0's software has handled all `N - 1` messages one after
//!   another: `o + L + (N-1) r + b/B`, so `r` is the difference over
//!   `N - 2` (three ranks or more; `r = 0` otherwise);
//! - [`CALLS`](super::probe::CALLS) calls in a row of one shift round each
//!   take `c + o + L + r + b/B` per call, so `c` is the difference.
//!
//! A difference below 0 (noise) gives 0. With `r` the shift's fixed cost
//! `o + L + r` splits three ways: `L` is what is left.

use super::fit::Sample;
use super::probe::Probe;

/// The receiver's software time per message, ps: from the smallest
/// fan-in and `shift(bytes)`, the shift's time at its size; 0 without a
/// fan-in or on two ranks.
pub fn receive_overhead_ps(
    samples: &[Sample],
    world_size: usize,
    shift: impl Fn(u64) -> f64,
) -> f64 {
    if world_size < 3 {
        return 0.0;
    }
    let fan_in = smallest(samples, |p| match p {
        Probe::FanIn { bytes } => Some(bytes),
        _ => None,
    });
    fan_in.map_or(0.0, |(bytes, t)| {
        ((t - shift(bytes)) / (world_size - 2) as f64).max(0.0)
    })
}

/// The software time of one call, ps: from the smallest `calls` probe and
/// `shift(bytes)`, the shift's time at its size; 0 without it.
pub fn call_overhead_ps(samples: &[Sample], shift: impl Fn(u64) -> f64) -> f64 {
    let calls = smallest(samples, |p| match p {
        Probe::Calls { bytes } => Some(bytes),
        _ => None,
    });
    calls.map_or(0.0, |(bytes, t)| (t - shift(bytes)).max(0.0))
}

/// The sample of the smallest size among the probes `size_of` picks:
/// its size and time.
fn smallest(samples: &[Sample], size_of: impl Fn(Probe) -> Option<u64>) -> Option<(u64, f64)> {
    samples
        .iter()
        .filter_map(|s| Some((size_of(s.probe)?, s.time_ps as f64)))
        .min_by(|a, b| a.0.cmp(&b.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(probe: Probe, time_ps: u64) -> Sample {
        Sample { probe, time_ps }
    }

    #[test]
    fn the_costs_are_the_differences_from_the_shift_at_the_same_size() {
        // A shift line of 10 us + 1 ps/B.
        let line = |bytes: u64| 10_000_000.0 + bytes as f64;
        let samples = [
            sample(Probe::FanIn { bytes: 8 }, 16_000_008),
            sample(Probe::Calls { bytes: 8 }, 14_000_008),
        ];
        // Four ranks: the fan-in waits for two more messages than the shift.
        assert_eq!(receive_overhead_ps(&samples, 4, line), 3_000_000.0);
        assert_eq!(receive_overhead_ps(&samples, 2, line), 0.0);
        assert_eq!(call_overhead_ps(&samples, line), 4_000_000.0);
        // Noise that makes a probe faster than the shift gives no cost.
        let fast = [
            sample(Probe::FanIn { bytes: 8 }, 9_000_000),
            sample(Probe::Calls { bytes: 8 }, 9_500_000),
        ];
        assert_eq!(receive_overhead_ps(&fast, 4, line), 0.0);
        assert_eq!(call_overhead_ps(&fast, line), 0.0);
        // Without the probes there is nothing to read.
        assert_eq!(call_overhead_ps(&samples[..1], line), 0.0);
        assert_eq!(receive_overhead_ps(&samples[1..], 4, line), 0.0);
    }
}
