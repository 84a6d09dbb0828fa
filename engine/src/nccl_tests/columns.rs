//! A table's columns as its header names them, and its data rows read
//! field by field against them.

use super::{Measured, ParseError, Placement, Timing};

/// nccl-tests' element types and their sizes in bytes.
const TYPES: [(&str, usize); 14] = [
    ("int8", 1),
    ("uint8", 1),
    ("int32", 4),
    ("uint32", 4),
    ("int64", 8),
    ("uint64", 8),
    ("half", 2),
    ("float", 4),
    ("double", 8),
    ("bfloat16", 2),
    ("f8e4m3", 1),
    ("f8e5m2", 1),
    ("fp8_e4m3", 1),
    ("fp8_e5m2", 1),
];

/// The size in bytes of one element of nccl-tests' type `name`.
pub fn element_bytes(name: &str) -> Option<usize> {
    TYPES.iter().find(|(t, _)| *t == name).map(|&(_, b)| b)
}

/// One column; the number is the placement group (0: the first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Column {
    Size,
    Count,
    Type,
    Redop,
    Root,
    Time(usize),
    AlgBw(usize),
    BusBw(usize),
    /// `#wrong`, or `error` in older binaries.
    Check(usize),
    /// A column this reader does not use (`#bitdiff`, `i_min`, ...).
    Other,
    /// `timestamp`: two fields, date and time.
    Timestamp,
}

impl Column {
    fn fields(self) -> usize {
        if self == Column::Timestamp { 2 } else { 1 }
    }
}

/// A table's columns.
#[derive(Clone, Debug)]
pub struct Columns {
    columns: Vec<Column>,
    /// The header's names, for messages.
    names: Vec<String>,
    /// The placement of each group.
    placements: Vec<Placement>,
}

/// The columns of a row's fields that errors point at.
#[derive(Clone, Copy, Debug)]
pub struct At {
    /// The `size` field.
    pub size: usize,
    /// The `root` field (the size's without one).
    pub root: usize,
}

impl Columns {
    /// The columns of header `tokens` (after the `#`) at line `n`;
    /// `groups` are the placements a line above named, in order.
    pub fn from_header(
        n: usize,
        tokens: &[&str],
        groups: Option<Vec<Placement>>,
    ) -> Result<Columns, ParseError> {
        let error = |message: String| ParseError::Line { line: n, message };
        let mut columns = Vec::new();
        let mut group = None;
        let mut count = 0;
        for token in tokens {
            columns.push(match (*token, group) {
                ("size", None) => Column::Size,
                ("count", None) => Column::Count,
                ("type", None) => Column::Type,
                ("redop", None) => Column::Redop,
                ("root", None) => Column::Root,
                ("time" | "cputime", _) => {
                    group = Some(count);
                    count += 1;
                    Column::Time(count - 1)
                }
                ("algbw", Some(g)) => Column::AlgBw(g),
                ("busbw", Some(g)) => Column::BusBw(g),
                ("#wrong" | "error", Some(g)) => Column::Check(g),
                ("timestamp", _) => Column::Timestamp,
                _ => Column::Other,
            });
        }
        if columns.get(..3) != Some(&[Column::Size, Column::Count, Column::Type][..]) {
            return Err(error(
                "a column header starts with `size count type`".to_string(),
            ));
        }
        if !(1..=2).contains(&count) {
            return Err(error(format!(
                "a column header has one or two `time` columns (out-of-place, in-place), found {count}"
            )));
        }
        for g in 0..count {
            let at = |c: Column| columns.iter().filter(|&&x| x == c).count();
            if at(Column::AlgBw(g)) != 1 || at(Column::BusBw(g)) != 1 {
                return Err(error(format!(
                    "time column {} needs one `algbw` and one `busbw` after it",
                    g + 1
                )));
            }
        }
        let placements = match groups {
            Some(groups) if groups.len() == count => groups,
            _ => [Placement::OutOfPlace, Placement::InPlace][..count].to_vec(),
        };
        Ok(Columns {
            columns,
            names: tokens.iter().map(|t| t.to_string()).collect(),
            placements,
        })
    }

    /// Whether the table has a `redop` column.
    pub fn has_redop(&self) -> bool {
        self.columns.contains(&Column::Redop)
    }

    /// The placements of the groups, in order.
    pub fn placements(&self) -> &[Placement] {
        &self.placements
    }

    /// Reads data row `tokens` (each with its column) at line `n`; `end`
    /// is the column just past the line's last character.
    pub fn row(
        &self,
        n: usize,
        tokens: &[(usize, &str)],
        end: usize,
    ) -> Result<(Measured, At), ParseError> {
        let want: usize = self.columns.iter().map(|c| c.fields()).sum();
        if let Some(&(col, text)) = tokens.first()
            && text.parse::<u64>().is_err()
        {
            return Err(ParseError::Row {
                line: n,
                column: col,
                message: format!(
                    "expected a data row, starting with the size in bytes (a whole number), found `{text}`"
                ),
            });
        }
        if tokens.len() != want {
            let column = tokens.get(want).map_or(end, |&(c, _)| c);
            return Err(ParseError::Row {
                line: n,
                column,
                message: format!(
                    "expected {want} fields ({}), found {}",
                    self.names.join(" "),
                    tokens.len()
                ),
            });
        }
        let mut row = Measured {
            line: n,
            size_bytes: 0,
            count: 0,
            dtype: String::new(),
            redop: None,
            root: None,
            out_of_place: None,
            in_place: None,
        };
        let first = tokens.first().map_or(end, |&(col, _)| col);
        let mut at = At {
            size: first,
            root: first,
        };
        let mut timings: Vec<Timing> = self
            .placements
            .iter()
            .map(|_| Timing {
                time_us: 0.0,
                algbw_gb_per_s: 0.0,
                busbw_gb_per_s: 0.0,
                check: None,
            })
            .collect();
        let mut fields = tokens.iter();
        for &column in &self.columns {
            let mut next = || fields.next().copied().unwrap_or((end, ""));
            let (col, text) = next();
            let field = Field { n, col, text };
            match column {
                Column::Size => row.size_bytes = field.whole("the size in bytes")?,
                Column::Count => row.count = field.whole("the count of elements")?,
                Column::Type => {
                    if element_bytes(text).is_none() {
                        let names: Vec<&str> = TYPES.iter().map(|(t, _)| *t).collect();
                        return Err(field.error(format!(
                            "unknown type `{text}`; nccl-tests prints {}",
                            names.join(", ")
                        )));
                    }
                    row.dtype = text.to_string();
                }
                Column::Redop => row.redop = Some(text.to_string()),
                Column::Root => {
                    at.root = col;
                    row.root = Some(field.root()?);
                }
                Column::Time(g) => timings[g].time_us = field.real("the time in us")?,
                Column::AlgBw(g) => timings[g].algbw_gb_per_s = field.real("algbw in GB/s")?,
                Column::BusBw(g) => timings[g].busbw_gb_per_s = field.real("busbw in GB/s")?,
                Column::Check(g) if text == "N/A" => timings[g].check = None,
                Column::Check(g) => timings[g].check = Some(field.real("#wrong or N/A")?),
                Column::Timestamp => {
                    next();
                }
                Column::Other => {}
            }
        }
        for (placement, timing) in self.placements.iter().zip(timings) {
            match placement {
                Placement::OutOfPlace => row.out_of_place = Some(timing),
                Placement::InPlace => row.in_place = Some(timing),
            }
        }
        Ok((row, at))
    }
}

/// One field of a row, for reading and for errors pointing at it.
struct Field<'a> {
    n: usize,
    col: usize,
    text: &'a str,
}

impl Field<'_> {
    fn error(&self, message: String) -> ParseError {
        ParseError::Row {
            line: self.n,
            column: self.col,
            message,
        }
    }

    fn whole(&self, what: &str) -> Result<u64, ParseError> {
        self.text.parse().map_err(|_| {
            self.error(format!(
                "expected {what} (a whole number), found `{}`",
                self.text
            ))
        })
    }

    fn root(&self) -> Result<i64, ParseError> {
        match self.text.parse::<i64>() {
            Ok(root) if root >= -1 => Ok(root),
            _ => Err(self.error(format!(
                "expected the root (a rank, or -1 for none), found `{}`",
                self.text
            ))),
        }
    }

    /// A finite, non-negative number (`1.2e+04` included, as nccl-tests
    /// prints large values).
    fn real(&self, what: &str) -> Result<f64, ParseError> {
        match self.text.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
            _ => Err(self.error(format!("expected {what} (a number), found `{}`", self.text))),
        }
    }
}
