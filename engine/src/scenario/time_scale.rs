//! The scenario values that set how long a run takes in virtual time:
//! rates (a link's or a reduction's bandwidth, a degraded link's factor, a
//! straggler's slowdown) and delays (latencies, a straggler's delay, NCCL's
//! launch gap).
//!
//! Virtual time is a `u64` of picoseconds and ends after 2^64 ps (about
//! 213 days). A value that alone makes one step of the run take longer
//! than [`VALUE_PS_MAX`] (the cap latencies already have) is refused where
//! it is written; a run that still passes the end names the value that
//! makes its steps longest
//! ([`Scenario::slowest_value`](super::Scenario::slowest_value)), so the
//! error points at a line of the file rather than at "the link bandwidth,
//! latency or reduction rate".
//!
//! What a value "makes one step take" is an estimate: a rate's time for
//! the scenario's largest buffer (a rank of any collective moves or reduces
//! at least that much per call, within a factor of its rank count), a
//! delay's own length.

use std::path::Path;

use toml::Spanned;

use super::ScenarioError;
use super::raw::RawScenario;
use super::validate::Source;

/// The longest one value may make one step take: 10^18 ps, about 11.6
/// days, the cap every latency and delay already has.
pub const VALUE_PS_MAX: f64 = 1e18;

/// The bandwidth a degraded link is assumed to have before its
/// `bandwidth_factor` (100 GB/s, faster than most links, so the estimate
/// of the degraded time is low).
const NOMINAL_BYTES_PER_S: f64 = 100e9;

/// A value of the scenario that sets how long something takes, and where
/// it is written.
#[derive(Clone, Debug, PartialEq)]
pub struct TimeValue {
    /// 1-based line of the value.
    pub line: usize,
    /// 1-based column of the value.
    pub column: usize,
    /// Its key (`bandwidth_gb_per_s`).
    pub key: &'static str,
    /// The value as written.
    pub value: f64,
    /// How long it alone makes one step take, in ps (see the module docs).
    pub ps: f64,
    /// What that step is ("one 1048576-byte buffer at this rate").
    pub step: String,
    /// Whether [`check`] refuses it beyond [`VALUE_PS_MAX`].
    capped: bool,
}

impl TimeValue {
    /// `path:line:column`, where the value is.
    pub fn location(&self, path: &Path) -> String {
        format!("{}:{}:{}", path.display(), self.line, self.column)
    }

    /// `key = value`, the value in exponent form when it is tiny or huge.
    pub fn assignment(&self) -> String {
        format!("{} = {}", self.key, number(self.value))
    }

    /// How long its step takes, in seconds of virtual time, or "forever".
    pub fn duration(&self) -> String {
        if self.ps.is_finite() {
            format!("{:.3e} s of virtual time", self.ps / 1e12)
        } else {
            "forever".to_string()
        }
    }
}

/// `x` as people write it: `5e-324` rather than 324 digits.
fn number(x: f64) -> String {
    if x != 0.0 && !(1e-4..1e15).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        x.to_string()
    }
}

/// Collects the values with their estimates; `largest_bytes` is the
/// largest buffer of any `[[collective]]`.
struct Collector<'a> {
    src: &'a Source<'a>,
    largest_bytes: f64,
    values: Vec<TimeValue>,
}

impl Collector<'_> {
    /// A rate in bytes per second (`scale` times the value as written);
    /// `at` says at what ("at this rate").
    fn rate(&mut self, v: &Option<Spanned<f64>>, key: &'static str, scale: f64, at: &str) {
        let Some(v) = v else { return };
        let bytes_per_s = v.get_ref() * scale;
        // Values that are not positive and finite are refused by their own
        // checks, with their own messages.
        if !(bytes_per_s > 0.0 && v.get_ref().is_finite()) {
            return;
        }
        let step = format!("one {}-byte buffer {at}", self.largest_bytes);
        let ps = self.largest_bytes / bytes_per_s * 1e12;
        self.push(v, key, ps, step, true);
    }

    /// A delay, `ps_per_unit` picoseconds per unit written; `capped`:
    /// whether [`check`] refuses it (delays with a cap of their own are
    /// refused by it, with its message).
    fn delay(
        &mut self,
        v: &Option<Spanned<f64>>,
        key: &'static str,
        ps_per_unit: f64,
        capped: bool,
    ) {
        let Some(v) = v else { return };
        if !(v.get_ref().is_finite() && *v.get_ref() >= 0.0) {
            return;
        }
        let ps = v.get_ref() * ps_per_unit;
        self.push(v, key, ps, "the delay itself".into(), capped);
    }

    fn push(&mut self, v: &Spanned<f64>, key: &'static str, ps: f64, step: String, capped: bool) {
        let (line, column) = self.src.position(v.span().start);
        self.values.push(TimeValue {
            line,
            column,
            key,
            value: *v.get_ref(),
            ps,
            step,
            capped,
        });
    }
}

/// The time-setting values of `raw`, each with its estimate, in file
/// order of their tables.
pub(super) fn values(src: &Source, raw: &RawScenario) -> Vec<TimeValue> {
    let largest_bytes = raw
        .collective
        .iter()
        .map(|c| c.get_ref().max_bytes.get_ref().0)
        .max()
        .unwrap_or(0) as f64;
    let mut c = Collector {
        src,
        largest_bytes,
        values: Vec::new(),
    };
    if let Some(links) = &raw.links {
        let l = links.get_ref();
        c.delay(&Some(l.latency_us.clone()), "latency_us", 1e6, false);
        let bandwidth = Some(l.bandwidth_gb_per_s.clone());
        c.rate(&bandwidth, "bandwidth_gb_per_s", 1e9, "at this rate");
    }
    let reduce = raw.compute.as_ref().map(|r| r.reduce_gb_per_s.clone());
    c.rate(&reduce, "reduce_gb_per_s", 1e9, "reduced at this rate");
    if let Some(t) = &raw.topology {
        let t = t.get_ref();
        for v in &t.vertex {
            c.delay(
                &v.get_ref().forward_latency_ns,
                "forward_latency_ns",
                1e3,
                false,
            );
        }
        for l in &t.link {
            let l = l.get_ref();
            c.rate(
                &l.bandwidth_gb_per_s,
                "bandwidth_gb_per_s",
                1e9,
                "at this rate",
            );
            c.delay(&l.latency_ns, "latency_ns", 1e3, false);
        }
    }
    for f in &raw.fault {
        let f = f.get_ref();
        c.delay(&f.delay_us, "delay_us", 1e6, false);
        // A straggler reduces at the [compute] rate divided by its slowdown.
        if let (Some(s), Some(r)) = (&f.compute_slowdown, &reduce) {
            let rate = r.get_ref() * 1e9 / s.get_ref();
            if rate.is_finite() && rate > 0.0 {
                let step = format!("one {largest_bytes}-byte reduction at the slowed rate");
                c.push(
                    s,
                    "compute_slowdown",
                    largest_bytes / rate * 1e12,
                    step,
                    true,
                );
            }
        }
    }
    for l in &raw.link_fault {
        let factor = &l.get_ref().bandwidth_factor;
        let at = "on a 100 GB/s link degraded by this factor";
        c.rate(factor, "bandwidth_factor", NOMINAL_BYTES_PER_S, at);
    }
    if let Some(n) = &raw.nccl {
        // NCCL's launch gap has no cap of its own.
        c.delay(&n.get_ref().launch_us, "launch_us", 1e6, true);
    }
    c.values
}

/// Refuses the first value that alone makes one step take longer than
/// [`VALUE_PS_MAX`], at the value.
pub(super) fn check(src: &Source, values: &[TimeValue]) -> Result<(), ScenarioError> {
    let Some(v) = values.iter().find(|v| v.capped && v.ps > VALUE_PS_MAX) else {
        return Ok(());
    };
    Err(ScenarioError::at(
        src.path,
        v.line,
        v.column,
        &format!(
            "{} is unrealistic: {} would take {}, more than the {:.0e} s \
             (about 11.6 days) one value may make a step take (virtual time ends after \
             2^64 ps, about 213 days)",
            v.assignment(),
            v.step,
            v.duration(),
            VALUE_PS_MAX / 1e12
        ),
    ))
}

/// The value that makes its step longest: the one a run that passes the
/// end of virtual time names.
pub(super) fn slowest(values: Vec<TimeValue>) -> Option<TimeValue> {
    values
        .into_iter()
        .filter(|v| v.ps > 0.0)
        .max_by(|a, b| a.ps.total_cmp(&b.ps))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use algorithms::Registry;

    use crate::scenario::{Scenario, ScenarioError};

    const BASE: &str = "world_size = 4\n\
[links]\n\
latency_us = 1.0\n\
bandwidth_gb_per_s = 25.0\n\
[compute]\n\
reduce_gb_per_s = 100.0\n\
[[collective]]\n\
kind = \"allreduce\"\n\
min_bytes = 8\n\
max_bytes = \"1M\"\n";

    fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse(Path::new("t.toml"), text, &Registry::builtin())
    }

    #[test]
    fn an_absurd_rate_is_refused_at_its_value_whichever_it_is() {
        let cases = [
            (
                "bandwidth_gb_per_s = 25.0",
                "bandwidth_gb_per_s = 5e-324",
                4,
                22,
            ),
            ("reduce_gb_per_s = 100.0", "reduce_gb_per_s = 1e-12", 6, 19),
        ];
        for (from, to, line, column) in cases {
            match parse(&BASE.replace(from, to)) {
                Err(ScenarioError::Invalid {
                    line: l,
                    column: c,
                    message,
                    ..
                }) => {
                    assert_eq!((l, c), (line, column), "{message}");
                    let key = to.split(' ').next().unwrap();
                    assert!(message.starts_with(key), "{message}");
                    assert!(message.contains("is unrealistic"), "{message}");
                }
                other => panic!("{to}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_delay_with_a_cap_of_its_own_keeps_its_own_message() {
        let text = BASE.replace("latency_us = 1.0", "latency_us = 1e13");
        let Err(ScenarioError::Invalid { message, .. }) = parse(&text) else {
            panic!("refused");
        };
        assert_eq!(message, "latency_us is unreasonably large");
    }

    #[test]
    fn the_slowest_value_is_the_one_whose_step_is_longest() {
        let s = parse(BASE).expect("valid");
        // 1 MiB at 25 GB/s (42 us) beats a 1 us latency and 1 MiB
        // reduced at 100 GB/s (10 us).
        let v = s.slowest_value.as_ref().expect("the file has rates");
        assert_eq!((v.key, v.line, v.column), ("bandwidth_gb_per_s", 4, 22));
        assert_eq!(v.assignment(), "bandwidth_gb_per_s = 25");
        let message = s.out_of_time_message("allreduce at 1048576 bytes");
        assert!(
            message.starts_with("t.toml:4:22: virtual time passed its end (2^64 ps, about 213 days) at allreduce at 1048576 bytes; `bandwidth_gb_per_s = 25` here"),
            "{message}"
        );
        let slow = parse(&BASE.replace("latency_us = 1.0", "latency_us = 1e6")).unwrap();
        let v = slow.slowest_value.unwrap();
        assert_eq!((v.key, v.line), ("latency_us", 3));
    }
}
