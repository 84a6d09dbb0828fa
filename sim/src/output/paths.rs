//! [`check_paths`]: a command's output files may be none of its inputs
//! and no two of them the same file, checked before anything runs (`sim
//! run s.toml --csv s.toml` would replace the scenario; `--csv x --trace
//! x` would mix two files in one).
//!
//! Paths are compared as the files they name: an existing path by its
//! canonical form (symbolic links, `..` and `.` resolved) and, on Unix,
//! by device and inode (hard links); a path that does not exist yet by
//! its canonical parent directory and its name. `/dev/null` may be named
//! by any number of outputs.

use std::fs;
use std::path::{Path, PathBuf};

/// A file a command reads or writes, named for messages.
#[derive(Clone, Copy, Debug)]
pub struct Named<'a> {
    /// What it is: `the scenario`, `--csv`, ...
    pub name: &'a str,
    /// The path as given.
    pub path: &'a Path,
}

/// Which file a path names, as far as can be told before writing it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Identity {
    canonical: PathBuf,
    /// Device and inode of an existing file (Unix).
    inode: Option<(u64, u64)>,
}

impl Identity {
    fn of(path: &Path) -> Identity {
        if let Ok(canonical) = fs::canonicalize(path) {
            return Identity {
                inode: inode(&canonical),
                canonical,
            };
        }
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let canonical = match (fs::canonicalize(parent), path.file_name()) {
            (Ok(dir), Some(name)) => dir.join(name),
            // No such directory: the create will fail and say so; compare
            // the path as written.
            _ => std::env::current_dir().unwrap_or_default().join(path),
        };
        Identity {
            canonical,
            inode: None,
        }
    }

    fn same(&self, other: &Identity) -> bool {
        self.canonical == other.canonical || (self.inode.is_some() && self.inode == other.inode)
    }
}

#[cfg(unix)]
fn inode(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn inode(_: &Path) -> Option<(u64, u64)> {
    None
}

/// Refuses `outputs` that name one of `inputs` or each other (see the
/// module docs); the error says which two.
pub fn check_paths(inputs: &[Named<'_>], outputs: &[Named<'_>]) -> Result<(), String> {
    let null = Identity::of(Path::new("/dev/null"));
    let ins: Vec<Identity> = inputs.iter().map(|f| Identity::of(f.path)).collect();
    let outs: Vec<Identity> = outputs.iter().map(|f| Identity::of(f.path)).collect();
    for (o, out) in outputs.iter().zip(&outs) {
        if out.same(&null) {
            continue;
        }
        if let Some((input, _)) = inputs.iter().zip(&ins).find(|(_, i)| out.same(i)) {
            return Err(format!(
                "{} {} is {} ({}): an output may not overwrite an input",
                o.name,
                o.path.display(),
                input.name,
                input.path.display()
            ));
        }
    }
    for (i, (a, ia)) in outputs.iter().zip(&outs).enumerate() {
        if ia.same(&null) {
            continue;
        }
        if let Some((b, _)) = outputs[i + 1..]
            .iter()
            .zip(&outs[i + 1..])
            .find(|(_, ib)| ia.same(ib))
        {
            return Err(format!(
                "{} {} and {} {} are the same file: give each output its own",
                a.name,
                a.path.display(),
                b.name,
                b.path.display()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named<'a>(name: &'a str, path: &'a Path) -> Named<'a> {
        Named { name, path }
    }

    #[test]
    fn an_output_on_an_input_or_another_output_is_refused() {
        let d = std::env::temp_dir().join(format!("sim-paths-{}", std::process::id()));
        fs::create_dir_all(d.join("sub")).unwrap();
        let scenario = d.join("s.toml");
        fs::write(&scenario, "x").unwrap();
        let inputs = [named("the scenario", &scenario)];
        // The same file by another spelling.
        let other = d.join("sub/../s.toml");
        let err = check_paths(&inputs, &[named("--csv", &other)]).unwrap_err();
        assert!(err.starts_with("--csv "), "{err}");
        assert!(err.contains("is the scenario"), "{err}");
        // Two outputs that do not exist yet, spelled differently.
        let (a, b) = (d.join("out.csv"), d.join("sub/../out.csv"));
        let err = check_paths(&inputs, &[named("--csv", &a), named("--trace", &b)]).unwrap_err();
        assert!(err.contains("are the same file"), "{err}");
        let t = d.join("t.json");
        let ok = [named("--csv", &a), named("--trace", &t)];
        assert_eq!(check_paths(&inputs, &ok), Ok(()));
        // /dev/null takes any number of outputs.
        let null = Path::new("/dev/null");
        assert_eq!(
            check_paths(&inputs, &[named("--csv", null), named("--trace", null)]),
            Ok(())
        );
        #[cfg(unix)]
        {
            let link = d.join("hard.toml");
            let _ = fs::remove_file(&link);
            fs::hard_link(&scenario, &link).unwrap();
            assert!(check_paths(&inputs, &[named("--csv", &link)]).is_err());
        }
    }
}
