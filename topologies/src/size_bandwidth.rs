//! A pair bandwidth that depends on the message size (the ideal links of
//! a calibrated scenario: a host's TCP or shared-memory path is faster per
//! byte for some sizes than for others, e.g. an eager copy for small
//! messages and another path for large ones).
//!
//! The rate is given at anchor sizes; between two anchors it is
//! interpolated linearly in `log(size)`, below the first anchor it is the
//! first's and above the last the last's. A message of `b` bytes then
//! occupies its link for `b / rate(b)`.

use crate::TopologyError;

/// Up to [`SizeBandwidth::MAX`] anchors `(bytes, bytes per second)`, sizes
/// strictly increasing. `Copy`, so a [`crate::LinkSpec`] holding one stays
/// `Copy`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SizeBandwidth {
    anchors: [(u64, f64); SizeBandwidth::MAX],
    len: u8,
}

impl SizeBandwidth {
    /// The most anchors a curve holds.
    pub const MAX: usize = 16;

    /// A curve through `anchors`, checked: 1 to [`Self::MAX`] of them, sizes
    /// positive and strictly increasing, rates positive and finite.
    pub fn new(anchors: &[(u64, f64)]) -> Result<SizeBandwidth, TopologyError> {
        if anchors.is_empty() || anchors.len() > Self::MAX {
            return Err(TopologyError::Parameter(format!(
                "a size-dependent bandwidth needs 1 to {} anchors, got {}",
                Self::MAX,
                anchors.len()
            )));
        }
        let mut held = [(0, 0.0); Self::MAX];
        let mut previous = 0;
        for (i, &(bytes, rate)) in anchors.iter().enumerate() {
            if bytes <= previous {
                return Err(TopologyError::Parameter(format!(
                    "the anchors of a size-dependent bandwidth must have sizes above 0 and \
                     increasing, got {bytes} B after {previous} B"
                )));
            }
            if !(rate.is_finite() && rate > 0.0) {
                return Err(TopologyError::Bandwidth(rate));
            }
            held[i] = (bytes, rate);
            previous = bytes;
        }
        Ok(SizeBandwidth {
            anchors: held,
            len: anchors.len() as u8,
        })
    }

    /// The anchors, in increasing size.
    pub fn anchors(&self) -> &[(u64, f64)] {
        &self.anchors[..usize::from(self.len)]
    }

    /// The rate of a message of `bytes`, bytes per second.
    pub fn rate(&self, bytes: u64) -> f64 {
        let a = self.anchors();
        let upper = a.partition_point(|&(size, _)| size <= bytes);
        if upper == 0 {
            return a[0].1;
        }
        if upper == a.len() {
            return a[a.len() - 1].1;
        }
        let ((s0, r0), (s1, r1)) = (a[upper - 1], a[upper]);
        let f = ((bytes as f64).ln() - (s0 as f64).ln()) / ((s1 as f64).ln() - (s0 as f64).ln());
        r0 + f * (r1 - r0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_the_ends_outside_and_log_interpolated_between() {
        let c = SizeBandwidth::new(&[(1024, 1e9), (4096, 3e9), (1 << 20, 2e9)]).unwrap();
        assert_eq!(c.rate(8), 1e9);
        assert_eq!(c.rate(1024), 1e9);
        assert_eq!(c.rate(4096), 3e9);
        // 2048 is halfway between 1024 and 4096 in log(size).
        assert!((c.rate(2048) - 2e9).abs() < 1.0, "{}", c.rate(2048));
        assert_eq!(c.rate(1 << 30), 2e9);
        assert_eq!(c.anchors().len(), 3);
    }

    #[test]
    fn bad_anchors_are_refused() {
        assert!(SizeBandwidth::new(&[]).is_err());
        assert!(SizeBandwidth::new(&[(8, 1e9), (8, 2e9)]).is_err());
        assert!(SizeBandwidth::new(&[(0, 1e9)]).is_err());
        assert!(SizeBandwidth::new(&[(8, -1.0)]).is_err());
        let many: Vec<(u64, f64)> = (1..=17).map(|i| (i, 1e9)).collect();
        assert!(SizeBandwidth::new(&many).is_err());
    }
}
