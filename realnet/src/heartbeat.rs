//! Heartbeats: telling a peer that stopped responding from one that is
//! alive but waiting.
//!
//! When a rank freezes (SIGSTOP, a debugger, a machine that stalls), its
//! peers' receives time out, and so do receives of ranks waiting on those
//! peers: without more to go on, each would blame the rank it waits for,
//! and two live ranks can end up blaming each other. So every rank of a
//! TCP or shared-memory job beats: a thread of its own, independent of
//! what the rank's collective is doing, says "alive" to every peer each
//! [`interval`] (a heartbeat frame on TCP, a timestamp in its control block
//! on shared memory), and every rank keeps when it last heard from each
//! peer (any bytes count). A frozen process stops beating with all its
//! threads.
//!
//! When a receive has waited past the job's timeout, the rank asks its
//! transport's [`PeerSilence`] (see [`crate::Mailbox::expire_with`]):
//! - a peer silent for longer than the [`silence_threshold`] (half the
//!   timeout) is the cause, whoever the receive waited for: the rank fails
//!   naming it ("rank 0 stopped responding: nothing heard from it for
//!   2.1 s"); with several, the one silent longest;
//! - if every peer was heard recently, the waited-for peer is alive and
//!   waiting for someone else: the rank waits one threshold longer (a peer
//!   that froze just now shows up as silent by then) and then fails
//!   naming the peer it waited for as alive but silent.
//!
//! Peers that finished or already failed are left out.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use algorithms::{FabricError, Rank};

/// How often a rank beats in a job whose timeout is `timeout`: a tenth of
/// it, from 5 ms to 1 s.
pub fn interval(timeout: Duration) -> Duration {
    (timeout / 10).clamp(Duration::from_millis(5), Duration::from_secs(1))
}

/// How long a peer must have been silent to count as stopped: half the
/// timeout, and at least four intervals (so a beat that is late because
/// the machine is busy does not count).
pub fn silence_threshold(timeout: Duration) -> Duration {
    (timeout / 2).max(4 * interval(timeout))
}

/// What a transport's heartbeats say about the peers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerSilence {
    /// The transport has no heartbeats.
    Unknown,
    /// `peer` has been silent longest, for `silent` (over the threshold).
    Silent {
        /// The peer.
        peer: Rank,
        /// How long nothing was heard from it.
        silent: Duration,
    },
    /// Every running peer was heard within `threshold`.
    AllHeard {
        /// The silence threshold.
        threshold: Duration,
    },
}

impl PeerSilence {
    /// Judges peers by how long each has been silent (peers that finished
    /// or failed left out): the one silent longest if over `threshold`.
    pub fn judge(
        silences: impl IntoIterator<Item = (Rank, Duration)>,
        threshold: Duration,
    ) -> Self {
        let longest = silences
            .into_iter()
            .filter(|(_, silent)| *silent > threshold)
            // Ties go to the lower rank, so the verdict is the same on
            // every rank that sees the same silences.
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)));
        match longest {
            Some((peer, silent)) => PeerSilence::Silent { peer, silent },
            None => PeerSilence::AllHeard { threshold },
        }
    }

    /// The error of a wait of `rank`'s that ran out: a
    /// [`FabricError::Timeout`] naming the peer silent longest if one is
    /// (it [stopped responding](stopped_responding), whoever the rank
    /// waited for), else naming `waited_for` with `reason()`.
    pub fn timeout(
        self,
        rank: Rank,
        waited_for: Rank,
        reason: impl FnOnce() -> String,
    ) -> FabricError {
        match self {
            PeerSilence::Silent { peer, silent } => FabricError::Timeout {
                rank,
                peer,
                reason: stopped_responding(peer, silent),
            },
            PeerSilence::Unknown | PeerSilence::AllHeard { .. } => FabricError::Timeout {
                rank,
                peer: waited_for,
                reason: reason(),
            },
        }
    }
}

/// The phrase every report of a silent peer uses.
pub fn stopped_responding(peer: Rank, silent: Duration) -> String {
    format!(
        "rank {peer} stopped responding: nothing heard from it for {:.1} s (it is stopped, frozen or cut off)",
        silent.as_secs_f64()
    )
}

/// CLOCK_MONOTONIC in nanoseconds: the clock every process of a host
/// shares (the one [`std::time::Instant`] reads on Linux).
pub fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(t.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(t.tv_nsec).unwrap_or(0))
}

/// A thread that calls a beat every interval until it is dropped.
pub(crate) struct Beater {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Beater {
    /// Starts a thread named `name` that calls `beat` now and then every
    /// `every`.
    pub(crate) fn start(
        name: String,
        every: Duration,
        mut beat: impl FnMut() + Send + 'static,
    ) -> std::io::Result<Beater> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            loop {
                beat();
                match stopped.recv_timeout(every) {
                    Err(RecvTimeoutError::Timeout) => {}
                    // Dropped (or told): stop.
                    _ => return,
                }
            }
        })?;
        Ok(Beater {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Beater {
    /// Stops the thread (at once: it waits on the channel) and joins it.
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn intervals_and_thresholds_follow_the_timeout() {
        assert_eq!(interval(Duration::from_secs(30)), Duration::from_secs(1));
        assert_eq!(
            interval(Duration::from_millis(10)),
            Duration::from_millis(5)
        );
        assert_eq!(
            silence_threshold(Duration::from_secs(30)),
            Duration::from_secs(15)
        );
        assert_eq!(
            silence_threshold(Duration::from_millis(10)),
            Duration::from_millis(20)
        );
    }

    #[test]
    fn the_longest_silence_over_the_threshold_is_the_cause() {
        let ms = Duration::from_millis;
        let t = ms(500);
        assert_eq!(
            PeerSilence::judge([(0, ms(900)), (1, ms(10)), (3, ms(700))], t),
            PeerSilence::Silent {
                peer: 0,
                silent: ms(900)
            }
        );
        assert_eq!(
            PeerSilence::judge([(2, ms(600)), (1, ms(600))], t),
            PeerSilence::Silent {
                peer: 1,
                silent: ms(600)
            }
        );
        assert_eq!(
            PeerSilence::judge([(0, ms(499)), (1, ms(10))], t),
            PeerSilence::AllHeard { threshold: t }
        );
    }

    #[test]
    fn a_timeout_names_the_silent_peer_else_the_one_waited_for() {
        let waited = || "rank 2 did not finish".to_string();
        let silent = PeerSilence::Silent {
            peer: 1,
            silent: Duration::from_millis(2100),
        };
        assert_eq!(
            silent.timeout(0, 2, waited),
            FabricError::Timeout {
                rank: 0,
                peer: 1,
                reason: stopped_responding(1, Duration::from_millis(2100)),
            }
        );
        let heard = PeerSilence::AllHeard {
            threshold: Duration::from_secs(1),
        };
        for silence in [heard, PeerSilence::Unknown] {
            assert_eq!(
                silence.timeout(0, 2, waited),
                FabricError::Timeout {
                    rank: 0,
                    peer: 2,
                    reason: "rank 2 did not finish".into(),
                }
            );
        }
    }

    #[test]
    fn a_beater_beats_until_dropped() {
        let beats = Arc::new(AtomicU32::new(0));
        let counted = beats.clone();
        let beater = Beater::start("beat-test".into(), Duration::from_millis(5), move || {
            counted.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
        while beats.load(Ordering::Relaxed) < 3 {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(beater);
        let after = beats.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(beats.load(Ordering::Relaxed), after, "no beat after drop");
        assert!(monotonic_ns() > 0);
    }
}
