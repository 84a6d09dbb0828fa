//! The program every simulated rank runs in a study: the scenario's
//! injected mistakes, then `warmup + iters` calls of the collective, each
//! started on every rank at once (a zero-cost synchronisation between
//! calls), on a fresh copy of the rank's input, with its own tag.

use std::rc::Rc;

use algorithms::{
    Algorithm, CollectiveError, DType, Fabric, Params, Payload, ReduceOp, Shape, Tag, Time, Work,
};

use crate::fabric::SimFabric;
use crate::scenario::{CollectiveSpec, Fault, Inject};
use crate::trace::SpanKind;

/// The tag of receives injected by [`Inject::ExtraRecv`]; no collective
/// uses it.
pub const INJECTED_TAG: Tag = Tag(u64::MAX);

/// What one rank's program returns: when each call started and ended, and
/// its final buffer; or `None` if the rank skipped the collectives.
pub type RankOutput = Result<Option<(Vec<(Time, Time)>, Payload)>, CollectiveError>;

/// What every rank calls: the scenario's collective with the algorithm and
/// parameters chosen for this size.
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    /// The scenario's entry.
    pub spec: &'a CollectiveSpec,
    /// The algorithm.
    pub algorithm: &'a Algorithm,
    /// Its parameters (the tag is set per call).
    pub params: Params,
    /// Software time each rank spends before each call starts moving
    /// data (NCCL's base latency and launch skew, or a calibration's
    /// per-call time), by rank; empty: none.
    pub overhead_ps: &'a [u64],
}

/// Runs one rank's share of a study point.
pub async fn rank_program(
    fabric: SimFabric,
    call: Call<'_>,
    injects: &[Inject],
    faults: &[Fault],
    inputs: Rc<Vec<Payload>>,
) -> RankOutput {
    let spec = call.spec;
    let me = fabric.rank();
    let delay_ps: u64 = faults
        .iter()
        .map(|f| match *f {
            Fault::Straggler { rank, delay_ps, .. } if rank == me => delay_ps,
            _ => 0,
        })
        .fold(0, u64::saturating_add); // past the end of time: reported as such
    if injects.contains(&Inject::Skip { rank: me }) {
        // Reaches the start of the first call with everyone, then never
        // makes it.
        fabric.sync_all().await;
        return Ok(None);
    }
    let calls = spec.warmup + spec.iters;
    let mut spans = Vec::with_capacity(calls as usize);
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
        // Every call starts on every rank at once, as nccl-tests' calls
        // start after the host has synchronised: with eager sends and no
        // flow control, ranks would otherwise run calls ahead of each other.
        fabric.sync_all().await;
        let start = fabric.now();
        if delay_ps > 0 {
            // A straggler reaches the call late; the call's time counts
            // from the common start, so the others' wait shows in it.
            fabric.sleep_ps(delay_ps).await;
        }
        if let Some(&ps) = call.overhead_ps.get(me)
            && ps > 0
        {
            fabric.compute(Work::Latency { ps }).await?;
        }
        if index == 0 {
            extra_receives(&fabric, injects, spec).await?;
        }
        call.algorithm
            .run(&fabric, &mut buf, spec.op, &params)
            .await?;
        let bytes = (buf.len() * spec.dtype.size_bytes()) as u64;
        fabric.record(SpanKind::Call(spec.kind.name()), None, bytes, start);
        spans.push((start, fabric.now()));
    }
    if injects.contains(&Inject::CorruptResult { rank: me }) && !buf.is_empty() && !buf.is_phantom()
    {
        buf.reduce_from(0..1, &one(spec.dtype), ReduceOp::Sum)?;
    }
    Ok(Some((spans, buf)))
}

/// The receives nobody sends that `injects` make this rank post at the
/// start of its first call.
async fn extra_receives(
    fabric: &SimFabric,
    injects: &[Inject],
    spec: &CollectiveSpec,
) -> Result<(), CollectiveError> {
    for inject in injects {
        if let Inject::ExtraRecv { rank, from } = *inject
            && rank == fabric.rank()
        {
            let expect = Shape::new(spec.dtype, 0);
            fabric.recv(from, INJECTED_TAG, expect).await?;
        }
    }
    Ok(())
}

/// What `tag` means in a study's program, for reports: which of the
/// `warmup + iters` calls of `spec` (each call's tag is its index) and,
/// for a tag the algorithm derived with [`Tag::phase`], which phase; or the
/// receive an `extra_recv` mistake posted.
pub fn describe_tag(tag: Tag, spec: &CollectiveSpec, algorithm: &str) -> String {
    if tag == INJECTED_TAG {
        return "the injected receive (extra_recv), which no rank sends".to_string();
    }
    let (tag, channel) = algorithms::nccl::ring::split_channel_tag(tag);
    let index = tag.base();
    let call = if index < u64::from(spec.warmup) {
        format!("warm-up call {} of {}", index + 1, spec.warmup)
    } else if index < u64::from(spec.warmup + spec.iters) {
        let timed = index - u64::from(spec.warmup);
        format!("timed call {} of {}", timed + 1, spec.iters)
    } else {
        return format!("tag {tag}");
    };
    let channel = channel.map_or_else(String::new, |c| format!(", channel {c}"));
    match tag.phase_number() {
        Some(p) => format!("{call} ({} {algorithm}{channel}, phase {p})", spec.kind),
        None => format!("{call} ({} {algorithm}{channel})", spec.kind),
    }
}

/// A one-element payload holding 1.
fn one(dtype: DType) -> Payload {
    match dtype {
        DType::F32 => Payload::from_vec(vec![1.0f32]),
        DType::F64 => Payload::from_vec(vec![1.0f64]),
        DType::I32 => Payload::from_vec(vec![1i32]),
        DType::I64 => Payload::from_vec(vec![1i64]),
        DType::U8 => Payload::from_vec(vec![1u8]),
        DType::Sym => Payload::from_vec(vec![algorithms::symbolic::leaf(1)]),
    }
}
