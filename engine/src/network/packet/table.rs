//! A table of the packet model's records (messages, flows, packets),
//! addressed by `u32` ids with slot reuse, so that the steady state
//! allocates nothing per packet.

use std::ops::{Index, IndexMut};

/// Values addressed by `u32` ids; freed ids are reused, newest first.
#[derive(Debug)]
pub(super) struct Table<T> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Table {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Table<T> {
    /// Stores `value` and returns its id.
    pub(super) fn insert(&mut self, value: T) -> u32 {
        match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = Some(value);
                id
            }
            None => {
                self.slots.push(Some(value));
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 live records")
            }
        }
    }

    /// Removes and returns the value with id `id`.
    pub(super) fn remove(&mut self, id: u32) -> T {
        let value = self.slots[id as usize]
            .take()
            .expect("only live ids are removed");
        self.free.push(id);
        value
    }

    /// The value with id `id`, if it is live.
    pub(super) fn get(&self, id: u32) -> Option<&T> {
        self.slots.get(id as usize)?.as_ref()
    }

    /// Number of live values.
    pub(super) fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

impl<T> Index<u32> for Table<T> {
    type Output = T;

    fn index(&self, id: u32) -> &T {
        self.slots[id as usize]
            .as_ref()
            .expect("only live ids are looked up")
    }
}

impl<T> IndexMut<u32> for Table<T> {
    fn index_mut(&mut self, id: u32) -> &mut T {
        self.slots[id as usize]
            .as_mut()
            .expect("only live ids are looked up")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_reused_and_values_addressed() {
        let mut t = Table::default();
        let a = t.insert(10);
        let b = t.insert(20);
        t[b] += 1;
        assert_eq!(t.remove(a), 10);
        assert_eq!(t.insert(30), a);
        assert_eq!((t[a], t[b], t.len()), (30, 21, 2));
    }
}
