//! Input buffers for checked runs, drawn from the run's seeded RNG.
//!
//! Values are chosen so that the exact result does not depend on the order
//! in which an algorithm combines them: small integers for sums (exact in
//! any float format at any world size this simulator reaches), `±1` for
//! float products, and anything for min and max. Integer reductions wrap,
//! so they are exact in any order anyway. A result can therefore be checked
//! against [`algorithms::reference::rank_order_reference`] bit for bit,
//! whatever the algorithm.
//!
//! A scenario cannot ask for symbolic elements ([`DType::Sym`]), but a
//! spec built in code can: those inputs are leaves with ids drawn from the
//! RNG, and the study checks them against the algorithm's own reference
//! (their order is the point), which works because a point runs every
//! rank on one thread.

use algorithms::payload::IntoBuffer;
use algorithms::symbolic::{Sym, leaf};
use algorithms::{DType, Payload, ReduceOp};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Draws one rank's input of `count` elements.
pub fn draw(rng: &mut ChaCha8Rng, dtype: DType, op: ReduceOp, count: usize) -> Payload {
    match dtype {
        DType::F32 => values::<f32>(rng, op, count, true),
        DType::F64 => values::<f64>(rng, op, count, true),
        DType::I32 => values::<i32>(rng, op, count, false),
        DType::I64 => values::<i64>(rng, op, count, false),
        DType::U8 => values::<u8>(rng, op, count, false),
        DType::Sym => {
            Payload::from_vec((0..count).map(|_| leaf(rng.random())).collect::<Vec<Sym>>())
        }
    }
}

fn values<T: IntoBuffer>(rng: &mut ChaCha8Rng, op: ReduceOp, count: usize, float: bool) -> Payload {
    let v = (0..count)
        .map(|_| {
            let x: i64 = match (op, float) {
                (ReduceOp::Prod, true) => {
                    if rng.random::<bool>() {
                        1
                    } else {
                        -1
                    }
                }
                (ReduceOp::Sum | ReduceOp::Avg, true) => rng.random_range(-8..=8),
                _ => rng.random_range(-100..=100),
            };
            T::from_i64(x)
        })
        .collect();
    Payload::from_vec(v)
}
