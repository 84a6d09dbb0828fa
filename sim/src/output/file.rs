//! [`OutputFile`]: an output written beside its destination and renamed
//! onto it when complete, so an existing result is never truncated before
//! a new one exists, and an interrupted or failed command leaves either
//! the old file or a whole new one (a partial one says so in its last
//! line, see the commands).
//!
//! The temporary file is `.NAME.XXXXXX.tmp` in the destination's directory
//! (a rename does not cross file systems), with the destination's
//! permissions if it exists (else 0666 less the umask, as a plain create);
//! a symbolic link is followed, so its target is replaced, not the link. A
//! destination that exists and is not a regular file (`/dev/stdout`, a
//! FIFO, `/dev/full`) is written in place: it cannot be renamed onto.
//! Dropping an uncommitted `OutputFile` removes its temporary file; a
//! process killed outright (a second Ctrl-C, SIGKILL) may leave one.

use std::fs::{self, File};
use std::io::{self, BufWriter, Seek, Write};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

/// An output file that cannot be written: its path, what it is, and the
/// error.
#[derive(Debug, thiserror::Error)]
#[error("{path}: cannot write {what}: {source}")]
pub struct OutputError {
    /// The path as given on the command line.
    pub path: String,
    /// What the file is ("CSV", "trace", ...).
    pub what: &'static str,
    /// The error.
    #[source]
    pub source: io::Error,
}

/// Where an [`OutputFile`]'s bytes go.
enum Sink {
    /// A temporary file renamed onto the destination by `commit`.
    Temp(NamedTempFile),
    /// The destination itself (not a regular file).
    Direct(File),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Temp(f) => f.write(buf),
            Sink::Direct(f) => f.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Temp(f) => f.flush(),
            Sink::Direct(f) => f.flush(),
        }
    }
}

/// An output file under construction (see the module docs).
pub struct OutputFile {
    shown: PathBuf,
    what: &'static str,
    target: PathBuf,
    writer: BufWriter<Sink>,
}

impl OutputFile {
    /// Starts writing `what` to `path`: a temporary file beside it, or
    /// the destination itself if it is not a regular file.
    pub fn create(path: &Path, what: &'static str) -> Result<OutputFile, OutputError> {
        let fail = |source| OutputError {
            path: path.display().to_string(),
            what,
            source,
        };
        let (target, existing) = match fs::canonicalize(path) {
            Ok(target) => {
                let meta = fs::metadata(&target).map_err(fail)?;
                (target, Some(meta))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => (path.to_path_buf(), None),
            Err(e) => return Err(fail(e)),
        };
        let sink = match &existing {
            Some(meta) if !meta.is_file() => Sink::Direct(File::create(&target).map_err(fail)?),
            _ => Sink::Temp(temp_beside(&target, existing.as_ref()).map_err(fail)?),
        };
        Ok(OutputFile {
            shown: path.to_path_buf(),
            what,
            target,
            writer: BufWriter::new(sink),
        })
    }

    /// The path as given.
    pub fn path(&self) -> &Path {
        &self.shown
    }

    /// `source` as this file's error.
    pub fn error(&self, source: io::Error) -> OutputError {
        OutputError {
            path: self.shown.display().to_string(),
            what: self.what,
            source,
        }
    }

    /// Whether [`OutputFile::rewind`] can start the file over (a
    /// temporary file can; a device or FIFO cannot).
    pub fn can_rewind(&self) -> bool {
        matches!(self.writer.get_ref(), Sink::Temp(_))
    }

    /// Empties the file to write it again from the start.
    pub fn rewind(&mut self) -> Result<(), OutputError> {
        let emptied = self
            .writer
            .flush()
            .and_then(|()| match self.writer.get_mut() {
                Sink::Temp(f) => f.as_file_mut().set_len(0).and_then(|()| f.rewind()),
                Sink::Direct(_) => Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "the output is not a regular file",
                )),
            });
        emptied.map_err(|e| self.error(e))
    }

    /// Finishes the file: flushed and, if it was written beside its
    /// destination, renamed onto it.
    pub fn commit(self) -> Result<(), OutputError> {
        let OutputFile {
            shown,
            what,
            target,
            writer,
        } = self;
        let fail = |source| OutputError {
            path: shown.display().to_string(),
            what,
            source,
        };
        match writer.into_inner().map_err(|e| fail(e.into_error()))? {
            Sink::Temp(temp) => temp.persist(&target).map(drop).map_err(|e| fail(e.error)),
            Sink::Direct(mut file) => file.flush().map_err(fail),
        }
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }
}

/// A temporary file in `target`'s directory, with the permissions of
/// `existing` (the file it will replace) if there is one.
fn temp_beside(target: &Path, existing: Option<&fs::Metadata>) -> io::Result<NamedTempFile> {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = target
        .file_name()
        .map_or_else(|| "output".into(), |n| n.to_string_lossy());
    let prefix = format!(".{name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    if let Some(mode) = existing
        .map(fs::Metadata::permissions)
        .or_else(plain_create_permissions)
    {
        builder.permissions(mode);
    }
    builder.tempfile_in(dir)
}

/// The mode a plain create asks for (the umask then applies).
#[cfg(unix)]
fn plain_create_permissions() -> Option<fs::Permissions> {
    use std::os::unix::fs::PermissionsExt;
    Some(fs::Permissions::from_mode(0o666))
}

/// The mode a plain create asks for: the platform's default.
#[cfg(not(unix))]
fn plain_create_permissions() -> Option<fs::Permissions> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sim-output-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn entries(d: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_old_file_stays_until_the_new_one_is_committed() {
        let d = dir("commit");
        let path = d.join("out.csv");
        fs::write(&path, "old\n").unwrap();
        let mut out = OutputFile::create(&path, "CSV").unwrap();
        out.write_all(b"new\n").unwrap();
        out.flush().unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "old\n");
        assert_eq!(entries(&d).len(), 2, "the temporary file is beside it");
        out.commit().unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new\n");
        assert_eq!(entries(&d), ["out.csv"]);
    }

    #[test]
    fn an_abandoned_file_leaves_the_old_one_and_no_temporary_file() {
        let d = dir("abandon");
        let path = d.join("out.csv");
        fs::write(&path, "old\n").unwrap();
        let mut out = OutputFile::create(&path, "CSV").unwrap();
        out.write_all(b"new\n").unwrap();
        drop(out);
        assert_eq!(fs::read_to_string(&path).unwrap(), "old\n");
        assert_eq!(entries(&d), ["out.csv"]);
    }

    #[test]
    fn a_rewound_file_starts_over() {
        let d = dir("rewind");
        let path = d.join("out.csv");
        let mut out = OutputFile::create(&path, "CSV").unwrap();
        assert!(out.can_rewind());
        out.write_all(b"first draft\n").unwrap();
        out.rewind().unwrap();
        out.write_all(b"final\n").unwrap();
        out.commit().unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "final\n");
    }

    #[cfg(unix)]
    #[test]
    fn a_device_is_written_in_place_and_its_errors_name_the_path() {
        let mut out = OutputFile::create(Path::new("/dev/full"), "trace").unwrap();
        assert!(!out.can_rewind());
        out.write_all(b"x").unwrap();
        let err = out.commit().unwrap_err().to_string();
        assert!(err.starts_with("/dev/full: cannot write trace: "), "{err}");
        let missing = OutputFile::create(Path::new("/nonexistent/dir/out.csv"), "CSV");
        let err = missing.err().unwrap().to_string();
        assert!(
            err.starts_with("/nonexistent/dir/out.csv: cannot write CSV: "),
            "{err}"
        );
    }
}
