//! The program every simulated rank runs in a study: the scenario's
//! injected mistakes, then `warmup + iters` back-to-back calls of the
//! collective, each on a fresh copy of the rank's input with its own tag.

use std::rc::Rc;

use algorithms::{
    Algorithm, CollectiveError, DType, Fabric, Params, Payload, ReduceOp, Shape, Tag, Time,
    collective,
};

use crate::fabric::SimFabric;
use crate::scenario::{CollectiveSpec, Inject};

/// The tag of receives injected by [`Inject::ExtraRecv`]; no collective
/// uses it.
pub const INJECTED_TAG: Tag = Tag(u64::MAX);

/// What one rank's program returns: when each call ended and its final
/// buffer, or `None` if the rank skipped the collectives.
pub type RankOutput = Result<Option<(Vec<Time>, Payload)>, CollectiveError>;

/// What every rank calls: the scenario's collective with the algorithm and
/// parameters chosen for this size.
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    /// The scenario's entry.
    pub spec: &'a CollectiveSpec,
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Its parameters (the tag is set per call).
    pub params: Params,
}

/// Runs one rank's share of a study point.
pub async fn rank_program(
    fabric: SimFabric,
    call: Call<'_>,
    injects: &[Inject],
    inputs: Rc<Vec<Payload>>,
) -> RankOutput {
    let spec = call.spec;
    let me = fabric.rank();
    for inject in injects {
        match *inject {
            Inject::Skip { rank } if rank == me => return Ok(None),
            Inject::ExtraRecv { rank, from } if rank == me => {
                fabric
                    .recv(from, INJECTED_TAG, Shape::new(spec.dtype, 0))
                    .await?;
            }
            _ => {}
        }
    }
    let calls = spec.warmup + spec.iters;
    let mut ends = Vec::with_capacity(calls as usize);
    // One buffer, refilled from the input before every call: the copy costs
    // wall time only, not virtual time.
    let mut buf = inputs[me].clone();
    for index in 0..calls {
        if index > 0 {
            let whole = 0..buf.len();
            buf.copy_from(whole, &inputs[me])?;
        }
        let params = Params {
            tag: Tag(u64::from(index)),
            ..call.params
        };
        collective::run(
            &fabric,
            spec.kind,
            call.algorithm,
            &mut buf,
            spec.op,
            &params,
        )
        .await?;
        ends.push(fabric.now());
    }
    if injects.contains(&Inject::CorruptResult { rank: me }) && !buf.is_empty() && !buf.is_phantom()
    {
        buf.reduce_from(0..1, &one(spec.dtype), ReduceOp::Sum)?;
    }
    Ok(Some((ends, buf)))
}

/// A one-element payload holding 1.
fn one(dtype: DType) -> Payload {
    match dtype {
        DType::F32 => Payload::from_vec(vec![1.0f32]),
        DType::F64 => Payload::from_vec(vec![1.0f64]),
        DType::I32 => Payload::from_vec(vec![1i32]),
        DType::I64 => Payload::from_vec(vec![1i64]),
        DType::U8 => Payload::from_vec(vec![1u8]),
    }
}
