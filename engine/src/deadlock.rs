//! The deadlock report: what every blocked rank waits for, and the cycle
//! among ranks if there is one.

use std::fmt;

use algorithms::{Rank, Tag, Time};

use crate::network::packet::Stall;

/// One receive a blocked rank is waiting on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingRecv {
    /// The rank it waits to hear from.
    pub from: Rank,
    /// The tag it expects.
    pub tag: Tag,
    /// The size it expects, in bytes.
    pub bytes: u64,
    /// Whether `from` had already returned from its program (finished or
    /// failed).
    pub from_finished: bool,
    /// Whether `from` crashed (a scheduled fault).
    pub from_crashed: bool,
    /// What the tag means to the program that waits, for people ("timed
    /// call 3 of 20, phase 1"); `None`: the report shows the tag.
    pub label: Option<String>,
}

/// A rank that cannot make progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockedRank {
    /// The rank.
    pub rank: Rank,
    /// Its pending receives, in the order they were posted (empty if it is
    /// stuck on something that is not a receive).
    pub waiting_for: Vec<PendingRecv>,
    /// Whether it waits for the other ranks at the simulator's
    /// synchronisation before a call (it finished the previous call, or
    /// has not started the first).
    pub at_sync: bool,
}

/// Nothing is left to happen but some ranks have not finished.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadlockReport {
    /// When a rank last ran or a message last arrived (later events
    /// changed nothing); for a timeout, when the watchdog fired.
    pub time: Time,
    /// Every unfinished rank, in rank order.
    pub blocked: Vec<BlockedRank>,
    /// A cycle `r0 -> r1 -> ... -> r0` of ranks each waiting on the next,
    /// if the wait-for graph has one (the first found searching from the
    /// lowest rank), written from its lowest rank.
    pub cycle: Option<Vec<Rank>>,
    /// Messages that were sent but never arrived although nothing was left
    /// to happen: the network itself is stuck (a cycle of full buffers
    /// under credit flow control), and the ranks' waits follow from it.
    pub stuck_in_network: Vec<StuckMessage>,
    /// Set when the run did not run dry but a call outlived the collective
    /// watchdog: the call's start and the limit, in ps.
    pub timeout: Option<(Time, u64)>,
    /// Ranks that crashed (scheduled faults), with when.
    pub crashed: Vec<(Rank, Time)>,
    /// Link directions down (scheduled faults) when the run stopped.
    pub down_links: Vec<String>,
    /// Link directions each waiting on the next, in a cycle, when the
    /// network is stuck: for credit (a credit deadlock) or because PFC
    /// paused them (a PFC deadlock).
    pub buffer_cycle: Vec<(String, Stall)>,
    /// Rank pairs whose transport (RDMA or TCP) gave up during the run,
    /// in words.
    pub transport_failures: Vec<String>,
}

/// A message the network holds with no event left to move it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StuckMessage {
    /// Its sender.
    pub src: Rank,
    /// Its receiver.
    pub dst: Rank,
    /// Its size in bytes.
    pub bytes: u64,
}

/// How many stuck messages a report lists (it counts them all).
const STUCK_LISTED_MAX: usize = 8;

impl DeadlockReport {
    /// Builds the report and looks for a cycle among `blocked`.
    pub fn new(time: Time, blocked: Vec<BlockedRank>, world_size: usize) -> DeadlockReport {
        let cycle = find_cycle(&blocked, world_size);
        DeadlockReport {
            time,
            blocked,
            cycle,
            stuck_in_network: Vec::new(),
            timeout: None,
            crashed: Vec::new(),
            down_links: Vec::new(),
            buffer_cycle: Vec::new(),
            transport_failures: Vec::new(),
        }
    }

    /// The same report, noting a buffer-dependency cycle.
    pub fn with_buffer_cycle(mut self, cycle: Vec<(String, Stall)>) -> DeadlockReport {
        self.buffer_cycle = cycle;
        self
    }

    /// Whether the network is stuck in a PFC deadlock: a cycle of links
    /// paused by priority flow control.
    pub fn is_pfc_deadlock(&self) -> bool {
        self.buffer_cycle.iter().any(|(_, s)| *s == Stall::Paused)
    }

    /// The same report, noting the transport failures of the run.
    pub fn with_transport_failures(mut self, failures: Vec<String>) -> DeadlockReport {
        self.transport_failures = failures;
        self
    }

    /// The same report, noting the link directions that are down.
    pub fn with_down_links(mut self, down_links: Vec<String>) -> DeadlockReport {
        self.down_links = down_links;
        self
    }

    /// The same report, noting the ranks that crashed.
    pub fn with_crashes(mut self, crashed: Vec<(Rank, Time)>) -> DeadlockReport {
        self.crashed = crashed;
        self
    }

    /// The same report, as a collective timeout: the call that started at
    /// `started` was still running `limit_ps` later.
    pub fn timed_out(mut self, started: Time, limit_ps: u64) -> DeadlockReport {
        self.timeout = Some((started, limit_ps));
        self
    }

    /// The same report, noting the messages stuck in the network.
    pub fn with_stuck_messages(mut self, stuck: Vec<StuckMessage>) -> DeadlockReport {
        self.stuck_in_network = stuck;
        self
    }
}

impl DeadlockReport {
    /// Names every pending receive's tag with `name` (what the tag means
    /// to the program: which call, which phase), for the printed report.
    pub fn label_tags(&mut self, name: impl Fn(Tag) -> String) {
        for wait in self.blocked.iter_mut().flat_map(|b| &mut b.waiting_for) {
            wait.label = Some(name(wait.tag));
        }
    }
}

impl fmt::Display for DeadlockReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.timeout {
            Some((started, limit_ps)) => writeln!(
                f,
                "collective timeout at {}: the call that started at {} has not finished within {}; {} rank(s) not done",
                self.time,
                started,
                Time(limit_ps),
                self.blocked.len()
            )?,
            None => writeln!(
                f,
                "deadlock at {}: {} rank(s) blocked with nothing left to happen",
                self.time,
                self.blocked.len()
            )?,
        }
        if !self.stuck_in_network.is_empty() {
            let cause = if !self.down_links.is_empty() {
                format!(
                    "held behind link(s) that are down: {}",
                    self.down_links.join(", ")
                )
            } else if let Some((first, _)) = self.buffer_cycle.first() {
                let names: Vec<&str> = self.buffer_cycle.iter().map(|(l, _)| l.as_str()).collect();
                if self.is_pfc_deadlock() {
                    format!(
                        "a PFC deadlock: a cycle of paused links {} => {first}; each link's receiver \
                         holds packets from it that wait on the next link, and has paused it",
                        names.join(" => ")
                    )
                } else {
                    format!(
                        "a cycle of full buffers under credit flow control: {} => {first}, each waiting for room on the next",
                        names.join(" => ")
                    )
                }
            } else {
                "no port is waiting for credit".to_string()
            };
            writeln!(
                f,
                "  the network is stuck: {} message(s) sent but never delivered with no event left to move them \
                 ({cause}); the waits below follow from it",
                self.stuck_in_network.len()
            )?;
            for m in self.stuck_in_network.iter().take(STUCK_LISTED_MAX) {
                writeln!(
                    f,
                    "    stuck: rank {} -> rank {}, {} bytes",
                    m.src, m.dst, m.bytes
                )?;
            }
            if self.stuck_in_network.len() > STUCK_LISTED_MAX {
                writeln!(f, "    ...")?;
            }
        }
        for (rank, at) in &self.crashed {
            writeln!(f, "  rank {rank} crashed at {at} (scheduled fault)")?;
        }
        for failure in &self.transport_failures {
            writeln!(f, "  {failure}")?;
        }
        for b in &self.blocked {
            if b.at_sync {
                writeln!(
                    f,
                    "  rank {} waits for the other ranks at the synchronisation before a call",
                    b.rank
                )?;
            } else if b.waiting_for.is_empty() {
                writeln!(
                    f,
                    "  rank {} has no pending receive (it is computing or delayed)",
                    b.rank
                )?;
            }
            for w in &b.waiting_for {
                let note = if w.from_crashed {
                    " (rank crashed)"
                } else if w.from_finished {
                    " (rank already returned)"
                } else {
                    ""
                };
                let what = match &w.label {
                    Some(label) => label.clone(),
                    None => format!("tag {}", w.tag),
                };
                writeln!(
                    f,
                    "  rank {} waits for rank {}, {what}, {} bytes{}",
                    b.rank, w.from, w.bytes, note
                )?;
            }
        }
        match &self.cycle {
            Some(cycle) => {
                let path: Vec<String> = cycle.iter().map(|r| r.to_string()).collect();
                writeln!(f, "  cycle: {} -> {}", path.join(" -> "), cycle[0])
            }
            None if self.timeout.is_some() => writeln!(f, "  no cycle among the waits"),
            None => writeln!(
                f,
                "  no cycle: the chain of waits ends at a rank that will never send"
            ),
        }
    }
}

/// Finds a cycle in the graph "rank waits for rank", visiting ranks and
/// edges in ascending order.
fn find_cycle(blocked: &[BlockedRank], world_size: usize) -> Option<Vec<Rank>> {
    let mut edges: Vec<Vec<Rank>> = vec![Vec::new(); world_size];
    let mut is_blocked = vec![false; world_size];
    for b in blocked {
        is_blocked[b.rank] = true;
    }
    for b in blocked {
        let mut out: Vec<Rank> = b
            .waiting_for
            .iter()
            .map(|w| w.from)
            .filter(|&p| p < world_size && is_blocked[p])
            .collect();
        out.sort_unstable();
        out.dedup();
        edges[b.rank] = out;
    }
    crate::cycle::find_cycle(&edges, blocked.iter().map(|b| b.rank))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waits(rank: Rank, on: &[Rank]) -> BlockedRank {
        BlockedRank {
            rank,
            waiting_for: on
                .iter()
                .map(|&from| PendingRecv {
                    from,
                    tag: Tag(0),
                    bytes: 8,
                    from_finished: false,
                    from_crashed: false,
                    label: None,
                })
                .collect(),
            at_sync: false,
        }
    }

    #[test]
    fn finds_the_cycle_and_not_the_tail() {
        // 0 -> 1 -> 2 -> 3 -> 1: the cycle is 1, 2, 3.
        let b = vec![
            waits(0, &[1]),
            waits(1, &[2]),
            waits(2, &[3]),
            waits(3, &[1]),
        ];
        let r = DeadlockReport::new(Time(0), b, 4);
        assert_eq!(r.cycle, Some(vec![1, 2, 3]));
        assert!(r.to_string().contains("cycle: 1 -> 2 -> 3 -> 1"));
    }

    #[test]
    fn a_chain_to_a_finished_rank_has_no_cycle() {
        let b = vec![waits(1, &[0]), waits(2, &[1])];
        let r = DeadlockReport::new(Time(0), b, 3);
        assert_eq!(r.cycle, None);
    }
}

#[cfg(test)]
mod flow_tests {
    use std::sync::Arc;

    use algorithms::{DType, Fabric, Payload, Shape, Tag};
    use topologies::presets;

    use crate::network::{ModelLevel, NetworkConfig, TopologyConfig};
    use crate::world::WorldConfig;

    /// Three ranks on one DGX H100 node, flow model.
    fn world() -> WorldConfig {
        let topology = Arc::new(presets::dgx_h100().expect("the preset builds"));
        let placement: Arc<[topologies::VertexId]> = topology.endpoints()[..3].into();
        WorldConfig::new(
            3,
            NetworkConfig::Topology(TopologyConfig::new(
                topology,
                placement,
                ModelLevel::Flow,
                1,
            )),
        )
    }

    /// Ranks 1 and 2 send rank 0 a large and a small message at once: they
    /// share rank 0's link, so when the small one finishes the large one's
    /// rate doubles and its finish moves earlier. Rank 0 takes both, then
    /// (if `hang`) waits for a third message that nobody sends. Returns
    /// when rank 0 had both messages, and the deadlock report's time.
    fn run(hang: bool) -> (Option<u64>, Option<u64>) {
        let large = 64 << 20;
        let small = 1 << 20;
        let exec = crate::run(world(), move |f| async move {
            let shape = |count| Shape::new(DType::U8, count);
            match f.rank() {
                0 => {
                    let a = f.recv(1, Tag(1), shape(large));
                    let b = f.recv(2, Tag(2), shape(small));
                    let (a, b) = futures_util::future::join(a, b).await;
                    a?;
                    b?;
                    let at = f.now().as_ps();
                    if hang {
                        f.recv(2, Tag(3), shape(1)).await?;
                    }
                    Ok(at)
                }
                1 => f
                    .send(0, Tag(1), Payload::phantom(DType::U8, large))
                    .await
                    .map(|()| 0),
                _ => f
                    .send(0, Tag(2), Payload::phantom(DType::U8, small))
                    .await
                    .map(|()| 0),
            }
        });
        let done = exec.outputs[0]
            .as_ref()
            .map(|r| *r.as_ref().expect("rank 0 receives both"));
        (done, exec.deadlock.map(|d| d.time.as_ps()))
    }

    #[test]
    fn a_deadlocked_flow_run_reports_its_last_real_event_not_a_moved_finish() {
        let (done, none) = run(false);
        assert_eq!(none, None, "without the missing message nothing hangs");
        let arrived = done.expect("rank 0 finishes");
        let (hung, report) = run(true);
        assert_eq!(hung, None, "rank 0 waits for rank 2 for ever");
        // The large message's first finish, before the small one left its
        // links, was later than its real one; the report must not take it.
        assert_eq!(report, Some(arrived));
    }
}
