//! [`SortedMap`]: a map kept as one vector sorted by key, for the
//! mailbox's few entries per rank (the messages and receives of the call
//! under way). A `BTreeMap` allocates a node whenever it goes from empty
//! to one entry and frees it when it empties again, which a mailbox does
//! for nearly every message; the vector keeps its allocation. Lookups are
//! binary searches, inserts and removals shift the entries after them
//! (a few, typically), and iteration is in key order, as a `BTreeMap`'s.

/// Entries sorted by key, each key at most once.
#[derive(Debug)]
pub(crate) struct SortedMap<K, V> {
    entries: Vec<(K, V)>,
}

impl<K, V> Default for SortedMap<K, V> {
    fn default() -> Self {
        SortedMap {
            entries: Vec::new(),
        }
    }
}

impl<K: Ord + Copy, V> SortedMap<K, V> {
    fn find(&self, key: &K) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| k.cmp(key))
    }

    /// Whether it has no entries.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value of `key`, if present.
    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        let i = self.find(key).ok()?;
        Some(&mut self.entries[i].1)
    }

    /// The value of `key`, inserted by `make` if absent.
    pub(crate) fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.find(&key) {
            Ok(i) => i,
            Err(i) => {
                self.entries.insert(i, (key, make()));
                i
            }
        };
        &mut self.entries[i].1
    }

    /// Removes `key`'s entry and returns its value.
    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        let i = self.find(key).ok()?;
        Some(self.entries.remove(i).1)
    }

    /// The entries in key order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// The entries in key order, values mutable.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&K, &mut V)> {
        self.entries.iter_mut().map(|(k, v)| (&*k, v))
    }

    /// The keys in order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &K> {
        self.entries.iter().map(|(k, _)| k)
    }

    /// Removes every entry, in key order.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = (K, V)> + '_ {
        self.entries.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn it_behaves_as_a_btree_map() {
        // The same operations on both, from a fixed pseudo-random sequence.
        let mut ours: SortedMap<u32, u32> = SortedMap::default();
        let mut theirs: BTreeMap<u32, u32> = BTreeMap::new();
        let mut x: u32 = 12345;
        for step in 0..5000u32 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let key = (x >> 16) % 40;
            match step % 3 {
                0 => {
                    *ours.get_or_insert_with(key, || 0) += step;
                    *theirs.entry(key).or_insert(0) += step;
                }
                1 => assert_eq!(ours.remove(&key), theirs.remove(&key)),
                _ => assert_eq!(ours.get_mut(&key).copied(), theirs.get(&key).copied()),
            }
            let a: Vec<(u32, u32)> = ours.iter().map(|(k, v)| (*k, *v)).collect();
            let b: Vec<(u32, u32)> = theirs.iter().map(|(k, v)| (*k, *v)).collect();
            assert_eq!(a, b);
        }
        let keys: Vec<u32> = ours.keys().copied().collect();
        assert_eq!(keys, theirs.keys().copied().collect::<Vec<_>>());
        for (_, v) in ours.iter_mut() {
            *v = 7;
        }
        let drained: Vec<(u32, u32)> = ours.drain().collect();
        assert_eq!(drained, keys.iter().map(|k| (*k, 7)).collect::<Vec<_>>());
        assert_eq!(ours.iter().count(), 0);
    }
}
