//! [`SmallSpares`]: the buffers of small messages (carried in their
//! slot) a shared-memory rank keeps for its next small messages.

use algorithms::payload::Buffer;
use algorithms::{Payload, Shape};

/// Small payloads' buffers (real data, their bytes carried in a slot) kept
/// for the next small messages: the payloads of small messages sent, and
/// small received ones handed back ([`Fabric::recycle`](algorithms::Fabric::recycle)). A small message
/// received goes into one of its shape, a small [`Fabric::send_copy`](algorithms::Fabric::send_copy)
/// copies into any: an exchange of small messages through `send_copy` and
/// `recycle` allocates nothing, even when the peer is a call ahead (two
/// of its messages pulled before this rank's next send).
#[derive(Default)]
pub(super) struct SmallSpares(Vec<Payload>);

impl SmallSpares {
    /// Buffers kept at most (beyond, they are freed).
    pub(super) const MAX: usize = 4;

    /// Keeps `payload`'s buffer if it holds real data and there is room.
    pub(super) fn keep(&mut self, payload: Payload) {
        if self.0.len() < Self::MAX && !payload.is_phantom() {
            self.0.push(payload);
        }
    }

    /// A kept payload of `shape`, the last kept first.
    pub(super) fn take(&mut self, shape: Shape) -> Option<Payload> {
        let i = self.0.iter().rposition(|p| p.shape() == shape)?;
        Some(self.0.remove(i))
    }

    /// The buffer of the last payload kept.
    pub(super) fn take_any(&mut self) -> Option<Buffer> {
        match self.0.pop()? {
            Payload::Data(b) => Some(b),
            Payload::Phantom(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_spares_are_bounded_and_matched_by_shape() {
        let mut spares = SmallSpares::default();
        let f32s = |n: usize| Payload::zeros(algorithms::DType::F32, n, false);
        spares.keep(Payload::phantom(algorithms::DType::F32, 2));
        assert!(
            spares.take_any().is_none(),
            "a phantom has no buffer to keep"
        );
        for n in 1..=SmallSpares::MAX + 2 {
            spares.keep(f32s(n));
        }
        assert_eq!(spares.0.len(), SmallSpares::MAX);
        // The one of the shape asked for, whatever came after it.
        let two = Shape::new(algorithms::DType::F32, 2);
        assert_eq!(spares.take(two).map(|p| p.shape()), Some(two));
        assert!(spares.take(two).is_none());
        assert!(spares.take(Shape::new(algorithms::DType::I32, 1)).is_none());
        // Any buffer for a copy: the last one kept.
        assert_eq!(spares.take_any().map(|b| b.len()), Some(SmallSpares::MAX));
    }
}
