//! `nccl_nvls_tree`: allreduce the way NCCL's NVLS-Tree algorithm runs it
//! across nodes: NVLS inside each node (the NVSwitch reduces, through
//! [`Fabric::reduce_in_network`]), NCCL's double binary tree between the
//! nodes' heads, and the result written back to every GPU of the node by
//! the NVSwitch's multicast ([`Fabric::multicast_in_network`]).
//!
//! Nodes are `Params::ranks_per_node` (`p`) consecutive ranks (all ranks
//! one node when it does not divide the world size). Every GPU of a node
//! is a head (NCCL: the NVLS graph's heads, one per NIC across nodes,
//! `src/graph/search.cc:1195-1214` @b91894bd; on DGX/HGX nodes that is
//! every GPU).
//!
//! NCCL (`src/device/all_reduce.h:522-628` @b91894bd): a channel's part of
//! the buffer goes in loops of `nHeads` chunks, head `h` owning chunk `h`
//! of every loop (`all_reduce.h:573`). For its chunk, the head's reduce
//! warps `multimem.ld_reduce` the node's copies (the switch sums them)
//! together with the partial sums of up to two child nodes' heads and send
//! the sum to the parent node's head (`treeUp`); the root's sum goes back
//! down. The head's broadcast warps receive the result from the parent,
//! pass it to the children and `multimem.st` it to the node
//! (`all_reduce.h:604-625`; `treeDown[0]` is the local NVLS,
//! `src/graph/connect.cc:264-320`). Head `h` of every node forms the tree
//! over nodes: NCCL's double binary tree (`ncclGetDtree`), channel `c`
//! using tree `c mod 2` (`connect.cc:264-320`).
//!
//! Here: the buffer is cut into `c = Params::channels` blocks (0: two, one
//! per tree), block `k` on tree `k mod 2`; a block goes in loops of `p`
//! units of `min(Params::chunk_bytes, 128 KiB)` (the engine passes NCCL's
//! NVLS-Tree chunk, `src/enqueue.cc:2166-2179`), unit `h` of each loop
//! owned by local head `h` (a short last loop is split evenly over the
//! heads; NCCL aligns it to 16 bytes). For each unit:
//! 1. the node's ranks reduce it in the switch, the sum going to the head
//!    alone ([`Fabric::reduce_to_in_network`], `multimem.ld_reduce`);
//! 2. the head adds its children's partial sums, in child order, and sends
//!    the sum to its parent; the root has the result (divided by `N` for
//!    [`ReduceOp::Avg`]);
//! 3. the result goes down the tree (a head sends it on to its children)
//!    and each head multicasts it to its node (the head the source).
//!
//! A head's units go up in order and come down in order, the two
//! directions at once. Each (channel, head) connection has NCCL's
//! `NCCL_STEPS` = 8 slots of one unit (`src/transport/nvls.cc:427-428`:
//! `buffSize = nvlsStepSize * NCCL_STEPS`, the step the NVLS chunk;
//! `src/include/device.h:26`; NVIDIA/nccl
//! 5067397c2676d5aed50042fc39e5c8ee96eb0027): the kernel's scatter warps
//! write a loop into every head's buffer only once that head's reduce
//! warps have consumed the loop 8 before (`src/device/all_reduce.h:527-628`
//! @5067397c, one step per loop iteration). Here a rank's contribution to
//! unit `i` of head `h` leaves only once unit `i - 8` is done at the head
//! (reduced with the children's sums and sent up, or at the root sent
//! down): the head posts its own then, and sends every other rank of its
//! node a zero-byte credit. So at most 8 units per connection are in
//! flight. The tree's edges have their 8 slots too: NCCL connects a
//! channel's `treeUp` and `treeDown` peers as ordinary p2p connections
//! (`ncclNvlsTreeConnect`, `src/transport/nvls.cc:283-296` @5067397c),
//! whose sender waits until the receiver has freed the slot of the step
//! `NCCL_STEPS` before (`waitPeer`, `src/device/prims_simple.h:107`
//! @5067397c). Here a head sends unit `i` up or down an edge once its
//! receiver has credited unit `i - 8` with a zero-byte message, sent as
//! it takes that unit (as `nccl_tree` does; NCCL frees the slot once the
//! step's receive-and-send is done). Sends are eager in the simulator, so
//! without these credits a head whose node sums come faster than its NIC
//! drains them queued them in the network, more the larger the buffer.
//! So neither what a rank holds nor what waits in the network grows with
//! the buffer (512 GPUs: 110 MiB at 1, 2 and 4 GiB; see the engine's
//! `fold` module). Tree messages are plain sends (the router takes a
//! head through its own NIC). Tags: [`channel_tag`] of channel `k p + h` with phases 0
//! (node reduction), 1 (up the tree), 2 (down the tree), 3 (multicast), 4
//! (credits to the node's ranks), 5 and 6 (credits up and down the tree).
//!
//! The multicast's group is the node's ranks from the head on, round the
//! node (`h, h + 1, ..., h - 1`), so that a turn of every node's ranks
//! maps each head's calls onto another head's ([`head_turn`]; the engine
//! folds the run by it).
//!
//! Reduction order: a node's sum `S_v` is its ranks folded in local order
//! (the switch's member order); a tree node's partial sum is
//! `((S_v ⊕ P(child0)) ⊕ P(child1))`; the result is the root's.
//!
//! Traffic per GPU link for a buffer of `S` bytes and `p` heads: up `S`
//! (its contributions) plus `S/p` (its multicasts), down `S/p` (its node
//! sums) plus `S` (every head's multicast); across nodes each head sends
//! and receives its `S/p` once per tree edge.
//!
//! Cost on ideal links (every rank a link of latency `α` to the switch
//! and to every other rank, `c` the time of one unit on it, the switch's
//! forwarding free), two nodes of `p` ranks, one channel, one loop (each
//! head one unit): every rank's `p` contributions leave back to back, so
//! head `h`'s node sum is back at `(h + 2) c + 2α`; the child head's sum
//! reaches the root `c + α` later, the result reaches the child after
//! another `c + α`, and the child's multicast takes `2 (c + α)`: the last
//! head's copy is in at `T = (p + 5) c + 6α` ([`ideal_time_ps`]), provided
//! the multicasts do not queue behind the node sums on the way down
//! (`3α >= (p - 3) c`; the root's first multicast leaves the switch at
//! `4c + 4α`, its node's last node sum at `(p + 1) c + α`).
//!
//! On fabrics without a switch that reduces and multicasts the call fails
//! with the fabric's reason before anything is sent.

use std::cell::RefCell;
use std::ops::Range;

use crate::algorithm::{Chunking, CollectiveAlgorithm, Running};
use crate::any_fabric::AnyFabric;
use crate::branches::join_branches;
use crate::collective::{Collective, Params, reduction_is_trivial};
use crate::dtype::ReduceOp;
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank, Tag};
use crate::layout::block_range;
use crate::nccl::TreeNode;
use crate::nccl::nvls::NVLS_CHUNK_BYTES;
use crate::nccl::plan::double_binary_tree;
use crate::nccl::ring::channel_tag;
use crate::payload::Payload;
use crate::reference::{Order, fold_reference};

mod place;
use place::{Head, Place};

/// The call's layout: ranks per node, nodes, channels, elements per unit.
#[derive(Clone, Copy, Debug)]
struct Layout {
    per_node: usize,
    nodes: usize,
    channels: usize,
    unit: usize,
}

impl Layout {
    fn new(n: usize, count: usize, elem: usize, params: &Params) -> Layout {
        let p = params.ranks_per_node;
        let per_node = if p == 0 || !n.is_multiple_of(p) { n } else { p };
        let channels = if params.channels == 0 {
            2
        } else {
            params.channels
        };
        let unit_bytes = params.chunk_bytes.clamp(1, NVLS_CHUNK_BYTES);
        Layout {
            per_node,
            nodes: n / per_node,
            channels: channels.clamp(1, count.max(1)),
            unit: usize::try_from(unit_bytes / elem.max(1) as u64)
                .unwrap_or(usize::MAX)
                .max(1),
        }
    }

    /// Channel `k`'s block of a buffer of `count` elements.
    fn block(&self, count: usize, k: usize) -> Range<usize> {
        block_range(count, self.channels, k)
    }

    /// Head `h`'s units of `block`: unit `h` of each loop of `per_node`
    /// units, a short last loop split evenly (computed on demand: a
    /// 32 GiB buffer has a quarter million units per rank).
    fn units(&self, block: &Range<usize>, h: usize) -> Units {
        let loop_len = self.per_node * self.unit;
        let len = block.len();
        let full = len / loop_len;
        let rest = block_range(len % loop_len, self.per_node, h);
        Units {
            start: block.start,
            loop_len,
            mine: h * self.unit..(h + 1) * self.unit,
            full,
            last: (!rest.is_empty()).then(|| {
                let base = block.start + full * loop_len;
                base + rest.start..base + rest.end
            }),
        }
    }

    /// The ranks of `node` from local rank `h` (the multicast's source)
    /// on, in local order round the node: `h, h + 1, ..., h - 1` (an
    /// order a turn of the node's ranks moves onto another head's).
    fn node_group(&self, node: usize, h: usize) -> Vec<Rank> {
        let base = node * self.per_node;
        (0..self.per_node)
            .map(|j| base + (h + j) % self.per_node)
            .collect()
    }
}

/// One head's units of one channel's block, in order, non-empty.
#[derive(Clone, Debug)]
struct Units {
    /// The block's first element.
    start: usize,
    /// Elements per full loop (`per_node` units).
    loop_len: usize,
    /// The head's unit within a full loop, relative to the loop.
    mine: Range<usize>,
    /// Full loops.
    full: usize,
    /// The head's part of a short last loop, if not empty.
    last: Option<Range<usize>>,
}

impl Units {
    /// How many units.
    fn count(&self) -> usize {
        self.full + usize::from(self.last.is_some())
    }

    /// Unit `i`'s elements in the buffer.
    fn range(&self, i: usize) -> Range<usize> {
        if i < self.full {
            let base = self.start + i * self.loop_len;
            base + self.mine.start..base + self.mine.end
        } else {
            self.last.clone().unwrap_or(0..0)
        }
    }

    /// Unit `i`'s elements in the head's results, which hold its units
    /// back to back.
    fn packed(&self, i: usize) -> Range<usize> {
        let at = i * self.mine.len();
        at..at + self.range(i).len()
    }

    /// Elements of all the units.
    fn total(&self) -> usize {
        self.full * self.mine.len() + self.last.as_ref().map_or(0, Range::len)
    }
}

/// The tags of channel `k`, head `h`.
#[derive(Clone, Copy, Debug)]
struct Tags {
    node: Tag,
    up: Tag,
    down: Tag,
    cast: Tag,
    credit: Tag,
    up_credit: Tag,
    down_credit: Tag,
}

impl Tags {
    fn new(tag: Tag, layout: &Layout, k: usize, h: usize) -> Tags {
        let t = channel_tag(tag, k * layout.per_node + h);
        Tags {
            node: t.phase(0),
            up: t.phase(1),
            down: t.phase(2),
            cast: t.phase(3),
            credit: t.phase(4),
            up_credit: t.phase(5),
            down_credit: t.phase(6),
        }
    }
}

/// Allreduce with NVLS-Tree, in place on `buf`; see the module docs.
pub async fn run<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    if reduction_is_trivial(fabric, buf, op)? {
        return Ok(());
    }
    let n = fabric.world_size();
    let dtype = buf.shape().dtype;
    let layout = Layout::new(n, buf.len(), dtype.size_bytes(), params);
    let (node, local) = (
        fabric.rank() / layout.per_node,
        fabric.rank() % layout.per_node,
    );
    // Every group asked on every rank, so all refuse alike, before sending.
    let members: Vec<Rank> = (0..layout.per_node)
        .map(|j| node * layout.per_node + j)
        .collect();
    fabric.can_reduce_in_network(&members)?;
    for h in 0..layout.per_node {
        fabric.can_multicast_in_network(&layout.node_group(node, h))?;
    }
    let buf_ref = &*buf;
    let mut jobs = Vec::new();
    let mut all_units = Vec::new();
    for k in 0..layout.channels {
        let block = layout.block(buf.len(), k);
        let tree = double_binary_tree(layout.nodes, (k % 2) as u8);
        for h in 0..layout.per_node {
            let units = layout.units(&block, h);
            all_units.push(units.clone());
            let tags = Tags::new(params.tag, &layout, k, h);
            let cast_group = layout.node_group(node, h);
            let head = (local == h).then(|| tree[node].clone());
            let members = &members;
            jobs.push(async move {
                let out = RefCell::new(Payload::zeros(dtype, units.total(), buf_ref.is_phantom()));
                let place = Place {
                    fabric,
                    members,
                    cast_group: &cast_group,
                    units: &units,
                    tags,
                    op,
                    out: &out,
                };
                match head {
                    Some(tree_node) => {
                        let job = Head {
                            place,
                            tree: tree_node,
                            per_node: layout.per_node,
                            local,
                        };
                        job.run(buf_ref).await?
                    }
                    None => place.member(buf_ref).await?,
                }
                Ok::<_, CollectiveError>(out.into_inner())
            });
        }
    }
    let done = join_branches(fabric, jobs).await;
    for (job, units) in done.into_iter().zip(&all_units) {
        let results = job?;
        for i in 0..units.count() {
            let range = units.range(i);
            buf.copy_from(range, &results.extract(units.packed(i)))?;
        }
    }
    Ok(())
}

/// The turn of the call's channel tags that goes with turning every
/// node's ranks by `by` (local rank `j` to `(j + by) mod per_node`):
/// `images[k p + h]` is `k p + (h + by) mod p`, channel `k`'s head `h`
/// becoming head `h + by` (the tags [`channel_tag`] of `k p + h`), for
/// `channels` channels. Under that turn every rank's sends, receives and
/// in-network calls are its image's, provided every head's units have
/// the same sizes ([`turns_evenly`]); the tree over nodes is untouched.
pub fn head_turn(per_node: usize, by: usize, channels: usize) -> Vec<u16> {
    let p = per_node.max(1);
    (0..channels * p)
        .map(|i| (i / p * p + (i % p + by) % p) as u16)
        .collect()
}

/// Whether a call of `count` elements of `elem_bytes` bytes gives every
/// head of a node the same units, so that a turn of the nodes' ranks
/// ([`head_turn`]) maps the run onto itself: each channel's block must
/// split into `per_node` equal parts (a short last loop is split evenly
/// over the heads only then).
pub fn turns_evenly(count: usize, elem_bytes: usize, params: &Params, world: usize) -> bool {
    let layout = Layout::new(world, count, elem_bytes, params);
    (0..layout.channels).all(|k| layout.block(count, k).len().is_multiple_of(layout.per_node))
}

/// The channels a call of `count` elements runs on (its tags use
/// `channels x ranks per node` channel numbers, see [`head_turn`]).
pub fn channels_used(count: usize, elem_bytes: usize, params: &Params, world: usize) -> usize {
    Layout::new(world, count, elem_bytes, params).channels
}

/// The closed-form time of one call on ideal links (see the module docs):
/// two nodes of `per_node` ranks, one channel, one unit per head taking
/// `unit_ps` on a link of latency `alpha_ps`; exact while
/// `3 alpha_ps >= (per_node - 3) unit_ps`.
pub fn ideal_time_ps(alpha_ps: u64, unit_ps: u64, per_node: u64) -> u64 {
    (per_node + 5) * unit_ps + 6 * alpha_ps
}

/// Node `v`'s partial sum in `tree`: its ranks in local order, then each
/// child's partial sum.
fn subtree_order(tree: &[TreeNode], v: usize, per_node: usize) -> Order {
    let own = Order::left_fold((0..per_node).map(|j| v * per_node + j));
    tree[v].children.iter().fold(own, |acc, &c| {
        Order::combine(acc, subtree_order(tree, c, per_node))
    })
}

/// Every rank's result: per channel block, the root's partial sum of its
/// tree (see the module docs).
pub fn reference(inputs: &[Payload], op: ReduceOp, params: &Params) -> Vec<Payload> {
    let n = inputs.len();
    let count = inputs[0].len();
    let layout = Layout::new(n, count, inputs[0].shape().dtype.size_bytes(), params);
    let parts: Vec<(Range<usize>, Order)> = (0..layout.channels)
        .map(|k| {
            let tree = double_binary_tree(layout.nodes, (k % 2) as u8);
            let root = tree
                .iter()
                .position(|t| t.parent.is_none())
                .expect("a tree has a root");
            (
                layout.block(count, k),
                subtree_order(&tree, root, layout.per_node),
            )
        })
        .collect();
    vec![fold_reference(inputs, op, &parts); n]
}

/// NCCL's NVLS-Tree allreduce, as the registry holds it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Allreduce;

impl CollectiveAlgorithm for Allreduce {
    fn name(&self) -> &str {
        "nccl_nvls_tree"
    }

    fn collective(&self) -> Collective {
        Collective::Allreduce
    }

    fn run<'a>(
        &'a self,
        fabric: AnyFabric<'a>,
        buf: &'a mut Payload,
        op: ReduceOp,
        params: &'a Params,
    ) -> Running<'a> {
        Box::pin(async move { run(&fabric, buf, op, params).await })
    }

    fn reference(&self, inputs: &[Payload], op: ReduceOp, params: &Params) -> Option<Vec<Payload>> {
        Some(reference(inputs, op, params))
    }

    fn chunking(&self) -> Chunking {
        Chunking::Buffer
    }

    fn nccl_algorithm(&self) -> Option<&str> {
        Some("nvls_tree")
    }

    fn runs_nccl_channels(&self) -> bool {
        true
    }

    fn reduces_in_network(&self) -> bool {
        true
    }
}
