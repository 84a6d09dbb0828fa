//! Inputs that are not small regular UTF-8 files are refused at once with
//! a message naming the path and what it is: `/dev/zero` and
//! `/dev/urandom` (endless), a FIFO with no writer (a read would wait for
//! ever), a directory, and a file over its kind's cap. Each is tried as a
//! scenario, a check scenario, an `nvidia-smi` file, a counterexample, a
//! counterexample's scenario and an nccl-tests log, with `sim` run under a
//! 512 MiB address-space limit (an unbounded read of `/dev/zero`, or of
//! the 1 GiB file, would exceed it) and a hang guard. Text that is not
//! UTF-8 is located at its first bad byte; a run past the end of virtual
//! time names the value that took it there.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{repo_root, temp_dir};

/// The address space `sim` gets here, in KiB (`ulimit -v`).
const ADDRESS_SPACE_KIB: u64 = 512 * 1024;

/// How long a refusal may take before the test calls it a hang.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// Runs `sim` with `args` under the address-space limit; returns its exit
/// code and stderr. Fails the test if it runs longer than [`HANG_GUARD`]
/// (and kills it).
fn sim_bounded(args: &[&str]) -> (Option<i32>, String) {
    sim_bounded_from(args, Stdio::null())
}

/// [`sim_bounded`] with `stdin` as standard input.
fn sim_bounded_from(args: &[&str], stdin: Stdio) -> (Option<i32>, String) {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {ADDRESS_SPACE_KIB} && exec \"$0\" \"$@\""
        ))
        .arg(env!("CARGO_BIN_EXE_sim"))
        .args(args)
        .current_dir(repo_root())
        .stdin(stdin)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sh runs sim");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > HANG_GUARD {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`sim {}` hung for {HANG_GUARD:?}", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("piped"), &mut stderr)
        .expect("stderr is text");
    (status.code(), stderr)
}

/// The special inputs, each with what the refusal says it is.
fn specials(dir: &Path) -> Vec<(PathBuf, &'static str)> {
    let fifo = dir.join("fifo");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    // 1 GiB, sparse: over every cap, and over the address-space limit if
    // it were read whole.
    let big = dir.join("big.toml");
    std::fs::File::create(&big)
        .and_then(|f| f.set_len(1 << 30))
        .expect("a sparse file");
    vec![
        (
            "/dev/zero".into(),
            "it is a character device, not a regular file",
        ),
        (
            "/dev/urandom".into(),
            "it is a character device, not a regular file",
        ),
        (fifo, "it is a FIFO (named pipe), not a regular file"),
        (dir.to_path_buf(), "it is a directory, not a regular file"),
        (big, "it is 1073741824 bytes, over the "),
    ]
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// Asserts a refusal: exit status 2, `needle` in stderr, no panic.
fn assert_refused(args: &[&str], needle: &str) {
    let (code, stderr) = sim_bounded(args);
    assert_eq!(code, Some(2), "`sim {}`: {stderr}", args.join(" "));
    assert!(
        stderr.contains(needle),
        "`sim {}`: stderr lacks `{needle}`:\n{stderr}",
        args.join(" ")
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn special_files_are_refused_as_scenarios_and_check_scenarios() {
    let dir = temp_dir("special-scenarios");
    for (path, found) in specials(&dir) {
        let needle = format!("{}: cannot read scenario: {found}", path.display());
        assert_refused(&["run", s(&path)], &needle);
        assert_refused(&["check", s(&path)], &needle);
        assert_refused(&["sweep", s(&path)], &needle);
    }
}

#[test]
fn special_files_are_refused_as_nvidia_smi_topologies_at_the_file_key() {
    let dir = temp_dir("special-topologies");
    for (i, (path, found)) in specials(&dir).into_iter().enumerate() {
        let scenario = dir.join(format!("s{i}.toml"));
        std::fs::write(
            &scenario,
            format!(
                "[topology]\npreset = \"nvidia_smi\"\nfile = \"{}\"\n\
                 [[collective]]\nkind = \"allreduce\"\nmin_bytes = 8\nmax_bytes = 8\n",
                path.display()
            ),
        )
        .expect("written");
        let needle = format!(
            "{}:3:8: cannot read {}: {found}",
            scenario.display(),
            path.display()
        );
        assert_refused(&["run", s(&scenario)], &needle);
    }
}

#[test]
fn special_files_are_refused_as_counterexamples_and_their_scenarios() {
    let dir = temp_dir("special-cex");
    for (i, (path, found)) in specials(&dir).into_iter().enumerate() {
        let needle = format!("{}: cannot read counterexample: {found}", path.display());
        assert_refused(&["replay", s(&path)], &needle);
        // A counterexample naming the special file as its scenario: the
        // error is at its `scenario` value.
        let cex = dir.join(format!("c{i}.cex.toml"));
        std::fs::write(
            &cex,
            format!(
                "# sim check counterexample\nscenario = \"{}\"\nverdict = \"deadlock\"\n\
                 summary = \"x\"\nworld_size = 2\ncount = 1\nchunks = 1\nroot = 0\n\
                 in_place = true\nbuffering = \"eager:1\"\nchoices = []\n",
                path.display()
            ),
        )
        .expect("written");
        let needle = format!(
            "{}:2:12: scenario: {}: cannot read scenario: {found}",
            cex.display(),
            path.display()
        );
        assert_refused(&["replay", s(&cex)], &needle);
    }
}

#[test]
fn special_files_are_refused_as_nccl_tests_logs() {
    let dir = temp_dir("special-logs");
    let scenario = "scenarios/ring_8.toml";
    for (path, found) in specials(&dir) {
        let needle = format!("{}: cannot read nccl-tests log: {found}", path.display());
        assert_refused(&["compare", s(&path), scenario], &needle);
    }
    // An endless standard input is read up to the cap, then refused.
    let zero = std::fs::File::open("/dev/zero").expect("/dev/zero opens");
    let (code, stderr) = sim_bounded_from(&["compare", "-", scenario], zero.into());
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("<stdin>: cannot read nccl-tests log: it is over the 64 MiB limit"),
        "{stderr}"
    );
}

#[test]
fn text_that_is_not_utf8_is_located_at_its_first_bad_byte() {
    let dir = temp_dir("not-utf8");
    // Latin-1 `é` (0xe9) on line 3, after `latency_us = 1.0 # caf`.
    let scenario = dir.join("latin1.toml");
    std::fs::write(
        &scenario,
        b"world_size = 4\n[links]\nlatency_us = 1.0 # caf\xe9\nbandwidth_gb_per_s = 25.0\n\
          [[collective]]\nkind = \"allreduce\"\nmin_bytes = 8\nmax_bytes = 8\n",
    )
    .expect("written");
    assert_refused(
        &["run", s(&scenario)],
        &format!(
            "{}:3:23: the scenario is not UTF-8 text: byte 0xe9",
            scenario.display()
        ),
    );
    // In an nvidia-smi file, the error points into that file.
    let topo = dir.join("topo.txt");
    let mut matrix = std::fs::read(repo_root().join("scenarios/topo/pcie_8gpu.txt")).unwrap();
    let second_line = matrix.iter().position(|&b| b == b'\n').unwrap() + 1;
    matrix.insert(second_line + 2, 0xff);
    std::fs::write(&topo, matrix).expect("written");
    let with_topo = dir.join("s.toml");
    std::fs::write(
        &with_topo,
        "[topology]\npreset = \"nvidia_smi\"\nfile = \"topo.txt\"\n\
         [[collective]]\nkind = \"allreduce\"\nmin_bytes = 8\nmax_bytes = 8\n",
    )
    .expect("written");
    assert_refused(
        &["run", s(&with_topo)],
        &format!(
            "{}:2:3: the nvidia-smi topology is not UTF-8 text: byte 0xff",
            topo.display()
        ),
    );
    // A check scenario and a counterexample alike.
    let check = dir.join("check.toml");
    std::fs::write(&check, b"name = \"\xc3\"\n").expect("written");
    assert_refused(
        &["check", s(&check)],
        &format!(
            "{}:1:9: the scenario is not UTF-8 text: byte 0xc3",
            check.display()
        ),
    );
    let cex = dir.join("c.cex.toml");
    std::fs::write(&cex, b"# \x80\n").expect("written");
    assert_refused(
        &["replay", s(&cex)],
        &format!(
            "{}:1:3: the counterexample is not UTF-8 text: byte 0x80",
            cex.display()
        ),
    );
}

/// An ideal 4-rank allreduce of 1 MiB on links of `bandwidth` GB/s.
fn slow_scenario(bandwidth: &str) -> String {
    format!(
        "world_size = 4\n[links]\nlatency_us = 1.0\nbandwidth_gb_per_s = {bandwidth}\n\
         [[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\n\
         min_bytes = \"1M\"\nmax_bytes = \"1M\"\nphantom = true\n"
    )
}

#[test]
fn an_absurd_rate_is_refused_at_its_value() {
    let dir = temp_dir("overflow-static");
    let path = dir.join("absurd.toml");
    std::fs::write(&path, slow_scenario("5e-324")).expect("written");
    assert_refused(
        &["run", s(&path)],
        &format!(
            "{}:4:22: bandwidth_gb_per_s = 5e-324 is unrealistic: one 1048576-byte buffer \
             at this rate would take forever",
            path.display()
        ),
    );
}

#[test]
fn a_run_past_the_end_of_virtual_time_names_the_value_that_took_it_there() {
    // 1.1 B/s: one 1 MiB buffer takes 9.5e5 s, under the per-value
    // bound, but 25 calls of a ring allreduce take over 213 days.
    let dir = temp_dir("overflow-run");
    let path = dir.join("slow.toml");
    std::fs::write(&path, slow_scenario("1.1e-9")).expect("written");
    assert_refused(
        &["run", s(&path)],
        &format!(
            "{}:4:22: virtual time passed its end (2^64 ps, about 213 days) at allreduce at \
             1048576 bytes; `bandwidth_gb_per_s = 1.1e-9` here is the value that makes the \
             run's steps longest",
            path.display()
        ),
    );
}
