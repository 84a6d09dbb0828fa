//! [`Interrupt`]: SIGINT and SIGTERM caught while `sim run` or `sim
//! sweep` runs, so that they stop between rows (a sweep: no new point
//! starts) and close their outputs as valid files marked partial, then
//! exit with 128 + the signal number ([`ExitStatus::Interrupted`],
//! [`ExitStatus::Terminated`]), as a shell reports a process the signal
//! killed.
//!
//! A second signal while the first is being handled (a long point, a slow
//! disk) is not caught: the process ends at once, as by default, and may
//! leave the temporary files of its outputs (`.NAME.XXXXXX.tmp`) beside
//! them. The handlers are removed when the `Interrupt` is dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::{SigId, flag, low_level};

use crate::exit::ExitStatus;

/// The signals that stop a run, caught (see the module docs).
pub struct Interrupt {
    stop: Arc<AtomicBool>,
    signal: Arc<AtomicUsize>,
    handlers: Vec<SigId>,
}

impl Interrupt {
    /// Catches SIGINT and SIGTERM until dropped. If a handler cannot be
    /// installed, that signal keeps its default action (the message says
    /// so on stderr).
    pub fn catch() -> Interrupt {
        let stop = Arc::new(AtomicBool::new(false));
        let signal = Arc::new(AtomicUsize::new(0));
        let mut handlers = Vec::new();
        for sig in [SIGINT, SIGTERM] {
            // In this order: the second signal finds the flag set by the
            // first and takes the default action.
            let installed = flag::register_conditional_default(sig, Arc::clone(&stop))
                .and_then(|id| {
                    handlers.push(id);
                    flag::register_usize(sig, Arc::clone(&signal), sig as usize)
                })
                .and_then(|id| {
                    handlers.push(id);
                    flag::register(sig, Arc::clone(&stop))
                })
                .map(|id| handlers.push(id));
            if let Err(e) = installed {
                crate::report!("warning: cannot catch signal {sig}: {e}");
            }
        }
        Interrupt {
            stop,
            signal,
            handlers,
        }
    }

    /// The flag a signal sets, for the engine to poll.
    pub fn flag(&self) -> &AtomicBool {
        &self.stop
    }

    /// The signal that arrived, if one did.
    pub fn received(&self) -> Option<Signal> {
        if !self.stop.load(Ordering::SeqCst) {
            return None;
        }
        match self.signal.load(Ordering::SeqCst) as i32 {
            SIGTERM => Some(Signal::Term),
            _ => Some(Signal::Int),
        }
    }
}

impl Drop for Interrupt {
    fn drop(&mut self) {
        for id in self.handlers.drain(..) {
            low_level::unregister(id);
        }
    }
}

/// A signal that stops a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT (Ctrl-C).
    Int,
    /// SIGTERM (`kill`, a batch system's time limit).
    Term,
}

impl Signal {
    /// The signal's name.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Int => "SIGINT",
            Signal::Term => "SIGTERM",
        }
    }

    /// The exit status of a run it stopped.
    pub fn status(self) -> ExitStatus {
        match self {
            Signal::Int => ExitStatus::Interrupted,
            Signal::Term => ExitStatus::Terminated,
        }
    }
}
