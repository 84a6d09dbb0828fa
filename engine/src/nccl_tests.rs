//! nccl-tests output as data, to judge the simulator against a cluster's
//! own measurements: [`parse`] reads what `all_reduce_perf`,
//! `all_gather_perf` and the other nccl-tests binaries print (one run or
//! several concatenated) into [`Table`]s of measured rows;
//! [`predict::Predictor`] runs the same collectives, sizes, types and
//! operators on a scenario; [`compare`] sets each measured row beside its
//! prediction (error per row, medians, the table and CSV of `sim compare`).
//!
//! # What the parser reads
//! ```text
//! $ ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 8          <- names the test (or, newer:
//! # nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 ...        # Collective test starting: all_reduce_perf)
//! # Using devices
//! #  Rank  0 Group  0 Pid  48213 on host device  0 [0x1b] NVIDIA H100 80GB HBM3   <- one per rank
//! #                         out-of-place                       in-place
//! #       size   count   type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
//! #        (B)  (elements)                        (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
//!            8       2  float     sum      -1    11.38    0.00    0.00      0    11.26    0.00    0.00      0
//! # Out of bounds values : 0 OK
//! # Avg bus bandwidth    : 100.161
//! ```
//!
//! Columns come from the header line, not from a fixed layout: older
//! binaries print no `redop`/`root` for some tests and an `error` column
//! instead of `#wrong`; newer ones may add `#bitdiff`, per-iteration
//! columns or a two-word `timestamp`. The test a table measured is the
//! last binary named before its header (`# Collective test starting: X`,
//! or a command line or message naming `X_perf`), else the caller's
//! fallback. The world size is the number of `Rank` lines since the last
//! `# nThread` line, else `nThread x nGpus x` the processes of an
//! `mpirun`/`srun` line, else what a per-rank count implies (`size =
//! count x element size x ranks` for allgather, reduce-scatter, alltoall,
//! gather, scatter), else `nThread x nGpus` (one process assumed). Lines
//! of NCCL's own debug output (`NCCL INFO`, `NCCL WARN`) and `mpirun
//! --tag-output` prefixes are skipped. Anything wrong in a row (the
//! number of fields, a non-number, a size that is not count x element
//! size) is a [`ParseError`] with the line and column.

mod columns;
pub mod compare;
pub mod predict;
mod reader;
#[cfg(test)]
mod tests;

use std::fmt;
use std::path::Path;

use algorithms::Collective;

/// What an nccl-tests binary measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Test {
    /// A collective the simulator runs.
    Collective(Collective),
    /// A test with no collective here (`hypercube`): its rows
    /// are read and checked, not simulated.
    Unsupported(&'static str),
}

/// The nccl-tests binaries by name without `_perf`, and whether their
/// `count` column is per rank (`size = count x element size x ranks`).
const TESTS: [(&str, Test, bool); 10] = [
    ("all_reduce", Test::Collective(Collective::Allreduce), false),
    ("all_gather", Test::Collective(Collective::Allgather), true),
    (
        "reduce_scatter",
        Test::Collective(Collective::ReduceScatter),
        true,
    ),
    ("broadcast", Test::Collective(Collective::Broadcast), false),
    ("reduce", Test::Collective(Collective::Reduce), false),
    ("alltoall", Test::Collective(Collective::Alltoall), true),
    ("gather", Test::Collective(Collective::Gather), true),
    ("scatter", Test::Collective(Collective::Scatter), true),
    ("sendrecv", Test::Collective(Collective::SendRecv), false),
    ("hypercube", Test::Unsupported("hypercube"), true),
];

impl Test {
    /// The test of a binary or collective name: `all_reduce_perf`,
    /// `all_reduce_perf_mpi`, `all_reduce`, `all-reduce` or the
    /// simulator's `allreduce`; `None` for anything else.
    pub fn from_name(name: &str) -> Option<Test> {
        let name = name.to_ascii_lowercase().replace('-', "_");
        let stem = name
            .strip_suffix("_perf_mpi")
            .or_else(|| name.strip_suffix("_perf"))
            .unwrap_or(&name);
        TESTS
            .iter()
            .find(|(binary, test, _)| *binary == stem || test.to_string() == stem)
            .map(|&(_, test, _)| test)
    }

    /// Whether the table's `count` column counts one rank's elements.
    pub fn count_is_per_rank(self) -> bool {
        TESTS
            .iter()
            .any(|&(_, test, per_rank)| test == self && per_rank)
    }

    /// The nccl-tests binary, e.g. `all_reduce_perf`.
    pub fn binary(self) -> String {
        let stem = TESTS
            .iter()
            .find(|(_, test, _)| *test == self)
            .map_or("unknown", |(binary, _, _)| binary);
        format!("{stem}_perf")
    }
}

impl fmt::Display for Test {
    /// The simulator's collective name, or the test's (`hypercube`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Test::Collective(c) => write!(f, "{c}"),
            Test::Unsupported(name) => f.write_str(name),
        }
    }
}

/// Where a buffer's result goes: nccl-tests times both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Placement {
    /// Separate input and output buffers.
    OutOfPlace,
    /// The output overwrites the input.
    InPlace,
}

impl Placement {
    /// The name nccl-tests prints above the columns.
    pub fn name(self) -> &'static str {
        match self {
            Placement::OutOfPlace => "out-of-place",
            Placement::InPlace => "in-place",
        }
    }
}

/// One placement's measurement in a row.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// Mean time per call, in microseconds.
    pub time_us: f64,
    /// Algorithm bandwidth, GB/s, as printed.
    pub algbw_gb_per_s: f64,
    /// Bus bandwidth, GB/s, as printed.
    pub busbw_gb_per_s: f64,
    /// The `#wrong` count (or, from older binaries, the `error` column's
    /// largest relative error); `None` when not checked (`N/A`).
    pub check: Option<f64>,
}

/// One data row of a table.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// Its line in the log (1-based).
    pub line: usize,
    /// The `size` column: bytes of the collective's full buffer.
    pub size_bytes: u64,
    /// The `count` column: elements (per rank for the tests whose
    /// [`Test::count_is_per_rank`]).
    pub count: u64,
    /// The element type as printed (`float`, `bfloat16`, ...).
    pub dtype: String,
    /// The reduction as printed (`sum`, `none`, ...), if the table has
    /// the column.
    pub redop: Option<String>,
    /// The root (-1 for none), if the table has the column.
    pub root: Option<i64>,
    /// The out-of-place measurement, if the table has one.
    pub out_of_place: Option<Timing>,
    /// The in-place measurement, if the table has one.
    pub in_place: Option<Timing>,
}

impl Measured {
    /// The measurement of `placement`.
    pub fn timing(&self, placement: Placement) -> Option<&Timing> {
        match placement {
            Placement::OutOfPlace => self.out_of_place.as_ref(),
            Placement::InPlace => self.in_place.as_ref(),
        }
    }
}

/// How many ranks ran a table, and how the log says so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct World {
    /// The number of ranks.
    pub ranks: usize,
    /// Where the number comes from.
    pub source: WorldSource,
}

/// Where a table's world size comes from, with the line that says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorldSource {
    /// `#  Rank N ...` lines, the first at `line`.
    RankLines {
        /// The first `Rank` line.
        line: usize,
    },
    /// `nThread x nGpus x` the processes of a launcher's command line.
    Launcher {
        /// The launcher's line.
        line: usize,
    },
    /// A row's size over its per-rank count and element size.
    Rows {
        /// The row.
        line: usize,
    },
    /// `nThread x nGpus` of the `# nThread` line, one process assumed
    /// (the log shows no `Rank` lines and no launcher).
    Header {
        /// The `# nThread` line.
        line: usize,
    },
}

impl fmt::Display for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.ranks;
        match self.source {
            WorldSource::RankLines { line } => {
                write!(f, "{n} ranks ({n} `Rank` lines from line {line})")
            }
            WorldSource::Launcher { line } => {
                write!(
                    f,
                    "{n} ranks (nThread x nGpus x the processes at line {line})"
                )
            }
            WorldSource::Rows { line } => {
                write!(f, "{n} ranks (size / count at line {line})")
            }
            WorldSource::Header { line } => write!(
                f,
                "{n} ranks (nThread x nGpus at line {line}, one process assumed: no `Rank` lines)"
            ),
        }
    }
}

/// One table of a log: a test's rows under one column header.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// The line of its column header.
    pub line: usize,
    /// What it measured.
    pub test: Test,
    /// The line that named the test; `None` when the caller's fallback
    /// did.
    pub named_at: Option<usize>,
    /// How many ranks ran it, if the log tells.
    pub world: Option<World>,
    /// The placements its columns hold, in their order.
    pub placements: Vec<Placement>,
    /// The data rows, in order.
    pub rows: Vec<Measured>,
    /// `# Avg bus bandwidth`, GB/s.
    pub avg_busbw_gb_per_s: Option<f64>,
    /// `# Out of bounds values`.
    pub out_of_bounds: Option<u64>,
}

/// A log that cannot be read as nccl-tests output.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A data row that does not fit its table's header.
    #[error("{line}:{column}: {message}")]
    Row {
        /// 1-based line.
        line: usize,
        /// 1-based column of the offending field.
        column: usize,
        /// What is wrong and what was expected.
        message: String,
    },
    /// Another line that says something it cannot (a column header
    /// without `time`, a `Rank` line without a number, ...).
    #[error("{line}: {message}")]
    Line {
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A table whose test neither the log nor the caller names.
    #[error(
        "{line}: cannot tell which collective this table measured: no `# Collective test \
         starting` line or `*_perf` command line names it; say which (sim compare --collective NAME)"
    )]
    UnknownTest {
        /// The table's column header.
        line: usize,
    },
    /// A rank listed twice in one run: separate jobs, not one.
    #[error(
        "{line}: rank {rank} is listed twice (first at line {first}): the processes did not \
         form one job (nccl-tests built without MPI support?)"
    )]
    DuplicateRank {
        /// The second `Rank` line.
        line: usize,
        /// The rank.
        rank: usize,
        /// The first.
        first: usize,
    },
    /// Nothing in the text looks like an nccl-tests table.
    #[error("no nccl-tests table (no `#  size  count  type ...` column header)")]
    NoTable,
}

impl ParseError {
    /// The same error with long values in its message shortened.
    fn shortened(self) -> ParseError {
        let short = |m: String| inputs::shorten_quoted(&m).into_owned();
        match self {
            ParseError::Row {
                line,
                column,
                message,
            } => ParseError::Row {
                line,
                column,
                message: short(message),
            },
            ParseError::Line { line, message } => ParseError::Line {
                line,
                message: short(message),
            },
            other => other,
        }
    }

    /// The line the error is at, if any.
    pub fn line(&self) -> Option<usize> {
        match *self {
            ParseError::Row { line, .. }
            | ParseError::Line { line, .. }
            | ParseError::UnknownTest { line }
            | ParseError::DuplicateRank { line, .. } => Some(line),
            ParseError::NoTable => None,
        }
    }
}

/// Reads nccl-tests output: every table, in order. A table the log does
/// not name the test of is `fallback`'s (an error without one). Long
/// values an error echoes are shortened ([`inputs::shorten_quoted`]).
pub fn parse(text: &str, fallback: Option<Test>) -> Result<Vec<Table>, ParseError> {
    reader::read(text, fallback).map_err(ParseError::shortened)
}

/// The text of the log at `path` (`-`: standard input), read through the
/// bounded reader ([`inputs::kind::NCCL_TESTS_LOG`]: a regular file or
/// stream of at most 64 MiB). Bytes that are not UTF-8 become U+FFFD, so
/// only a row they fall in is an error (logs carry other programs'
/// output).
pub fn read_log(path: &Path) -> Result<String, inputs::InputError> {
    let kind = &inputs::kind::NCCL_TESTS_LOG;
    let bytes = if path == Path::new("-") {
        inputs::read_stream(std::io::stdin().lock(), "<stdin>", kind)?
    } else {
        inputs::read_bytes(path, kind)?
    };
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
