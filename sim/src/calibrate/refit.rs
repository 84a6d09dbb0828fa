//! `sim calibrate --refit FILE`: the fit made again from the
//! measurements a calibration file holds, without measuring (a
//! calibration taken on a cluster refitted by a newer build, or its fit
//! compared with another on the very same measurements).

use std::io;
use std::path::Path;

use algorithms::DType;
use engine::calibration::{Calibration, Measurement};

use super::fit::Sample;
use super::probe::Probe;
use super::write_calibration;
use crate::exit::ExitStatus;
use crate::output::OutputFile;

/// The probe a `[[measurement]]` row measured, or why it names none.
pub fn probe_of(m: &Measurement) -> Result<Probe, String> {
    let bytes = m.bytes;
    Ok(match m.probe.as_str() {
        "pingpong" => Probe::PingPong { bytes },
        "shift" => Probe::Shift { bytes },
        "stream" => Probe::Stream {
            bytes,
            messages: m.messages,
        },
        "flows" => Probe::Flows { bytes },
        "fanin" => Probe::FanIn { bytes },
        "calls" => Probe::Calls { bytes },
        "reduce" => {
            let name = m
                .dtype
                .as_deref()
                .ok_or("a reduce measurement without its dtype")?;
            let dtype = name.parse::<DType>().map_err(|e| e.to_string())?;
            Probe::Reduce { dtype, bytes }
        }
        other => return Err(format!("unknown probe `{other}` in a [[measurement]]")),
    })
}

/// The measured samples of calibration `c`, in the file's order.
pub fn samples_of(c: &Calibration) -> Result<Vec<Sample>, String> {
    c.measurements
        .iter()
        .map(|m| {
            Ok(Sample {
                probe: probe_of(m)?,
                time_ps: (m.measured_us * 1e6).round() as u64,
            })
        })
        .collect()
}

/// Refits the calibration at `path` from its measurements and writes the
/// new one to `out`, with `command` as the command that wrote it.
pub fn refit(path: &Path, out: &Path, command: &str) -> io::Result<ExitStatus> {
    let loaded = Calibration::load(path).and_then(|c| {
        let samples = samples_of(&c).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok((c, samples))
    });
    let (c, samples) = match loaded {
        Ok(l) => l,
        Err(e) => {
            crate::report!("error: {e}");
            return Ok(ExitStatus::InvalidInput);
        }
    };
    let file = match OutputFile::create(out, "calibration") {
        Ok(f) => f,
        Err(e) => {
            crate::report!("error: {e}");
            return Ok(ExitStatus::ToolFailed);
        }
    };
    let mut about = c.calibration;
    about.command = command.to_string();
    let ranks = about.ranks;
    write_calibration(file, about, c.host, &samples, ranks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::fit::simulate;
    use crate::calibrate::probe::Plan;
    use crate::calibrate::{fitted, host};
    use engine::calibration::{About, FORMAT};
    use realnet::connect::FabricKind;
    use topologies::LinkSpec;

    #[test]
    fn a_refit_reads_back_the_samples_and_fits_the_same_model() {
        let plan = Plan::standard(1 << 20, 3);
        let link = LinkSpec::new(5_000_000, 2e9)
            .unwrap()
            .with_overhead_ps(1_000_000)
            .with_shared(2.5e9)
            .unwrap();
        let samples = simulate(&plan.probes, 3, link, 0, |_| Some(3e9)).unwrap();
        let about = About {
            format: FORMAT,
            fabric: "sim".into(),
            ranks: 3,
            command: "test".into(),
        };
        let host = host::this_host(FabricKind::Shm, None);
        let c = fitted(about, host, &samples, 3).unwrap();
        let back = Calibration::parse(Path::new("c.toml"), &c.to_toml()).unwrap();
        assert_eq!(samples_of(&back).unwrap(), samples);
        let again = fitted(back.calibration.clone(), back.host.clone(), &samples, 3).unwrap();
        assert_eq!(again.model, c.model);
        assert!(c.model.shared_gb_per_s.is_some(), "{:?}", c.model);
        let mut unknown = back.measurements[0].clone();
        unknown.probe = "teleport".into();
        assert!(probe_of(&unknown).unwrap_err().contains("teleport"));
    }
}
