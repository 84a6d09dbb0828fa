//! The one bounded reader: regular files only, at most the kind's cap.

use std::fs::{Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::error::InputError;
use crate::kind::InputKind;
use crate::utf8;

/// Reads the file at `path`, a `kind`, as UTF-8 text: refused if it is
/// not a regular file, larger than `kind.bytes_max`, or not UTF-8 (located
/// at the first bad byte).
pub fn read_text(path: &Path, kind: &InputKind) -> Result<String, InputError> {
    let bytes = read_bytes(path, kind)?;
    utf8::decode(bytes).map_err(|bad| InputError::NotUtf8 {
        path: path.display().to_string(),
        what: kind.name,
        line: bad.line,
        column: bad.column,
        byte: bad.byte,
        offset: bad.offset,
    })
}

/// Reads the file at `path`, a `kind`: refused, before a byte is read, if
/// it is not a regular file or is larger than `kind.bytes_max`; at most
/// `kind.bytes_max + 1` bytes are ever read.
pub fn read_bytes(path: &Path, kind: &InputKind) -> Result<Vec<u8>, InputError> {
    let shown = path.display().to_string();
    let io = |e: std::io::Error| InputError::Io {
        path: shown.clone(),
        what: kind.name,
        reason: e.to_string(),
    };
    // Look before opening: opening a device can have effects of its own.
    check_regular(&std::fs::metadata(path).map_err(io)?, &shown, kind)?;
    // Without blocking, so that a FIFO swapped in since cannot hang the
    // open; then the open file itself is checked again.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    let metadata = file.metadata().map_err(io)?;
    check_regular(&metadata, &shown, kind)?;
    if metadata.len() > kind.bytes_max {
        return Err(too_large(&shown, kind, Some(metadata.len())));
    }
    bounded(file, metadata.len(), &shown, kind)
}

/// Reads a stream (standard input), named `name` in errors, as a `kind`:
/// at most `kind.bytes_max` bytes, refused beyond.
pub fn read_stream(stream: impl Read, name: &str, kind: &InputKind) -> Result<Vec<u8>, InputError> {
    bounded(stream, 0, name, kind)
}

/// Reads at most `kind.bytes_max + 1` bytes; one more than the cap is an
/// error (the file grew, or a stream is too long).
fn bounded(
    source: impl Read,
    expected_bytes: u64,
    shown: &str,
    kind: &InputKind,
) -> Result<Vec<u8>, InputError> {
    let capacity = expected_bytes.min(kind.bytes_max) as usize + 1;
    let mut bytes = Vec::with_capacity(capacity);
    source
        .take(kind.bytes_max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| InputError::Io {
            path: shown.to_string(),
            what: kind.name,
            reason: e.to_string(),
        })?;
    if bytes.len() as u64 > kind.bytes_max {
        return Err(too_large(shown, kind, None));
    }
    Ok(bytes)
}

/// Refuses anything but a regular file, naming what it is.
fn check_regular(metadata: &Metadata, shown: &str, kind: &InputKind) -> Result<(), InputError> {
    let t = metadata.file_type();
    let found = if t.is_file() {
        return Ok(());
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    };
    Err(InputError::NotRegular {
        path: shown.to_string(),
        what: kind.name,
        found,
    })
}

fn too_large(shown: &str, kind: &InputKind, size_bytes: Option<u64>) -> InputError {
    InputError::TooLarge {
        path: shown.to_string(),
        what: kind.name,
        size_bytes,
        cap: kind.cap(),
        hint: kind.too_large_hint,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kind::SCENARIO;

    fn temp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("inputs-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    const TINY: InputKind = InputKind {
        name: "scenario",
        bytes_max: 16,
        too_large_hint: "trim it",
    };

    #[test]
    fn a_small_regular_file_reads_whole() {
        let path = temp("ok.toml", b"a = 1\n");
        assert_eq!(read_text(&path, &SCENARIO).unwrap(), "a = 1\n");
        let exact = temp("exact.toml", &[b'x'; 16]);
        assert_eq!(read_bytes(&exact, &TINY).unwrap().len(), 16);
    }

    #[test]
    fn devices_and_directories_are_refused_before_reading() {
        for (path, found) in [
            ("/dev/zero", "a character device"),
            ("/dev/urandom", "a character device"),
            ("/", "a directory"),
        ] {
            let e = read_bytes(Path::new(path), &SCENARIO).unwrap_err();
            let text = e.to_string();
            assert!(
                text.starts_with(&format!("{path}: cannot read scenario: it is {found}")),
                "{text}"
            );
            assert!(text.contains("not a regular file"), "{text}");
        }
    }

    #[test]
    fn a_fifo_without_a_writer_is_refused_at_once() {
        let dir = temp("fifo-dir-marker", b"").with_file_name("fifo");
        let _ = std::fs::remove_file(&dir);
        let made = std::process::Command::new("mkfifo").arg(&dir).status();
        assert!(made.expect("mkfifo runs").success());
        // On a thread, so that a read that blocked would fail the test
        // rather than hang it.
        let (tx, rx) = std::sync::mpsc::channel();
        let path = dir.clone();
        std::thread::spawn(move || tx.send(read_bytes(&path, &SCENARIO)));
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the read returns without a writer");
        let text = got.unwrap_err().to_string();
        assert!(
            text.contains("it is a FIFO (named pipe), not a regular file"),
            "{text}"
        );
    }

    #[test]
    fn a_file_over_the_cap_is_refused_naming_its_size_and_the_cap() {
        let path = temp("big.toml", &[b'x'; 17]);
        let text = read_bytes(&path, &TINY).unwrap_err().to_string();
        assert!(
            text.contains("it is 17 bytes, over the 16 bytes limit for scenario files; trim it"),
            "{text}"
        );
    }

    #[test]
    fn a_stream_over_the_cap_is_refused_after_the_cap() {
        let long = std::io::repeat(b'x'); // endless
        let e = read_stream(long, "<stdin>", &TINY).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("<stdin>: cannot read scenario: it is over the 16 bytes limit"),
            "{e}"
        );
        assert_eq!(
            read_stream(&b"short"[..], "<stdin>", &TINY).unwrap(),
            b"short"
        );
    }

    #[test]
    fn text_that_is_not_utf8_is_located() {
        let path = temp("latin1.toml", b"name = \"caf\xe9\"\n");
        let e = read_text(&path, &SCENARIO).unwrap_err();
        assert_eq!(e.line_column(), Some((1, 12)));
        assert!(
            e.to_string().starts_with(&format!(
                "{}:1:12: the scenario is not UTF-8 text: byte 0xe9",
                path.display()
            )),
            "{e}"
        );
    }

    #[test]
    fn a_missing_file_names_the_path() {
        let e = read_text(Path::new("/no/such/file.toml"), &SCENARIO).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/no/such/file.toml: cannot read scenario: "),
            "{e}"
        );
    }
}
