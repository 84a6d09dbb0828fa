//! Element types and reduction operators.
//!
//! Floating-point reductions are not associative, so every collective
//! documents the order in which it combines contributions and
//! [`crate::reference`] reproduces that order bit for bit. Integer
//! reductions wrap on overflow (as NCCL's and MPI's do in practice), which
//! makes them independent of order. [`DType::Sym`] elements record the
//! order instead (see [`crate::symbolic`]).

use std::fmt;
use std::str::FromStr;

/// The element type of a buffer. Names follow nccl-tests (`float`,
/// `double`, `int32`, `int64`, `uint8`); Rust names are accepted too.
/// [`DType::Sym`] is for checkers only: it is not in [`DType::ALL`] and
/// not parsed from a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DType {
    /// 32-bit IEEE float (`float`, `f32`).
    F32,
    /// 64-bit IEEE float (`double`, `f64`).
    F64,
    /// 32-bit signed integer (`int32`, `i32`).
    I32,
    /// 64-bit signed integer (`int64`, `i64`).
    I64,
    /// Unsigned byte (`uint8`, `u8`).
    U8,
    /// A symbolic element, [`crate::symbolic::Sym`] (`sym`, 4 bytes): the
    /// reduction tree of the value, for checkers. Ids mean something only
    /// on the thread that made them, so it is not in [`DType::ALL`] (which
    /// lists what users, transports and wire formats handle), is not
    /// accepted by [`FromStr`] (a scenario or command line cannot ask for
    /// it) and real transports refuse to send it.
    Sym,
}

impl DType {
    /// Every type a user may ask for, in a fixed order (everything but
    /// [`DType::Sym`]).
    pub const ALL: [DType; 5] = [DType::F32, DType::F64, DType::I32, DType::I64, DType::U8];

    /// Size of one element in bytes.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 | DType::I32 | DType::Sym => 4,
            DType::F64 | DType::I64 => 8,
            DType::U8 => 1,
        }
    }

    /// Whether this is a floating-point type (the only kind that supports
    /// [`ReduceOp::Avg`]).
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    /// The name nccl-tests prints for this type.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float",
            DType::F64 => "double",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::Sym => "sym",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "float" | "f32" | "float32" => DType::F32,
            "double" | "f64" | "float64" => DType::F64,
            "int32" | "i32" | "int" => DType::I32,
            "int64" | "i64" => DType::I64,
            "uint8" | "u8" => DType::U8,
            _ => {
                return Err(format!(
                    "unknown dtype `{s}`; expected one of float, double, int32, int64, uint8"
                ));
            }
        })
    }
}

/// A reduction operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReduceOp {
    /// Sum (wrapping for integers).
    Sum,
    /// Product (wrapping for integers).
    Prod,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Average: the sum, divided by the number of ranks once at the end.
    /// Floating-point types only.
    Avg,
}

impl ReduceOp {
    /// Every operator, in a fixed order.
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::Avg,
    ];

    /// The name nccl-tests prints for this operator.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::Avg => "avg",
        }
    }

    /// Whether `self` may be applied to elements of `dtype` (every
    /// operator applies to [`DType::Sym`]).
    pub fn supports(self, dtype: DType) -> bool {
        self != ReduceOp::Avg || dtype.is_float() || dtype == DType::Sym
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ReduceOp {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "sum" => ReduceOp::Sum,
            "prod" => ReduceOp::Prod,
            "min" => ReduceOp::Min,
            "max" => ReduceOp::Max,
            "avg" => ReduceOp::Avg,
            _ => {
                return Err(format!(
                    "unknown reduction `{s}`; expected one of sum, prod, min, max, avg"
                ));
            }
        })
    }
}

/// A Rust type that can be an element of a buffer.
pub trait Element: Copy + PartialEq + fmt::Debug + 'static {
    /// The [`DType`] this type represents.
    const DTYPE: DType;

    /// Combines `a` (the earlier contribution) with `b` (the later one).
    /// [`ReduceOp::Avg`] combines as a sum; see [`Element::divide`].
    fn combine(op: ReduceOp, a: Self, b: Self) -> Self;

    /// Sets `local[i] = incoming[i] ⊕ local[i]` for every `i` (the
    /// incoming, earlier contribution on the left). The operator is matched
    /// once, outside the loop, so each loop can be vectorised.
    fn reduce_slice(op: ReduceOp, incoming: &[Self], local: &mut [Self]) {
        reduce_slices::<Self, false>(op, incoming, local);
    }

    /// Sets `local[i] = local[i] ⊕ incoming[i]` for every `i` (the local
    /// value on the left: the mirror of [`Element::reduce_slice`]), the
    /// operator matched once, outside the loop.
    fn reduce_slice_right(op: ReduceOp, incoming: &[Self], local: &mut [Self]) {
        reduce_slices::<Self, true>(op, incoming, local);
    }

    /// Divides by the number of ranks, the final step of [`ReduceOp::Avg`].
    fn divide(self, ranks: usize) -> Self;

    /// Whether `self` and `other` are the same value bit for bit.
    fn same_bits(self, other: Self) -> bool;

    /// Converts a small integer (as produced by test data generators).
    fn from_i64(v: i64) -> Self;
}

/// [`Element::reduce_slice`] (`LOCAL_LEFT = false`: `incoming ⊕ local`)
/// and [`Element::reduce_slice_right`] (`local ⊕ incoming`): the operator
/// matched once, outside the loop, so each loop can be vectorised.
#[inline(always)]
fn reduce_slices<T: Element, const LOCAL_LEFT: bool>(
    op: ReduceOp,
    incoming: &[T],
    local: &mut [T],
) {
    #[inline(always)]
    fn apply<T: Element, const LOCAL_LEFT: bool>(op: ReduceOp, incoming: &[T], local: &mut [T]) {
        for (x, &y) in local.iter_mut().zip(incoming) {
            *x = if LOCAL_LEFT {
                T::combine(op, *x, y)
            } else {
                T::combine(op, y, *x)
            };
        }
    }
    match op {
        ReduceOp::Sum | ReduceOp::Avg => apply::<T, LOCAL_LEFT>(ReduceOp::Sum, incoming, local),
        ReduceOp::Prod => apply::<T, LOCAL_LEFT>(ReduceOp::Prod, incoming, local),
        ReduceOp::Min => apply::<T, LOCAL_LEFT>(ReduceOp::Min, incoming, local),
        ReduceOp::Max => apply::<T, LOCAL_LEFT>(ReduceOp::Max, incoming, local),
    }
}

macro_rules! float_element {
    ($t:ty, $d:expr) => {
        impl Element for $t {
            const DTYPE: DType = $d;

            #[inline(always)]
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => a + b,
                    ReduceOp::Prod => a * b,
                    // `a < b ? a : b`, as NCCL's device code does.
                    ReduceOp::Min => {
                        if a < b {
                            a
                        } else {
                            b
                        }
                    }
                    ReduceOp::Max => {
                        if a > b {
                            a
                        } else {
                            b
                        }
                    }
                }
            }

            fn divide(self, ranks: usize) -> Self {
                self / ranks as $t
            }

            fn same_bits(self, other: Self) -> bool {
                self.to_bits() == other.to_bits()
            }

            fn from_i64(v: i64) -> Self {
                v as $t
            }
        }
    };
}

macro_rules! int_element {
    ($t:ty, $d:expr) => {
        impl Element for $t {
            const DTYPE: DType = $d;

            #[inline(always)]
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => a.wrapping_add(b),
                    ReduceOp::Prod => a.wrapping_mul(b),
                    ReduceOp::Min => a.min(b),
                    ReduceOp::Max => a.max(b),
                }
            }

            fn divide(self, ranks: usize) -> Self {
                // Never reached through the public API: Avg is rejected
                // for integer types before a collective starts.
                self / (ranks as $t).max(1)
            }

            fn same_bits(self, other: Self) -> bool {
                self == other
            }

            fn from_i64(v: i64) -> Self {
                v as $t
            }
        }
    };
}

float_element!(f32, DType::F32);
float_element!(f64, DType::F64);
int_element!(i32, DType::I32);
int_element!(i64, DType::I64);
int_element!(u8, DType::U8);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
        }
        for op in ReduceOp::ALL {
            assert_eq!(op.name().parse::<ReduceOp>().unwrap(), op);
        }
        assert!("half".parse::<DType>().is_err());
        assert_eq!(DType::Sym.name(), "sym");
        assert!("sym".parse::<DType>().is_err());
        assert!(!DType::ALL.contains(&DType::Sym));
        assert!("xor".parse::<ReduceOp>().is_err());
    }

    #[test]
    fn integer_reductions_wrap() {
        assert_eq!(u8::combine(ReduceOp::Sum, 200, 100), 44);
        assert_eq!(i32::combine(ReduceOp::Prod, i32::MAX, 2), -2);
        assert_eq!(i64::combine(ReduceOp::Min, -3, 7), -3);
        assert!(!ReduceOp::Avg.supports(DType::I32));
        assert!(ReduceOp::Avg.supports(DType::F64));
        assert!(ReduceOp::ALL.iter().all(|op| op.supports(DType::Sym)));
        assert_eq!(DType::Sym.size_bytes(), 4);
        assert!(!DType::Sym.is_float());
    }
}
