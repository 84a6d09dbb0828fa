//! One `[[collective]]` entry validated into a [`CollectiveSpec`]: its
//! kind and algorithm, sizes, iterations, chunking, and the caps on real
//! data and on the messages a point sends.

use algorithms::algorithm::messages_bound;
use algorithms::{Collective, DType, ReduceOp, Registry};
use toml::Spanned;

use super::super::raw::RawCollective;
use super::super::{
    CHUNKS_PER_BUFFER_MAX, CollectiveSpec, MESSAGES_PER_POINT_MAX, REAL_DATA_BYTES_MAX,
    ScenarioError, WORLD_SIZE_MAX,
};
use super::Source;

/// Validates one `[[collective]]` entry against the world it runs in.
pub(super) fn collective(
    src: &Source,
    spanned: &Spanned<RawCollective>,
    registry: &Registry,
    world_size: usize,
    max_ranks: usize,
    fold: Option<usize>,
) -> Result<CollectiveSpec, ScenarioError> {
    let c = spanned.get_ref();
    let kind: Collective = src.parsed(&c.kind)?;
    let algorithm = match &c.algorithm {
        None => None,
        Some(a) if a.get_ref() == "auto" => None,
        Some(a) => Some(
            registry
                .find(kind, a.get_ref())
                .map_err(|e| src.at(a, format!("{e} (or \"auto\" to let the tuner choose)")))?,
        ),
    };
    let world_size = match &c.world_size {
        Some(w) => src.count(w, "world_size", 1, max_ranks as i64)? as usize,
        None => world_size,
    };
    let root = match &c.root {
        Some(r) => src.count(r, "root", 0, world_size as i64 - 1)? as usize,
        None => 0,
    };
    let ranks_per_node = match &c.ranks_per_node {
        Some(r) => src.count(r, "ranks_per_node", 1, WORLD_SIZE_MAX as i64)? as usize,
        None => 8,
    };
    let dtype: DType = match &c.dtype {
        Some(d) => src.parsed(d)?,
        None => DType::F32,
    };
    let op: ReduceOp = match &c.op {
        Some(o) => src.parsed(o)?,
        None => ReduceOp::Sum,
    };
    if !op.supports(dtype) {
        let at =
            c.op.as_ref()
                .expect("only an explicit op can be unsupported");
        return Err(src.at(
            at,
            format!("op `{op}` is only defined for float and double, not `{dtype}`"),
        ));
    }
    let (min_bytes, max_bytes) = (c.min_bytes.get_ref().0, c.max_bytes.get_ref().0);
    if min_bytes > max_bytes {
        return Err(src.at(
            &c.max_bytes,
            format!("max_bytes ({max_bytes}) is smaller than min_bytes ({min_bytes})"),
        ));
    }
    let step_factor = match &c.step_factor {
        Some(f) => src.count(f, "step_factor", 2, 1 << 20)? as u64,
        None => 2,
    };
    let iters = match &c.iters {
        Some(v) => src.count(v, "iters", 1, 1_000_000)? as u32,
        None => 20,
    };
    let warmup = match &c.warmup {
        Some(v) => src.count(v, "warmup", 0, 1_000_000)? as u32,
        None => 5,
    };
    let chunk_bytes = match &c.chunk_bytes {
        Some(b) if b.get_ref().0 == 0 => return Err(src.at(b, "chunk_bytes must be at least 1")),
        Some(b) => b.get_ref().0,
        None => 512 * 1024,
    };
    // Where a limit the chunk size breaks is pointed at: the chunk_bytes
    // given, else max_bytes.
    let chunk_at = c
        .chunk_bytes
        .as_ref()
        .map_or(c.max_bytes.span(), |b| b.span());
    if max_bytes / chunk_bytes > CHUNKS_PER_BUFFER_MAX {
        return Err(src.error(
            Some(chunk_at),
            format!(
                "chunk_bytes = {chunk_bytes} cuts max_bytes = {max_bytes} into more than {CHUNKS_PER_BUFFER_MAX} chunks; use a larger chunk_bytes"
            ),
        ));
    }
    let slots = match &c.slots {
        Some(v) => src.count(v, "slots", 1, 1 << 16)? as usize,
        None => algorithms::allreduce::ring::NCCL_STEPS,
    };
    if c.phantom && c.check == Some(true) {
        return Err(src.error(
            Some(spanned.span()),
            "check = true needs real data, but phantom = true carries none",
        ));
    }
    let phantom = c.phantom;
    // Inputs and working buffers of every rank, plus the reference.
    let real_bytes = (2 * world_size as u64 + 1).saturating_mul(max_bytes);
    if !phantom && real_bytes > REAL_DATA_BYTES_MAX {
        return Err(src.at(
            &c.max_bytes,
            format!(
                "real data for {world_size} ranks at max_bytes = {max_bytes} needs about {} MiB, more than the {} MiB limit; \
                 set phantom = true for size-only payloads, or lower max_bytes",
                real_bytes >> 20,
                REAL_DATA_BYTES_MAX >> 20
            ),
        ));
    }
    let max_count = usize::try_from(max_bytes / dtype.size_bytes() as u64).unwrap_or(usize::MAX);
    let calls = u64::from(warmup + iters);
    // With the tuner choosing, the pipelined ring's bound (the largest of
    // the rings and exchanges it usually picks).
    let per_call = match &algorithm {
        Some(a) => a.messages_bound(world_size, max_count, dtype.size_bytes(), chunk_bytes),
        None => messages_bound::ring(world_size, max_count, dtype.size_bytes(), chunk_bytes),
    };
    // A folded run sends one orbit's share (validation refuses a
    // collective on fewer ranks than the rotation's later).
    let share = fold.map_or(1, |shift| (world_size / shift.max(1)).max(1)) as u64;
    let messages = per_call.saturating_mul(calls) / share;
    if messages > MESSAGES_PER_POINT_MAX {
        return Err(src.error(
            Some(chunk_at),
            format!(
                "{calls} calls at max_bytes = {max_bytes} with chunk_bytes = {chunk_bytes} on {world_size} ranks send {messages} messages, \
                 more than the {MESSAGES_PER_POINT_MAX} limit; use a larger chunk_bytes, fewer iterations or fewer ranks{}",
                super::super::fold_check::fold_hint(algorithm.as_ref(), kind, fold)
            ),
        ));
    }
    let spec = CollectiveSpec {
        kind,
        algorithm,
        world_size,
        root,
        ranks_per_node,
        min_bytes,
        max_bytes,
        step_factor,
        dtype,
        op,
        iters,
        warmup,
        chunk_bytes,
        slots,
        phantom,
        check: c.check.unwrap_or(!phantom),
        extrapolate_above: c.extrapolate_above.as_ref().map(|t| t.get_ref().0),
    };
    if let Some(above) = &c.extrapolate_above {
        super::super::extrapolate::check_bases(src, above, &spec)?;
    }
    Ok(spec)
}
