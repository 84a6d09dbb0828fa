//! A port's serialization clock: how long each packet takes on the wire,
//! rounded per busy period (see *Ports* in the docs of [`super`]).
//!
//! A busy period of `b` bytes at `B` bytes per second takes exactly
//! `duration_ps(b, B) = ceil(b x 10^12 / B)`; a packet of `p` bytes takes
//! `duration(total + p) - duration(total)`. With an integer bandwidth the
//! clock keeps `total x 10^12` as a quotient and remainder by `B` and adds
//! each packet's own (cached per packet size), so the common case needs
//! no 128-bit division and no float; the result is the same integer.

use topologies::duration_ps;

/// Picoseconds per second: durations are `bytes x PS_PER_S / bandwidth`.
const PS_PER_S: u128 = 1_000_000_000_000;

/// `bytes_per_s` as an integer when [`duration_ps`] divides by it exactly
/// (an integer of at least 1) and it is below 2^63, so that two
/// remainders add up without overflow; else 0.
fn integer_bandwidth(bytes_per_s: f64) -> u64 {
    if bytes_per_s.fract() == 0.0 && bytes_per_s >= 1.0 && bytes_per_s < 2f64.powi(63) {
        bytes_per_s as u64
    } else {
        0
    }
}

/// The serialization clock of one port.
#[derive(Debug)]
pub(super) struct Wire {
    /// Current bandwidth, in bytes per second.
    bandwidth_bytes_per_s: f64,
    /// The same as an integer, or 0 (see [`integer_bandwidth`]).
    bandwidth_int: u64,
    /// Bytes serialised in the current busy period.
    period_bytes: u64,
    /// Their duration, rounded once.
    period_ps: u64,
    /// `period_bytes x 10^12 = period_quot x B + period_rem`, maintained
    /// while `period_exact`.
    period_quot: u64,
    period_rem: u64,
    period_exact: bool,
    /// The last packet size served, with `step_bytes x 10^12 =
    /// step_quot x B + step_rem` (0 bytes is 0 at any bandwidth).
    step_bytes: u64,
    step_quot: u64,
    step_rem: u64,
}

impl Wire {
    /// An idle wire at `bandwidth_bytes_per_s`.
    pub(super) fn new(bandwidth_bytes_per_s: f64) -> Wire {
        Wire {
            bandwidth_bytes_per_s,
            bandwidth_int: integer_bandwidth(bandwidth_bytes_per_s),
            period_bytes: 0,
            period_ps: 0,
            period_quot: 0,
            period_rem: 0,
            period_exact: true,
            step_bytes: 0,
            step_quot: 0,
            step_rem: 0,
        }
    }

    /// Serialization time of the next `bytes` of the current busy period:
    /// `duration(total + bytes) - duration(total)`, so that a busy period
    /// of `b` bytes takes exactly `duration(b)` whatever its packets.
    #[inline]
    pub(super) fn serialize(&mut self, bytes: u64) -> u64 {
        let end_ps = match self.period_bytes.checked_add(bytes) {
            Some(total) => {
                self.period_bytes = total;
                self.exact_end_ps(bytes)
            }
            None => {
                self.period_bytes = u64::MAX;
                None
            }
        };
        let end_ps = end_ps.unwrap_or_else(|| {
            self.period_exact = false;
            duration_ps(self.period_bytes, self.bandwidth_bytes_per_s)
        });
        // `duration_ps` is monotonic in the byte count, so this never
        // underflows; the `max` keeps that true even for huge periods.
        let ser_ps = end_ps.saturating_sub(self.period_ps);
        self.period_ps = self.period_ps.max(end_ps);
        ser_ps
    }

    /// `duration_ps(period_bytes)`, `bytes` having just been added to it,
    /// from the running quotient and remainder, when the bandwidth is an
    /// integer and nothing overflows; `None` otherwise (the caller then
    /// divides, and the period stays on that path). It equals
    /// `duration_ps`: `ceil(n / B) = q + (r > 0)` for `n = q x B + r`,
    /// and two such pairs add up with at most one carry.
    #[inline]
    fn exact_end_ps(&mut self, bytes: u64) -> Option<u64> {
        let b = self.bandwidth_int;
        if b == 0 || !self.period_exact {
            return None;
        }
        if bytes != self.step_bytes {
            let n = u128::from(bytes) * PS_PER_S;
            self.step_quot = u64::try_from(n / u128::from(b)).ok()?;
            self.step_rem = (n % u128::from(b)) as u64;
            self.step_bytes = bytes;
        }
        // Both remainders are below `b < 2^63`: the sum does not overflow.
        let mut rem = self.period_rem + self.step_rem;
        let mut quot = self.period_quot.checked_add(self.step_quot)?;
        if rem >= b {
            rem -= b;
            quot = quot.checked_add(1)?;
        }
        let end_ps = quot.checked_add(u64::from(rem > 0))?;
        self.period_quot = quot;
        self.period_rem = rem;
        Some(end_ps)
    }

    /// Sets the bandwidth for packets started from now on. A new rate
    /// starts a new busy period, so each rate's times stay exact.
    pub(super) fn set_bandwidth(&mut self, bytes_per_s: f64) {
        if bytes_per_s != self.bandwidth_bytes_per_s {
            *self = Wire::new(bytes_per_s);
        }
    }

    /// Ends the busy period: the wire is idle.
    #[inline]
    pub(super) fn go_idle(&mut self) {
        self.period_bytes = 0;
        self.period_ps = 0;
        self.period_quot = 0;
        self.period_rem = 0;
        self.period_exact = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The clock as it was first written: one division per packet.
    struct Reference {
        bandwidth_bytes_per_s: f64,
        period_bytes: u64,
        period_ps: u64,
    }

    impl Reference {
        fn serialize(&mut self, bytes: u64) -> u64 {
            self.period_bytes = self.period_bytes.saturating_add(bytes);
            let end_ps = duration_ps(self.period_bytes, self.bandwidth_bytes_per_s);
            let ser_ps = end_ps.saturating_sub(self.period_ps);
            self.period_ps = self.period_ps.max(end_ps);
            ser_ps
        }
    }

    #[test]
    fn huge_periods_fall_back_to_division() {
        let mut wire = Wire::new(3.0);
        let mut reference = Reference {
            bandwidth_bytes_per_s: 3.0,
            period_bytes: 0,
            period_ps: 0,
        };
        for bytes in [u64::MAX / 4, u64::MAX / 3, 7, u64::MAX, 1] {
            assert_eq!(wire.serialize(bytes), reference.serialize(bytes));
        }
        assert!(!wire.period_exact, "the quotient overflowed");
        wire.go_idle();
        assert_eq!(wire.serialize(4096), 1_365_333_333_333_334);
    }

    proptest::proptest! {
        /// Same times as one division per packet, over packet sizes that
        /// repeat (a full MTU) or vary, idle gaps and rate changes, at
        /// integer and fractional bandwidths.
        #[test]
        fn same_times_as_dividing_each_time(
            bandwidths in proptest::collection::vec(
                proptest::prop_oneof![
                    (1u64..1_000_000_000_000).prop_map(|b| b as f64),
                    Just(25e9), Just(50e9), Just(450e9), Just(3.0), Just(7e9 / 3.0),
                    (1.0f64..1e12),
                ],
                1..4,
            ),
            ops in proptest::collection::vec((0u8..8, 0u64..100_000), 0..400),
        ) {
            let mut wire = Wire::new(bandwidths[0]);
            let mut reference = Reference {
                bandwidth_bytes_per_s: bandwidths[0],
                period_bytes: 0,
                period_ps: 0,
            };
            for (op, x) in ops {
                match op {
                    0 => {
                        wire.go_idle();
                        reference.period_bytes = 0;
                        reference.period_ps = 0;
                    }
                    1 => {
                        let b = bandwidths[x as usize % bandwidths.len()];
                        wire.set_bandwidth(b);
                        if b != reference.bandwidth_bytes_per_s {
                            reference = Reference {
                                bandwidth_bytes_per_s: b,
                                period_bytes: 0,
                                period_ps: 0,
                            };
                        }
                    }
                    2..=4 => {
                        proptest::prop_assert_eq!(wire.serialize(4096), reference.serialize(4096));
                    }
                    _ => {
                        proptest::prop_assert_eq!(wire.serialize(x), reference.serialize(x));
                    }
                }
            }
        }
    }

    use proptest::prelude::{Just, Strategy};
}
