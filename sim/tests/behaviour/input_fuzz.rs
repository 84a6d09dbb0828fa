//! Mutated inputs never panic a reader, and every error they give is
//! located: it names the file and a line and column, and echoes no value
//! whole. Scenarios, check scenarios, `nvidia-smi topo -m` files and
//! counterexamples are each mutated a few hundred times from valid files
//! by a seeded ChaCha generator (bytes inserted, including bytes that are
//! not UTF-8; ranges deleted; numbers replaced by extreme values; strings
//! replaced by long ones; lines repeated or cut), written to disk and read
//! back through the same functions `sim` uses. A failure prints the seed,
//! the mutant's number and its text.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use algorithms::Registry;
use checker::Check;
use engine::scenario::Scenario;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::support::{repo_root, temp_dir};

/// The seed of every generator here; a failure names it with the mutant.
const SEED: u64 = 0x21_1f_0e;

/// The longest error message a mutant may give: long values are cut to
/// 80 characters, so only the fixed text is left.
const MESSAGE_BYTES_MAX: usize = 3000;

/// Numbers a mutation may put in place of a number.
const EXTREME_VALUES: &[&str] = &[
    "0",
    "-1",
    "1",
    "2",
    "3",
    "17",
    "0.5",
    "-0.0",
    "1e-9",
    "5e-324",
    "1e308",
    "nan",
    "inf",
    "-inf",
    "9223372036854775807",
    "18446744073709551616",
    "\"\"",
    "\"1G\"",
    "true",
    "[]",
    "{}",
];

/// Bytes a mutation may insert: TOML's punctuation, line breaks, and
/// bytes that are not UTF-8 (a lone continuation byte, a cut-off
/// sequence, 0xff).
const INSERTED_BYTES: &[u8] = b"\n\n\"\"''[[]]{}==,,##..--__ aZ09\t\r\0\x80\xc3\xe2\xff";

/// Applies one to three random mutations to `bytes`.
fn mutate(rng: &mut ChaCha8Rng, valid: &[u8]) -> Vec<u8> {
    let mut bytes = valid.to_vec();
    for _ in 0..rng.random_range(1..=3) {
        let at = rng.random_range(0..=bytes.len());
        match rng.random_range(0..7) {
            0 => {
                let n = rng.random_range(1..=4);
                for _ in 0..n {
                    let b = INSERTED_BYTES[rng.random_range(0..INSERTED_BYTES.len())];
                    bytes.insert(at.min(bytes.len()), b);
                }
            }
            1 => {
                let end = (at + rng.random_range(1..=24)).min(bytes.len());
                bytes.drain(at..end);
            }
            2 | 3 => replace_number(rng, &mut bytes),
            4 => replace_string(rng, &mut bytes),
            5 => repeat_line(rng, &mut bytes),
            _ => bytes.truncate(at),
        }
    }
    bytes
}

/// Replaces a random number of the text by one of [`EXTREME_VALUES`].
fn replace_number(rng: &mut ChaCha8Rng, bytes: &mut Vec<u8>) {
    let starts: Vec<usize> = (0..bytes.len())
        .filter(|&i| bytes[i].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric()))
        .collect();
    if starts.is_empty() {
        return;
    }
    let start = starts[rng.random_range(0..starts.len())];
    let end = (start..bytes.len())
        .find(|&i| !(bytes[i].is_ascii_alphanumeric() || b".+-".contains(&bytes[i])))
        .unwrap_or(bytes.len());
    let value = EXTREME_VALUES[rng.random_range(0..EXTREME_VALUES.len())];
    bytes.splice(start..end, value.bytes());
}

/// Replaces the inside of a random `"..."` by a long, empty or unusual
/// string.
fn replace_string(rng: &mut ChaCha8Rng, bytes: &mut Vec<u8>) {
    let quotes: Vec<usize> = (0..bytes.len()).filter(|&i| bytes[i] == b'"').collect();
    if quotes.len() < 2 {
        return;
    }
    let k = rng.random_range(0..quotes.len() - 1);
    let (open, close) = (quotes[k], quotes[k + 1]);
    let long = "long".repeat(1500);
    let value = match rng.random_range(0..4) {
        0 => long.as_str(),
        1 => "",
        2 => "é∑ \\t",
        _ => "../../../../../../../../../../no/such/file",
    };
    bytes.splice(open + 1..close, value.bytes());
}

/// Repeats a random line (a duplicate key or table).
fn repeat_line(rng: &mut ChaCha8Rng, bytes: &mut Vec<u8>) {
    let starts: Vec<usize> = std::iter::once(0)
        .chain(
            (0..bytes.len())
                .filter(|&i| bytes[i] == b'\n')
                .map(|i| i + 1),
        )
        .filter(|&i| i < bytes.len())
        .collect();
    if starts.is_empty() {
        return;
    }
    let start = starts[rng.random_range(0..starts.len())];
    let end = bytes[start..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |n| start + n + 1);
    let line = bytes[start..end].to_vec();
    bytes.splice(start..start, line);
}

/// Whether `message` names one of `paths` followed by `:line:column:`.
fn located_in(message: &str, paths: &[&Path]) -> bool {
    paths.iter().any(|path| {
        let prefix = format!("{}:", path.display());
        message.match_indices(&prefix).any(|(i, _)| {
            let mut parts = message[i + prefix.len()..].splitn(3, ':');
            let number =
                |s: Option<&str>| s.is_some_and(|s| s.parse::<usize>().is_ok_and(|n| n >= 1));
            number(parts.next()) && number(parts.next()) && parts.next().is_some()
        })
    })
}

/// Runs `read` on `mutants` mutants of `valid` written to `path`;
/// asserts that it never panics and that every error is located in one
/// of `paths` and short. Returns how many mutants were refused.
fn fuzz(
    what: &str,
    valid: &[u8],
    path: &Path,
    paths: &[&Path],
    mutants: usize,
    rng: &mut ChaCha8Rng,
    read: &dyn Fn(&Path) -> Result<(), String>,
) -> usize {
    let mut refused = 0;
    for n in 0..mutants {
        let bytes = mutate(rng, valid);
        std::fs::write(path, &bytes).expect("the mutant is written");
        let text = String::from_utf8_lossy(&bytes);
        let result = catch_unwind(AssertUnwindSafe(|| read(path)));
        let Ok(result) = result else {
            panic!("{what} mutant {n} (seed {SEED:#x}) panicked the reader:\n{text}");
        };
        let Err(message) = result else { continue };
        refused += 1;
        assert!(
            located_in(&message, paths),
            "{what} mutant {n} (seed {SEED:#x}): the error is not located: {message}\n{text}"
        );
        assert!(
            message.len() <= MESSAGE_BYTES_MAX,
            "{what} mutant {n} (seed {SEED:#x}): a {}-byte message:\n{message}",
            message.len()
        );
    }
    refused
}

#[test]
fn mutated_scenarios_never_panic_and_every_error_is_located() {
    let dir = temp_dir("fuzz-scenarios");
    let path = dir.join("mutant.toml");
    let registry = Registry::builtin();
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let ideal = "name = \"fuzz\"\nworld_size = 4\nseed = 7\ntimeout_ms = 100\n\
        [links]\nlatency_us = 1.5\nbandwidth_gb_per_s = 25.0\n\
        [compute]\nreduce_gb_per_s = 200.0\n\
        [[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\nmin_bytes = 8\n\
        max_bytes = \"64K\"\niters = 2\nwarmup = 1\nchunk_bytes = \"4K\"\n\
        [[fault]]\nkind = \"straggler\"\nrank = 1\ndelay_us = 5\ncompute_slowdown = 2.0\n\
        [[inject]]\nkind = \"extra_recv\"\nrank = 3\nfrom = 1\n";
    let mut seeds = vec![ideal.as_bytes().to_vec()];
    for name in ["link_down", "straggler", "pfc_deadlock"] {
        let file = repo_root().join("scenarios").join(format!("{name}.toml"));
        seeds.push(std::fs::read(file).expect("the scenario exists"));
    }
    let mut refused = 0;
    for valid in &seeds {
        let load = |p: &Path| {
            Scenario::load(p, &registry)
                .map(drop)
                .map_err(|e| e.to_string())
        };
        assert_eq!(load_valid(&path, valid, &load), Ok(()), "the seed is valid");
        refused += fuzz("scenario", valid, &path, &[&path], 300, &mut rng, &load);
    }
    // Most mutants are refused; some (a changed name, a duplicated
    // comment) stay valid.
    assert!(refused > 600, "only {refused} of 1200 mutants refused");
}

/// Writes `valid` to `path` and reads it with `read`.
fn load_valid(
    path: &Path,
    valid: &[u8],
    read: &dyn Fn(&Path) -> Result<(), String>,
) -> Result<(), String> {
    std::fs::write(path, valid).expect("written");
    read(path)
}

#[test]
fn mutated_check_scenarios_never_panic_and_every_error_is_located() {
    let dir = temp_dir("fuzz-checks");
    let path = dir.join("mutant.toml");
    let registry = Registry::builtin();
    let mut rng = ChaCha8Rng::seed_from_u64(SEED ^ 1);
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo_root().join("scenarios/check"))
        .expect("the check scenarios exist")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    let load = |p: &Path| {
        checker::scenario::load(p, &registry)
            .map(drop)
            .map_err(|e| e.to_string())
    };
    let mut refused = 0;
    for file in &files {
        let valid = std::fs::read(file).expect("readable");
        assert_eq!(
            load_valid(&path, &valid, &load),
            Ok(()),
            "{}",
            file.display()
        );
        refused += fuzz(
            "check scenario",
            &valid,
            &path,
            &[&path],
            80,
            &mut rng,
            &load,
        );
    }
    assert!(refused > files.len() * 40, "only {refused} mutants refused");
}

#[test]
fn mutated_nvidia_smi_files_never_panic_and_every_error_is_located() {
    let dir = temp_dir("fuzz-nvsmi");
    let topo = dir.join("topo.txt");
    let scenario = dir.join("s.toml");
    std::fs::write(
        &scenario,
        "[topology]\npreset = \"nvidia_smi\"\nfile = \"topo.txt\"\nmodel = \"flow\"\n\
         [[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\nmin_bytes = 8\n\
         max_bytes = 8\niters = 1\nwarmup = 0\n",
    )
    .expect("written");
    let registry = Registry::builtin();
    let mut rng = ChaCha8Rng::seed_from_u64(SEED ^ 2);
    let load = |_: &Path| {
        Scenario::load(&scenario, &registry)
            .map(drop)
            .map_err(|e| e.to_string())
    };
    let mut refused = 0;
    for name in ["dgx1_v100.txt", "dgx_a100.txt", "pcie_8gpu.txt"] {
        let valid = std::fs::read(repo_root().join("scenarios/topo").join(name)).expect("exists");
        assert_eq!(load_valid(&topo, &valid, &load), Ok(()), "{name}");
        refused += fuzz(
            "nvidia-smi file",
            &valid,
            &topo,
            &[&topo, &scenario],
            200,
            &mut rng,
            &load,
        );
    }
    assert!(refused > 300, "only {refused} of 600 mutants refused");
}

#[test]
fn mutated_counterexamples_never_panic_and_every_error_is_located() {
    let dir = temp_dir("fuzz-cex");
    let buggy = checker::demo::algorithms()
        .into_iter()
        .find(|a| a.name() == "buggy_ring")
        .expect("the demo is registered");
    let check = Check::of(&buggy)
        .name("fuzz_buggy")
        .world_sizes(&[3])
        .counts(&[3]);
    let report = check.run().expect("the check runs");
    let (_, cex) = check.save(&dir, &report).expect("saved");
    let cex = cex.expect("the buggy ring fails");
    let valid = std::fs::read(&cex).expect("the counterexample is written");
    let path = dir.join("mutant.cex.toml");
    let registry = Registry::builtin();
    let replay = |p: &Path| {
        checker::replay::replay_file(p, &registry)
            .map(drop)
            .map_err(|e| e.to_string())
    };
    assert_eq!(
        load_valid(&path, &valid, &replay),
        Ok(()),
        "the saved file replays"
    );
    let mut rng = ChaCha8Rng::seed_from_u64(SEED ^ 3);
    let refused = fuzz(
        "counterexample",
        &valid,
        &path,
        &[&path],
        800,
        &mut rng,
        &replay,
    );
    assert!(refused > 400, "only {refused} of 800 mutants refused");
}
