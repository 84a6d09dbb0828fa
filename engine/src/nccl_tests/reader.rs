//! The line-by-line reader behind [`parse`](super::parse): what each
//! kind of line (header comments, `Rank` lines, column headers, data
//! rows, footers, command lines, noise) does to the tables read so far.

use std::collections::BTreeMap;

use super::columns::{self, Columns};
use super::{Measured, ParseError, Placement, Table, Test, World, WorldSource};

/// Reads every table of `text` (see [`parse`](super::parse)).
pub fn read(text: &str, fallback: Option<Test>) -> Result<Vec<Table>, ParseError> {
    let mut parser = Parser {
        fallback,
        ..Parser::default()
    };
    for (i, line) in text.lines().enumerate() {
        parser.line(i + 1, line)?;
    }
    parser.close();
    if parser.tables.is_empty() {
        return Err(ParseError::NoTable);
    }
    Ok(parser.tables)
}

/// What a `# nThread` line and the `Rank` lines after it say.
#[derive(Clone, Debug, Default)]
struct Run {
    /// `nThread x nGpus` and the line.
    per_process: Option<(usize, usize)>,
    /// The processes of the launcher line before it, and that line.
    processes: Option<(usize, usize)>,
    /// Each listed rank's line.
    ranks: BTreeMap<usize, usize>,
}

impl Run {
    /// The world size the run's header says, if it says one.
    fn world(&self) -> Option<World> {
        if let Some(&line) = self.ranks.values().min() {
            return Some(World {
                ranks: self.ranks.len(),
                source: WorldSource::RankLines { line },
            });
        }
        let ((per_process, _), (processes, line)) = (self.per_process?, self.processes?);
        Some(World {
            ranks: per_process.checked_mul(processes)?,
            source: WorldSource::Launcher { line },
        })
    }
}

/// The parser's state between lines.
#[derive(Default)]
struct Parser {
    fallback: Option<Test>,
    tables: Vec<Table>,
    /// The columns of the last table while its rows go on.
    open: Option<Columns>,
    /// A test named since the last table, and where.
    named: Option<(Test, usize)>,
    /// A launcher's process count, and its line, for the next run.
    launcher: Option<(usize, usize)>,
    run: Run,
    /// The placements of a `out-of-place  in-place` line, for the next header.
    groups: Option<Vec<Placement>>,
}

impl Parser {
    fn line(&mut self, n: usize, raw: &str) -> Result<(), ParseError> {
        let offset = tag_prefix(raw);
        let text = &raw[offset..];
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Ok(());
        }
        if let Some(body) = trimmed.strip_prefix('#') {
            return self.comment(n, body);
        }
        if is_nccl_debug(trimmed) {
            return Ok(());
        }
        let named = named_test(trimmed);
        if let Some(processes) = launcher_processes(trimmed) {
            self.launcher = Some((processes, n));
        }
        if let Some(test) = named {
            self.close();
            self.named = Some((test, n));
            return Ok(());
        }
        match (&self.open, self.tables.last_mut()) {
            (Some(columns), Some(table)) => add_row(table, columns, n, offset, text),
            _ => Ok(()),
        }
    }

    fn comment(&mut self, n: usize, body: &str) -> Result<(), ParseError> {
        let tokens: Vec<&str> = body.split_whitespace().collect();
        match tokens.as_slice() {
            ["Collective", "test", "starting:", name, ..] => {
                self.close();
                self.named = Test::from_name(name).map(|t| (t, n));
            }
            ["Collective", "test", "concluded:", ..] => self.close(),
            ["nThread", ..] => {
                self.close();
                self.run = Run {
                    per_process: Some((per_process(n, &tokens)?, n)),
                    processes: self.launcher.take(),
                    ranks: BTreeMap::new(),
                };
            }
            ["Rank", rank, ..] => {
                let rank: usize = rank.parse().map_err(|_| ParseError::Line {
                    line: n,
                    message: format!("a `Rank` line needs a rank number, found `{rank}`"),
                })?;
                if let Some(&first) = self.run.ranks.get(&rank) {
                    return Err(ParseError::DuplicateRank {
                        line: n,
                        rank,
                        first,
                    });
                }
                self.run.ranks.insert(rank, n);
            }
            ["size", ..] => self.header(n, &tokens)?,
            ["Out", "of", "bounds", "values", ..] => {
                self.close();
                if let Some(t) = self.tables.last_mut() {
                    t.out_of_bounds = footer_value(&tokens).and_then(|v| v.parse().ok());
                }
            }
            ["Avg", "bus", "bandwidth", ..] => {
                self.close();
                if let Some(t) = self.tables.last_mut() {
                    t.avg_busbw_gb_per_s = footer_value(&tokens).and_then(|v| v.parse().ok());
                }
            }
            _ => {
                let groups: Vec<Placement> = tokens
                    .iter()
                    .filter_map(|t| match *t {
                        "out-of-place" => Some(Placement::OutOfPlace),
                        "in-place" => Some(Placement::InPlace),
                        _ => None,
                    })
                    .collect();
                if !groups.is_empty() {
                    self.groups = Some(groups);
                }
            }
        }
        Ok(())
    }

    /// A column header: a new table.
    fn header(&mut self, n: usize, tokens: &[&str]) -> Result<(), ParseError> {
        self.close();
        let columns = Columns::from_header(n, tokens, self.groups.take())?;
        let (test, named_at) = match self.named.take() {
            Some((test, at)) => (test, Some(at)),
            None => match self.fallback {
                Some(test) => (test, None),
                None => return Err(ParseError::UnknownTest { line: n }),
            },
        };
        if let Test::Collective(c) = test
            && named_at.is_none()
            && c.reduces()
            && !columns.has_redop()
        {
            return Err(ParseError::Line {
                line: n,
                message: format!(
                    "this table has no redop column, so it did not measure {c} (a reducing collective)"
                ),
            });
        }
        self.tables.push(Table {
            line: n,
            test,
            named_at,
            world: self.run.world(),
            placements: columns.placements().to_vec(),
            rows: Vec::new(),
            avg_busbw_gb_per_s: None,
            out_of_bounds: None,
        });
        self.open = Some(columns);
        Ok(())
    }

    /// Ends the open table's rows: its world size, if nothing better
    /// said it, is its header's `nThread x nGpus`.
    fn close(&mut self) {
        if self.open.take().is_none() {
            return;
        }
        if let Some(table) = self.tables.last_mut()
            && table.world.is_none()
            && let Some((ranks, line)) = self.run.per_process
        {
            table.world = Some(World {
                ranks,
                source: WorldSource::Header { line },
            });
        }
    }
}

/// Reads a data row of `table`, whose header gave `columns`.
fn add_row(
    table: &mut Table,
    columns: &Columns,
    n: usize,
    offset: usize,
    text: &str,
) -> Result<(), ParseError> {
    let tokens = tokenize(text, offset);
    let end = offset + text.trim_end().len() + 1;
    let (row, at) = columns.row(n, &tokens, end)?;
    check_size(table, &row, at.size)?;
    if let (Test::Collective(c), Some(root), Some(world)) = (table.test, row.root, table.world)
        && c.has_root()
        && root >= world.ranks as i64
    {
        return Err(ParseError::Row {
            line: n,
            column: at.root,
            message: format!("root {root} is not a rank of this run of {world}"),
        });
    }
    table.rows.push(row);
    Ok(())
}

/// Checks a row's size against its count, element size and (per-rank
/// counts) ranks; a per-rank count in a run of unknown size tells the
/// size.
fn check_size(table: &mut Table, row: &Measured, column: usize) -> Result<(), ParseError> {
    let elem = columns::element_bytes(&row.dtype).unwrap_or(1) as u64;
    let error = |message: String| ParseError::Row {
        line: row.line,
        column,
        message,
    };
    let base = row.count.checked_mul(elem).ok_or_else(|| {
        error(format!(
            "count {} x {elem} bytes does not fit in 64 bits",
            row.count
        ))
    })?;
    let what = format!("count {} x {elem} bytes ({})", row.count, row.dtype);
    if !table.test.count_is_per_rank() {
        if row.size_bytes != base {
            return Err(error(format!(
                "size {} is not {what} = {base}",
                row.size_bytes
            )));
        }
        return Ok(());
    }
    match table.world {
        Some(world) => {
            let want = base.checked_mul(world.ranks as u64);
            if want != Some(row.size_bytes) {
                return Err(error(format!(
                    "size {} is not {what} x {world} ({} is a per-rank count)",
                    row.size_bytes,
                    table.test.binary()
                )));
            }
        }
        None if base == 0 => {
            if row.size_bytes != 0 {
                return Err(error(format!("size {} is not {what} = 0", row.size_bytes)));
            }
        }
        None => {
            if row.size_bytes == 0 || !row.size_bytes.is_multiple_of(base) {
                return Err(error(format!(
                    "size {} is not a whole number of ranks times {what}",
                    row.size_bytes
                )));
            }
            let ranks = usize::try_from(row.size_bytes / base).unwrap_or(usize::MAX);
            table.world = Some(World {
                ranks,
                source: WorldSource::Rows { line: row.line },
            });
        }
    }
    Ok(())
}

/// `nThread x nGpus` of a `# nThread 1 nGpus 8 ...` line.
fn per_process(n: usize, tokens: &[&str]) -> Result<usize, ParseError> {
    let value = |key: &str| -> Result<usize, ParseError> {
        let at = tokens.iter().position(|t| *t == key);
        let text = at.and_then(|i| tokens.get(i + 1)).copied().unwrap_or("");
        text.parse().map_err(|_| ParseError::Line {
            line: n,
            message: format!("`{key}` needs a number, found `{text}`"),
        })
    };
    let (threads, gpus) = (value("nThread")?, value("nGpus")?);
    threads.checked_mul(gpus).ok_or_else(|| ParseError::Line {
        line: n,
        message: format!("nThread {threads} x nGpus {gpus} is too large"),
    })
}

/// The value after the `:` of a footer line (`# Avg bus bandwidth : 12.3`).
fn footer_value<'a>(tokens: &[&'a str]) -> Option<&'a str> {
    let colon = tokens.iter().position(|t| *t == ":")?;
    tokens.get(colon + 1).copied()
}

/// The length of an `mpirun --tag-output` prefix (`[1,0]<stdout>:`), or 0.
fn tag_prefix(line: &str) -> usize {
    if !line.starts_with('[') {
        return 0;
    }
    ["]<stdout>:", "]<stderr>:"]
        .iter()
        .find_map(|tag| line.find(tag).map(|i| i + tag.len()))
        .unwrap_or(0)
}

/// Whether a line is NCCL's own debug output (`NCCL_DEBUG=INFO`).
fn is_nccl_debug(line: &str) -> bool {
    [" NCCL INFO", " NCCL WARN", " NCCL TRACE"]
        .iter()
        .any(|tag| line.contains(tag))
}

/// The test a non-comment line names (`./build/all_reduce_perf -b 8 ...`,
/// `all_gather_perf: error ...`), if any.
fn named_test(line: &str) -> Option<Test> {
    line.split_whitespace().find_map(|token| {
        let file = token.rsplit('/').next().unwrap_or(token);
        let file = file.trim_matches(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
        let is_binary = file.ends_with("_perf") || file.ends_with("_perf_mpi");
        if is_binary {
            Test::from_name(file)
        } else {
            None
        }
    })
}

/// The process count of a launcher's command line (`mpirun -np 16 ...`,
/// `srun -n 16 ...`, `srun --ntasks=16 ...`).
fn launcher_processes(line: &str) -> Option<usize> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let start = tokens.iter().position(|t| {
        let file = t.rsplit('/').next().unwrap_or(t);
        matches!(file, "mpirun" | "mpiexec" | "srun" | "orterun" | "prterun")
    })?;
    let args = &tokens[start + 1..];
    args.iter().enumerate().find_map(|(i, arg)| {
        let value = match *arg {
            "-np" | "-n" | "--np" | "--n" | "--ntasks" => args.get(i + 1).copied(),
            _ => arg
                .strip_prefix("--ntasks=")
                .or_else(|| arg.strip_prefix("--np=")),
        };
        value.and_then(|v| v.parse().ok())
    })
}

/// The whitespace-separated fields of `text` with their 1-based columns
/// in the whole line (`text` starts at byte `offset`).
fn tokenize(text: &str, offset: usize) -> Vec<(usize, &str)> {
    let mut tokens = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                tokens.push((offset + s + 1, &text[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        tokens.push((offset + s + 1, &text[s..]));
    }
    tokens
}
