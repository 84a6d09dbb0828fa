//! Calibration files: the simulator's parameters for one real fabric on
//! one kind of host, as `sim calibrate` fitted them, with what they were
//! fitted on.
//!
//! A scenario uses one with `[calibration] file = "PATH"` (instead of
//! `[links]` and `[compute]`): its ranks get ideal links with the fitted
//! latency, bandwidth (one, or one per message size), per-message sender
//! and receiver overheads, per-rank injection rate and the rate all ranks
//! share (see [`crate::links`]), reductions at the fitted rate of each
//! collective's element type, and every call of a collective starts with
//! the fitted per-call software time on every rank. The file is TOML:
//!
//! ```toml
//! [calibration]            # format 1; the fabric and job it was measured on
//! format = 1
//! fabric = "shm"
//! ranks = 4
//! command = "sim calibrate --out shm.toml"
//! [host]                   # what `sim validate` compares with the host it runs on
//! cores = 2
//! numa_nodes = 1
//! hosts = 1
//! interface = "shared memory"
//! [model]                  # the fitted parameters
//! latency_us = 1.2
//! bandwidth_gb_per_s = 3.1
//! overhead_us = 0.4
//! receive_overhead_us = 0.3 # optional: per message received (a step)
//! call_overhead_us = 5.0    # optional: per collective call
//! injection_gb_per_s = 4.0 # optional
//! shared_gb_per_s = 6.0    # optional: one rate every message shares
//! [model.reduce_gb_per_s]  # per element type
//! float = 5.0
//! [[model.bandwidth_by_size]] # optional: the pair bandwidth per message size
//! bytes = 131072
//! gb_per_s = 0.8
//! [fit]                    # residuals of the fit over the measurements
//! median_abs_residual_pct = 3.0
//! worst_abs_residual_pct = 9.0
//! [[measurement]]          # each microbenchmark, measured and as fitted
//! probe = "pingpong"
//! bytes = 8
//! messages = 1
//! peers = 1
//! measured_us = 2.5
//! fitted_us = 2.4
//! residual_pct = -4.0
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use algorithms::DType;
use serde::{Deserialize, Serialize};
use topologies::{LinkSpec, SizeBandwidth};

/// The format this build writes and reads.
pub const FORMAT: u32 = 1;

/// A calibration file's contents.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// What was measured.
    pub calibration: About,
    /// The host it was measured on.
    pub host: HostFacts,
    /// The fitted parameters.
    pub model: FittedModel,
    /// How well they fit.
    pub fit: FitSummary,
    /// The measurements, each with its fitted value.
    #[serde(default, rename = "measurement")]
    pub measurements: Vec<Measurement>,
}

/// `[calibration]`: the format, fabric and job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct About {
    /// [`FORMAT`].
    pub format: u32,
    /// The real fabric's name (`shm`, `tcp`, `verbs`, or `sim` for a
    /// calibration against the simulator itself).
    pub fabric: String,
    /// Ranks of the calibration job.
    pub ranks: usize,
    /// The command that wrote it.
    pub command: String,
}

/// `[host]`: the facts of the host (rank 0's) a calibration holds for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostFacts {
    /// Logical CPUs this process may run on.
    pub cores: usize,
    /// NUMA nodes of the machine.
    pub numa_nodes: usize,
    /// Distinct hosts among the ranks (by host name).
    pub hosts: usize,
    /// The network interface (TCP), or what carries the bytes.
    pub interface: String,
    /// The interface's MTU, where it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
}

impl HostFacts {
    /// What differs between the host shape a calibration was taken on
    /// (`self`) and `other`, one phrase per fact (empty: the same shape).
    /// The host count and interface name are not compared: a calibration
    /// is meant to predict other scales, and namespaces rename interfaces.
    pub fn differences(&self, other: &HostFacts) -> Vec<String> {
        let mut out = Vec::new();
        if self.cores != other.cores {
            out.push(format!(
                "cores: calibrated on {}, this host has {}",
                self.cores, other.cores
            ));
        }
        if self.numa_nodes != other.numa_nodes {
            out.push(format!(
                "NUMA nodes: calibrated on {}, this host has {}",
                self.numa_nodes, other.numa_nodes
            ));
        }
        if let (Some(a), Some(b)) = (self.mtu, other.mtu)
            && a != b
        {
            out.push(format!("MTU: calibrated with {a}, this interface has {b}"));
        }
        out
    }
}

/// `[model]`: the simulator's parameters for the fabric.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FittedModel {
    /// One-way latency per message beyond the overhead, microseconds.
    pub latency_us: f64,
    /// Bandwidth of one rank pair, GB/s.
    pub bandwidth_gb_per_s: f64,
    /// Per-message sender overhead, microseconds.
    pub overhead_us: f64,
    /// Per-message receiver overhead (each step of a collective waits for
    /// a message), microseconds; absent: 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub receive_overhead_us: f64,
    /// Software time on every rank at the start of each collective call,
    /// microseconds; absent: 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub call_overhead_us: f64,
    /// Each rank's total sending rate, GB/s (absent: unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub injection_gb_per_s: Option<f64>,
    /// One rate shared by every message between the ranks, GB/s: the
    /// machine's CPUs and memory when the calibration's ranks shared one
    /// host, so that all ranks moving data at once went slower than a
    /// lone pair (absent: nothing shared; then `bandwidth_gb_per_s` is
    /// what each pair gets with every rank busy). See
    /// [`topologies::LinkSpec::shared_bytes_per_s`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_gb_per_s: Option<f64>,
    /// Local reduction rate per element type name, GB/s of one operand.
    pub reduce_gb_per_s: BTreeMap<String, f64>,
    /// The pair bandwidth at the measured message sizes, where it depends
    /// on the size (`[[model.bandwidth_by_size]]`; absent: the one
    /// `bandwidth_gb_per_s` for every size). See [`topologies::SizeBandwidth`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bandwidth_by_size: Vec<SizeRate>,
}

/// Whether a parameter is 0 (left out of the file, so a calibration
/// without it is written as before).
fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// One `[[model.bandwidth_by_size]]` anchor.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SizeRate {
    /// Message size.
    pub bytes: u64,
    /// A pair's bandwidth for messages of that size, GB/s.
    pub gb_per_s: f64,
}

impl FittedModel {
    /// The per-call software time in picoseconds.
    pub fn call_overhead_ps(&self) -> u64 {
        (self.call_overhead_us.max(0.0) * 1e6).round() as u64
    }

    /// The ideal link of these parameters, checked.
    pub fn link_spec(&self) -> Result<LinkSpec, String> {
        let m = self;
        let latency_us = non_negative("latency_us", m.latency_us)?;
        let overhead_us = non_negative("overhead_us", m.overhead_us)?;
        let receive_us = non_negative("receive_overhead_us", m.receive_overhead_us)?;
        non_negative("call_overhead_us", m.call_overhead_us)?;
        let bandwidth = positive("bandwidth_gb_per_s", m.bandwidth_gb_per_s)?;
        let mut link = LinkSpec::new((latency_us * 1e6).round() as u64, bandwidth * 1e9)
            .map_err(|e| e.to_string())?
            .with_overhead_ps((overhead_us * 1e6).round() as u64)
            .with_receive_overhead_ps((receive_us * 1e6).round() as u64);
        if !m.bandwidth_by_size.is_empty() {
            let anchors: Vec<(u64, f64)> = m
                .bandwidth_by_size
                .iter()
                .map(|a| (a.bytes, a.gb_per_s * 1e9))
                .collect();
            let curve = SizeBandwidth::new(&anchors)
                .map_err(|e| format!("[[model.bandwidth_by_size]]: {e}"))?;
            link = link.with_size_bandwidth(curve);
        }
        if let Some(s) = m.shared_gb_per_s {
            link = link
                .with_shared(positive("shared_gb_per_s", s)? * 1e9)
                .map_err(|e| e.to_string())?;
        }
        match m.injection_gb_per_s {
            None => Ok(link),
            Some(i) => link
                .with_injection(positive("injection_gb_per_s", i)? * 1e9)
                .map_err(|e| e.to_string()),
        }
    }
}

/// `[fit]`: the residuals over all measurements.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitSummary {
    /// Median of |fitted - measured| / measured, percent.
    pub median_abs_residual_pct: f64,
    /// Largest of them, percent.
    pub worst_abs_residual_pct: f64,
}

/// One `[[measurement]]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measurement {
    /// `pingpong`, `shift`, `stream`, `flows`, `fanin`, `calls` or
    /// `reduce`.
    pub probe: String,
    /// Bytes per message (per operand for `reduce`).
    pub bytes: u64,
    /// Messages per timed run.
    pub messages: u32,
    /// Peers each rank sends to at once.
    pub peers: u32,
    /// The element type of a `reduce`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// The measured time, microseconds.
    pub measured_us: f64,
    /// The fitted model's time for it, microseconds.
    pub fitted_us: f64,
    /// `(fitted - measured) / measured`, percent.
    pub residual_pct: f64,
}

impl Calibration {
    /// Parses and checks calibration `text` read from `path`; errors name
    /// the path and line:column.
    pub fn parse(path: &Path, text: &str) -> Result<Calibration, String> {
        let at = |offset: usize, message: &str| {
            let before = &text[..offset.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("{}:{line}:{column}: {message}", path.display())
        };
        let c: Calibration = toml::from_str(text)
            .map_err(|e| at(e.span().map_or(0, |s| s.start), e.message().trim_end()))?;
        let whole = |message: String| format!("{}: {message}", path.display());
        if c.calibration.format != FORMAT {
            return Err(whole(format!(
                "calibration format {} is not the {FORMAT} this build reads; run sim calibrate again",
                c.calibration.format
            )));
        }
        c.link_spec().map_err(whole)?;
        for (name, rate) in &c.model.reduce_gb_per_s {
            name.parse::<DType>()
                .map_err(|e| whole(format!("[model.reduce_gb_per_s] {name}: {e}")))?;
            positive(&format!("reduce_gb_per_s.{name}"), *rate).map_err(whole)?;
        }
        Ok(c)
    }

    /// Reads and parses the calibration at `path`.
    pub fn load(path: &Path) -> Result<Calibration, String> {
        let text = inputs::read_text(path, &inputs::kind::SCENARIO).map_err(|e| e.to_string())?;
        Calibration::parse(path, &text)
    }

    /// The ideal link of the fitted model, its shared rate (if any) the
    /// calibrated machine's: shared by each `calibration.ranks`
    /// consecutive ranks of a larger world.
    pub fn link_spec(&self) -> Result<LinkSpec, String> {
        Ok(self
            .model
            .link_spec()?
            .with_shared_machine_ranks(self.calibration.ranks))
    }

    /// The fitted reduction rate of `dtype` in bytes per second, if it was
    /// measured.
    pub fn reduce_bytes_per_s(&self, dtype: DType) -> Option<f64> {
        self.model
            .reduce_gb_per_s
            .get(dtype.name())
            .map(|gb| gb * 1e9)
    }

    /// The file's text.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a calibration is plain numbers, strings and tables")
    }
}

/// `value` if finite and at least 0 (and at most 10^12 us), else an
/// error naming `what`.
fn non_negative(what: &str, value: f64) -> Result<f64, String> {
    if value.is_finite() && (0.0..=1e12).contains(&value) {
        Ok(value)
    } else {
        Err(format!(
            "[model] {what} must be between 0 and 1e12, got {value}"
        ))
    }
}

/// `value` if finite, positive and at most 10^9, else an error naming
/// `what`.
fn positive(what: &str, value: f64) -> Result<f64, String> {
    if value.is_finite() && value > 1e-9 && value <= 1e9 {
        Ok(value)
    } else {
        Err(format!(
            "[model] {what} must be between 1e-9 and 1e9, got {value}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Calibration {
        Calibration {
            calibration: About {
                format: FORMAT,
                fabric: "shm".into(),
                ranks: 4,
                command: "sim calibrate".into(),
            },
            host: HostFacts {
                cores: 2,
                numa_nodes: 1,
                hosts: 1,
                interface: "shared memory".into(),
                mtu: None,
            },
            model: FittedModel {
                latency_us: 1.5,
                bandwidth_gb_per_s: 3.0,
                overhead_us: 0.25,
                receive_overhead_us: 0.5,
                call_overhead_us: 7.0,
                injection_gb_per_s: Some(4.0),
                shared_gb_per_s: Some(6.0),
                reduce_gb_per_s: [("float".to_string(), 5.0)].into_iter().collect(),
                bandwidth_by_size: vec![
                    SizeRate {
                        bytes: 1024,
                        gb_per_s: 1.0,
                    },
                    SizeRate {
                        bytes: 1 << 20,
                        gb_per_s: 2.5,
                    },
                ],
            },
            fit: FitSummary {
                median_abs_residual_pct: 1.0,
                worst_abs_residual_pct: 2.0,
            },
            measurements: vec![Measurement {
                probe: "pingpong".into(),
                bytes: 8,
                messages: 1,
                peers: 1,
                dtype: None,
                measured_us: 2.0,
                fitted_us: 1.9,
                residual_pct: -5.0,
            }],
        }
    }

    #[test]
    fn a_calibration_reads_back_what_was_written() {
        let c = sample();
        let text = c.to_toml();
        let back = Calibration::parse(Path::new("c.toml"), &text).unwrap();
        assert_eq!(back, c);
        let link = back.link_spec().unwrap();
        assert_eq!(link.latency_ps, 1_500_000);
        assert_eq!(link.overhead_ps, 250_000);
        assert_eq!(link.receive_overhead_ps, 500_000);
        assert_eq!(back.model.call_overhead_ps(), 7_000_000);
        // Without the software costs the file reads back as before.
        let mut plain = sample();
        plain.model.receive_overhead_us = 0.0;
        plain.model.call_overhead_us = 0.0;
        let plain_text = plain.to_toml();
        assert!(!plain_text.contains("receive_overhead_us"), "{plain_text}");
        assert!(!plain_text.contains("call_overhead_us"), "{plain_text}");
        assert_eq!(
            Calibration::parse(Path::new("c.toml"), &plain_text).unwrap(),
            plain
        );
        assert_eq!(link.injection_bytes_per_s, Some(4e9));
        assert_eq!(link.shared_bytes_per_s, Some(6e9));
        // Shared by the calibrated machine's ranks, not by a larger world.
        assert_eq!(link.shared_machine_ranks, Some(back.calibration.ranks));
        // A file without the shared rate (as written before it existed)
        // loads with none.
        let old = text.replace("shared_gb_per_s = 6.0\n", "");
        assert_ne!(old, text);
        let old = Calibration::parse(Path::new("c.toml"), &old).unwrap();
        assert_eq!(old.model.shared_gb_per_s, None);
        assert_eq!(old.link_spec().unwrap().shared_bytes_per_s, None);
        let bad = text.replace("shared_gb_per_s = 6.0", "shared_gb_per_s = 0.0");
        let e = Calibration::parse(Path::new("c.toml"), &bad).unwrap_err();
        assert!(e.contains("[model] shared_gb_per_s"), "{e}");
        assert_eq!(back.reduce_bytes_per_s(DType::F32), Some(5e9));
        assert_eq!(back.reduce_bytes_per_s(DType::F64), None);
        // The size-dependent bandwidth: 1 KiB at 1 GB/s, 1 MiB at 2.5 GB/s.
        assert_eq!(link.serialization_ps(1024), 1_024_000);
        assert_eq!(link.serialization_ps(1 << 20), (1u64 << 20) * 400);
        let unordered = text.replace("bytes = 1048576", "bytes = 512");
        let e = Calibration::parse(Path::new("c.toml"), &unordered).unwrap_err();
        assert!(e.contains("[[model.bandwidth_by_size]]"), "{e}");
    }

    #[test]
    fn bad_values_are_named_with_the_file() {
        let text = sample()
            .to_toml()
            .replace("bandwidth_gb_per_s = 3.0", "bandwidth_gb_per_s = -1.0");
        let e = Calibration::parse(Path::new("c.toml"), &text).unwrap_err();
        assert!(e.starts_with("c.toml: [model] bandwidth_gb_per_s"), "{e}");
        let text = sample().to_toml().replace("cores = 2", "cores = \"two\"");
        let e = Calibration::parse(Path::new("c.toml"), &text).unwrap_err();
        assert!(e.starts_with("c.toml:"), "{e}");
        assert!(
            e.contains(':') && e.split(':').nth(1).unwrap().parse::<u32>().is_ok(),
            "{e}"
        );
    }

    #[test]
    fn host_shapes_differ_by_cores_numa_and_mtu_only() {
        let a = sample().host;
        let mut b = a.clone();
        b.hosts = 8;
        b.interface = "eth0".into();
        assert!(a.differences(&b).is_empty());
        b.cores = 64;
        b.numa_nodes = 2;
        let d = a.differences(&b);
        assert_eq!(d.len(), 2);
        assert!(d[0].contains("calibrated on 2, this host has 64"), "{d:?}");
    }
}
