//! [`InputError`]: why an input was not read.

/// Why an input file was not read. Each message names the path, and the
/// line and column for text that is not UTF-8.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// The operating system could not open or read it (missing, no
    /// permission, ...).
    #[error("{path}: cannot read {what}: {reason}")]
    Io {
        /// The file.
        path: String,
        /// What it should be ([`InputKind::name`](crate::InputKind::name)).
        what: &'static str,
        /// The operating system's reason.
        reason: String,
    },
    /// It is not a regular file: a FIFO, a device, a directory, a socket.
    #[error("{path}: cannot read {what}: {}", self.reason())]
    NotRegular {
        /// The file.
        path: String,
        /// What it should be.
        what: &'static str,
        /// What it is instead ("a character device").
        found: &'static str,
    },
    /// It is larger than its kind's cap.
    #[error("{path}: cannot read {what}: {}", self.reason())]
    TooLarge {
        /// The file.
        path: String,
        /// What it should be.
        what: &'static str,
        /// Its size in bytes, if known before reading; `None`: it grew
        /// past the cap while being read.
        size_bytes: Option<u64>,
        /// The cap, as people read it ("8 MiB").
        cap: String,
        /// What to do about it.
        hint: &'static str,
    },
    /// Text that is not UTF-8, at the first bad byte.
    #[error("{path}:{line}:{column}: {}", self.reason())]
    NotUtf8 {
        /// The file.
        path: String,
        /// What it should be.
        what: &'static str,
        /// 1-based line of the first bad byte.
        line: usize,
        /// 1-based column (in characters) of the first bad byte.
        column: usize,
        /// The bad byte.
        byte: u8,
        /// Its offset in the file.
        offset: usize,
    },
}

impl InputError {
    /// The file the error is about.
    pub fn path(&self) -> &str {
        match self {
            InputError::Io { path, .. }
            | InputError::NotRegular { path, .. }
            | InputError::TooLarge { path, .. }
            | InputError::NotUtf8 { path, .. } => path,
        }
    }

    /// The line and column of a located error (text that is not UTF-8).
    pub fn line_column(&self) -> Option<(usize, usize)> {
        match *self {
            InputError::NotUtf8 { line, column, .. } => Some((line, column)),
            _ => None,
        }
    }

    /// What is wrong, without the path and location (to follow "cannot
    /// read scenario: " or a line and column).
    pub fn reason(&self) -> String {
        match self {
            InputError::Io { reason, .. } => reason.clone(),
            InputError::NotRegular { what, found, .. } => format!(
                "it is {found}, not a regular file; {what} input must be a regular file \
                 (save generated or piped input to a file first)"
            ),
            InputError::TooLarge {
                what,
                size_bytes,
                cap,
                hint,
                ..
            } => {
                let size = match size_bytes {
                    Some(n) => format!("{n} bytes, "),
                    None => String::new(),
                };
                format!("it is {size}over the {cap} limit for {what} files; {hint}")
            }
            InputError::NotUtf8 {
                what, byte, offset, ..
            } => format!(
                "the {what} is not UTF-8 text: byte 0x{byte:02x} (offset {offset}) starts no valid \
                 character; save the file as UTF-8"
            ),
        }
    }
}
