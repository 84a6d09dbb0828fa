//! The program every checked rank runs: the scenario's calls in this rank's
//! order (or all at once when the scenario says they are concurrent), each
//! on a buffer of symbolic inputs, so that every output element names the
//! inputs it combines and in which order.

use std::ops::Range;
use std::rc::Rc;

use algorithms::layout::block_range;
use algorithms::symbolic::{self, Sym};
use algorithms::{
    Chunking, Collective, CollectiveError, DType, Fabric, Params, Payload, Rank, Tag,
};
use futures_util::future::join_all;

use super::fabric::CheckFabric;
use super::spec::{Buffering, CallSpec, CheckScenario, Point};

/// What a program checks: a whole scenario.
pub type Program = CheckScenario;

/// The outcome of one call on one rank: `None` if the rank never made it.
pub type CallResult = Option<Result<Payload, CollectiveError>>;

/// One rank's results, indexed like the scenario's calls.
pub type RankResult = Vec<CallResult>;

/// Bits of a leaf id that hold the element index.
const ELEMENT_BITS: u32 = 24;
/// Bits of a leaf id that hold the rank.
const RANK_BITS: u32 = 16;

/// The symbolic leaf standing for element `element` of `rank`'s input to
/// call `call`.
pub fn leaf_id(call: usize, rank: Rank, element: usize) -> u64 {
    ((call as u64) << (ELEMENT_BITS + RANK_BITS)) | ((rank as u64) << ELEMENT_BITS) | element as u64
}

/// The readable name of a leaf: `r1[3]` (rank 1's element 3), prefixed by
/// the call's id when the program has several calls (`sum:r1[3]`).
pub fn leaf_name(program: &Program, id: u64) -> String {
    let call = (id >> (ELEMENT_BITS + RANK_BITS)) as usize;
    let rank = (id >> ELEMENT_BITS) & ((1 << RANK_BITS) - 1);
    let element = id & ((1 << ELEMENT_BITS) - 1);
    match program.calls.get(call) {
        Some(c) if program.calls.len() > 1 => format!("{}:r{rank}[{element}]", c.id),
        _ => format!("r{rank}[{element}]"),
    }
}

/// Rank `rank`'s input buffer for call `call`: a distinct leaf per element.
pub fn input(call: usize, rank: Rank, count: usize) -> Payload {
    let leaves: Vec<Sym> = (0..count)
        .map(|e| symbolic::leaf(leaf_id(call, rank, e)))
        .collect();
    Payload::from_vec(leaves)
}

/// The parameters of a call at `point`.
///
/// `chunks` cuts the unit an algorithm pipelines (its
/// [`Chunking`]): a rank's block (`count / N` elements) for the rings, the
/// whole buffer for the others (tree, chains).
///
/// The pipeline window (`Params::slots`, how many chunks a rank sends
/// ahead of what it has received, NCCL_STEPS) is the receiver's buffer:
/// the eager slots per connection, one under rendezvous (send and receive
/// each step together), NCCL's 8 with unbounded buffering.
pub fn params(call: &CallSpec, point: Point) -> Params {
    let elem = DType::Sym.size_bytes() as u64;
    let n = point.world_size.max(1);
    let unit = if call.algorithm.facts().chunking() == Chunking::Block {
        point.count.div_ceil(n)
    } else {
        point.count
    };
    let per_chunk = unit.div_ceil(point.chunks.max(1)).max(1) as u64;
    let slots = match point.buffering {
        Buffering::Eager(k) => k.max(1),
        Buffering::Unbounded => Params::default().slots,
    };
    Params {
        chunk_bytes: per_chunk * elem,
        slots,
        tag: Tag(call.tag),
        root: point.root,
        // Two ranks per node where that splits the world into several
        // nodes, so that the hierarchical algorithm runs its own code.
        ranks_per_node: if n >= 4 && n.is_multiple_of(2) { 2 } else { n },
        ..Params::default()
    }
}

/// Runs one call on this rank; the result is a full-size buffer whose
/// [`collective::defined_output`](algorithms::collective::defined_output) holds the output, in place or not.
async fn run_call(
    fabric: &CheckFabric,
    index: usize,
    call: &CallSpec,
    point: Point,
) -> Result<Payload, CollectiveError> {
    let rank = fabric.rank();
    let n = fabric.world_size();
    let count = point.count;
    let params = params(call, point);
    let mut buf = input(index, rank, count);
    if point.in_place {
        call.algorithm
            .run(fabric, &mut buf, call.op, &params)
            .await?;
        return Ok(buf);
    }
    let own: Range<usize> = block_range(count, n, rank);
    let input = match call.collective {
        Collective::Allgather | Collective::Gather => buf.extract(own.clone()),
        _ => buf.clone(),
    };
    let out = call
        .algorithm
        .run_out_of_place(fabric, &input, count, call.op, &params)
        .await?;
    if out.len() == count {
        return Ok(out);
    }
    // Reduce-scatter and scatter return this rank's block only.
    buf.copy_from(own, &out)?;
    Ok(buf)
}

/// One rank's program at `point`.
pub async fn rank_program(fabric: CheckFabric, program: Rc<Program>, point: Point) -> RankResult {
    let rank = fabric.rank();
    let mut results: RankResult = vec![None; program.calls.len()];
    let order = program.order_of(rank).to_vec();
    if program.concurrent {
        // Each call waits for the checker to start it: the order in which
        // a rank's streams issue concurrent calls is a choice too.
        // Each call posts through its own view of the fabric, so the
        // checker knows which call every operation belongs to.
        let calls = order.iter().map(|&i| {
            let fabric = fabric.for_call(i);
            let program = &program;
            async move {
                fabric.wait_start(i).await;
                let result = run_call(&fabric, i, &program.calls[i], point).await;
                fabric.call_done();
                result
            }
        });
        for (&i, r) in order.iter().zip(join_all(calls).await) {
            results[i] = Some(r);
        }
    } else {
        for &i in &order {
            let r = run_call(&fabric, i, &program.calls[i], point).await;
            let failed = r.is_err();
            results[i] = Some(r);
            if failed {
                break;
            }
        }
    }
    results
}
