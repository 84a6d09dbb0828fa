//! The alpha-beta-gamma cost model: what a message and a reduction cost
//! under the simulator's ideal link model.
//!
//! A message of `b` bytes costs `α + ⌈b / B⌉` (latency plus serialisation,
//! rounded up to a picosecond); reducing `b` bytes costs `⌈b / R⌉` (zero
//! when the reduction rate is not modelled). Each algorithm's `cost_ps`
//! composes these terms into its closed form, which equals the simulated
//! time exactly under ideal links (each ordered rank pair its own link).

/// Time to move `bytes` at `bytes_per_s`, in picoseconds, rounded up so that
/// non-empty work never takes zero time.
///
/// Computed as `ceil(bytes * 1e12 / bytes_per_s)`; when the rate is a whole
/// number of bytes per second this is exact integer arithmetic.
pub fn duration_ps(bytes: u64, bytes_per_s: f64) -> u64 {
    if bytes_per_s.fract() == 0.0 && bytes_per_s >= 1.0 && bytes_per_s <= u64::MAX as f64 {
        let ps = (bytes as u128 * 1_000_000_000_000).div_ceil(bytes_per_s as u128);
        u64::try_from(ps).unwrap_or(u64::MAX)
    } else {
        (bytes as f64 * 1e12 / bytes_per_s)
            .ceil()
            .min(u64::MAX as f64) as u64
    }
}

/// The parameters of the alpha-beta-gamma model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostModel {
    /// α: per-message latency in picoseconds.
    pub latency_ps: u64,
    /// 1/β: link bandwidth per direction, bytes per second.
    pub bandwidth_bytes_per_s: f64,
    /// 1/γ: reduction throughput per rank, bytes per second (`None`: free).
    pub reduce_bytes_per_s: Option<f64>,
}

impl CostModel {
    /// Serialisation time of `bytes` on one link (no latency).
    pub fn wire_ps(&self, bytes: u64) -> u64 {
        duration_ps(bytes, self.bandwidth_bytes_per_s)
    }

    /// Time from sending `bytes` on an idle link to their arrival: `α + b/B`.
    pub fn message_ps(&self, bytes: u64) -> u64 {
        self.latency_ps.saturating_add(self.wire_ps(bytes))
    }

    /// Time to reduce `bytes` of incoming data into a local buffer.
    pub fn reduce_ps(&self, bytes: u64) -> u64 {
        self.reduce_bytes_per_s.map_or(0, |r| duration_ps(bytes, r))
    }
}
