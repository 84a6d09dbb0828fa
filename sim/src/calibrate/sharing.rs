//! A rate all ranks share: read off the shifts (every rank sending at
//! once) beside a lone pair's ping-pongs, and refined on the simulator
//! (see [`fit`](mod@super::fit)).

use topologies::LinkSpec;

use super::fit::{FitError, simulate, two_stage_line};
use super::probe::Probe;

/// Bisection steps of [`shared_rate`]: the rate to a part in 2^40 of its
/// bracket's width.
const SHARED_BISECTIONS: u32 = 40;

/// The shared rate whose simulated shifts (on `link`, the rest of the
/// fitted model, and `world_size` ranks) have the measured shifts'
/// slope `slope_ps_per_byte`, by bisection from `guess`
/// ([`MachineSharing::shared_bytes_per_s`]). The guess assumes every
/// round's `N` messages pass the shared rate one after another; over the
/// few rounds of a run they overlap (a rank's next round starts while
/// others' messages still queue), so rank 0's time per round is less,
/// and only the simulator itself says by how much (10% on 4 ranks).
pub fn shared_rate(
    shifts: &[(f64, f64)],
    slope_ps_per_byte: f64,
    link: LinkSpec,
    world_size: usize,
    guess: f64,
) -> Result<f64, FitError> {
    let probes: Vec<Probe> = shifts
        .iter()
        .map(|&(bytes, _)| Probe::Shift {
            bytes: bytes as u64,
        })
        .collect();
    let simulated_slope = |rate: f64| -> Result<f64, FitError> {
        let link = link
            .with_shared(rate)
            .map_err(|e| FitError::Unphysical(e.to_string()))?;
        let times =
            simulate(&probes, world_size, link, 0, |_| None).map_err(FitError::Unphysical)?;
        let points: Vec<(f64, f64)> = times
            .iter()
            .map(|s| (s.probe.bytes() as f64, s.time_ps as f64))
            .collect();
        Ok(two_stage_line(&points).1)
    };
    // Slower than the guess would be, faster than 4 times it: the
    // simulated slope falls as the rate grows.
    let (mut low, mut high) = (guess / 2.0, guess * 4.0);
    if simulated_slope(high)? > slope_ps_per_byte {
        return Ok(high);
    }
    for _ in 0..SHARED_BISECTIONS {
        let mid = (low * high).sqrt();
        if simulated_slope(mid)? > slope_ps_per_byte {
            low = mid;
        } else {
            high = mid;
        }
    }
    Ok((low * high).sqrt())
}

/// How much slower every rank moving data at once is than a lone pair
/// before the fit takes it for a rate the ranks share (noise between the
/// shift's and the ping-pong's slopes on separate hosts stays well below).
pub const SHARING_RATIO_MIN: f64 = 1.5;

/// A rate all ranks share, read off the shifts beside the ping-pongs.
pub struct MachineSharing {
    /// The ping-pongs' points, `(bytes, ps)`.
    pub pair_points: Vec<(f64, f64)>,
    /// The ping-pongs' line: a lone pair's time per byte ...
    pub pair_slope_ps_per_byte: f64,
    /// ... and its fixed cost.
    pub pair_intercept_ps: f64,
    /// The rate every message shares, bytes per second.
    pub shared_bytes_per_s: f64,
}

/// The rate the ranks share, if the probes show one: a shift's `N`
/// messages at once (slope `shift_slope_ps_per_byte` per message) take
/// clearly longer per byte than a lone pair's ping-pong
/// ([`SHARING_RATIO_MIN`]), as when the ranks share one machine's cores
/// for their copies. Then each pair keeps the ping-pong's bandwidth `B`
/// and the `N` messages of a shift round share `S = N / shift slope`: in
/// the simulator they hold the shared rate one after another, `N b / S`
/// in all, which is the shift's `b` per slope (`S` above `B`, a lone
/// message goes at `B`). None on two ranks: their shift is one pair's
/// two directions at once, which every collective on two ranks is too,
/// and a ping-pong can go faster than any collective's step for reasons
/// that are no shared rate (on shared memory it sends one clean buffer
/// over and over; 2 shm ranks measured it 1.5 to 6 times the shift's
/// rate, and a shared rate fitted from that doubled the median |error|
/// of a validation in 3 of 5 runs). None with fewer than two ping-pong sizes (no
/// shifts: `shifts` are then the ping-pongs themselves) or a ping-pong
/// slope that is not positive.
pub fn machine_sharing(
    shifts: &[(f64, f64)],
    pongs: &[(f64, f64)],
    shift_slope_ps_per_byte: f64,
    world_size: usize,
) -> Option<MachineSharing> {
    if pongs.len() < 2 || shifts == pongs || world_size < 3 {
        return None;
    }
    let (intercept_ps, slope_ps_per_byte) = two_stage_line(pongs);
    if slope_ps_per_byte <= 0.0 || shift_slope_ps_per_byte < SHARING_RATIO_MIN * slope_ps_per_byte {
        return None;
    }
    Some(MachineSharing {
        pair_points: pongs.to_vec(),
        pair_slope_ps_per_byte: slope_ps_per_byte,
        pair_intercept_ps: intercept_ps.max(0.0),
        shared_bytes_per_s: world_size as f64 * 1e12 / shift_slope_ps_per_byte,
    })
}
