//! NCCL's way of running a collective, as algorithms any fabric can run:
//! protocols, channels, and the ring and tree of each channel.
//!
//! - [`protocol`]: [`Protocol`] (LL, LL128, Simple): wire framing, step
//!   sizes, steps in flight, from NCCL's source.
//! - [`plan`]: [`ChannelPlan`], the ring and tree of every channel (from
//!   the fabric, [`Fabric::channel_plan`], or in rank order).
//! - [`framed`]: [`Framed`], a fabric whose sends carry a [`Framing`].
//! - [`ring`]: `nccl_ring` (allreduce, allgather, reduce-scatter,
//!   broadcast, reduce): the buffer split over channels, each a pipelined
//!   ring in its channel's order.
//! - [`tree`]: `nccl_tree` (allreduce): per channel, chunks reduced up the
//!   channel's tree and broadcast down it, both directions at once.
//! - [`pat`]: `nccl_pat` (allgather, reduce-scatter): NCCL's Parallel
//!   Aggregated Trees on the tree graph's channels.
//! - [`p2p`]: `nccl_sendrecv`: a send and a receive the way NCCL's p2p
//!   path runs them (parts per channel, LL or Simple by size, p2p chunks).
//! - [`nvls`]: `nccl_nvls` (allreduce): every chunk reduced by the NVSwitch
//!   and multicast back ([`Fabric::reduce_in_network`]).
//! - [`collnet`]: `nccl_collnet_direct` and `nccl_collnet_chain`
//!   (allreduce): in-node scatter or chain, across nodes SHARP switches
//!   ([`Fabric::reduce_in_network`]).
//!
//! An algorithm here reads the protocol and the number of channels from
//! [`Params::protocol`](crate::Params::protocol) and
//! [`Params::channels`](crate::Params::channels); choosing them the way
//! NCCL does is the engine's NCCL model, which also charges each call's
//! launch cost before it starts.

pub mod collnet;
pub mod framed;
pub mod nvls;
pub mod nvls_tree;
pub mod p2p;
pub mod pat;
pub mod plan;
pub mod protocol;
pub mod ring;
pub mod tree;

pub use framed::Framed;
pub use plan::{ChannelPlan, TreeNode};
pub use protocol::Protocol;

use std::fmt;

use crate::fabric::Fabric;

/// NCCL's algorithms, in NCCL's order (`NCCL_ALGO_*` in
/// `src/include/plugin/nccl_tuner.h` @b91894bd, v2.29.7-1; its tuner scans
/// them in this order and keeps the first of equal times).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NcclAlgorithm {
    /// NCCL's tree (allreduce only): reduce up, broadcast down.
    Tree,
    /// NCCL's ring.
    Ring,
    /// CollNet direct: every GPU scatters to the node's heads, which reduce
    /// through the network switches (SHARP) and broadcast back.
    CollNetDirect,
    /// CollNet chain: a chain inside the node whose top reduces through the
    /// network switches (SHARP).
    CollNetChain,
    /// NVLink SHARP: reductions inside the NVSwitch (multimem loads and
    /// stores), across nodes with the network's SHARP.
    Nvls,
    /// NVLS inside each node, NCCL's double binary tree between the nodes'
    /// heads.
    NvlsTree,
    /// Parallel Aggregated Trees (allgather and reduce-scatter, one GPU per
    /// node): a Bruck-like exchange over peers at distance 2^d.
    Pat,
}

impl NcclAlgorithm {
    /// NCCL's name (`NCCL_ALGO` accepts it, case-insensitively).
    pub fn name(self) -> &'static str {
        match self {
            NcclAlgorithm::Tree => "Tree",
            NcclAlgorithm::Ring => "Ring",
            NcclAlgorithm::CollNetDirect => "CollNetDirect",
            NcclAlgorithm::CollNetChain => "CollNetChain",
            NcclAlgorithm::Nvls => "NVLS",
            NcclAlgorithm::NvlsTree => "NVLSTree",
            NcclAlgorithm::Pat => "PAT",
        }
    }

    /// Every algorithm, in NCCL's order.
    pub const ALL: [NcclAlgorithm; 7] = [
        NcclAlgorithm::Tree,
        NcclAlgorithm::Ring,
        NcclAlgorithm::CollNetDirect,
        NcclAlgorithm::CollNetChain,
        NcclAlgorithm::Nvls,
        NcclAlgorithm::NvlsTree,
        NcclAlgorithm::Pat,
    ];
}

impl fmt::Display for NcclAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How one message travels: its protocol, for which algorithm, on which
/// channel (see [`Fabric::send_framed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Framing {
    /// The wire protocol.
    pub protocol: Protocol,
    /// The algorithm sending it (NCCL's per-hop latency depends on it).
    pub algorithm: NcclAlgorithm,
    /// The channel (a simulator routes each channel through its own NIC).
    pub channel: u16,
}

/// The fabric's channel plan, or the rank-order one.
pub(crate) fn plan_of<F: Fabric>(fabric: &F) -> std::sync::Arc<ChannelPlan> {
    fabric
        .channel_plan()
        .filter(|p| p.check(fabric.world_size()).is_ok())
        .unwrap_or_else(|| std::sync::Arc::new(ChannelPlan::rank_order(fabric.world_size())))
}

/// How many channels a call uses: `Params::channels`, or every channel of
/// the plan when it is 0; never more than there are elements.
pub(crate) fn channels_used(requested: usize, plan: &ChannelPlan, count: usize) -> usize {
    let wanted = if requested == 0 {
        plan.channels()
    } else {
        requested
    };
    wanted.clamp(1, count.max(1))
}
