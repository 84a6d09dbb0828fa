//! [`LoadedCex`]: a counterexample file read from disk and checked, with
//! the line and column of each value, so that every problem with it (a
//! value that cannot be read, a choice the replay cannot make, a scenario
//! that does not load) is reported at the value, as scenario errors are.

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use engine::scenario::Source;

use super::{CexError, CexFile, Decoded, Field};
use crate::spec::{Point, Verdict};
use crate::world::Choice;

/// The file as written, with the span of every value a check may reject.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCex {
    scenario: Spanned<PathBuf>,
    verdict: Spanned<String>,
    summary: String,
    world_size: Spanned<usize>,
    count: Spanned<usize>,
    chunks: Spanned<usize>,
    root: usize,
    in_place: bool,
    buffering: Spanned<String>,
    choices: Spanned<Vec<Spanned<String>>>,
}

/// A counterexample file read and checked, with where its values are.
#[derive(Clone, Debug)]
pub struct LoadedCex {
    /// The file's contents.
    pub file: CexFile,
    /// Its parameter point.
    pub point: Point,
    /// Its choices, read.
    pub choices: Vec<Choice>,
    /// The verdict it says the choices show.
    pub verdict: Verdict,
    /// Where it was read from.
    path: PathBuf,
    /// `(line, column)` of each value but the choices.
    field_at: Vec<(Field, (usize, usize))>,
    /// `(line, column)` of each choice.
    choice_at: Vec<(usize, usize)>,
}

impl LoadedCex {
    /// Reads the counterexample at `path` through the bounded reader and
    /// checks every value; each error is located at its line and column.
    pub fn read(path: &Path) -> Result<LoadedCex, CexError> {
        let text = inputs::read_text(path, &inputs::kind::COUNTEREXAMPLE)?;
        let src = Source { path, text: &text };
        let raw: RawCex = toml::from_str(&text)
            .map_err(|e| src.error(e.span(), e.message().trim_end().to_string()))?;
        let span = |field: Field| -> Range<usize> {
            match field {
                Field::Scenario => raw.scenario.span(),
                Field::Verdict => raw.verdict.span(),
                Field::WorldSize => raw.world_size.span(),
                Field::Count => raw.count.span(),
                Field::Chunks => raw.chunks.span(),
                Field::Buffering => raw.buffering.span(),
                Field::Choices => raw.choices.span(),
                Field::Choice(i) => raw
                    .choices
                    .get_ref()
                    .get(i)
                    .map_or(raw.choices.span(), Spanned::span),
            }
        };
        let position = |field: Field| src.position(span(field).start);
        let file = CexFile {
            scenario: raw.scenario.get_ref().clone(),
            verdict: raw.verdict.get_ref().clone(),
            summary: raw.summary.clone(),
            world_size: *raw.world_size.get_ref(),
            count: *raw.count.get_ref(),
            chunks: *raw.chunks.get_ref(),
            root: raw.root,
            in_place: raw.in_place,
            buffering: raw.buffering.get_ref().clone(),
            choices: raw
                .choices
                .get_ref()
                .iter()
                .map(|c| c.get_ref().clone())
                .collect(),
        };
        let (point, choices, verdict): Decoded = file
            .checked(&|field, message| CexError::Located(src.error(Some(span(field)), message)))?;
        Ok(LoadedCex {
            point,
            choices,
            verdict,
            path: path.to_path_buf(),
            field_at: [
                Field::Scenario,
                Field::Verdict,
                Field::WorldSize,
                Field::Count,
                Field::Chunks,
                Field::Buffering,
                Field::Choices,
            ]
            .into_iter()
            .map(|f| (f, position(f)))
            .collect(),
            choice_at: (0..file.choices.len())
                .map(|i| position(Field::Choice(i)))
                .collect(),
            file,
        })
    }

    /// `path:line:column` of a value, for problems found after reading
    /// (a scenario that does not load, a choice a replay cannot make).
    pub fn locate(&self, field: Field) -> String {
        let at = match field {
            Field::Choice(i) => self.choice_at.get(i).copied(),
            _ => self
                .field_at
                .iter()
                .find(|(f, _)| *f == field)
                .map(|&(_, at)| at),
        };
        let (line, column) = at.unwrap_or((1, 1));
        format!("{}:{line}:{column}", self.path.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "# sim check counterexample\n\
scenario = \"ring.toml\"\n\
verdict = \"deadlock\"\n\
summary = \"stuck\"\n\
world_size = 3\n\
count = 4\n\
chunks = 1\n\
root = 0\n\
in_place = true\n\
buffering = \"eager:1\"\n\
choices = [\"deliver 0->1 tag 0\", \"notify 1->2\"]\n";

    fn write(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cex-located-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_valid_file_reads_with_its_positions() {
        let path = write("ok.cex.toml", VALID);
        let cex = LoadedCex::read(&path).expect("valid");
        assert_eq!(cex.choices.len(), 2);
        assert_eq!(cex.verdict, Verdict::Deadlock);
        let shown = path.display();
        assert_eq!(cex.locate(Field::Scenario), format!("{shown}:2:12"));
        assert_eq!(cex.locate(Field::Choice(1)), format!("{shown}:11:34"));
    }

    #[test]
    fn each_bad_value_is_located_at_its_line_and_column() {
        let cases = [
            (
                "verdict = \"deadlock\"",
                "verdict = \"stuck\"",
                3,
                11,
                "unknown verdict `stuck`",
            ),
            (
                "world_size = 3",
                "world_size = 17",
                5,
                14,
                "world_size = 17 is out of range",
            ),
            ("world_size = 3", "world_size = -1", 5, 14, "invalid value"),
            (
                "count = 4",
                "count = 50000000",
                6,
                9,
                "count = 50000000 is out of range",
            ),
            (
                "buffering = \"eager:1\"",
                "buffering = \"eager\"",
                10,
                13,
                "unknown buffering `eager`",
            ),
            (
                "\"notify 1->2\"",
                "\"teleport 1->2\"",
                11,
                34,
                "choice 2: cannot read choice `teleport 1->2`",
            ),
            (
                "root = 0\n",
                "root = 0\ncolour = 1\n",
                9,
                1,
                "unknown field `colour`",
            ),
            ("choices = [", "choices = 3 #", 11, 11, "invalid type"),
        ];
        for (from, to, line, column, needle) in cases {
            let path = write("bad.cex.toml", &VALID.replace(from, to));
            let text = LoadedCex::read(&path).expect_err(to).to_string();
            let at = format!("{}:{line}:{column}: ", path.display());
            assert!(text.starts_with(&at), "{to}: {text}, expected {at}");
            assert!(text.contains(needle), "{to}: {text}");
        }
    }

    #[test]
    fn text_that_is_not_utf8_is_located_at_its_first_bad_byte() {
        let dir = std::env::temp_dir().join(format!("cex-located-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("latin1.cex.toml");
        let mut bytes = VALID.as_bytes().to_vec();
        bytes.splice(39..39, [0xe9]); // inside `"ring.toml"` on line 2
        std::fs::write(&path, bytes).unwrap();
        let text = LoadedCex::read(&path).unwrap_err().to_string();
        assert!(
            text.starts_with(&format!("{}:2:13: ", path.display())),
            "{text}"
        );
        assert!(text.contains("not UTF-8"), "{text}");
    }
}
