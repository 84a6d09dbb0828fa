//! Each rank's compute engine: reductions served one at a time, those
//! posted at the same instant in channel order.
//!
//! A rank's reductions occupy its engine for `bytes / throughput` each,
//! one after the other, in the order they were posted: a reduction posted
//! while the engine is busy starts when the work reserved before it is
//! done. Reductions posted at the *same* picosecond (a *tie*) are the
//! exception: those that name an NCCL channel
//! ([`Fabric::compute_framed`](algorithms::Fabric::compute_framed)) are
//! served in channel order, after any unframed work of the tie posted
//! before them; unframed work keeps the order it was posted in.
//!
//! Why: a tie must be served in some order, and the order in which its
//! messages were handled is the event queue's at that picosecond, which
//! follows global flow and rank numbers (the network handles one rank's
//! messages before another's), so it differs from rank to rank:
//! `nccl_pat`'s reduce-scatter on a fat-tree of 4 nodes delivers 8
//! channels' messages across a node boundary at one picosecond to ranks
//! 7, 15, 23 and 31, and they were handled in three different orders.
//! Served so, ranks one node apart finished up to 0.14% apart, and no
//! shift of whole nodes mapped the run onto itself. Channel order is the
//! same on every rank. It is no less like NCCL than the order of
//! handling: NCCL runs each channel on its own thread block (the
//! kernel's grid is one block per channel of the plan,
//! `src/enqueue.cc:1680-1682`, and each block finds its channel from its
//! index, `src/device/common.h:351-357`, NVIDIA/nccl @b91894bd), so no
//! channel's reduction waits for another's to be posted; both orders
//! serialise what the thread blocks do side by side.
//!
//! Nothing changes for work that does not tie: a reduction posted alone
//! at its instant is reserved exactly as before. A tie's later members
//! may move earlier ones back: a member's finish is final once time has
//! moved past the tie's instant, and its future, woken at the finish it
//! was first given, waits on for the later one.

use algorithms::Time;

use crate::slab::Slab;

/// Every simulated rank's compute engine (by slot).
#[derive(Debug)]
pub(crate) struct ComputeEngines {
    /// When each slot's engine is free of the work reserved so far.
    free_at: Vec<Time>,
    /// Each slot's reductions posted at its latest instant, in service
    /// order.
    ties: Vec<Tie>,
    /// Each reservation's finish, by ticket, while its future waits or
    /// its tie is open.
    tickets: Slab<Ticket>,
}

/// The reductions one slot posted at one instant.
#[derive(Debug, Default)]
struct Tie {
    /// When they were posted.
    at: Time,
    /// When the first of them starts.
    start: Time,
    /// In service order.
    members: Vec<Member>,
}

/// One reduction of a tie.
#[derive(Debug)]
struct Member {
    /// The NCCL channel that posted it, if it named one.
    channel: Option<u16>,
    work_ps: u64,
    ticket: u32,
}

/// A reservation's state.
#[derive(Debug)]
struct Ticket {
    /// When the work is done (final once its tie is closed).
    done: Time,
    /// Whether its future is done with it (finished or dropped).
    released: bool,
    /// Whether it is a member of its slot's open tie.
    in_tie: bool,
}

impl ComputeEngines {
    /// Idle engines for `slots` simulated ranks.
    pub(crate) fn new(slots: usize) -> ComputeEngines {
        ComputeEngines {
            free_at: vec![Time::ZERO; slots],
            ties: (0..slots).map(|_| Tie::default()).collect(),
            tickets: Slab::default(),
        }
    }

    /// Reserves `slot`'s engine for `work_ps` (more than 0), posted at
    /// `now` by `channel` (if the work names one), and returns its ticket;
    /// `None` if the work would end past the end of virtual time.
    pub(crate) fn reserve(
        &mut self,
        slot: usize,
        now: Time,
        work_ps: u64,
        channel: Option<u16>,
    ) -> Option<u32> {
        let tie = &mut self.ties[slot];
        if tie.at != now || tie.members.is_empty() {
            // A new instant: the last tie's finishes are final.
            for m in tie.members.drain(..) {
                let t = self
                    .tickets
                    .get_mut(m.ticket)
                    .expect("a tie's member has its ticket");
                if t.released {
                    self.tickets.remove(m.ticket);
                } else {
                    t.in_tie = false;
                }
            }
            tie.at = now;
            tie.start = now.max(self.free_at[slot]);
        }
        let free_at = self.free_at[slot].max(tie.start).checked_plus_ps(work_ps)?;
        // After every member that is unframed or of a channel not above
        // this one's.
        let mut at = tie.members.len();
        if let Some(c) = channel {
            while at > 0 && tie.members[at - 1].channel.is_some_and(|k| k > c) {
                at -= 1;
            }
        }
        let ticket = self.tickets.insert(Ticket {
            done: free_at,
            released: false,
            in_tie: true,
        });
        tie.members.insert(
            at,
            Member {
                channel,
                work_ps,
                ticket,
            },
        );
        // The finishes from the new member on (none overflows: the last
        // is `free_at`).
        let mut done = match at {
            0 => tie.start,
            _ => {
                self.tickets
                    .get(tie.members[at - 1].ticket)
                    .expect("live")
                    .done
            }
        };
        for m in &tie.members[at..] {
            done = Time(done.as_ps() + m.work_ps);
            self.tickets.get_mut(m.ticket).expect("live").done = done;
        }
        debug_assert_eq!(done, free_at);
        self.free_at[slot] = free_at;
        Some(ticket)
    }

    /// When the work of `ticket` is done, as far as is known now.
    pub(crate) fn done(&self, ticket: u32) -> Time {
        self.tickets
            .get(ticket)
            .expect("a waiting reduction has its ticket")
            .done
    }

    /// The future of `ticket` is done with it (its work finished, or it
    /// was dropped: the engine stays reserved).
    pub(crate) fn release(&mut self, ticket: u32) {
        let Some(t) = self.tickets.get_mut(ticket) else {
            return;
        };
        if t.in_tie {
            t.released = true;
        } else {
            self.tickets.remove(ticket);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finishes(e: &ComputeEngines, tickets: &[u32]) -> Vec<u64> {
        tickets.iter().map(|&t| e.done(t).as_ps()).collect()
    }

    #[test]
    fn work_posted_at_different_instants_is_served_in_posting_order() {
        let mut e = ComputeEngines::new(1);
        let a = e.reserve(0, Time(10), 5, Some(3)).unwrap();
        let b = e.reserve(0, Time(12), 5, Some(1)).unwrap();
        let c = e.reserve(0, Time(30), 5, Some(0)).unwrap();
        assert_eq!(finishes(&e, &[a, b, c]), vec![15, 20, 35]);
    }

    #[test]
    fn a_tie_is_served_in_channel_order_after_earlier_work() {
        let mut e = ComputeEngines::new(2);
        let early = e.reserve(0, Time(0), 10, Some(9)).unwrap();
        // At 4 ps, channels 6, 7, 0 and 1 post 2 ps each, in that order.
        let t: Vec<u32> = [6, 7, 0, 1]
            .iter()
            .map(|&c| e.reserve(0, Time(4), 2, Some(c)).unwrap())
            .collect();
        assert_eq!(finishes(&e, &[early]), vec![10]);
        assert_eq!(finishes(&e, &t), vec![16, 18, 12, 14]);
        // The other slot is idle.
        let other = e.reserve(1, Time(4), 2, Some(0)).unwrap();
        assert_eq!(e.done(other), Time(6));
    }

    #[test]
    fn unframed_work_keeps_its_posting_order_and_is_never_passed() {
        let mut e = ComputeEngines::new(1);
        let a = e.reserve(0, Time(0), 3, Some(5)).unwrap();
        let b = e.reserve(0, Time(0), 3, None).unwrap();
        let c = e.reserve(0, Time(0), 3, Some(2)).unwrap();
        let d = e.reserve(0, Time(0), 3, None).unwrap();
        // `c` passes nothing posted before the unframed `b`.
        assert_eq!(finishes(&e, &[a, b, c, d]), vec![3, 6, 9, 12]);
    }

    #[test]
    fn released_tickets_are_freed_once_their_tie_is_closed() {
        let mut e = ComputeEngines::new(1);
        let a = e.reserve(0, Time(0), 3, Some(1)).unwrap();
        let b = e.reserve(0, Time(0), 3, Some(0)).unwrap();
        e.release(b);
        // Still in the open tie: kept.
        assert_eq!(e.done(a), Time(6));
        let c = e.reserve(0, Time(7), 1, None).unwrap();
        assert_eq!(e.done(c), Time(8));
        // `b` was freed when the tie closed; `a` goes once released.
        assert_eq!(e.tickets.len(), 2);
        e.release(a);
        assert_eq!(e.tickets.len(), 1);
    }

    #[test]
    fn work_past_the_end_of_time_is_refused() {
        let mut e = ComputeEngines::new(1);
        assert!(e.reserve(0, Time(u64::MAX - 1), 5, None).is_none());
        assert!(e.reserve(0, Time(0), u64::MAX, None).is_some());
        assert!(e.reserve(0, Time(0), 1, Some(0)).is_none());
    }
}
