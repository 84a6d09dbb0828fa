//! `sim calibrate` and `sim validate`: the fit recovers a simulated
//! fabric's parameters, real calibrations write their residuals, a
//! calibrated scenario validates on shm and TCP, and a calibration of
//! another fabric or host shape is refused naming the difference.

use std::path::Path;

use algorithms::DType;
use engine::calibration::{About, Calibration, FORMAT};
use realnet::connect::FabricKind;
use sim::calibrate::fit::{fit, simulate};
use sim::calibrate::probe::Plan;
use sim::calibrate::{fitted, host};
use topologies::LinkSpec;

use super::real_support::{sim_env, text, write};
use super::support::temp_dir;

/// The simulated fabric the round trip must recover.
fn known_link(injection: Option<f64>) -> LinkSpec {
    let link = LinkSpec::new(5_000_000, 2e9)
        .unwrap()
        .with_overhead_ps(2_000_000);
    match injection {
        Some(i) => link.with_injection(i).unwrap(),
        None => link,
    }
}

/// The calibration `sim calibrate` would write for `samples` taken on
/// the simulator.
fn fitted_on_the_simulator(
    samples: &[sim::calibrate::fit::Sample],
    world_size: usize,
) -> Calibration {
    let about = About {
        format: FORMAT,
        fabric: "sim".into(),
        ranks: world_size,
        command: "test".into(),
    };
    fitted(
        about,
        host::this_host(FabricKind::Shm, None),
        samples,
        world_size,
    )
    .unwrap()
}

fn within(got: f64, want: f64, pct: f64) -> bool {
    ((got - want) / want).abs() * 100.0 <= pct
}

#[test]
fn calibrating_against_the_simulator_recovers_its_parameters_within_2_percent() {
    let world_size = 4;
    let plan = Plan::standard(4 << 20, world_size);
    let rate = |d: DType| Some(if d == DType::F64 { 8e9 } else { 4e9 });
    // Software costs too: 1.5 us per message received, 30 us per call.
    let link = known_link(Some(3e9)).with_receive_overhead_ps(1_500_000);
    let samples = simulate(&plan.probes, world_size, link, 30_000_000, rate).unwrap();
    let model = fit(&samples, world_size).unwrap();
    assert!(within(model.latency_us, 5.0, 2.0), "{model:?}");
    assert!(within(model.bandwidth_gb_per_s, 2.0, 2.0), "{model:?}");
    assert!(within(model.overhead_us, 2.0, 2.0), "{model:?}");
    assert!(within(model.receive_overhead_us, 1.5, 2.0), "{model:?}");
    assert!(within(model.call_overhead_us, 30.0, 2.0), "{model:?}");
    assert!(
        within(model.injection_gb_per_s.unwrap(), 3.0, 2.0),
        "{model:?}"
    );
    assert!(
        within(model.reduce_gb_per_s["float"], 4.0, 2.0),
        "{model:?}"
    );
    assert!(
        within(model.reduce_gb_per_s["double"], 8.0, 2.0),
        "{model:?}"
    );
    // The fitted simulator reproduces the measurements it was fitted on.
    let c = fitted_on_the_simulator(&samples, world_size);
    assert!(c.fit.worst_abs_residual_pct < 2.0, "{:?}", c.fit);
    assert_eq!(c.measurements.len(), plan.probes.len());
}

#[test]
fn a_bandwidth_that_depends_on_the_size_is_recovered_at_the_measured_sizes() {
    // 1 GB/s up to 32 KiB, 3 GB/s from 512 KiB (log-interpolated between).
    let world_size = 2;
    let curve = topologies::SizeBandwidth::new(&[(32 << 10, 1e9), (512 << 10, 3e9)]).unwrap();
    let link = known_link(None).with_size_bandwidth(curve);
    let plan = Plan::standard(4 << 20, world_size);
    let samples = simulate(&plan.probes, world_size, link, 0, |_| Some(4e9)).unwrap();
    let model = fit(&samples, world_size).unwrap();
    let at = |bytes: u64| {
        model
            .bandwidth_by_size
            .iter()
            .find(|a| a.bytes == bytes)
            .unwrap_or_else(|| panic!("no anchor at {bytes} B: {model:?}"))
            .gb_per_s
    };
    // Where the bytes take most of the time, each size's rate comes back.
    for (bytes, rate) in [(131_072, curve.rate(131_072)), (2 << 20, 3e9)] {
        assert!(within(at(bytes), rate / 1e9, 2.0), "{bytes}: {model:?}");
    }
    let c = fitted_on_the_simulator(&samples, world_size);
    // One bandwidth could not fit both ends; the curve does (within 5%:
    // the fixed cost is fitted from the small sizes, at the lower rate).
    assert!(c.fit.worst_abs_residual_pct < 5.0, "{:?}", c.fit);
    let back = Calibration::parse(Path::new("c.toml"), &c.to_toml()).unwrap();
    assert_eq!(back.model.bandwidth_by_size, c.model.bandwidth_by_size);
}

#[test]
fn links_that_share_nothing_calibrate_without_an_injection_rate() {
    let world_size = 3;
    let plan = Plan::standard(1 << 20, world_size);
    let samples = simulate(&plan.probes, world_size, known_link(None), 0, |_| Some(1e9)).unwrap();
    let model = fit(&samples, world_size).unwrap();
    assert_eq!(model.injection_gb_per_s, None, "{model:?}");
    assert!(within(model.bandwidth_gb_per_s, 2.0, 2.0), "{model:?}");
    // Two ranks measure no concurrent flows at all.
    let plan = Plan::standard(1 << 20, 2);
    assert!(plan.probes.iter().all(|p| p.runs_on(2)));
    let samples = simulate(&plan.probes, 2, known_link(Some(3e9)), 0, |_| None).unwrap();
    assert_eq!(fit(&samples, 2).unwrap().injection_gb_per_s, None);
}

#[test]
fn ranks_sharing_one_machine_calibrate_a_shared_rate_and_a_lone_pairs_bandwidth() {
    // Pairs of 2 GB/s on 4 ranks that share 3 GB/s: a shift (4 messages
    // at once) moves 0.75 GB/s per pair, a lone ping-pong 2 GB/s.
    let world_size = 4;
    let plan = Plan::standard(4 << 20, world_size);
    let link = known_link(None).with_shared(3e9).unwrap();
    let samples = simulate(&plan.probes, world_size, link, 0, |_| Some(4e9)).unwrap();
    let model = fit(&samples, world_size).unwrap();
    assert!(within(model.bandwidth_gb_per_s, 2.0, 2.0), "{model:?}");
    assert!(
        within(model.shared_gb_per_s.unwrap(), 3.0, 2.0),
        "{model:?}"
    );
    // The flows are what the shared rate makes them: no rank's own rate.
    assert_eq!(model.injection_gb_per_s, None, "{model:?}");
    // The bandwidth per size is a lone pair's, as the one bandwidth.
    for a in &model.bandwidth_by_size {
        assert!(within(a.gb_per_s, 2.0, 2.0), "{model:?}");
    }
    let c = fitted_on_the_simulator(&samples, world_size);
    assert!(c.fit.worst_abs_residual_pct < 5.0, "{:?}", c);
    // Without the shared rate the same samples were fitted as pairs of
    // the shift's 0.75 GB/s, and a lone pair's ping-pong came out 2.7
    // times too slow.
    let back = Calibration::parse(Path::new("c.toml"), &c.to_toml()).unwrap();
    assert_eq!(back.model.shared_gb_per_s, c.model.shared_gb_per_s);
    // Two ranks fit no shared rate: their shift is one pair both ways,
    // what every collective on two ranks does; its rate is the pair's
    // (here a shift of 0.75 GB/s per direction against a 2 GB/s lone
    // pair).
    let plan = Plan::standard(4 << 20, 2);
    let two = known_link(None).with_shared(1.5e9).unwrap();
    let samples = simulate(&plan.probes, 2, two, 0, |_| Some(4e9)).unwrap();
    let model = fit(&samples, 2).unwrap();
    assert_eq!(model.shared_gb_per_s, None, "{model:?}");
    assert!(within(model.bandwidth_gb_per_s, 0.75, 2.0), "{model:?}");
    // A ping-pong faster than all ranks together (as on shared memory,
    // where it sends one clean buffer over and over) is no shared rate:
    // a rate below the lone pair's bandwidth could not give it. Pairs of
    // 0.5 GB/s with the ping-pongs rewritten at 8 GB/s fit as before,
    // the shift's 0.5 GB/s and nothing shared.
    let plan = Plan::standard(4 << 20, world_size);
    let slow = LinkSpec::new(5_000_000, 0.5e9).unwrap();
    let mut samples = simulate(&plan.probes, world_size, slow, 0, |_| Some(4e9)).unwrap();
    for s in &mut samples {
        if let sim::calibrate::probe::Probe::PingPong { bytes } = s.probe {
            s.time_ps = 5_000_000 + bytes * 125;
        }
    }
    let model = fit(&samples, world_size).unwrap();
    assert_eq!(model.shared_gb_per_s, None, "{model:?}");
    assert!(within(model.bandwidth_gb_per_s, 0.5, 2.0), "{model:?}");
}

/// A calibration of `fabric` for this host (made up, not measured), for
/// the validation tests.
fn calibration_file(
    dir: &Path,
    fabric: FabricKind,
    tweak: impl FnOnce(&mut Calibration),
) -> String {
    let world_size = 2;
    let plan = Plan::standard(64 << 10, world_size);
    let samples = simulate(&plan.probes, world_size, known_link(None), 0, |_| Some(2e9)).unwrap();
    let about = About {
        format: FORMAT,
        fabric: fabric.name().into(),
        ranks: world_size,
        command: "test".into(),
    };
    let mut c = fitted(about, host::this_host(fabric, None), &samples, world_size).unwrap();
    tweak(&mut c);
    let name = format!("{}.calibration.toml", fabric.name());
    write(&dir.join(&name), &c.to_toml());
    name
}

const VALIDATED: &str = r#"
world_size = 2
[calibration]
file = "CAL"
[[collective]]
kind = "allreduce"
algorithm = "ring"
min_bytes = 64
max_bytes = "4K"
step_factor = 8
iters = 2
warmup = 1
"#;

fn validate(fabric: FabricKind, dir: &Path, cal: &str) -> std::process::Output {
    let scenario = dir.join(format!("{}-{cal}.scenario.toml", fabric.name()));
    write(&scenario, &VALIDATED.replace("CAL", cal));
    let csv = dir.join(format!("{}.csv", fabric.name()));
    sim_env(
        &[
            "launch",
            "-n",
            "2",
            "--fabric",
            fabric.name(),
            "--",
            "validate",
            scenario.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
        ],
        &[],
    )
}

#[test]
fn validate_prints_measured_and_simulated_side_by_side_on_shm_and_tcp() {
    let dir = temp_dir("validate");
    for fabric in [FabricKind::Shm, FabricKind::Tcp] {
        let cal = calibration_file(&dir, fabric, |_| {});
        let out = validate(fabric, &dir, &cal);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
        assert!(stdout.contains("measured_us"), "{stdout}");
        assert!(stdout.contains("# allreduce: median |error|"), "{stdout}");
        // Nothing was timed twice, so there is no spread to print.
        assert!(!stdout.contains("# measured twice"), "{stdout}");
        let rows: Vec<&str> = stdout
            .lines()
            .filter(|l| l.trim_start().starts_with("allreduce"))
            .collect();
        assert_eq!(rows.len(), 3, "64, 512 and 4096 bytes: {stdout}");
        let csv = std::fs::read_to_string(dir.join(format!("{}.csv", fabric.name()))).unwrap();
        assert_eq!(csv.lines().count(), 4, "{csv}");
        assert!(
            csv.lines()
                .nth(1)
                .unwrap()
                .starts_with("allreduce,ring,64,"),
            "{csv}"
        );
    }
}

#[test]
fn validate_refuses_a_calibration_of_another_fabric_or_host_shape() {
    let dir = temp_dir("validate-refused");
    let tcp = calibration_file(&dir, FabricKind::Tcp, |_| {});
    let out = validate(FabricKind::Shm, &dir, &tcp);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("was taken on the tcp fabric, not shm"),
        "{stderr}"
    );
    let other = calibration_file(&dir, FabricKind::Shm, |c| {
        c.host.cores += 62;
        c.host.numa_nodes += 1;
    });
    let out = validate(FabricKind::Shm, &dir, &other);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("a host of another shape (cores: calibrated on"),
        "{stderr}"
    );
    assert!(stderr.contains("NUMA nodes: calibrated on"), "{stderr}");
}

#[test]
fn validate_refuses_extrapolate_above() {
    let dir = temp_dir("validate-extrapolate");
    let cal = calibration_file(&dir, FabricKind::Shm, |_| {});
    let scenario = dir.join("lined.scenario.toml");
    write(
        &scenario,
        &format!(
            "{}extrapolate_above = 512\n",
            VALIDATED.replace("CAL", &cal)
        ),
    );
    let out = sim_env(
        &[
            "launch",
            "-n",
            "2",
            "--fabric",
            "shm",
            "--",
            "validate",
            scenario.to_str().unwrap(),
        ],
        &[],
    );
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{stderr}\n{}",
        text(&out.stdout)
    );
    assert!(
        stderr
            .contains("allreduce has extrapolate_above: sim validate sets every size's simulation"),
        "{stderr}"
    );
}

#[test]
fn a_real_calibration_writes_its_measurements_and_bounded_residuals() {
    let dir = temp_dir("calibrate-real");
    for fabric in [FabricKind::Shm, FabricKind::Tcp] {
        let out_path = dir.join(format!("{}.toml", fabric.name()));
        let calibrate = || {
            sim_env(
                &[
                    "launch",
                    "-n",
                    "3",
                    "--fabric",
                    fabric.name(),
                    "--",
                    "calibrate",
                    "--out",
                    out_path.to_str().unwrap(),
                    "--max-bytes",
                    "1M",
                    "--reps",
                    "3",
                ],
                &[],
            )
        };
        // Real timings on a shared machine: a fit the noise makes
        // unphysical is refused with "measure again", which is what a user
        // does; the test does it up to twice more, and then must succeed.
        let mut out = calibrate();
        for _ in 0..2 {
            if out.status.success() || !text(&out.stderr).contains("measure again") {
                break;
            }
            out = calibrate();
        }
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
        assert!(stdout.contains("# residuals: median"), "{stdout}");
        let c = Calibration::load(&out_path).unwrap();
        assert_eq!(c.calibration.fabric, fabric.name());
        assert_eq!(c.calibration.ranks, 3);
        assert_eq!(c.host.hosts, 1);
        let plan = Plan::standard(1 << 20, 3);
        assert_eq!(c.measurements.len(), plan.probes.len());
        // Every residual is the fitted time against the measured one, and
        // the summary is their median and maximum (bounded by them, not by
        // a speed this machine must reach).
        let mut worst: f64 = 0.0;
        for m in &c.measurements {
            assert!(m.measured_us > 0.0 && m.fitted_us > 0.0, "{m:?}");
            let pct = (m.fitted_us - m.measured_us) / m.measured_us * 100.0;
            assert!((pct - m.residual_pct).abs() < 0.01, "{m:?}");
            worst = worst.max(m.residual_pct.abs());
        }
        assert!(
            (c.fit.worst_abs_residual_pct - worst).abs() < 1e-9,
            "{:?}",
            c.fit
        );
        assert!(c.fit.median_abs_residual_pct <= c.fit.worst_abs_residual_pct);
        // A sanity bound, not a speed: a fit whose typical residual is
        // past 100% fits nothing.
        assert!(c.fit.median_abs_residual_pct < 100.0, "{stdout}");
        // The file's model is the one a scenario uses.
        c.link_spec().unwrap();
    }
}

#[test]
fn a_calibrated_scenario_gets_the_fitted_links_and_refuses_links_beside_them() {
    let dir = temp_dir("calibrated-scenario");
    let cal = calibration_file(&dir, FabricKind::Shm, |c| {
        c.model.injection_gb_per_s = Some(3.0);
    });
    let path = dir.join("s.toml");
    let registry = algorithms::Registry::builtin();
    let text = VALIDATED.replace("CAL", &cal);
    let s = engine::scenario::Scenario::parse(&path, &text, &registry).unwrap();
    let loaded = s.calibration.as_ref().unwrap();
    let engine::network::NetworkConfig::Ideal(link) = s.network else {
        panic!("ideal links");
    };
    assert_eq!(link, loaded.calibration.link_spec().unwrap());
    assert_eq!(link.injection_bytes_per_s, Some(3e9));
    assert!(s.input_files.contains(&dir.join(&cal)));
    assert!(s.to_string().contains("calibrated on shm"), "{s}");
    // [links] beside [calibration]: refused where [calibration] is.
    let both = format!("{text}\n[links]\nlatency_us = 1\nbandwidth_gb_per_s = 1\n");
    let e = engine::scenario::Scenario::parse(&path, &both, &registry)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("s.toml:3:1") && e.contains("remove [links]"),
        "{e}"
    );
    // A file that is not there is named, at the `file` value.
    let missing = VALIDATED.replace("CAL", "nowhere.toml");
    let e = engine::scenario::Scenario::parse(&path, &missing, &registry)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("s.toml:4:8") && e.contains("nowhere.toml"),
        "{e}"
    );
}

#[test]
fn a_calibrated_call_cost_adds_to_every_call_and_a_receive_cost_to_every_step() {
    let dir = temp_dir("calibrated-software");
    let registry = algorithms::Registry::builtin();
    let path = dir.join("s.toml");
    // Two ranks' ring allreduce at 4 KiB: two steps, each one message
    // received on every rank.
    let time_ps = |receive_us: f64, call_us: f64| {
        let cal = calibration_file(&dir, FabricKind::Shm, |c| {
            c.model.receive_overhead_us = receive_us;
            c.model.call_overhead_us = call_us;
        });
        let text = VALIDATED
            .replace("CAL", &cal)
            .replace("min_bytes = 64", "min_bytes = \"4K\"");
        let s = engine::scenario::Scenario::parse(&path, &text, &registry).unwrap();
        let rows = engine::study::run_scenario(
            &s,
            &Default::default(),
            engine::study::Options::default(),
            |_| std::ops::ControlFlow::Continue(()),
        )
        .unwrap();
        assert_eq!(rows.len(), 1);
        (s.to_string(), rows[0].time_ps)
    };
    let (plain, base) = time_ps(0.0, 0.0);
    assert!(!plain.contains("per call"), "{plain}");
    let (described, with_call) = time_ps(0.0, 25.0);
    assert_eq!(with_call, base + 25_000_000);
    assert!(described.contains("25.000 us per call"), "{described}");
    let (_, with_receive) = time_ps(3.0, 0.0);
    assert_eq!(with_receive, base + 2 * 3_000_000);
}

#[test]
fn calibrated_racks_share_their_link_and_bad_rack_keys_are_located() {
    let dir = temp_dir("calibrated-racks");
    let cal = calibration_file(&dir, FabricKind::Tcp, |_| {});
    let path = dir.join("s.toml");
    let registry = algorithms::Registry::builtin();
    let scenario = |extra: &str| {
        VALIDATED
            .replace("world_size = 2", "world_size = 4")
            .replace("file = \"CAL\"", &format!("file = \"{cal}\"\n{extra}"))
            .replace("max_bytes = \"4K\"", "max_bytes = \"1M\"")
            .replace("step_factor = 8", "step_factor = 16384")
    };
    let time_at_1m = |extra: &str| {
        let s = engine::scenario::Scenario::parse(&path, &scenario(extra), &registry).unwrap();
        let rows = engine::study::run_scenario(
            &s,
            &Default::default(),
            engine::study::Options::default(),
            |_| std::ops::ControlFlow::Continue(()),
        )
        .unwrap();
        (s, rows.last().unwrap().time_ps as f64 / 1e6)
    };
    let (_, flat) = time_at_1m("");
    let (racked, slow) = time_at_1m("racks = 2\nrack_gb_per_s = 0.25");
    let engine::network::NetworkConfig::Ideal(link) = racked.network else {
        panic!("ideal links");
    };
    let rack = link.racks.unwrap();
    assert_eq!(
        (rack.ranks_per_rack, rack.bandwidth_bytes_per_s),
        (2, 0.25e9)
    );
    assert!(
        racked.to_string().contains("in 2 racks of 2 ranks"),
        "{racked}"
    );
    // A 1 MiB ring allreduce on 4 ranks sends 2 x 3 blocks of 256 KiB on
    // each link of the ring, two of which cross the racks: at 0.25 GB/s
    // instead of 2 GB/s per pair, those dominate.
    let crossing_s = 6.0 * 262_144.0 / 0.25e9;
    assert!(slow * 1e-6 >= crossing_s, "{slow} us, flat {flat} us");
    assert!(slow > 3.0 * flat, "{slow} us, flat {flat} us");
    // Half the pair of keys, or racks that do not split the ranks: located.
    for (extra, words) in [
        ("racks = 2", "racks needs rack_gb_per_s"),
        ("rack_gb_per_s = 1.0", "rack_gb_per_s needs racks"),
        (
            "racks = 3\nrack_gb_per_s = 1.0",
            "3 racks do not split world_size = 4",
        ),
        (
            "racks = 2\nrack_gb_per_s = -1.0",
            "rack_gb_per_s must be a positive number",
        ),
    ] {
        let e = engine::scenario::Scenario::parse(&path, &scenario(extra), &registry)
            .unwrap_err()
            .to_string();
        let located = e.contains("s.toml:5:") || e.contains("s.toml:6:");
        assert!(located && e.contains(words), "{extra}: {e}");
    }
}

#[test]
fn calibrate_refuses_sizes_too_small_to_fit_and_runs_on_thread_ranks() {
    let dir = temp_dir("calibrate-threads");
    let out = dir.join("threads.toml");
    let out_arg = out.to_str().unwrap();
    let common = [
        "calibrate",
        "--fabric",
        "threads",
        "--ranks",
        "3",
        "--out",
        out_arg,
    ];
    let small = sim_env(&[&common[..], &["--max-bytes", "64"]].concat(), &[]);
    let stderr = text(&small.stderr);
    assert_eq!(small.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--max-bytes 64 is too small"), "{stderr}");
    assert!(!out.exists());
    // Sizes up to 1 MiB so the bandwidth term dominates the fit; on a
    // machine too loaded to measure, the refusal must be the clear one.
    let ok = sim_env(
        &[&common[..], &["--max-bytes", "1M", "--reps", "3"]].concat(),
        &[],
    );
    let stderr = text(&ok.stderr);
    if !ok.status.success() {
        assert_eq!(ok.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("measure again on a quieter machine"),
            "{stderr}"
        );
        assert!(!out.exists());
        return;
    }
    let c = Calibration::load(&out).unwrap();
    assert_eq!(
        (c.calibration.fabric.as_str(), c.calibration.ranks),
        ("threads", 3)
    );
}

#[test]
fn refit_fits_a_files_measurements_again_and_refuses_a_bad_file_with_exit_2() {
    let dir = temp_dir("calibrate-refit");
    // Measurements of 4 ranks sharing 3 GB/s, in a file whose [model]
    // says otherwise (as a previous build's fit would).
    let plan = Plan::standard(1 << 20, 4);
    let link = known_link(None).with_shared(3e9).unwrap();
    let samples = simulate(&plan.probes, 4, link, 0, |_| Some(4e9)).unwrap();
    let mut old = fitted_on_the_simulator(&samples, 4);
    let want = old.model.clone();
    old.model.shared_gb_per_s = None;
    old.model.bandwidth_gb_per_s = 0.75;
    let (from, to) = (dir.join("old.toml"), dir.join("new.toml"));
    write(&from, &old.to_toml());
    let args = |from: &Path| {
        [
            "calibrate",
            "--refit",
            from.to_str().unwrap(),
            "--out",
            to.to_str().unwrap(),
        ]
        .map(str::to_string)
    };
    let out = sim_env(&args(&from).each_ref().map(String::as_str), &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("GB/s by all ranks"),
        "{}",
        text(&out.stdout)
    );
    let new = Calibration::load(&to).unwrap();
    assert_eq!(new.model, want);
    assert_eq!(new.measurements.len(), samples.len());
    let bad = dir.join("bad.toml");
    write(
        &bad,
        &old.to_toml()
            .replace("probe = \"shift\"", "probe = \"warp\""),
    );
    let out = sim_env(&args(&bad).each_ref().map(String::as_str), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("unknown probe `warp`"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn refit_of_a_file_whose_measurements_cannot_be_fitted_is_bad_input() {
    // A file without the measurements a fit needs, with a time that is no
    // time, or of fewer than 2 ranks: exit 2 (bad input, as an unknown
    // probe), naming the file and what is wrong with it; never a panic
    // nor exit 1 (a tool failure) nor "measure again".
    let dir = temp_dir("calibrate-refit-bad");
    let plan = Plan::standard(1 << 20, 3);
    let samples = simulate(&plan.probes, 3, known_link(None), 0, |_| Some(4e9)).unwrap();
    let good = fitted_on_the_simulator(&samples, 3);
    let to = dir.join("new.toml");
    let refit = |name: &str, c: &Calibration| {
        let from = dir.join(name);
        write(&from, &c.to_toml());
        let out = sim_env(
            &[
                "calibrate",
                "--refit",
                from.to_str().unwrap(),
                "--out",
                to.to_str().unwrap(),
            ],
            &[],
        );
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(name), "{name}: {stderr}");
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        stderr
    };
    let mut empty = good.clone();
    empty.measurements.clear();
    refit("empty.toml", &empty);
    let mut no_pongs = good.clone();
    no_pongs
        .measurements
        .retain(|m| m.probe != "pingpong" && m.probe != "shift");
    refit("no_pongs.toml", &no_pongs);
    for (name, bad) in [("nan.toml", f64::NAN), ("negative.toml", -3.0)] {
        let mut c = good.clone();
        c.measurements[1].measured_us = bad;
        let e = refit(name, &c);
        assert!(e.contains("measured_us"), "{e}");
    }
    let mut one = good.clone();
    one.calibration.ranks = 1;
    let e = refit("one_rank.toml", &one);
    assert!(e.contains("ranks"), "{e}");
}
