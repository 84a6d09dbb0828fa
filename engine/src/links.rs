//! The ideal link model: each ordered pair of ranks is its own full-duplex
//! link.
//!
//! A message of `b` bytes sent from `a` to `d` at time `t` starts on the
//! wire at `max(t, when the link a->d is free)`, occupies it for
//! `b / bandwidth` (rounded up to a picosecond) and arrives `latency` after
//! its last byte left. Messages on one link are therefore sent back to back
//! in the order they were posted, and arrive in that order. A link's state
//! is created the first time it carries a message: a run holds state only
//! for the pairs that talk.
//!
//! Two optional terms model a host's software and memory (fitted by `sim
//! calibrate`): a per-message sender overhead `o` ([`LinkSpec::overhead_ps`])
//! and a per-rank injection rate `I` ([`LinkSpec::injection_bytes_per_s`]).
//! With them a message posted at `t` leaves the sender's software at
//! `p = max(t, the sender's previous p) + o` (messages of one rank pay `o`
//! one after another, whatever their destination), starts at
//! `s = max(p, link free, sender's port free)`, holds the link until
//! `s + max(b / bandwidth, b / I)`, the sender's port until `s + b / I`,
//! and arrives `latency` after the link is free. So `n` concurrent flows
//! out of one rank take `(n - 1) b / I + b / bandwidth` together. Only the
//! sending side is shared: a port per receiver, reserved greedily in the
//! order senders post, would charge flows into one rank by the order the
//! engine polls the senders rather than by a fair share.
//!
//! With racks ([`LinkSpec::racks`]: ranks in racks of consecutive ranks, a
//! rate-limited link between each two racks, one per direction) a message
//! from rack `x` to rack `y` also starts no earlier than the link `x -> y`
//! is free, holds it for `b / rack rate` (and its own link at least as
//! long), and arrives the rack link's latency later: the flows between two
//! racks share one rate, in the order they are posted, as they share a
//! shaped uplink.
//!
//! With a shared rate ([`LinkSpec::shared_bytes_per_s`]: the CPUs and
//! memory of the one machine all ranks run on, fitted by `sim calibrate`
//! when every rank moving data at once is slower than a lone pair) every
//! message also holds the one shared resource for `b / shared rate`,
//! from `max(p, the resource free)`, in the order messages are posted,
//! and its link stays busy (and it arrives `latency` later) until both
//! its link time and its share are through: `n` messages posted at once
//! take `n b / shared rate` together, while a lone message goes at its
//! pair's bandwidth. The share does not wait for the message's link: a
//! message queued behind its pair's previous one would otherwise hold
//! the machine idle for every other pair (a pipelined ring of 16 MiB on
//! TCP namespaces was simulated 54% slow that way). With
//! [`LinkSpec::shared_machine_ranks`] each `n` consecutive ranks are a
//! machine of their own with its own shared resource, which a message
//! takes from its sender's machine (a calibration of `n` ranks on one
//! machine, run at a larger world size, is that many copies of it).
//!
//! For in-network reductions (the `in_network` module) the ideal links also
//! give every rank a full-duplex link of the same parameters to one
//! switch that reduces every group at once (no forwarding latency): a leg
//! of `b` bytes is timed like a message on that link
//! ([`IdealLinks::transmit_leg`]).

use rustc_hash::FxHashMap as HashMap;

use algorithms::{Rank, Time};
use topologies::LinkSpec;

/// Traffic counters of the ideal link model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Messages carried (self-sends excluded).
    pub messages: u64,
    /// Payload bytes carried.
    pub bytes: u64,
    /// Number of distinct links that carried anything.
    pub links_used: u64,
}

/// Per-pair dedicated links with one [`LinkSpec`].
#[derive(Debug)]
pub struct IdealLinks {
    spec: LinkSpec,
    /// When each used link becomes free. Only looked up, never iterated,
    /// so its order cannot reach any output.
    free_at: HashMap<(u32, u32), Time>,
    /// When each rank's link to (`true`) or from the switch becomes free;
    /// only looked up.
    leg_free_at: HashMap<(u32, bool), Time>,
    /// When each rank's software is done with the last message it posted
    /// (with an overhead); only looked up.
    posted_at: HashMap<u32, Time>,
    /// When each rank's port out becomes free (with an injection rate);
    /// only looked up.
    port_free_at: HashMap<u32, Time>,
    /// When each rack-to-rack link becomes free (with racks); only
    /// looked up.
    rack_free_at: HashMap<(u32, u32), Time>,
    /// When each machine's shared resource becomes free (with a shared
    /// rate; machine 0 alone unless the spec groups ranks into machines);
    /// only looked up.
    shared_free_at: HashMap<u32, Time>,
    stats: LinkStats,
}

impl IdealLinks {
    /// Links with parameters `spec`, none of them used yet.
    pub fn new(spec: LinkSpec) -> IdealLinks {
        IdealLinks {
            spec,
            free_at: HashMap::default(),
            leg_free_at: HashMap::default(),
            posted_at: HashMap::default(),
            port_free_at: HashMap::default(),
            rack_free_at: HashMap::default(),
            shared_free_at: HashMap::default(),
            stats: LinkStats::default(),
        }
    }

    /// Puts a message of `bytes` on the link `src -> dst` at `now` and
    /// returns when it arrives, or `None` if that is past the end of
    /// virtual time. A rank sending to itself uses no link: the message
    /// arrives at once.
    pub fn transmit(&mut self, now: Time, src: Rank, dst: Rank, bytes: u64) -> Option<Time> {
        if src == dst {
            return Some(now);
        }
        let key = (src as u32, dst as u32);
        let ready = self.posted(now, key.0)?;
        let free_at = *self.free_at.entry(key).or_insert_with(|| {
            self.stats.links_used += 1;
            Time::ZERO
        });
        let shared_done = match self.spec.shared_bytes_per_s {
            Some(rate) => {
                let machine = self
                    .spec
                    .shared_machine_ranks
                    .map_or(0, |n| (src / n.max(1)) as u32);
                let free = self.shared_free_at.entry(machine).or_insert(Time::ZERO);
                let done = ready
                    .max(*free)
                    .checked_plus_ps(topologies::duration_ps(bytes, rate))?;
                *free = done;
                Some(done)
            }
            None => None,
        };
        let mut start = ready.max(free_at);
        let mut busy_ps = self.spec.serialization_ps(bytes);
        if let Some(rate) = self.spec.injection_bytes_per_s {
            let port = self.port_free_at.entry(key.0).or_insert(Time::ZERO);
            start = start.max(*port);
            let port_ps = topologies::duration_ps(bytes, rate);
            *port = start.checked_plus_ps(port_ps)?;
            busy_ps = busy_ps.max(port_ps);
        }
        let mut latency_ps = self.spec.latency_ps;
        if let Some(racks) = self.spec.racks {
            let (from, to) = (racks.rack_of(src), racks.rack_of(dst));
            if from != to {
                let shared = self.rack_free_at.entry((from, to)).or_insert(Time::ZERO);
                start = start.max(*shared);
                let rack_ps = topologies::duration_ps(bytes, racks.bandwidth_bytes_per_s);
                *shared = start.checked_plus_ps(rack_ps)?;
                busy_ps = busy_ps.max(rack_ps);
                latency_ps = latency_ps.saturating_add(racks.latency_ps);
            }
        }
        let mut done = start.checked_plus_ps(busy_ps)?;
        if let Some(shared) = shared_done {
            done = done.max(shared);
        }
        self.free_at.insert(key, done);
        self.stats.messages += 1;
        self.stats.bytes += bytes;
        done.checked_plus_ps(latency_ps)
    }

    /// When a message `src` posts at `now` is through its software
    /// overhead (`now` itself without one).
    fn posted(&mut self, now: Time, src: u32) -> Option<Time> {
        if self.spec.overhead_ps == 0 {
            return Some(now);
        }
        let last = self.posted_at.entry(src).or_insert(Time::ZERO);
        let ready = now.max(*last).checked_plus_ps(self.spec.overhead_ps)?;
        *last = ready;
        Some(ready)
    }

    /// Puts a leg of `bytes` on `rank`'s link to (`up`) or from the
    /// switch at `now` and returns when it arrives (`None` past the end of
    /// virtual time). Legs use neither overheads nor shared rates.
    pub fn transmit_leg(&mut self, now: Time, rank: Rank, up: bool, bytes: u64) -> Option<Time> {
        let free_at = self
            .leg_free_at
            .entry((rank as u32, up))
            .or_insert_with(|| {
                self.stats.links_used += 1;
                Time::ZERO
            });
        let start = now.max(*free_at);
        let done = start.checked_plus_ps(self.spec.serialization_ps(bytes))?;
        *free_at = done;
        self.stats.messages += 1;
        self.stats.bytes += bytes;
        done.checked_plus_ps(self.spec.latency_ps)
    }

    /// Counters so far.
    pub fn stats(&self) -> LinkStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_queue_behind_each_other_on_one_link_only() {
        let spec = LinkSpec::new(1_000, 1e9).unwrap(); // 1 ns latency, 1 GB/s
        let mut l = IdealLinks::new(spec);
        // 1000 bytes at 1 GB/s = 1 us on the wire.
        assert_eq!(
            l.transmit(Time(0), 0, 1, 1000),
            Some(Time(1_000_000 + 1_000))
        );
        assert_eq!(
            l.transmit(Time(0), 0, 1, 1000),
            Some(Time(2_000_000 + 1_000))
        );
        // The reverse direction and another pair are independent.
        assert_eq!(l.transmit(Time(0), 1, 0, 1000), Some(Time(1_001_000)));
        assert_eq!(l.transmit(Time(0), 0, 2, 0), Some(Time(1_000)));
        assert_eq!(l.transmit(Time(7), 3, 3, 1 << 30), Some(Time(7)));
        assert_eq!(l.stats().links_used, 3);
        assert_eq!(l.stats().messages, 4);
        // Past the end of virtual time is reported, not wrapped or clamped.
        assert_eq!(l.transmit(Time(u64::MAX - 10), 4, 5, 1000), None);
    }

    #[test]
    fn overhead_is_paid_per_message_in_turn_and_ports_are_shared() {
        // 1 ns latency, 1 GB/s links, 100 ns overhead, 2 GB/s per rank.
        let spec = LinkSpec::new(1_000, 1e9)
            .unwrap()
            .with_overhead_ps(100_000)
            .with_injection(2e9)
            .unwrap();
        let mut l = IdealLinks::new(spec);
        // First message: overhead, 1 us on the link (the port's 0.5 us is
        // shorter), latency.
        assert_eq!(l.transmit(Time(0), 0, 1, 1000), Some(Time(1_101_000)));
        // Second, to another peer: its overhead after the first's, then
        // the sender's port (free at 0.6 us) holds it back.
        assert_eq!(l.transmit(Time(0), 0, 2, 1000), Some(Time(1_601_000)));
        // Another rank sending to rank 1 shares nothing with rank 0.
        assert_eq!(l.transmit(Time(0), 3, 1, 1000), Some(Time(1_101_000)));
        // Self-sends pay nothing.
        assert_eq!(l.transmit(Time(5), 2, 2, 1000), Some(Time(5)));
    }

    #[test]
    fn flows_between_two_racks_share_the_rack_link_in_turn() {
        // 1 ns latency, 1 GB/s links; racks of 2 ranks joined at 0.5 GB/s
        // with 10 ns more latency.
        let spec = LinkSpec::new(1_000, 1e9)
            .unwrap()
            .with_racks(topologies::RackLink {
                ranks_per_rack: 2,
                bandwidth_bytes_per_s: 0.5e9,
                latency_ps: 10_000,
            })
            .unwrap();
        let mut l = IdealLinks::new(spec);
        // Within rack 0: the pair's own link only.
        assert_eq!(l.transmit(Time(0), 0, 1, 1000), Some(Time(1_001_000)));
        // Rack 0 to rack 1: 2 us on the rack link, then both latencies.
        assert_eq!(l.transmit(Time(0), 0, 2, 1000), Some(Time(2_011_000)));
        // Another pair across the same direction waits for the rack link.
        assert_eq!(l.transmit(Time(0), 1, 3, 1000), Some(Time(4_011_000)));
        // The other direction is a link of its own.
        assert_eq!(l.transmit(Time(0), 3, 0, 1000), Some(Time(2_011_000)));
        // Within rack 1, nothing shared with the crossing flows.
        assert_eq!(l.transmit(Time(0), 2, 3, 1000), Some(Time(1_001_000)));
    }

    #[test]
    fn every_message_shares_the_machine_rate_in_posting_order() {
        // 1 ns latency, 1 GB/s links, all messages sharing 2 GB/s.
        let spec = LinkSpec::new(1_000, 1e9).unwrap().with_shared(2e9).unwrap();
        let mut l = IdealLinks::new(spec);
        // A lone message goes at its pair's 1 GB/s (its 0.5 us share is
        // shorter).
        assert_eq!(l.transmit(Time(0), 0, 1, 1000), Some(Time(1_001_000)));
        // Two more pairs posting at once: shares through at 1 and 1.5 us.
        assert_eq!(l.transmit(Time(0), 2, 3, 1000), Some(Time(1_001_000)));
        assert_eq!(l.transmit(Time(0), 3, 2, 1000), Some(Time(1_501_000)));
        // A second message of the first pair waits for its link (free at
        // 1 us); its share (1.5-2 us) is taken in posting order.
        assert_eq!(l.transmit(Time(0), 0, 1, 1000), Some(Time(2_001_000)));
        // The share does not wait for a link: a new pair's runs 2-2.5 us.
        assert_eq!(l.transmit(Time(0), 1, 0, 1000), Some(Time(2_501_000)));
        // Later than the queue, nothing waits.
        assert_eq!(
            l.transmit(Time(5_000_000), 1, 0, 1000),
            Some(Time(6_001_000))
        );
        // Slower than the pair's link, the shared rate sets the time.
        let slow = LinkSpec::new(1_000, 1e9)
            .unwrap()
            .with_shared(0.5e9)
            .unwrap();
        let mut l = IdealLinks::new(slow);
        assert_eq!(l.transmit(Time(0), 0, 1, 1000), Some(Time(2_001_000)));
        assert_eq!(l.transmit(Time(0), 1, 0, 1000), Some(Time(4_001_000)));
        // Self-sends use nothing.
        assert_eq!(l.transmit(Time(0), 1, 1, 1000), Some(Time(0)));
        // Machines of 2 ranks: each pair of ranks has its own share.
        let machines = LinkSpec::new(1_000, 1e9)
            .unwrap()
            .with_shared(0.5e9)
            .unwrap()
            .with_shared_machine_ranks(2);
        let mut l = IdealLinks::new(machines);
        assert_eq!(l.transmit(Time(0), 0, 1, 1000), Some(Time(2_001_000)));
        assert_eq!(l.transmit(Time(0), 2, 3, 1000), Some(Time(2_001_000)));
        // Rank 1 is on machine 0 (busy until 2 us), rank 5 on machine 2.
        assert_eq!(l.transmit(Time(0), 1, 2, 1000), Some(Time(4_001_000)));
        assert_eq!(l.transmit(Time(0), 5, 0, 1000), Some(Time(2_001_000)));
        assert!(LinkSpec::new(0, 1e9).unwrap().with_shared(0.0).is_err());
    }
}
