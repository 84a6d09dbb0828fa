//! [`BufferPool`]: message memory a rank recycles instead of allocating.
//!
//! A large allreduce sends and receives the same few chunk sizes over and
//! over. Fresh memory for each message costs page faults (the allocator
//! hands freed large blocks back to the kernel) and cold caches; a pool of
//! the buffers the rank is done with (sent payloads the peer has copied,
//! received payloads already combined into the caller's buffer) gives the
//! next message warm memory. Last in, first out, so the most recently
//! touched buffer (the likeliest to be in cache) goes first.

use algorithms::payload::Buffer;
use algorithms::{CollectiveError, DType, Payload, Rank, ReduceOp, Shape};
use std::ops::Range;

/// Payloads smaller than this are left to the allocator (its small-size
/// caches already recycle them).
pub(crate) const POOL_MIN_BYTES: u64 = 32 << 10;

/// The most buffers the pool keeps.
const POOL_MAX_BUFFERS: usize = 64;

/// The most bytes the pool keeps in all.
const POOL_MAX_BYTES: usize = 256 << 20;

/// Buffers of one rank, free for its next messages.
#[derive(Debug, Default)]
pub(crate) struct BufferPool {
    free: Vec<Buffer>,
    bytes: usize,
}

/// `buf[range]` copied for a send to own: into a recycled buffer that
/// `take` finds for its shape, else into new memory. `take` is called
/// only for real data, and the copy happens after it returns (no pool
/// lock held while copying).
pub(crate) fn copy_for_send(
    buf: &Payload,
    range: Range<usize>,
    take: impl FnOnce(Shape) -> Option<Buffer>,
) -> Payload {
    let shape = Shape::new(buf.shape().dtype, range.len());
    match (!buf.is_phantom()).then(|| take(shape)).flatten() {
        Some(spare) => buf.extract_reusing(range, spare),
        None => buf.extract(range),
    }
}

/// `incoming` combined into `buf[range]`: reduced with `Some(op)`, copied
/// with `None` (what [`algorithms::Fabric::recv_combine`] does after its
/// receive).
pub(crate) fn combine(
    buf: &mut Payload,
    range: Range<usize>,
    incoming: &Payload,
    op: Option<ReduceOp>,
) -> Result<(), CollectiveError> {
    match op {
        Some(op) => buf.reduce_from(range, incoming, op)?,
        None => buf.copy_from(range, incoming)?,
    }
    Ok(())
}

/// The bytes of `buf[range]` when a send from `rank` to `to` may lend
/// them straight from the caller's buffer instead of copying them into a
/// message of its own: real data (not phantom, not symbols, which sends
/// refuse) for another rank, the range inside the buffer. `None`: the
/// send copies. A transport adds its own conditions (shm: cross-memory
/// attach to that peer, a minimum size).
pub(crate) fn lendable<'a>(
    rank: Rank,
    to: Rank,
    buf: &'a Payload,
    range: &Range<usize>,
) -> Option<&'a [u8]> {
    let dtype = buf.shape().dtype;
    if to == rank || dtype == DType::Sym || range.end > buf.shape().count {
        return None;
    }
    let elem = dtype.size_bytes();
    buf.as_bytes()?.get(range.start * elem..range.end * elem)
}

/// Bytes of the allocation behind `b`.
fn allocated_bytes(b: &Buffer) -> usize {
    b.capacity() * b.dtype().size_bytes()
}

impl BufferPool {
    /// A free buffer of `shape`'s element type that holds `shape.count`
    /// elements without growing, if the pool has one (the most recently
    /// returned first).
    pub(crate) fn take(&mut self, shape: Shape) -> Option<Buffer> {
        if shape.bytes() < POOL_MIN_BYTES || shape.dtype == DType::Sym {
            return None;
        }
        let at = self
            .free
            .iter()
            .rposition(|b| b.dtype() == shape.dtype && b.capacity() >= shape.count)?;
        let b = self.free.remove(at);
        self.bytes -= allocated_bytes(&b);
        Some(b)
    }

    /// A payload of `shape` whose every element the caller overwrites: a
    /// recycled buffer when the pool has one, else zeros (see
    /// [`Payload::scratch`]).
    pub(crate) fn scratch(&mut self, shape: Shape) -> Payload {
        Payload::scratch(shape.dtype, shape.count, self.take(shape))
    }

    /// Keeps `payload`'s memory for a later message if it is real data
    /// large enough to be worth it and the pool has room; otherwise drops
    /// it. When full, the oldest buffer makes room.
    pub(crate) fn give(&mut self, payload: Payload) {
        let Payload::Data(b) = payload else {
            return;
        };
        let bytes = allocated_bytes(&b);
        if (bytes as u64) < POOL_MIN_BYTES || bytes > POOL_MAX_BYTES || b.dtype() == DType::Sym {
            return;
        }
        while self.free.len() >= POOL_MAX_BUFFERS || self.bytes + bytes > POOL_MAX_BYTES {
            let oldest = self.free.remove(0);
            self.bytes -= allocated_bytes(&oldest);
        }
        self.bytes += bytes;
        self.free.push(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floats(n: usize) -> Payload {
        Payload::from_vec(vec![1.0f32; n])
    }

    #[test]
    fn only_real_data_for_another_rank_inside_the_buffer_is_lent() {
        let buf = Payload::from_vec(vec![1.0f32, 2.0, 3.0, 4.0]);
        let bytes = lendable(0, 1, &buf, &(1..3)).expect("lendable");
        assert_eq!(bytes, &buf.as_bytes().unwrap()[4..12]);
        assert!(lendable(1, 1, &buf, &(1..3)).is_none(), "to itself");
        assert!(lendable(0, 1, &buf, &(2..5)).is_none(), "past the end");
        let phantom = Payload::phantom(DType::F32, 4);
        assert!(lendable(0, 1, &phantom, &(0..4)).is_none());
        let symbols = Payload::zeros(DType::Sym, 4, false);
        assert!(lendable(0, 1, &symbols, &(0..4)).is_none());
    }

    #[test]
    fn returns_a_fitting_buffer_of_the_same_type_last_in_first_out() {
        let mut pool = BufferPool::default();
        let n = 64 << 10;
        pool.give(floats(n));
        pool.give(Payload::from_vec(vec![1i32; n]));
        pool.give(floats(2 * n));
        assert!(pool.take(Shape::new(DType::F64, n)).is_none());
        let b = pool.take(Shape::new(DType::F32, n)).unwrap();
        assert_eq!((b.dtype(), b.len()), (DType::F32, 2 * n));
        let b = pool.take(Shape::new(DType::F32, n)).unwrap();
        assert_eq!(b.len(), n);
        assert!(pool.take(Shape::new(DType::F32, n)).is_none());
        assert!(pool.take(Shape::new(DType::I32, 2 * n)).is_none());
        assert_eq!(pool.take(Shape::new(DType::I32, n)).unwrap().len(), n);
        assert_eq!(pool.bytes, 0);
    }

    #[test]
    fn small_buffers_and_phantoms_are_not_kept() {
        let mut pool = BufferPool::default();
        pool.give(floats(16));
        pool.give(Payload::phantom(DType::F32, 1 << 20));
        assert!(pool.free.is_empty());
        assert!(pool.take(Shape::new(DType::F32, 16)).is_none());
    }

    #[test]
    fn a_full_pool_drops_its_oldest_buffers() {
        let mut pool = BufferPool::default();
        for _ in 0..POOL_MAX_BUFFERS + 3 {
            pool.give(floats(16 << 10));
        }
        assert_eq!(pool.free.len(), POOL_MAX_BUFFERS);
        let big = POOL_MAX_BYTES / 4 - 64;
        for _ in 0..5 {
            pool.give(Payload::from_vec(vec![0u8; big]));
        }
        assert!(pool.bytes <= POOL_MAX_BYTES);
        assert_eq!(
            pool.bytes,
            pool.free.iter().map(allocated_bytes).sum::<usize>()
        );
    }
}
