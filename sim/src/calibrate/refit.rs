//! `sim calibrate --refit FILE`: the fit made again from the
//! measurements a calibration file holds, without measuring (a
//! calibration taken on a cluster refitted by a newer build, or its fit
//! compared with another on the very same measurements).

use std::io;
use std::path::Path;

use engine::calibration::Calibration;

use super::fit::Sample;
use super::probe::Probe;
use super::{fitted, write_fitted};
use crate::exit::ExitStatus;
use crate::output::OutputFile;

/// The measured samples of calibration `c`, in the file's order; an
/// error for a time that is not a positive, finite number of
/// microseconds.
pub fn samples_of(c: &Calibration) -> Result<Vec<Sample>, String> {
    c.measurements
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let us = m.measured_us;
            if !(us.is_finite() && us > 0.0) {
                return Err(format!(
                    "[[measurement]] {} ({} of {} B): measured_us = {us} is not a positive time",
                    i + 1,
                    m.probe,
                    m.bytes
                ));
            }
            Ok(Sample {
                probe: Probe::of_measurement(m)?,
                time_ps: (us * 1e6).round() as u64,
            })
        })
        .collect()
}

/// Refits the calibration at `path` from its measurements and writes the
/// new one to `out`, with `command` as the command that wrote it.
pub fn refit(path: &Path, out: &Path, command: &str) -> io::Result<ExitStatus> {
    // A file's measurements that cannot be fitted are bad input (exit 2),
    // not a failure of the tool nor a noisy machine to measure again.
    let refitted = Calibration::load(path).and_then(|c| {
        let at = |e: String| format!("{}: {e}", path.display());
        let samples = samples_of(&c).map_err(at)?;
        let ranks = c.calibration.ranks;
        if ranks < 2 {
            return Err(at(format!(
                "[calibration] ranks = {ranks}: a calibration measures at least 2 ranks"
            )));
        }
        let mut about = c.calibration;
        about.command = command.to_string();
        fitted(about, c.host, &samples, ranks)
            .map_err(|e| at(format!("its measurements cannot be fitted: {e}")))
    });
    let calibration = match refitted {
        Ok(c) => c,
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
    write_fitted(file, &calibration)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::fit::simulate;
    use crate::calibrate::host;
    use crate::calibrate::probe::Plan;
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
        assert!(
            Probe::of_measurement(&unknown)
                .unwrap_err()
                .contains("teleport")
        );
    }
}
