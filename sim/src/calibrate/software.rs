//! The host's software costs beside the links: what the receiver's
//! software spends on each message (a collective's step waits for one)
//! and what every call of a collective costs before it moves data.
//!
//! Both are read off probes beside the shift of the same size (one round:
//! `o + L + r + b/B`, see [`super::fit`]):
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
/// fan-in and the shift of its size; 0 without them or on two ranks.
pub fn receive_overhead_ps(samples: &[Sample], world_size: usize) -> f64 {
    if world_size < 3 {
        return 0.0;
    }
    let fan_in = smallest(samples, |p| match p {
        Probe::FanIn { bytes } => Some(bytes),
        _ => None,
    });
    match fan_in.and_then(|(bytes, t)| Some((t, shift_at(samples, bytes)?))) {
        Some((fan_in, shift)) => ((fan_in - shift) / (world_size - 2) as f64).max(0.0),
        None => 0.0,
    }
}

/// The software time of one call, ps: from the smallest `calls` probe and
/// the shift of its size; 0 without them.
pub fn call_overhead_ps(samples: &[Sample]) -> f64 {
    let calls = smallest(samples, |p| match p {
        Probe::Calls { bytes } => Some(bytes),
        _ => None,
    });
    match calls.and_then(|(bytes, t)| Some((t, shift_at(samples, bytes)?))) {
        Some((calls, shift)) => (calls - shift).max(0.0),
        None => 0.0,
    }
}

/// The sample of the smallest size among the probes `size_of` picks:
/// its size and time.
fn smallest(samples: &[Sample], size_of: impl Fn(Probe) -> Option<u64>) -> Option<(u64, f64)> {
    samples
        .iter()
        .filter_map(|s| Some((size_of(s.probe)?, s.time_ps as f64)))
        .min_by(|a, b| a.0.cmp(&b.0))
}

/// The shift's time at `bytes`, if measured.
fn shift_at(samples: &[Sample], bytes: u64) -> Option<f64> {
    samples.iter().find_map(|s| match s.probe {
        Probe::Shift { bytes: b } if b == bytes => Some(s.time_ps as f64),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(probe: Probe, time_ps: u64) -> Sample {
        Sample { probe, time_ps }
    }

    #[test]
    fn the_costs_are_the_differences_from_the_shift_of_the_same_size() {
        let samples = [
            sample(Probe::Shift { bytes: 8 }, 10_000_000),
            sample(Probe::Shift { bytes: 32 }, 11_000_000),
            sample(Probe::FanIn { bytes: 8 }, 16_000_000),
            sample(Probe::Calls { bytes: 8 }, 14_000_000),
        ];
        // Four ranks: the fan-in waits for two more messages than the shift.
        assert_eq!(receive_overhead_ps(&samples, 4), 3_000_000.0);
        assert_eq!(receive_overhead_ps(&samples, 2), 0.0);
        assert_eq!(call_overhead_ps(&samples), 4_000_000.0);
        // Noise that makes a probe faster than the shift gives no cost.
        let fast = [
            sample(Probe::Shift { bytes: 8 }, 10_000_000),
            sample(Probe::FanIn { bytes: 8 }, 9_000_000),
            sample(Probe::Calls { bytes: 8 }, 9_500_000),
        ];
        assert_eq!(receive_overhead_ps(&fast, 4), 0.0);
        assert_eq!(call_overhead_ps(&fast), 0.0);
        // Without a shift of the probe's size there is nothing to compare.
        assert_eq!(call_overhead_ps(&samples[1..]), 0.0);
    }
}
