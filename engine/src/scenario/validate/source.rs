//! The file being validated ([`Source`]): byte spans turned into
//! line:column errors, and the checks of single values (counts, rates,
//! durations) that every table of a scenario, sweep or check file shares.

use std::ops::Range;
use std::path::Path;

use toml::Spanned;

use super::super::ScenarioError;

/// The file being validated, for turning byte spans into line:column
/// (scenario, sweep and check files share it).
pub struct Source<'a> {
    /// The file's path, as errors name it.
    pub path: &'a Path,
    /// Its text.
    pub text: &'a str,
}

impl Source<'_> {
    /// An error at the start of `span` (the file's start without one).
    pub fn error(&self, span: Option<Range<usize>>, message: impl Into<String>) -> ScenarioError {
        let (line, column) = self.position(span.map_or(0, |s| s.start));
        ScenarioError::at(self.path, line, column, &message.into())
    }

    /// The 1-based line and column (in characters) of byte `offset`.
    pub fn position(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        inputs::utf8::line_column(&self.text[..offset])
    }

    /// The 1-based line a value starts on.
    pub fn line_of<T>(&self, value: &Spanned<T>) -> usize {
        let offset = value.span().start.min(self.text.len());
        self.text[..offset].matches('\n').count() + 1
    }

    /// An error at `value`.
    pub fn at<T>(&self, value: &Spanned<T>, message: impl Into<String>) -> ScenarioError {
        self.error(Some(value.span()), message)
    }

    /// A count that must lie in `min..=max`.
    pub fn count(
        &self,
        v: &Spanned<i64>,
        what: &str,
        min: i64,
        max: i64,
    ) -> Result<i64, ScenarioError> {
        let x = *v.get_ref();
        if x < min || x > max {
            return Err(self.at(
                v,
                format!("{what} must be between {min} and {max}, got {x}"),
            ));
        }
        Ok(x)
    }

    /// A rate or duration that must be finite, and positive or non-negative.
    pub fn number(
        &self,
        v: &Spanned<f64>,
        what: &str,
        zero_ok: bool,
    ) -> Result<f64, ScenarioError> {
        let x = *v.get_ref();
        let ok = x.is_finite() && (x > 0.0 || (zero_ok && x == 0.0));
        if !ok {
            let wanted = if zero_ok {
                "a non-negative"
            } else {
                "a positive"
            };
            return Err(self.at(v, format!("{what} must be {wanted} number, got {x}")));
        }
        Ok(x)
    }

    pub(super) fn parsed<T: std::str::FromStr<Err = String>>(
        &self,
        v: &Spanned<String>,
    ) -> Result<T, ScenarioError> {
        v.get_ref().parse().map_err(|e| self.at(v, e))
    }
}

/// A duration in microseconds as picoseconds (at most about 11 days).
pub(in crate::scenario) fn micros(
    src: &Source,
    v: &Spanned<f64>,
    what: &str,
) -> Result<u64, ScenarioError> {
    let us = src.number(v, what, true)?;
    let ps = (us * 1e6).round();
    if ps > 1e18 {
        return Err(src.at(v, format!("{what} is unreasonably large")));
    }
    Ok(ps as u64)
}
