//! Liveness: telling a peer that died or failed from one that is slow, and
//! the orderly end of a job (`Endpoint::finish`).
//!
//! A rank is alive while it holds its OFD lock on its byte of the segment
//! file (the kernel drops it when the process exits or is killed, even
//! before it is reaped). Its control block says whether it is running,
//! finished (it may then exit: not a failure) or failed (with a reason).
//! Idle progress probes every peer each `probe_interval`: a failed peer
//! or one whose lock is gone without having finished fails this rank at
//! once, with an error naming it. A peer that hangs while holding its
//! lock is left to the mailbox's receive timeout, where its heartbeat
//! (a timestamp its own thread writes in its control block, see
//! [`crate::heartbeat`]) tells a frozen peer (SIGSTOP) from a live one.

use std::time::{Duration, Instant};

use algorithms::{FabricError, Rank};

use super::fabric::ShmFabric;
use super::segment::RankState;
use crate::endpoint::Endpoint;
use crate::heartbeat::{self, PeerSilence};

/// Idle progress calls between two looks at the clock.
const IDLE_CALLS_PER_CLOCK: u32 = 64;

/// When the peers were last probed.
pub(crate) struct Health {
    idle_calls: u32,
    last_probe: Instant,
}

impl Health {
    /// Probing state for a job of `_world` ranks.
    pub(crate) fn new(_world: usize) -> Health {
        Health {
            idle_calls: 0,
            last_probe: Instant::now(),
        }
    }

    /// Progress moved something: the peers are evidently alive.
    pub(crate) fn busy(&mut self) {
        self.idle_calls = 0;
    }
}

/// What a probe found wrong with a peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerTrouble {
    /// The peer marked itself failed, with this reason.
    Failed(String),
    /// The peer's process is gone without having finished.
    Died,
}

impl ShmFabric {
    /// Probes `peer`: `None` if it is running or finished.
    pub fn probe(&self, peer: Rank) -> Option<PeerTrouble> {
        let ctl = self.seg.rank_control(peer);
        match ctl.state() {
            RankState::Finished => None,
            RankState::Failed => Some(PeerTrouble::Failed(ctl.reason())),
            RankState::Running | RankState::Absent => match self.seg.is_locked(peer) {
                Ok(true) => None,
                // It may have finished between the two looks: it marks
                // itself finished before it lets go of its lock.
                Ok(false) if ctl.state() == RankState::Finished => None,
                Ok(false) if ctl.state() == RankState::Failed => {
                    Some(PeerTrouble::Failed(ctl.reason()))
                }
                Ok(false) => Some(PeerTrouble::Died),
                // A lock test that fails tells nothing; the timeout remains.
                Err(_) => None,
            },
        }
    }

    /// The error a rank reports for `peer`'s trouble.
    fn trouble_error(&self, peer: Rank, trouble: PeerTrouble) -> FabricError {
        let pid = self.seg.rank_control(peer).pid();
        self.error(match trouble {
            PeerTrouble::Failed(reason) => format!("rank {peer} (pid {pid}) failed: {reason}"),
            PeerTrouble::Died => format!(
                "rank {peer} (pid {pid}) died: its process exited or was killed without finishing"
            ),
        })
    }

    /// How long each running peer's heartbeat has been silent, judged
    /// (peers that finished, failed or died are left out).
    pub(crate) fn silences(&self) -> PeerSilence {
        let now = heartbeat::monotonic_ns();
        let silences: Vec<(Rank, Duration)> = (0..self.world)
            .filter(|p| *p != self.rank)
            .filter(|p| self.seg.rank_control(*p).state() == RankState::Running)
            .map(|p| {
                let last = self.seg.rank_control(p).last_beat();
                (p, Duration::from_nanos(now.saturating_sub(last)))
            })
            .collect();
        PeerSilence::judge(
            silences,
            heartbeat::silence_threshold(self.options.job.timeout),
        )
    }

    /// The peers' trouble as one error: every peer that died (the likely
    /// cause), or else the first that failed, with its reason (which often
    /// names the peer that caused it).
    pub(crate) fn check_peers(&self) -> Result<(), FabricError> {
        let troubles: Vec<(Rank, PeerTrouble)> = (0..self.world)
            .filter(|p| *p != self.rank)
            .filter_map(|p| self.probe(p).map(|t| (p, t)))
            .collect();
        let died: Vec<&(Rank, PeerTrouble)> = troubles
            .iter()
            .filter(|(_, t)| *t == PeerTrouble::Died)
            .collect();
        let chosen: Vec<&(Rank, PeerTrouble)> = if died.is_empty() {
            troubles.iter().take(1).collect()
        } else {
            died
        };
        if chosen.is_empty() {
            return Ok(());
        }
        let reasons: Vec<String> = chosen
            .into_iter()
            .map(|(p, t)| match self.trouble_error(*p, t.clone()) {
                FabricError::Transport { reason, .. } => reason,
                other => other.to_string(),
            })
            .collect();
        Err(self.error(reasons.join("; ")))
    }

    /// Called when progress found nothing to do: probes the peers when
    /// `probe_interval` has passed since the last probe; returns whether
    /// it probed.
    pub(crate) fn check_peers_when_due(&self) -> bool {
        let mut h = self.health.borrow_mut();
        h.idle_calls += 1;
        if h.idle_calls < IDLE_CALLS_PER_CLOCK {
            return false;
        }
        h.idle_calls = 0;
        let now = Instant::now();
        if now.duration_since(h.last_probe) < self.options.probe_interval {
            return false;
        }
        h.last_probe = now;
        drop(h);
        if let Err(e) = self.check_peers() {
            self.fail_with(e);
        }
        true
    }

    /// Fails this rank with `e` at once, in its mailbox and in its
    /// control block, so that peers learn the reason (not merely that this
    /// rank went away) even if the process exits right after.
    pub(crate) fn fail_with(&self, e: FabricError) {
        self.seg.rank_control(self.rank).fail(&e.to_string());
        self.mailbox.fail_all(e);
    }

    /// [`ShmFabric::fail_with`], returning the error.
    fn give_up(&self, e: FabricError) -> FabricError {
        self.fail_with(e.clone());
        e
    }

    /// [`Endpoint::finish`]: flush, mark finished, wait for the peers.
    pub(crate) fn finish_job(&self) -> Result<(), FabricError> {
        let timeout = self.options.job.timeout;
        let deadline = Instant::now() + timeout;
        let mut idle = 0u32;
        // 1. Everything sent leaves this rank's hands.
        loop {
            if let Some(e) = self.mailbox.fatal() {
                return Err(self.give_up(e));
            }
            // Which peers finished before this progress: a peer counts its
            // copies out of our memory before it marks itself finished, so
            // the progress below sees them. (A peer that finishes during
            // the progress may have copied after our look at `copied`.)
            let finished: Vec<bool> = (0..self.world)
                .map(|p| self.seg.rank_control(p).state() == RankState::Finished)
                .collect();
            let moved = self.progress();
            let waiting: Vec<Rank> = {
                let out = self.out.borrow();
                (0..self.world).filter(|p| !out[*p].is_flushed()).collect()
            };
            if waiting.is_empty() {
                break;
            }
            for &peer in &waiting {
                if finished[peer] {
                    return Err(self.give_up(self.error(format!(
                        "rank {peer} finished before receiving everything this rank sent it"
                    ))));
                }
            }
            if Instant::now() > deadline {
                let peer = waiting[0];
                return Err(self.give_up(self.silences().timeout(self.rank, peer, || {
                    format!(
                        "rank {peer} did not take this rank's last messages within {:.1} s",
                        timeout.as_secs_f64()
                    )
                })));
            }
            pause(moved, &mut idle);
        }
        // 2. Tell the peers, then wait for them.
        self.seg
            .rank_control(self.rank)
            .set_state(RankState::Finished);
        self.finished.set(true);
        loop {
            let mut pending = None;
            self.check_peers()?;
            for peer in (0..self.world).filter(|p| *p != self.rank) {
                if pending.is_none() && self.seg.rank_control(peer).state() != RankState::Finished {
                    pending = Some(peer);
                }
            }
            let Some(peer) = pending else {
                return Ok(());
            };
            if Instant::now() > deadline {
                return Err(self.silences().timeout(self.rank, peer, || {
                    format!(
                        "rank {peer} did not finish within {:.1} s of this rank",
                        timeout.as_secs_f64()
                    )
                }));
            }
            pause(false, &mut idle);
        }
    }
}

/// Waits a little between two looks: yield at first, then sleep 100 us.
fn pause(moved: bool, idle: &mut u32) {
    if moved {
        *idle = 0;
        return;
    }
    *idle += 1;
    if *idle < 1000 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_micros(100));
    }
}
