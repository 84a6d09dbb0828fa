//! Payloads: what travels between ranks and what collectives work on.
//!
//! A [`Payload`] is either real typed data or a *phantom* that has a type
//! and an element count but no bytes. Phantoms let scaling studies move
//! gigabytes through the simulator without allocating them: every
//! operation on a phantom (slicing, reducing, copying) only checks shapes.

use std::fmt;
use std::ops::Range;

use crate::dtype::{DType, Element, ReduceOp};
use crate::symbolic::Sym;

/// The type and length of a payload: everything a receiver must know to
/// accept it and everything a link model needs to time it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    /// Element type.
    pub dtype: DType,
    /// Number of elements.
    pub count: usize,
}

impl Shape {
    /// A shape of `count` elements of `dtype`.
    pub fn new(dtype: DType, count: usize) -> Shape {
        Shape { dtype, count }
    }

    /// Size in bytes.
    pub fn bytes(self) -> u64 {
        self.count as u64 * self.dtype.size_bytes() as u64
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} x {} ({} bytes)",
            self.count,
            self.dtype,
            self.bytes()
        )
    }
}

/// Real typed data: one vector per supported element type.
#[derive(Clone, Debug, PartialEq)]
pub enum Buffer {
    /// `float` elements.
    F32(Vec<f32>),
    /// `double` elements.
    F64(Vec<f64>),
    /// `int32` elements.
    I32(Vec<i32>),
    /// `int64` elements.
    I64(Vec<i64>),
    /// `uint8` elements.
    U8(Vec<u8>),
    /// Symbolic elements ([`crate::symbolic`]), for checkers.
    Sym(Vec<Sym>),
}

/// Applies `$body` to the typed vector inside a [`Buffer`], binding it to
/// `$v` and its element type to the type alias `$t`.
macro_rules! with_vec {
    ($buf:expr, $v:ident, $t:ident => $body:expr) => {
        match $buf {
            Buffer::F32($v) => {
                #[allow(dead_code)]
                type $t = f32;
                $body
            }
            Buffer::F64($v) => {
                #[allow(dead_code)]
                type $t = f64;
                $body
            }
            Buffer::I32($v) => {
                #[allow(dead_code)]
                type $t = i32;
                $body
            }
            Buffer::I64($v) => {
                #[allow(dead_code)]
                type $t = i64;
                $body
            }
            Buffer::U8($v) => {
                #[allow(dead_code)]
                type $t = u8;
                $body
            }
            Buffer::Sym($v) => {
                #[allow(dead_code)]
                type $t = Sym;
                $body
            }
        }
    };
}

/// Conversion between a typed vector and a [`Buffer`].
pub trait IntoBuffer: Element {
    /// Wraps a vector of this type.
    fn into_buffer(v: Vec<Self>) -> Buffer;
    /// Borrows the vector if `buffer` holds this type.
    fn slice_of(buffer: &Buffer) -> Option<&[Self]>;
    /// Mutably borrows the vector if `buffer` holds this type.
    fn slice_of_mut(buffer: &mut Buffer) -> Option<&mut [Self]>;
    /// Unwraps the vector if `buffer` holds this type (else gives it back).
    fn vec_of(buffer: Buffer) -> Result<Vec<Self>, Buffer>;
}

macro_rules! into_buffer {
    ($t:ty, $variant:ident) => {
        impl IntoBuffer for $t {
            fn into_buffer(v: Vec<Self>) -> Buffer {
                Buffer::$variant(v)
            }
            fn slice_of(buffer: &Buffer) -> Option<&[Self]> {
                match buffer {
                    Buffer::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn slice_of_mut(buffer: &mut Buffer) -> Option<&mut [Self]> {
                match buffer {
                    Buffer::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn vec_of(buffer: Buffer) -> Result<Vec<Self>, Buffer> {
                match buffer {
                    Buffer::$variant(v) => Ok(v),
                    other => Err(other),
                }
            }
        }
    };
}

into_buffer!(f32, F32);
into_buffer!(f64, F64);
into_buffer!(i32, I32);
into_buffer!(i64, I64);
into_buffer!(u8, U8);
into_buffer!(Sym, Sym);

impl Buffer {
    /// The element type.
    #[inline]
    pub fn dtype(&self) -> DType {
        with_vec!(self, _v, T => <T as Element>::DTYPE)
    }

    /// The number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        with_vec!(self, v, T => v.len())
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of elements its allocation holds without growing.
    pub fn capacity(&self) -> usize {
        with_vec!(self, v, T => v.capacity())
    }
}

/// Two payloads that an operation combines do not fit together.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("payload mismatch: {what}")]
pub struct PayloadMismatch {
    /// What did not fit.
    pub what: String,
}

/// What travels between ranks: real data or a size-only phantom.
#[derive(Clone, Debug, PartialEq)]
pub enum Payload {
    /// Real typed elements.
    Data(Buffer),
    /// A type and a count, with no bytes behind them.
    Phantom(Shape),
}

impl Payload {
    /// A phantom of `count` elements of `dtype`.
    pub fn phantom(dtype: DType, count: usize) -> Payload {
        Payload::Phantom(Shape::new(dtype, count))
    }

    /// `count` zero elements of `dtype` (for [`DType::Sym`], the zero
    /// symbol), or a phantom of that shape.
    pub fn zeros(dtype: DType, count: usize, phantom: bool) -> Payload {
        if phantom {
            return Payload::phantom(dtype, count);
        }
        Payload::Data(match dtype {
            DType::F32 => Buffer::F32(vec![0.0; count]),
            DType::F64 => Buffer::F64(vec![0.0; count]),
            DType::I32 => Buffer::I32(vec![0; count]),
            DType::I64 => Buffer::I64(vec![0; count]),
            DType::U8 => Buffer::U8(vec![0; count]),
            DType::Sym => Buffer::Sym(vec![Sym::ZERO; count]),
        })
    }

    /// `count` elements of `dtype` for the caller to overwrite (a receive
    /// buffer): in `spare`'s allocation when it holds `dtype` (its old
    /// values left in place, only growth zeroed), otherwise `count` zeros.
    /// A receiver that recycles its buffers fills warm memory instead of
    /// faulting in fresh pages.
    pub fn scratch(dtype: DType, count: usize, spare: Option<Buffer>) -> Payload {
        match spare {
            Some(b) if b.dtype() == dtype && dtype != DType::Sym => {
                Payload::Data(with_vec!(b, v, T => {
                    let mut v = v;
                    v.resize(count, <T as Element>::from_i64(0));
                    T::into_buffer(v)
                }))
            }
            _ => Payload::zeros(dtype, count, false),
        }
    }

    /// Real data from a typed vector.
    pub fn from_vec<T: IntoBuffer>(v: Vec<T>) -> Payload {
        Payload::Data(T::into_buffer(v))
    }

    /// The typed elements, if this is real data of type `T`.
    pub fn as_slice<T: IntoBuffer>(&self) -> Option<&[T]> {
        match self {
            Payload::Data(b) => T::slice_of(b),
            Payload::Phantom(_) => None,
        }
    }

    /// The elements as raw bytes in the host's byte order, for transports
    /// that copy payloads into frames or shared memory (`None` for a
    /// phantom, which has no bytes).
    #[inline]
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Payload::Data(b) => Some(with_vec!(b, v, T => bytemuck::cast_slice::<T, u8>(v))),
            Payload::Phantom(_) => None,
        }
    }

    /// The elements as mutable raw bytes in the host's byte order, so that a
    /// transport can receive straight into a payload made by
    /// [`Payload::zeros`] (`None` for a phantom).
    #[inline]
    pub fn as_bytes_mut(&mut self) -> Option<&mut [u8]> {
        match self {
            Payload::Data(b) => Some(with_vec!(b, v, T => bytemuck::cast_slice_mut::<T, u8>(v))),
            Payload::Phantom(_) => None,
        }
    }

    /// Real data of type `dtype` copied from raw bytes in the host's byte
    /// order; `None` when `bytes` is not a whole number of elements.
    /// Symbols ([`DType::Sym`]) read back this way mean something only on
    /// the thread whose interner made them.
    pub fn from_bytes(dtype: DType, bytes: &[u8]) -> Option<Payload> {
        let size = dtype.size_bytes();
        if !bytes.len().is_multiple_of(size) {
            return None;
        }
        let mut p = Payload::zeros(dtype, bytes.len() / size, false);
        p.as_bytes_mut()?.copy_from_slice(bytes);
        Some(p)
    }

    /// The type and length.
    #[inline]
    pub fn shape(&self) -> Shape {
        match self {
            Payload::Data(b) => Shape::new(b.dtype(), b.len()),
            Payload::Phantom(s) => *s,
        }
    }

    /// The number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.shape().count
    }

    /// Whether the payload has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether this payload is a phantom.
    #[inline]
    pub fn is_phantom(&self) -> bool {
        matches!(self, Payload::Phantom(_))
    }

    /// A copy of the elements in `range` (a phantom of that length for a
    /// phantom). Panics if `range` is out of bounds: callers compute ranges
    /// from this payload's own length.
    pub fn extract(&self, range: Range<usize>) -> Payload {
        assert!(
            range.end <= self.len(),
            "extract {range:?} of {}",
            self.len()
        );
        match self {
            Payload::Data(b) => {
                Payload::Data(with_vec!(b, v, T => T::into_buffer(v[range].to_vec())))
            }
            Payload::Phantom(s) => Payload::phantom(s.dtype, range.len()),
        }
    }

    /// [`Payload::extract`] into the allocation of `spare` when it holds
    /// the same element type (its contents replaced, its memory grown if
    /// too small), otherwise into new memory: a sender that recycles its
    /// message buffers copies into warm memory instead of faulting in
    /// fresh pages. Panics if `range` is out of bounds, as `extract` does.
    pub fn extract_reusing(&self, range: Range<usize>, spare: Buffer) -> Payload {
        assert!(
            range.end <= self.len(),
            "extract {range:?} of {}",
            self.len()
        );
        match self {
            Payload::Data(b) => Payload::Data(with_vec!(b, v, T => {
                let mut out = T::vec_of(spare).unwrap_or_default();
                out.clear();
                out.extend_from_slice(&v[range]);
                T::into_buffer(out)
            })),
            Payload::Phantom(s) => Payload::phantom(s.dtype, range.len()),
        }
    }

    /// Sets `self[range] = incoming ⊕ self[range]` element by element:
    /// the incoming (earlier) contribution is the left operand.
    pub fn reduce_from(
        &mut self,
        range: Range<usize>,
        incoming: &Payload,
        op: ReduceOp,
    ) -> Result<(), PayloadMismatch> {
        self.check_fits(&range, incoming)?;
        if let (Payload::Data(dst), Payload::Data(src)) = (self, incoming) {
            with_vec!(dst, d, T => {
                let s = T::slice_of(src).expect("dtypes checked by check_fits");
                T::reduce_slice(op, s, &mut d[range]);
            });
        }
        Ok(())
    }

    /// Sets `self[range] = self[range] ⊕ incoming` element by element: the
    /// local value is the left operand (the mirror of [`Payload::reduce_from`]).
    pub fn reduce_from_right(
        &mut self,
        range: Range<usize>,
        incoming: &Payload,
        op: ReduceOp,
    ) -> Result<(), PayloadMismatch> {
        self.check_fits(&range, incoming)?;
        if let (Payload::Data(dst), Payload::Data(src)) = (self, incoming) {
            with_vec!(dst, d, T => {
                let s = T::slice_of(src).expect("dtypes checked by check_fits");
                T::reduce_slice_right(op, s, &mut d[range]);
            });
        }
        Ok(())
    }

    /// Sets `self[range] = incoming`.
    pub fn copy_from(
        &mut self,
        range: Range<usize>,
        incoming: &Payload,
    ) -> Result<(), PayloadMismatch> {
        self.check_fits(&range, incoming)?;
        if let (Payload::Data(dst), Payload::Data(src)) = (self, incoming) {
            with_vec!(dst, d, T => {
                let s = T::slice_of(src).expect("dtypes checked by check_fits");
                d[range].copy_from_slice(s);
            });
        }
        Ok(())
    }

    /// Divides the elements in `range` by `ranks` (the end of an average).
    pub fn divide(&mut self, range: Range<usize>, ranks: usize) {
        if let Payload::Data(b) = self {
            with_vec!(b, d, T => {
                for x in &mut d[range] {
                    *x = x.divide(ranks);
                }
            });
        }
    }

    /// Number of elements that differ from `expected` bit for bit (all of
    /// them if the shapes differ; none for phantoms of equal shape).
    pub fn count_wrong(&self, expected: &Payload) -> usize {
        if self.shape() != expected.shape() {
            return self.len().max(expected.len());
        }
        match (self, expected) {
            (Payload::Data(a), Payload::Data(b)) => with_vec!(a, x, T => {
                let y = T::slice_of(b).expect("shapes are equal");
                x.iter().zip(y).filter(|(p, q)| !p.same_bits(**q)).count()
            }),
            (Payload::Phantom(_), Payload::Phantom(_)) => 0,
            _ => self.len(),
        }
    }

    fn check_fits(&self, range: &Range<usize>, incoming: &Payload) -> Result<(), PayloadMismatch> {
        // The common case, real data of one type that fits, in one match
        // (a small message's reduction costs little more than this check).
        if let (Payload::Data(d), Payload::Data(s)) = (self, incoming) {
            let fits = with_vec!(d, dv, T => T::slice_of(s)
                .is_some_and(|sv| range.len() == sv.len() && range.end <= dv.len()));
            if fits {
                return Ok(());
            }
        }
        let mine = self.shape();
        let theirs = incoming.shape();
        if mine.dtype != theirs.dtype || range.len() != theirs.count || range.end > mine.count {
            return Err(PayloadMismatch {
                what: format!("cannot place {theirs} at {range:?} of a buffer of {mine}"),
            });
        }
        if self.is_phantom() != incoming.is_phantom() {
            return Err(PayloadMismatch {
                what: "real data and a phantom were mixed".to_string(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extract_reusing_copies_into_the_spare_allocation_of_the_same_type() {
        let p = Payload::from_vec((0..10).map(|i| i as f32).collect::<Vec<_>>());
        let spare = Buffer::F32(Vec::with_capacity(64));
        let spare_ptr = match &spare {
            Buffer::F32(v) => v.as_ptr(),
            _ => unreachable!(),
        };
        let out = p.extract_reusing(2..5, spare);
        assert_eq!(out, p.extract(2..5));
        assert_eq!(out.as_slice::<f32>().unwrap().as_ptr(), spare_ptr);
        // Another element type: new memory, same contents.
        assert_eq!(
            p.extract_reusing(2..5, Buffer::I32(vec![7; 9])),
            p.extract(2..5)
        );
        let ph = Payload::phantom(DType::F32, 10);
        assert_eq!(
            ph.extract_reusing(1..4, Buffer::F32(vec![])),
            ph.extract(1..4)
        );
    }

    #[test]
    fn scratch_reuses_a_spare_of_the_type_and_sizes_it() {
        let mut spare = vec![5i32; 3];
        spare.reserve(10);
        let ptr = spare.as_ptr();
        let grown = Payload::scratch(DType::I32, 6, Some(Buffer::I32(spare)));
        // Old values stay (the caller overwrites them), growth is zeroed.
        assert_eq!(grown.as_slice::<i32>().unwrap(), &[5, 5, 5, 0, 0, 0]);
        assert_eq!(grown.as_slice::<i32>().unwrap().as_ptr(), ptr);
        let Payload::Data(b) = grown else {
            unreachable!()
        };
        assert_eq!(Payload::scratch(DType::I32, 2, Some(b)).len(), 2);
        let other = Payload::scratch(DType::F64, 4, Some(Buffer::I32(vec![1; 8])));
        assert_eq!(other, Payload::zeros(DType::F64, 4, false));
        assert_eq!(
            Payload::scratch(DType::U8, 3, None),
            Payload::zeros(DType::U8, 3, false)
        );
    }

    #[test]
    fn reduce_puts_incoming_on_the_left() {
        let mut p = Payload::from_vec(vec![1.0f32, 2.0, 3.0]);
        let inc = Payload::from_vec(vec![10.0f32, 20.0]);
        p.reduce_from(1..3, &inc, ReduceOp::Sum).unwrap();
        assert_eq!(p.as_slice::<f32>().unwrap(), &[1.0, 12.0, 23.0]);
        // min(+0, -0) keeps its right operand, so the two orders differ.
        let mut left = Payload::from_vec(vec![0.0f32]);
        let mut right = left.clone();
        let neg = Payload::from_vec(vec![-0.0f32]);
        left.reduce_from(0..1, &neg, ReduceOp::Min).unwrap();
        right.reduce_from_right(0..1, &neg, ReduceOp::Min).unwrap();
        assert_eq!(
            left.as_slice::<f32>().unwrap()[0].to_bits(),
            0.0f32.to_bits()
        );
        assert_eq!(
            right.as_slice::<f32>().unwrap()[0].to_bits(),
            (-0.0f32).to_bits()
        );
        let mut q = Payload::from_vec(vec![8i64]);
        q.reduce_from(0..1, &Payload::from_vec(vec![2i64]), ReduceOp::Prod)
            .unwrap();
        assert_eq!(q.as_slice::<i64>().unwrap(), &[16]);
    }

    #[test]
    fn phantoms_only_check_shapes() {
        let mut p = Payload::phantom(DType::F64, 1 << 30);
        assert_eq!(p.shape().bytes(), 8 << 30);
        let part = p.extract(10..20);
        assert_eq!(part, Payload::phantom(DType::F64, 10));
        p.reduce_from(0..10, &part, ReduceOp::Max).unwrap();
        assert!(p.reduce_from(0..11, &part, ReduceOp::Max).is_err());
        let real = Payload::from_vec(vec![0.0f64; 10]);
        assert!(p.copy_from(0..10, &real).is_err());
    }

    #[test]
    fn bytes_round_trip_for_every_dtype() {
        for dtype in DType::ALL.into_iter().chain([DType::Sym]) {
            let mut p = Payload::zeros(dtype, 3, false);
            let n = p.as_bytes().unwrap().len();
            assert_eq!(n, 3 * dtype.size_bytes());
            for (i, b) in p.as_bytes_mut().unwrap().iter_mut().enumerate() {
                *b = i as u8 + 1;
            }
            let q = Payload::from_bytes(dtype, p.as_bytes().unwrap()).unwrap();
            assert_eq!(q, p);
            assert_ne!(q, Payload::zeros(dtype, 3, false));
        }
        assert!(Payload::from_bytes(DType::F32, &[0u8; 7]).is_none());
        assert!(Payload::phantom(DType::U8, 4).as_bytes().is_none());
    }

    #[test]
    fn mismatched_types_are_rejected() {
        let mut p = Payload::from_vec(vec![1i32, 2]);
        let inc = Payload::from_vec(vec![1.0f32, 2.0]);
        assert!(p.copy_from(0..2, &inc).is_err());
        // Same type, but a range of another length or past the end.
        let two = Payload::from_vec(vec![5i32, 6]);
        assert!(p.reduce_from_right(0..1, &two, ReduceOp::Sum).is_err());
        assert!(p.reduce_from(1..3, &two, ReduceOp::Sum).is_err());
        assert!(p.copy_from(0..2, &Payload::phantom(DType::I32, 2)).is_err());
        assert_eq!(p.as_slice::<i32>().unwrap(), &[1, 2]);
        assert_eq!(p.count_wrong(&Payload::from_vec(vec![1i32, 3])), 1);
    }
}
