//! [`Stdout`]: standard output that outlives its reader. When the reader
//! goes away (`sim run s.toml | head`, a closed pipe: EPIPE, Rust ignoring
//! SIGPIPE), what is written after is dropped and the command goes on, so
//! its verdict still decides the exit status; any other write error (a
//! full disk) is returned, and the command exits 1 naming stdout.

use std::io::{self, Write};

/// Standard output, with a closed reader tolerated (see the module docs).
#[derive(Debug, Default)]
pub struct Stdout {
    closed: bool,
}

impl Stdout {
    /// Standard output.
    pub fn new() -> Stdout {
        Stdout::default()
    }

    /// `result`, unless it is a closed reader's: then remember it and
    /// pretend `written` bytes went out.
    fn tolerate<T>(&mut self, result: io::Result<T>, written: T) -> io::Result<T> {
        match result {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(written)
            }
            other => other,
        }
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.closed {
            return Ok(buf.len());
        }
        let result = io::stdout().write(buf);
        self.tolerate(result, buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.closed {
            return Ok(());
        }
        let result = io::stdout().flush();
        self.tolerate(result, ())
    }
}
