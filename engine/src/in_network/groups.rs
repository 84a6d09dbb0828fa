//! The groups of a run's in-network calls, numbered, so that the calls'
//! maps are keyed by small numbers (see [`Groups`]).

use algorithms::Rank;
use rustc_hash::FxHashMap as HashMap;

/// `group` with its first member kept and the rest sorted.
pub(crate) fn normalized(group: &[Rank]) -> Box<[Rank]> {
    let mut out: Vec<Rank> = group.to_vec();
    if out.len() > 1 {
        out[1..].sort_unstable();
    }
    out.into()
}

/// The groups of a run's in-network calls, numbered twice: each group as
/// a call listed it, and its key, the group a call is filed under. The
/// key is the group as listed, or in a folded run the group with its
/// first member kept and the rest sorted (a representative's call and a
/// moved copy's group, listed in another order, are the same call; see
/// [`normalized`]). Two groups have the same key number exactly when
/// their keys are equal, so maps keyed by it file calls as maps keyed by
/// the key itself did.
#[derive(Debug, Default)]
pub(super) struct Groups {
    /// Keys are normalized (a folded run).
    normalize: bool,
    /// Each group as listed: its own number and its key's.
    listed: HashMap<Box<[Rank]>, (u32, u32)>,
    /// Each key's number.
    keys: HashMap<Box<[Rank]>, u32>,
}

impl Groups {
    /// No groups yet; keys normalized when `normalize` (a folded run).
    pub(super) fn new(normalize: bool) -> Groups {
        Groups {
            normalize,
            ..Groups::default()
        }
    }

    /// `group`'s numbers (as listed, and its key's), if it was seen.
    pub(super) fn get(&self, group: &[Rank]) -> Option<(u32, u32)> {
        self.listed.get(group).copied()
    }

    /// `group`'s numbers (as listed, and its key's), numbered on first
    /// sight.
    pub(super) fn number(&mut self, group: &[Rank]) -> (u32, u32) {
        if let Some(known) = self.get(group) {
            return known;
        }
        let key: Box<[Rank]> = if self.normalize {
            normalized(group)
        } else {
            group.into()
        };
        let next = u32::try_from(self.keys.len()).expect("fewer than 2^32 groups in a run");
        let key = *self.keys.entry(key).or_insert(next);
        let own = u32::try_from(self.listed.len()).expect("fewer than 2^32 groups in a run");
        self.listed.insert(group.into(), (own, key));
        (own, key)
    }

    /// The number of `group`'s key.
    pub(super) fn key(&mut self, group: &[Rank]) -> u32 {
        self.number(group).1
    }
}
