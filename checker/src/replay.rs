//! [`replay_file`]: a saved counterexample run again, exactly: the same
//! scenario, point and choices give the same failure (or say that the file
//! no longer matches the scenario).

use std::path::{Path, PathBuf};
use std::rc::Rc;

use algorithms::Registry;

use crate::cex::{CexError, Field, LoadedCex};
use crate::exec::Execution;
use crate::explore::{self, SearchError, Target};
use crate::program::Program;
use crate::properties::{Baseline, Violation, describe_waits, evaluate};
use crate::spec::{Point, Verdict};
use crate::world::{Choice, RankStatus};

/// The largest world a counterexample file may ask for.
pub const REPLAY_WORLD_SIZE_MAX: usize = 64;

/// A counterexample replayed.
pub struct Replayed {
    /// The scenario the file names, as loaded.
    pub program: Rc<Program>,
    /// Where that scenario was found.
    pub scenario: PathBuf,
    /// The point of the counterexample.
    pub point: Point,
    /// Its choices, in order.
    pub choices: Vec<Choice>,
    /// The verdict the file says it shows.
    pub saved: Verdict,
    /// The execution after the last choice.
    pub exec: Execution,
    /// What the properties say of it (`None`: nothing fails).
    pub violation: Option<Violation>,
    /// Each rank's state at the end, one line each.
    pub state: Vec<String>,
}

impl Replayed {
    /// The verdict the replay found.
    pub fn found(&self) -> Verdict {
        self.violation
            .as_ref()
            .map_or(Verdict::Verified, |v| v.verdict)
    }
}

/// Why a counterexample could not be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The file cannot be read or is not a counterexample.
    #[error(transparent)]
    File(#[from] CexError),
    /// The scenario it names cannot be loaded.
    #[error("{file}: scenario: {message}")]
    Scenario {
        /// The counterexample file.
        file: String,
        /// Why the scenario cannot be loaded.
        message: String,
    },
    /// The point is larger than a replay may run.
    #[error("{file}: world_size {world_size} is too large")]
    TooLarge {
        /// The counterexample file.
        file: String,
        /// Its world size.
        world_size: usize,
    },
    /// A choice is not possible where the file puts it.
    #[error(
        "{file}: choice {step} ({choice}) is not possible at that point of {scenario}: the file does not match the scenario (edited, or the scenario or the algorithms changed since it was saved)"
    )]
    Diverged {
        /// The counterexample file.
        file: String,
        /// The 1-based number of the choice.
        step: usize,
        /// The choice.
        choice: Choice,
        /// The scenario file.
        scenario: String,
    },
}

/// Replays the counterexample file at `path`; its scenario (the path as
/// given to the check, else beside the file) is loaded with `registry`'s
/// algorithms and the demonstration ones. Errors are located in the file:
/// a scenario that does not load at `scenario =`, a choice that cannot be
/// made at that choice.
pub fn replay_file(path: &Path, registry: &Registry) -> Result<Replayed, ReplayError> {
    let cex = LoadedCex::read(path)?;
    let mut scenario = cex.file.scenario.clone();
    if let (false, Some(dir)) = (scenario.exists(), path.parent()) {
        scenario = dir.join(&cex.file.scenario);
    }
    let program = crate::scenario::load(&scenario, registry)
        .map(Rc::new)
        .map_err(|e| ReplayError::Scenario {
            file: cex.locate(Field::Scenario),
            message: e.to_string(),
        })?;
    let named = path.display().to_string();
    let replayed = replay_choices(
        program,
        &scenario,
        cex.point,
        cex.choices.clone(),
        cex.verdict,
        &named,
    );
    replayed.map_err(|e| match e {
        ReplayError::Diverged {
            step,
            choice,
            scenario,
            ..
        } => ReplayError::Diverged {
            file: cex.locate(Field::Choice(step - 1)),
            step,
            choice,
            scenario,
        },
        ReplayError::TooLarge { world_size, .. } => ReplayError::TooLarge {
            file: cex.locate(Field::WorldSize),
            world_size,
        },
        other => other,
    })
}

/// Replays `choices` at `point` of `program` (read from `scenario`),
/// which a counterexample (named `named` in errors) says shows `saved`.
pub fn replay_choices(
    program: Rc<Program>,
    scenario: &Path,
    point: Point,
    choices: Vec<Choice>,
    saved: Verdict,
    named: &str,
) -> Result<Replayed, ReplayError> {
    let named = named.to_string();
    if point.world_size > REPLAY_WORLD_SIZE_MAX {
        return Err(ReplayError::TooLarge {
            file: named,
            world_size: point.world_size,
        });
    }
    let target = Target {
        program: &program,
        point,
        faults: program.faults,
        bounds: program.bounds,
    };
    let diverged = |SearchError::Diverged { step, choice }| ReplayError::Diverged {
        file: named.clone(),
        step: step + 1,
        choice,
        scenario: scenario.display().to_string(),
    };
    let mut baseline = Baseline::default();
    if saved == Verdict::Nondeterministic {
        // The determinism property compares with the default schedule.
        let mut exec = explore::replay(&target, &[]).map_err(diverged)?;
        while let Some(&c) = exec.enabled().first() {
            exec.apply(c);
        }
        let _ = evaluate(&program, point, &exec, false, &mut baseline);
    }
    let exec = explore::replay(&target, &choices).map_err(diverged)?;
    let violation = evaluate(&program, point, &exec, false, &mut baseline);
    let state = final_state(&program, &exec);
    Ok(Replayed {
        program,
        scenario: scenario.to_path_buf(),
        point,
        choices,
        saved,
        exec,
        violation,
        state,
    })
}

/// What each rank waits for or how it ended, one line each.
fn final_state(program: &Program, exec: &Execution) -> Vec<String> {
    let world = exec.world.borrow();
    let mut state = describe_waits(program, &world);
    for (r, rank) in world.ranks.iter().enumerate() {
        match &rank.status {
            RankStatus::Running => {}
            RankStatus::Finished(None) => state.push(format!("rank {r} finished")),
            RankStatus::Finished(Some(c)) => state.push(format!("rank {r} failed: {c}")),
            RankStatus::Crashed(c) => state.push(format!("rank {r} stopped: {c}")),
        }
    }
    state
}
