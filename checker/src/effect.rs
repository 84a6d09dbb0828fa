//! What a step did, for the dependence relation of the partial-order
//! reduction ([`Effect`]), and the parts of a rank that steps change
//! independently ([`Unit`]).
//!
//! # Units: a rank, or one of its concurrent calls
//! A rank whose program issues several calls at once (two allreduces from
//! two streams, `concurrent = true`) runs each call as its own future over
//! its own view of the fabric, and the rank's task only joins them. A
//! step that completes an operation of call `A` wakes the rank, but only
//! `A`'s future can move: the others find their own operations as they
//! were. So the state a rank keeps is the product of its calls' states,
//! and completing an operation of `A` commutes with completing one of `B`
//! unless what the two calls then do meets in shared state. That is the
//! independence of threads in Flanagan and Godefroid's DPOR (POPL 2005),
//! with each call as a thread of the rank; the rank's shared state is
//! named by [`Resource`]s, the way DPOR tools for shared memory name
//! variables:
//!
//! - the messages of one channel (one `(src, dst, tag)`), whose order
//!   decides which receive each matches: two calls sending, or two calls
//!   receiving, on one channel (a tag shared by two calls, the
//!   `tag_reuse` bug) conflict;
//! - the eager send slots of a [`Connection`] (a `(src, dst)` pair, and
//!   the channel of the call's joins a send was posted from), which calls
//!   share whatever their tags: two sends of different calls on one
//!   connection conflict when either took the last slot or found none
//!   (the slot goes to whichever came first, and the other waits); sends
//!   that both found room commute. Under rendezvous no send ever holds a
//!   slot, so sends of different calls on one pair commute;
//! - the rank itself: a crash, a notice that a peer stopped, a fault, the
//!   end of the rank's program (whichever call finishes last ends it) and
//!   everything of a program whose calls are not concurrent change the
//!   whole rank ([`Unit::call`] `None`) and conflict with every step that
//!   changes any part of it.
//!
//! The branches a call joins with
//! [`join_branches`](algorithms::branches::join_branches) (NCCL's
//! channels) are units too, nested in their call
//! ([`Unit::branch`]): the same argument one level down, with its own
//! checked assumption ([`World::branching`](super::world::World::branching)).
//! A flow that keeps sends in flight in an outbox
//! ([`algorithms::outbox::Outbox`]) is split the same way into [`Part`]s:
//! the flow without its lanes, and each lane (`world/lanes.rs` argues why
//! a lane's completions commute with the flow's; the flow *feeds* its
//! lanes, [`Unit::feeds`], so a lane may start a send in a step of the
//! flow). A unit contains the units nested in it (the whole rank contains
//! its calls, a call its branches, a flow its main part and lanes), and
//! changes to two units conflict when one contains the other.
//!
//! # Assumption, checked
//! The refinement assumes that a call observes nothing of another call
//! but through the fabric's operations, so that a call moves only when one
//! of its own operations completes. Through the checker's fabric the only
//! other window is [`Fabric::now`](algorithms::Fabric::now) (the rank's
//! count of received messages, which every call of the rank moves), and a
//! call that posts an operation during a step that completed none of its
//! own has observed something else (state the algorithm shares between
//! calls, for instance). The world records both
//! ([`World::independence_broken`](super::world::World::independence_broken)),
//! and the explorer then runs the search again with whole ranks as units,
//! so a program that breaks the assumption visibly is still explored
//! completely (tested by `check_calls`: a call that reads the clock, and
//! one whose algorithm shares a counter between calls and so posts on it).
//! State shared outside the fabric and read only when a call's own
//! operations complete is invisible to the world: the refinement then
//! misses outcomes silently, so concurrent calls must not share mutable
//! state (see [`explore`](super::explore)). Timing (each rank's clock
//! under the [`TIMINGS`](super::world::TIMINGS) models) is shared by a
//! rank's calls and not modelled per call; the only property reading it on
//! every schedule (`max_steps`) turns the refinement off.

use algorithms::Rank;

use super::world::{ChannelKey, OpId};

/// A part of a rank that steps change independently: one of its
/// concurrent calls (or, `call` `None`, all of them), and within it one
/// branch of its joins of independent branches (or, [`Branch::ROOT`], all
/// of them). `Unit::rank` is the whole rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Unit {
    /// The rank.
    pub rank: Rank,
    /// The call's index in the scenario; `None`: every call of the rank.
    pub call: Option<usize>,
    /// The branch (see [`World::branching`](super::world::World::branching)).
    pub branch: Branch,
    /// The part of the branch an outbox's lanes split it into (see
    /// [`Part`]); [`Part::Whole`] for all of it.
    pub part: Part,
}

impl Unit {
    /// The whole of `rank`.
    pub fn rank(rank: Rank) -> Unit {
        Unit {
            rank,
            call: None,
            branch: Branch::ROOT,
            part: Part::Whole,
        }
    }

    /// Whether `other` is part of this unit (or is it): same rank, this
    /// unit's call is every call or `other`'s, its branch holds
    /// `other`'s, and its part `other`'s.
    pub fn contains(self, other: Unit) -> bool {
        self.rank == other.rank
            && (self.call.is_none() || self.call == other.call)
            && self.branch.holds(other.branch)
            && self.part.holds(other.part)
    }

    /// Whether this unit is the main flow that feeds `other`, a lane of
    /// the same outbox: a lane may start a send during a step of its main
    /// flow (the send the step queued).
    pub fn feeds(self, other: Unit) -> bool {
        self.part == Part::Main
            && matches!(other.part, Part::Lane(_))
            && (self.rank, self.call, self.branch) == (other.rank, other.call, other.branch)
    }

    /// Whether changes to the two units may fail to commute: one is part
    /// of the other.
    pub fn overlaps(self, other: Unit) -> bool {
        self.contains(other) || other.contains(self)
    }
}

/// A part of a flow that runs an outbox
/// ([`algorithms::outbox::Outbox`]): the flow itself (its *main flow*,
/// which queues sends and receives), or one of the outbox's lanes (the
/// sends to one destination with one tag, started one after another by
/// the outbox). See the module docs and `world/lanes.rs`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    /// The whole flow, lanes included (every flow without an outbox).
    #[default]
    Whole,
    /// The main flow of an outbox, without its lanes.
    Main,
    /// Lane `i` of an outbox (lanes beyond 65,535 share the last index:
    /// a coarser unit).
    Lane(u16),
}

impl Part {
    /// Whether `other` is this part or lies within it.
    pub fn holds(self, other: Part) -> bool {
        self == Part::Whole || self == other
    }
}

/// Where a branch sits in its call's nested joins
/// ([`join_branches`](algorithms::branches::join_branches)): the index of
/// the branch at each level, outermost first. Joins nested deeper than
/// [`Branch::DEPTH`] levels (or with more than 65,536 branches) name their
/// branches as their parent: coarser units, so more steps conflict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Branch {
    len: u8,
    path: [u16; Branch::DEPTH],
}

impl Branch {
    /// The levels of nesting a branch is told apart at.
    pub const DEPTH: usize = 4;

    /// No branch: the call (or rank) as a whole.
    pub const ROOT: Branch = Branch {
        len: 0,
        path: [0; Branch::DEPTH],
    };

    /// Branch `index` of a join polled from this branch.
    pub fn child(self, index: usize) -> Branch {
        let len = usize::from(self.len);
        match u16::try_from(index) {
            Ok(i) if len < Branch::DEPTH => {
                let mut path = self.path;
                path[len] = i;
                Branch {
                    len: self.len + 1,
                    path,
                }
            }
            _ => self,
        }
    }

    /// The index of the outermost join's branch this branch lies in
    /// (NCCL's channel: every NCCL-style call runs its channels as the
    /// branches of one join), `None` outside every join.
    pub fn channel(self) -> Option<u16> {
        (self.len > 0).then_some(self.path[0])
    }

    /// Whether `other` is this branch or lies within it.
    pub fn holds(self, other: Branch) -> bool {
        self.len <= other.len
            && self.path[..usize::from(self.len)] == other.path[..usize::from(self.len)]
    }
}

impl std::fmt::Display for Branch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.len == 0 {
            return write!(f, "the call itself");
        }
        write!(f, "branch ")?;
        for (i, p) in self.path[..usize::from(self.len)].iter().enumerate() {
            if i > 0 {
                write!(f, ".")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

/// Which parts of a rank a search names as separate units.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Units {
    /// Each concurrent call of a rank is a unit.
    pub calls: bool,
    /// Each branch of a call's joins is a unit
    /// ([`World::branching`](super::world::World::branching)).
    pub branches: bool,
}

/// What eager send slots belong to: the (src, dst) pair, and within it
/// the channel of a call's joins the send was posted from, if any (see
/// [`World::post_send`](super::world::World::post_send)): NCCL gives
/// every channel its own connection with its own buffers, while plain
/// sends (MPI's eager protocol) share one pool per pair whatever their
/// tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Connection {
    /// The sender.
    pub src: Rank,
    /// The receiver.
    pub dst: Rank,
    /// The outermost branch of the sending call's joins
    /// ([`Branch::channel`]); `None`: a send outside every join.
    pub channel: Option<u16>,
}

/// State of a rank that its concurrent calls share (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    /// The messages a rank sends on the channel.
    Sends(ChannelKey),
    /// The receives a rank posts on the channel.
    Receives(ChannelKey),
    /// The eager send slots of a connection (bounded buffering with at
    /// least one slot).
    Slots(Connection),
}

/// An operation a concurrent call posted during a step, on shared state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Post {
    /// The call that posted it.
    pub unit: Unit,
    /// What it used.
    pub resource: Resource,
    /// For [`Resource::Slots`]: whether the send took the pair's last slot
    /// or found none free (its outcome depends on which send came first).
    pub critical: bool,
}

impl Post {
    /// Whether two posts of different calls meet on shared state.
    fn conflicts(&self, other: &Post) -> bool {
        self.resource == other.resource
            && self.unit != other.unit
            && match self.resource {
                Resource::Slots(..) => self.critical || other.critical,
                Resource::Sends(_) | Resource::Receives(_) => true,
            }
    }
}

/// What a step did to shared state, for the dependency relation of the
/// partial-order reduction: the units (ranks, or calls of ranks) whose
/// operations it completed or whose state it changed, the send slot it
/// freed, the sends of the ranks it woke that found their pair's slots
/// full or took the last one (only those sends would behave differently
/// had the slot been freed in another order), and the shared state the
/// calls it woke then used.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Effect {
    /// Units changed (woken, stopped or told); `Unit::call` `None`: the
    /// whole rank.
    pub units: Vec<Unit>,
    /// Halves of exchanges ([`Fabric::exchange`](algorithms::Fabric::exchange))
    /// completed: the two halves of one exchange commute (the rank observes
    /// one completion, once both are done, whatever their order), so they
    /// do not conflict with each other; anything else done to the rank does.
    pub halves: Vec<Half>,
    /// The connection whose slot it freed.
    pub frees: Option<Connection>,
    /// Connections on which a send of the woken ranks needed the last
    /// slot.
    pub critical: Vec<Connection>,
    /// Notices (from, to) a rank stopping in this step did not send
    /// because `to` had already stopped: had `to` stopped later, the notice
    /// would have been a choice. The explorer checks their races.
    pub unsent_notices: Vec<(Rank, Rank)>,
    /// Operations concurrent calls posted on state they share with the
    /// rank's other calls.
    pub posts: Vec<Post>,
}

/// One half (the send or the receive) of an exchange, completed by a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Half {
    /// The rank (and call) whose exchange it is.
    pub unit: Unit,
    /// The exchange operation.
    pub exchange: OpId,
    /// The half's own operation.
    pub op: OpId,
    /// Whether it completes the exchange (the other half was done): only
    /// then is the rank woken.
    pub completes: bool,
}

impl Effect {
    /// An effect changing the whole of `rank`.
    pub fn on_rank(rank: Rank) -> Effect {
        Effect {
            units: vec![Unit::rank(rank)],
            ..Effect::default()
        }
    }

    /// Records that the step changed `unit`.
    pub fn touch(&mut self, unit: Unit) {
        if !self.units.contains(&unit) {
            self.units.push(unit);
        }
    }

    /// Records that the step completed `half`.
    pub fn touch_half(&mut self, half: Half) {
        if !self.halves.contains(&half) {
            self.halves.push(half);
        }
    }

    /// Every unit this step changed, through a whole operation or half of
    /// an exchange.
    pub fn touched(&self) -> impl Iterator<Item = Unit> + '_ {
        self.units
            .iter()
            .copied()
            .chain(self.halves.iter().map(|h| h.unit))
    }

    /// Every rank this step changed, in whole or in part.
    pub fn touched_ranks(&self) -> impl Iterator<Item = Rank> + '_ {
        self.touched().map(|u| u.rank)
    }

    /// Whether the step changed `unit` (or a unit overlapping it).
    pub fn changes(&self, unit: Unit) -> bool {
        self.touched().any(|u| u.overlaps(unit))
    }

    /// Whether the two effects change a common unit in ways that may not
    /// commute: always, unless each changes it only through the other
    /// half of one same exchange.
    fn unit_conflict(&self, other: &Effect) -> bool {
        self.units
            .iter()
            .any(|&u| other.touched().any(|x| x.overlaps(u)))
            || other
                .units
                .iter()
                .any(|&u| self.halves.iter().any(|h| h.unit.overlaps(u)))
            || self.halves.iter().any(|a| {
                other.halves.iter().any(|b| {
                    // Halves of different exchanges commute unless both
                    // wake the same unit (which may observe their order).
                    let both_wake = a.exchange != b.exchange && a.completes && b.completes;
                    a.unit.overlaps(b.unit) && (a.op == b.op || both_wake)
                })
            })
    }

    fn post_conflict(&self, other: &Effect) -> bool {
        self.posts
            .iter()
            .any(|p| other.posts.iter().any(|q| p.conflicts(q)))
    }

    /// Whether two executed steps may fail to commute.
    pub fn conflicts(&self, other: &Effect) -> bool {
        self.unit_conflict(other)
            || self.post_conflict(other)
            || self.frees.is_some_and(|p| other.critical.contains(&p))
            || other.frees.is_some_and(|p| self.critical.contains(&p))
    }

    /// Whether a choice not yet taken (`self`, as predicted: its sends are
    /// unknown) may fail to commute with an executed step: the calls it
    /// wakes may post on state the step's calls posted on, or need a slot
    /// the step freed.
    pub fn may_conflict(&self, executed: &Effect) -> bool {
        self.unit_conflict(executed)
            || self.frees.is_some_and(|p| executed.critical.contains(&p))
            || executed
                .frees
                .is_some_and(|c| self.touched_ranks().any(|r| r == c.src))
            || self.may_post_into(executed)
    }

    /// Whether the units this predicted step wakes might post on shared
    /// state the executed step's units posted on: any post of the
    /// executed step made by another unit of a rank this step wakes (a
    /// post by an overlapping unit is a unit conflict already).
    fn may_post_into(&self, executed: &Effect) -> bool {
        executed.posts.iter().any(|p| {
            self.touched()
                .any(|u| u.rank == p.unit.rank && !u.overlaps(p.unit))
        })
    }

    /// The first post of this step by a unit the step did not change (the
    /// unit, or a unit containing it): that call or branch moved without
    /// one of its own operations completing, so it observed something
    /// other than its operations (see the module docs).
    /// A lane's post is explained by a step of its main flow too (the
    /// send that step queued).
    pub fn unexplained_post(&self) -> Option<Unit> {
        self.posts
            .iter()
            .map(|p| p.unit)
            .find(|&u| !self.touched().any(|t| t.contains(u) || t.feeds(u)))
    }
}
