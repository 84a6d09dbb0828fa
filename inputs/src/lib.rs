//! Reading the files a user hands the tools, safely.
//!
//! Every input of the workspace (scenarios, check scenarios, sweep files,
//! `nvidia-smi topo -m` files, counterexamples, nccl-tests logs, sweep
//! shards) is read through [`read_text`] or [`read_bytes`] with the
//! [`InputKind`] that says what it is and how large it may be. A read:
//!
//! - refuses anything but a regular file (a FIFO, a character device such
//!   as `/dev/zero` or `/dev/urandom`, a directory, a socket) before
//!   reading a byte, and opens without blocking, so a FIFO with no writer
//!   cannot hang it;
//! - refuses a file larger than the kind's documented cap
//!   ([`InputKind::bytes_max`]), from its size before reading and again
//!   while reading (a file that grows), so memory stays bounded;
//! - for text, refuses bytes that are not UTF-8 naming the line and column
//!   of the first bad byte.
//!
//! Every refusal is an [`InputError`] naming the path, the limit and what
//! to do.
//!
//! [`shorten`] and [`shorten_quoted`] keep long values out of error
//! messages: a value echoed back is cut to its first
//! [`EXCERPT_CHARS`] characters and its length.
//!
//! # Map of the crate
//! - [`kind`]: [`InputKind`], each input's name and size cap.
//! - [`read`](mod@read): [`read_bytes`], [`read_text`], [`read_stream`].
//! - [`utf8`]: [`decode`](utf8::decode), bytes to text with the first bad
//!   byte located; [`line_column`](utf8::line_column).
//! - [`excerpt`]: [`shorten`], [`shorten_quoted`].
//! - [`error`](mod@error): [`InputError`].

pub mod error;
pub mod excerpt;
pub mod kind;
pub mod read;
pub mod utf8;

pub use error::InputError;
pub use excerpt::{EXCERPT_CHARS, shorten, shorten_quoted};
pub use kind::InputKind;
pub use read::{read_bytes, read_stream, read_text};
