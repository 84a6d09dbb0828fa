//! [`ScenarioError`], what every scenario, sweep and check file reports
//! when it cannot be read or is not valid (file, line and column), and
//! [`read_file`], the bounded reader those files go through.

use std::path::Path;

/// A scenario that cannot be read or is not valid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{path}: cannot read scenario: {reason}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The file is not valid at a place in it.
    #[error("{path}:{line}:{column}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong and what was expected.
        message: String,
    },
}

impl ScenarioError {
    /// An error at `line`:`column` of `path`; long values quoted in
    /// `message` are shortened ([`inputs::shorten_quoted`]), so a 2 MB
    /// string is not echoed whole.
    pub fn at(path: &Path, line: usize, column: usize, message: &str) -> ScenarioError {
        ScenarioError::Invalid {
            path: path.display().to_string(),
            line,
            column,
            message: inputs::shorten_quoted(message).into_owned(),
        }
    }
}

impl From<inputs::InputError> for ScenarioError {
    /// Text that is not UTF-8 is located at its first bad byte; a file
    /// that cannot or may not be read (missing, a device, a FIFO, over
    /// the cap) says why.
    fn from(e: inputs::InputError) -> ScenarioError {
        match e.line_column() {
            Some((line, column)) => ScenarioError::Invalid {
                path: e.path().to_string(),
                line,
                column,
                message: e.reason(),
            },
            None => ScenarioError::Read {
                path: e.path().to_string(),
                reason: e.reason(),
            },
        }
    }
}

/// Reads the scenario, sweep or check file at `path` through the bounded
/// reader ([`inputs::kind::SCENARIO`]: a regular file of at most 8 MiB,
/// UTF-8 text).
pub fn read_file(path: &Path) -> Result<String, ScenarioError> {
    Ok(inputs::read_text(path, &inputs::kind::SCENARIO)?)
}
