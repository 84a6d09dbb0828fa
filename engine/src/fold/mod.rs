//! Folded runs: simulate one representative of each orbit of a rotation.
//!
//! A ring allreduce on `N` ranks sends `2N(N-1)` messages; at 16 384
//! ranks that is 5.4·10^8, and no per-event speed makes it a matter of
//! seconds. But when the hardware, the routes and the collective all look
//! the same from rank `r` and from rank `r + shift` (a fat-tree rotated by
//! one node, a ring allreduce shifted by one node's ranks), every rank of
//! an orbit lives through the same timeline, shifted in space only. A
//! folded run simulates ranks `0..shift` only:
//!
//! - **Messages.** A message from representative `s` to rank `d = d0 +
//!   k·shift` (`d0 < shift`) is, rotated back `k` steps, the message rank
//!   `d0` receives from `s - k·shift`; that is how it is delivered
//!   (`World::receiver_view`).
//! - **Links.** A message crosses its real route (with symmetric routes,
//!   [`TopologyConfig::rotation`](crate::network::TopologyConfig::rotation)), but each link direction's traffic goes
//!   to its orbit's representative ([`Rotation::link_orbits`]): link `l`
//!   carries, in the full run, the rotated copies of the representatives'
//!   flows that cross any member of its orbit, which is exactly what the
//!   representative carries here when every orbit has one member per
//!   step. Ideal links are per pair, so the representative pairs already
//!   carry what every rotated pair carries.
//! - **Shared links (flow model).** A link whose orbit has fewer members
//!   than the rotation has steps (an oversubscribed fat-tree's uplink,
//!   which several nodes share) is crossed, in the full run, by
//!   `w = order / members` rotated copies of each representative flow
//!   that crosses its orbit, all at the same rate. The folded route lists
//!   its representative `w` times, so max-min filling counts the flow `w`
//!   times there and the counters add its bytes `w` times (what each
//!   member carries); the delivery latency still follows the route
//!   crossed once. Packets cannot be weighed: the packet model refuses
//!   such a rotation.
//!
//! It is exact (the same simulated times as the full run with the same
//! symmetric routes) when the collective is rotation-equivariant: each
//! rank's sends and receives are the representative's, shifted, with the
//! same sizes. A receive that gets a message of another size fails with
//! the usual shape error, which in a folded run means the collective is
//! not symmetric (uneven blocks, a root); a pattern that does not match
//! deadlocks. Faults and payload checks need every rank and are refused;
//! payloads are phantom (only sizes travel).
//!
//! **Ties and rounding.** That needs the full run itself to be symmetric,
//! and two tie-breaks of the engine are not rotation-invariant: events at
//! equal times fire in scheduling order, which follows rank order (rank
//! 0's sends before rank 8's), and max-min filling freezes links of equal
//! share by link id, subtracting rates in that order. (A third was: a
//! GPU's reductions posted at one picosecond were served in the order of
//! those events; NCCL channels' ones are now served in channel order,
//! see the world's `compute` module and PAT below.) Where flows of
//! different orbit copies meet on one port at the same picosecond (a
//! pairwise alltoall on the packet-level fat-tree), the full run's ranks
//! of one orbit already finish up to a few packets apart and the folded
//! run gives one such timeline; where a route crosses several links of
//! one orbit (an alltoall on a torus folded by rows), flow-model rates can
//! differ in their last bits, a few ps. Rings and the hierarchical
//! allreduce on the fat-tree match to the picosecond (see the tests in
//! `sim/tests/behaviour/fold.rs`, which also pin these limits).
//!
//! Symmetric routes are a modelling choice: ECMP then sends the rotated
//! copies of a flow over rotated paths (a perfectly spread hash), where
//! the unfolded default hashes each flow independently.
//!
//! **Uneven sizes.** A size whose elements do not split into equal
//! per-rank blocks cannot fold exactly: the first `count mod N` blocks
//! hold one element more, so the ranks of an orbit send messages of
//! different sizes and no rotation maps the run onto itself (a receive of
//! the wrong size would fail in the folded run). Validation refuses such a
//! size and names the nearest sizes that fold (multiples of `N` ranks
//! times the element size) and the unfolded run as the alternative.
//!
//! **Trees: which fold, and how.** The double binary tree (`tree`) is
//! not rank-shift symmetric, and NCCL's tree (`nccl_tree`) is symmetric
//! under a turn inside the nodes, not a shift:
//!
//! - `tree` is NCCL's `ncclGetBtree` over ranks in order: rank `i`'s
//!   partners depend on its lowest set bit, so no shift of the ranks maps
//!   the tree onto itself (only ranks in the same position of isomorphic
//!   subtrees behave alike, and only while their parents' timelines do).
//!   A folded run refuses it, naming what folds.
//! - `nccl_tree`: a channel enters each node at its own GPU and NIC, so a
//!   map that turns every node's GPUs *together with the channels* (and
//!   the rails) carries the run onto itself. The fold's rank map is a
//!   group action ([`RankAction`]): a shift, or any free permutation of
//!   the ranks (a turn inside every node), one representative per orbit
//!   simulated at its slot ([`fold_by`]). With a [`Rotation`] that
//!   permutes ranks ([`Rotation::permuting`]), an NCCL model whose plan
//!   turns with it ([`nccl_channel_turn`]: every channel's ring, tree,
//!   NICs and NIC proxies moved by the turn are another channel's) makes
//!   the action turn channels too: a message on channel `c` to rank
//!   `g^k(b)` is `b`'s on channel `t^-k(c)`, its tag turned back
//!   ([`RankAction::tag_back`]), and a framed route is the moved copy of
//!   its representative's (in a folded run: on the orbit
//!   representatives). `symmetry = "fold"` with `algorithm = "nccl_tree"`
//!   on a `fat_tree` folds this way, by a quarter of every node's GPUs
//!   (below; tests: `fold/nccl_tests.rs`, every rank's time and every
//!   link counter against the full run, flow and packet models, by the
//!   quarter and the half turn; `sim/tests/behaviour/fold_nccl.rs`,
//!   scenarios).
//!
//! **Which turn `nccl_tree` has.** Read off the plan `NcclSystem::build`
//! gives a fat-tree of DGX H100-style nodes (8 search channels, 16 at run
//! time, channels `0..8` on NCCL's first node-level tree and `8..16` on
//! the second), each channel's chain through a node is its entry GPU,
//! that GPU's PCIe-switch partner (the exit, next to the same NIC), then
//! the others in index order: `0 1 2 3 4 5 6 7`, `1 0 2 3 4 5 6 7`,
//! `2 3 4 5 6 7 0 1`, `3 2 4 5 6 7 0 1`, and so on. The GPU maps that
//! carry this set of chains onto itself are the turns by 2, 4 and 6 GPUs
//! (channel `c` to `c + 2` within its tree's block of 8, channel `c`'s NIC
//! to channel `c + 2`'s); no map takes channel 0 to an odd channel
//! (checked by hand for each: the image of channel 2's chain is no
//! chain). Of these only the turn by 4, which swaps the sockets, is a
//! symmetry of the whole node: the turn by 2 takes PCIe switch 0 (socket
//! 0) to switch 1 (socket 0) but switch 1 to switch 2 (socket 1), so no
//! image of the sockets fits ([`fat_tree_node_turn`](topologies::presets::fat_tree_node_turn)
//! refuses it naming the link). No route of the run crosses a socket
//! link, though: GPUs reach each other over NVLink, and their channel's
//! NIC through their own PCIe switch or a PXN proxy's. So the turn by 2
//! is a symmetry of every link the run crosses, and
//! [`fat_tree_partial_node_turn`](topologies::presets::fat_tree_partial_node_turn)
//! builds it as a partial rotation ([`Rotation::permuting_partial`]):
//! the sockets and their links stay in place, not carried
//! ([`Rotation::carries`]). `nccl_tree` folds by it, a quarter of every
//! node's GPUs simulated, channel `c` to `c + 2`, exactly (the same times
//! and link counters as the full run and as the half turn's fold).
//!
//! A route across an uncarried link has no moved copy, so it is refused
//! twice. Before the run, [`fold_by`] (and validation, which picks the
//! turn) builds every channel's route from each representative to its
//! tree and ring neighbours ([`nccl_routes_carried`]) and refuses naming
//! the channel, the ranks and the link. During any run with such a
//! rotation (folded, or `routes`), a route is refused as it is built
//! (`network::Routed::placed`): the run stops, the sender's call fails,
//! and `Execution::refused` names the ranks and the link (the study
//! reports it as that rank's error). On the presets neither fires; the
//! socket links' counters are zero in the full runs (tested). One GPU
//! per node would need channel chains that follow the node's own
//! symmetry (socket, then PCIe switch, then GPU: an odometer turn),
//! which is another search order and would change the unfolded plan.
//!
//! What the fold needs of a scenario, checked by validation (each refusal
//! says why and what to do): every collective an `nccl_tree` allreduce on
//! all ranks, phantom, no faults; a `fat_tree` with a turn by half a node
//! (even GPUs per node), folded by the quarter turn instead where there is
//! one (8 GPUs) and NCCL's channels turn with it and keep to the links it
//! carries (so on `h100`, `a100`, `hgx_h200`, `h20` and `hgx_b200` nodes;
//! `hgx_b300` nodes and two NICs per GPU turn by neither); at every size,
//! the channels NCCL runs the call on a set the turn maps onto itself (at
//! 512 KiB on 4 nodes NCCL runs 14 of 16, which neither turn does) and
//! the elements split into that many equal blocks (the nearest sizes that
//! do are named). `tuner = "nccl"` folds
//! by the node shift only (see below); `nccl_nvls_tree` folds by the
//! same turn with its heads (below). The turn carries `nccl_ring`'s channels too
//! (`nccl_channel_turn` checks the rings), but the ring folds by the
//! node shift instead (below), which simulates one node's GPUs, not a quarter
//! of every node's; the
//! 157 ns (0.1%) once seen between a turned `nccl_ring` and its full run
//! was, most likely, framed routes left unmoved (fixed with the PAT fold).
//!
//! **PAT folds by a shift of whole nodes** (`nccl_pat` allgather and
//! reduce-scatter): its
//! peers are `r ± 2^d` in rank order whatever the plan, and channel `k`
//! works on block `k` of every rank's block, so a shift of the ranks by
//! whole nodes maps the run onto itself with every channel kept, provided
//! each channel crosses every node through the same NIC (and PXN proxy)
//! moved ([`nccl_nics_shift`], checked by [`fold_by`] and validation).
//! The preset's own rotation (`fat_tree`: one node, or `nodes / k` nodes
//! with `k` leaves per rail) is the shift: one node's GPUs are simulated
//! for all. A framed message under a shift takes its sender's
//! representative's route on the same channel, moved (without NCCL's
//! plan, when NCCL's model cannot run PAT, as NCCL 2.21.5: the pair's
//! moved route), so folded and `symmetry = "routes"` runs agree. Tests
//! (`fold/nccl_pat_tests.rs`; `sim/tests/behaviour/fold_nccl.rs`): every
//! rank's finish and every link counter equal the full run's in the flow
//! and packet models, one and two leaves per rail; scenarios time as
//! their `routes` runs; `sim run --links-csv` the same to the byte at
//! 128 and 1024 GPUs (figures below). The reduce-scatter's reductions
//! tie: on 4 nodes, 8 of a GPU's 16 channels get their messages from the
//! next node at one picosecond (ranks 7, 15, 23, 31 at step 0), and the
//! world handles them in the event queue's order, which follows global
//! flow and rank numbers (three different orders on those four ranks).
//! A GPU serves its reductions one at a time; served in that order, ranks
//! one node apart finished up to 0.14% apart and no shift mapped even the
//! full run onto itself. Reductions posted at the same instant are served
//! in channel order instead, the same on every rank (the world's
//! `compute` module, with why that is no less like NCCL, whose channels
//! are separate thread blocks); the reduce-scatter then folds exactly,
//! tested as the allgather (flow model at two sizes, one and two leaves
//! per rail; packet model; scenarios against `routes`, 16 KiB chunks and
//! reductions at 200 GB/s, up to 4 MiB; NCCL 2.29.7's tuner picking PAT
//! on 16 single-GPU nodes). The flow-model tests fail without the
//! channel order. One limit is left: at 32 MiB with 16 KiB chunks on 8
//! nodes of two leaves per rail, the folded call ends 5 ps (of 1.73 ms)
//! before its `routes` run, with the old order as with the new, and
//! exactly with free reductions; not traced further (the engine test at
//! the same size and shift is exact).
//!
//! **The ring folds by the same shift** (`nccl_ring` allreduce,
//! allgather, reduce-scatter): NCCL's rings on the preset go through the
//! nodes in order, each node's GPUs in the channel's own order, so channel
//! `c`'s ring with every rank moved by a node is channel `c`'s ring read
//! from another start ([`nccl_rings_shift`], with the NIC check above,
//! used by [`fold_by`] for every shift with a plan, and by validation).
//! Rank `r`'s ring neighbours and segments (which follow ring positions)
//! are then `r + shift`'s moved. A moved ring that is another channel's
//! would need the shift to turn channel tags and routes, which it does
//! not: refused naming both channels. The segments must be equal: at
//! every size the channels NCCL runs the call on (fewer than 16 for some
//! sizes: a 4 MiB allgather on 4 nodes runs on 14) times the ranks must
//! divide the elements, else validation names the nearest sizes that fold.
//! Tests (`fold/nccl_ring_tests.rs`;
//! `sim/tests/behaviour/fold_nccl.rs`): every rank's finish and every link
//! counter equal the full run with symmetric routes, flow model on 4 and 8
//! nodes (one and two leaves per rail) at two sizes, packet model on 4
//! nodes, all three collectives; plans whose rings do not move are refused.
//! Measured (2026-12-03, release `sim`, `tools/bench_trees.sh --algorithms
//! nccl_ring --sizes 1G`, allreduce, flow model, one point at a time on
//! the shared 2 cores, load 4-5): 1024 GPUs folded 0.63 s and 39 MiB,
//! unfolded with the same routes (`routes`) 190.45 s and 591 MiB, both
//! 7 485.47 us simulated; 8192 GPUs folded 5.06 s and 124 MiB, 38 059.85
//! us simulated (unfolded not run: eight times the ranks of the 190 s
//! run, each with eight times the ring steps). At 128 GPUs and 1 GiB, `sim run
//! --links-csv` folded and `routes` give the same rows and the same link
//! CSV to the byte (0.18 s against 1.63 s).
//!
//! **`tuner = "nccl"` folds by the same shift where each choice does**:
//! for collectives that name no algorithm, validation builds NCCL's
//! model, runs its selection at every size and needs each choice to fold
//! by the shift (`nccl_ring`, with the segment check above, or
//! `nccl_pat`); a size where it picks another algorithm
//! (`nccl_tree` for a 16 MiB allreduce on 4 nodes) is refused naming the
//! size and the algorithm. A scenario folded by the node turn (some
//! collective names `nccl_tree`), or whose collectives all name their
//! algorithm, still refuses the tuner. Tested against `routes` runs
//! (`sim/tests/behaviour/fold_nccl.rs`: an allgather at 256 KiB and
//! 1 MiB, an allreduce at 64 MiB, on 4 nodes).

//! Unfolded, their cost is what the engine spends per message: each rank
//! streams its tree program (no per-rank list of `O(chunks)` operations),
//! and in the flow model every flow start or end recomputes the max-min
//! rates of its connected component. That component is small: counted
//! on 2026-12-02 (a temporary counter, `tree` at 512 GPUs and 256 MiB),
//! the 201 441 recomputations reached 18.5 flows and 73 links each on
//! average (those with nothing to recompute counted as 0), of which 2.8
//! flows changed rate; what grows with the size is the number of
//! recomputations. Profiled
//! (`perf`, release `sim`, `tree` at 512 GPUs and 1 GiB, flow model):
//! 58% of the run was the max-min filling (35% `MaxMin::allocate`, 23%
//! its heap's pops), the rest spread over the world's delivery, the
//! futures and the tree programs (2-5% each). Two exact savings went in:
//!
//! - **Successors inherit their rate** (see the flow model's
//!   [Successors](crate::network::flow#successors)): a message that
//!   takes over its pair's route from the flow that just ended keeps its
//!   rate without a recomputation. Tested against recomputing every
//!   change (random instances, `tree`, `pat`, `nccl_tree`, `nccl_pat`,
//!   `tuner = "nccl"`: every rank's finish and every link counter equal).
//!   It pays little for trees: a rank posts chunk `c + 1` to its parent
//!   only once both children's chunk `c + 1` arrived, which is rarely
//!   before chunk `c` has left (12% less CPU time at 512 GPUs, 1 GiB).
//! - **The filling stops once every flow is frozen**: most links of a
//!   tree are no bottleneck, and were popped from the heap only to be
//!   skipped (with the above, 27% less CPU time: 13.3 s to 9.7 s).
//!
//! Both give the same output to the byte (`cmp` against the binary
//! before them). What they do not change is the count: the time grows
//! with the messages (`2·K` chunks per rank and tree, `K` = size / 2 /
//! chunk) times the flows each recomputation visits, so 512 to 2048 GPUs
//! at 32 GiB (32 768 chunks per half) stay out of reach of a minute.
//! Measured with `tools/bench_trees.sh` (release `sim`, fat-tree of DGX
//! H100-style nodes, IB NDR, flow model, phantom payloads; before and
//! after run at the same time on a shared 2-core machine, load about 10,
//! so wall times are pessimistic; simulated times identical):
//!
//! | algorithm | GPUs | size | before: wall s, peak MiB | after: wall s, peak MiB | simulated |
//! | --- | --- | --- | --- | --- | --- |
//! | `tree` | 512 | 1 GiB | 62.2, 38 | 45.2, 39 | 34 485.49 us |
//! | `tree` | 512 | 32 GiB | > 120 | > 120 | - |
//! | `tree` | 2048 | 1 GiB | > 120 | > 120 | - |
//! | `tree` | 2048 | 32 GiB | > 120 | > 120 | - |
//! | `nccl_tree` | 512 | 1 GiB | > 120 | > 120 | - |
//! | `nccl_tree` | 512 | 32 GiB | > 120 | > 120 | - |
//! | `nccl_tree` | 2048 | 1 GiB | > 120 | > 120 | - |
//! | `nccl_tree` | 2048 | 32 GiB | > 120 | > 120 | - |
//! | `pat` allgather, folded | 512 | 1 GiB | 0.79, 33 | 0.43, 33 | 32 336.34 us |
//! | `pat` allgather, folded | 512 | 32 GiB | 8.40, 108 | 7.15, 115 | 1 034 960.29 us |
//! | `pat` allgather, folded | 2048 | 1 GiB | 1.03, 53 | 1.17, 51 | 27 021.89 us |
//! | `pat` allgather, folded | 2048 | 32 GiB | 8.26, 121 | 7.99, 121 | 865 250.46 us |
//! | `nccl_pat` allgather | 512 | 1 GiB | 52.8, 231 | 45.6, 231 | 81 788.46 us |
//! | `nccl_pat` allgather | 512 | 32 GiB | > 120 | > 120 | - |
//! | `nccl_pat` allgather | 2048 | 1 GiB | > 120 | > 120 | - |
//! | `nccl_pat` allgather | 2048 | 32 GiB | refused | refused | - |
//!
//! (2026-12-02; `pat` folds by one node exactly, so it meets the target
//! already; `nccl_pat` did not fold then (it does now, see below), and at
//! 2048 GPUs and 32 GiB validation refuses it in 0.4 s: 1.32·10^9
//! messages, over the 2^30 cap, the error naming a larger `chunk_bytes`,
//! fewer iterations or fewer ranks. User CPU
//! seconds of `tree` at 512 GPUs, 1 GiB, each binary run on its own:
//! 13.2-13.5 s before, 9.7 s after.)
//!
//! Measured again later that day with `tools/bench_trees.sh` extended to
//! NVLS-Tree and PAT (`nccl_nvls_tree` allreduce, `nccl_pat` allgather),
//! a 60 s timeout per point (the target), load 6-12 on the 2 cores:
//!
//! | algorithm | 512 GPUs, 32 GiB | 2048 GPUs, 32 GiB | 512 GPUs, 1 GiB (timeout 120 s): wall s, peak MiB, simulated |
//! | --- | --- | --- | --- |
//! | `tree` | > 60 | > 60 | 32.2, 39, 34 485.49 us |
//! | `nccl_tree` | > 60 | > 60 | > 120 |
//! | `nccl_nvls_tree` | > 60 | > 60 | > 120 |
//! | `nccl_pat` allgather | > 60 | refused in 0.48 s (1.32·10^9 messages) | 5.40, 233, 81 788.46 us |
//!
//! The cap's refusal now also says what a fold would do: an algorithm
//! that folds is told to set `symmetry = "fold"`, one that does not (the
//! trees, NCCL's algorithms) gets the list of the collectives that fold,
//! the catalogue's `pat` allgather and reduce-scatter among them (which
//! meets the target folded, above), and `nccl_pat` is told it folds by a
//! node shift.
//!
//! **`nccl_pat` allgather folded by the node shift** (2026-12-03,
//! `tools/bench_trees.sh --algorithms nccl_pat --nodes "64 256" --sizes
//! "1G 32G" --timeout 60`, before: the parent commit's binary unfolded
//! (it refused the fold), after: `--symmetry fold`; run one after the
//! other, load 5-7 on the shared 2 cores, other helpers building; a
//! second round at load 2: folded 0.05, 0.66, 0.09 and 0.62 s, the same
//! simulated times; unfolded 512 GPUs at 1 GiB 1.86 s before and 1.58 s
//! after, 81 788.46 us both):
//!
//! | GPUs | size | before: wall s, peak MiB, simulated | after, folded: wall s, peak MiB, simulated |
//! | --- | --- | --- | --- |
//! | 512 | 1 GiB | 12.66, 231, 81 788.46 us | 0.07, 33, 32 101.87 us |
//! | 512 | 32 GiB | > 60; 63.61, 4507, 2 831 772.21 us at load 2 | 0.45, 121, 1 027 773.73 us |
//! | 2048 | 1 GiB | > 60; 33.43, 1672, 79 940.39 us at load 2 | 0.06, 61, 26 775.42 us |
//! | 2048 | 32 GiB | refused: 1.32·10^9 messages, over the cap | 0.46, 131, 857 968.27 us |
//!
//! The simulated times differ because the routes do: the unfolded default
//! hashes each flow's ECMP path (cross-leaf flows collide on spines),
//! the fold needs symmetric routes. Against the same routes
//! (`symmetry = "routes"`, unfolded, after) the fold is exact: 512 GPUs
//! at 1 GiB 32 101.87 us both (5.35 s and 235 MiB unfolded, 0.07 s and
//! 34 MiB folded; output the same but for the header), 1024 GPUs at
//! 1 GiB 32 850.39 us both (3.62 s, 538 MiB unfolded; 0.12 s, 39 MiB
//! folded) and 128 GPUs at 4 GiB 129 362.64 us both, `--links-csv` the
//! same to the byte at both. To time
//! hashed ECMP, the unfolded run is still the answer.
//!
//! **`nccl_pat` reduce-scatter folded by the node shift** (2026-12-03,
//! release `sim`, `tools/bench_trees.sh --algorithms nccl_pat --kind
//! reduce_scatter --symmetry fold --nodes "64 256" --sizes "1G 32G"`,
//! then the same with `--reduce-gbps 200` (reductions at 200 GB/s per
//! GPU, the engine tests' rate, not a measured one), and the allgather
//! right after; one point at a time, load 6-7 on the shared 2 cores):
//!
//! | GPUs | size | free reductions: wall s, peak MiB, simulated | 200 GB/s: wall s, peak MiB, simulated | allgather: wall s, peak MiB |
//! | --- | --- | --- | --- | --- |
//! | 512 | 1 GiB | 0.08, 33, 33 218.21 us | 0.05, 33, 33 209.67 us | 0.03, 33 |
//! | 512 | 32 GiB | 0.94, 119, 1 065 720.55 us | 0.72, 119, 1 065 453.95 us | 0.65, 121 |
//! | 2048 | 1 GiB | 0.10, 59, 30 079.70 us | 0.10, 59, 30 039.27 us | 0.09, 61 |
//! | 2048 | 32 GiB | 0.66, 127, 962 380.62 us | 0.94, 131, 960 518.48 us | 0.67, 131 |
//!
//! (With reductions the calls end slightly earlier: staggered by the
//! GPU's queue, the channels' next messages meet less on the links.)
//! Against `routes`, reductions at 200 GB/s: 128 and 512 GPUs at 1 GiB
//! 32 578.41 and 33 209.67 us both, the rows and `--links-csv` the same to
//! the byte (512 GPUs: 0.07 s and 34 MiB folded, 6.61 s and 234 MiB
//! unfolded). Before the channel order, the same `routes` runs gave
//! 32 579.90 and 33 246.04 us.
//!
//! Where the time goes (release `sim`, `tree` allreduce, same fat-tree,
//! one run at a time): 64, 128, 256 and 512 GPUs at 256 MiB take 0.15,
//! 0.30, 0.88 and 3.33 s; 64 GPUs at 256 MiB and at 2 GiB 0.15 and
//! 0.97 s. The time is the messages (linear in the size and in the
//! ranks) times a cost per message that itself grows with the ranks from
//! about 256 GPUs on: the max-min recomputation of the one component
//! (`perf` at 512 GPUs, 256 MiB: 33% in `FlowNetwork::handle`, where the
//! filling is inlined, and 12% in its heap's pops). Extrapolated, `tree`
//! at 512 GPUs and 32 GiB takes about 3.33 s x 128 = 7 min, and 2048 GPUs
//! about 16 times that. A recomputation that cost nothing would still
//! leave the per-message work of the small runs, about 0.15 s per 64 GPUs
//! and 256 MiB: some 2.5 min at 512 GPUs and 10 min at 2048 GPUs for
//! 32 GiB. `nccl_pat` already costs about 0.6 us per message (5.4 s for
//! 1 GiB at 512 GPUs; its profile is spread over the flow model, 18%,
//! page clearing, 12%, and `join_all`'s polling of every channel's
//! future, 9%), so its 32 GiB at 512 GPUs is about 3 min. Neither a
//! faster filling (the incremental ideas weighed: aggregating flows with
//! identical routes, which a tree's pairs never share; pruning links that
//! cannot saturate, which the fat-tree's shared PCIe and leaf uplinks can;
//! restarting the filling at the changed flow's level, which saves at
//! most the flows below it, about half) nor a cheaper event reaches a
//! minute: the target needs fewer simulated messages.
//!
//! `nccl_nvls_tree` is dearer per message than the others: its max-min
//! component over the nodes is large (the heads' tree messages join the
//! nodes), so the filling and its heap take over half the time (`perf`,
//! 512 GPUs, 64 MiB, 2026-12-03). Counted on folded 512 GPUs, 1 GiB
//! (2026-12-04, the flow model's `reallocations` and
//! `reallocation_work`, release build): `nccl_nvls_tree` recomputes
//! 1 338 053 times visiting 939.8 M (flow, link) incidences,
//! `nccl_tree` 305 872 times and 178.7 M. The legs to and from the
//! NVSwitch are not the cost: each crosses one NVLink, so each link's
//! legs are a component of their own, and the 1.09 M recomputations
//! that touch only such links (the legs' starts and ends) or none visit
//! 14.0 M incidences in all. The other 243 114, those of the tree
//! messages over IB, visit 925.7 M, 3 808 each on average
//! (`nccl_tree`: 239 214 visiting 747 each): about as many changes as
//! `nccl_tree`, in a component five times its size, every GPU a head
//! with its own NIC carrying both trees' edges (`nccl_tree` sends two
//! channels per NIC between nodes). Only a cheaper filling of that
//! component (the flow model) shortens it exactly; the world's
//! in-network bookkeeping (groups numbered once instead of a key built,
//! and in a folded run sorted, per look-up; the legs' routes and a
//! multicast's moved groups built once) was 5-8% of the samples but
//! saved no measurable time (user CPU 19.77, 18.16, 18.21 s before;
//! 19.03, 17.86, 18.20 s after, alternated, load 1.6-2.5; 2048 GPUs,
//! 1 GiB: 187.06 s before, 177.52 s after, one run each, the same
//! output). It used to post all of a rank's node reductions and
//! multicasts at once, so memory grew with the size (3.9 GB at 512 GPUs
//! and 1 GiB); it now keeps NCCL's 8 units in flight per channel and head
//! in the node and on every tree edge (credits, see `nccl/nvls_tree.rs`),
//! and memory no longer grows with the size (figures below).
//!
//! **NVLS-Tree folds by the node turn with its heads.** Channel `k`'s
//! head `h` (tag channel `k p + h`) reduces unit `h` of every loop in the
//! node's NVSwitch and carries it over the tree between the nodes' heads
//! `h`; the tree is over nodes, so a turn of every node's GPUs by `t`
//! maps head `h`'s role onto head `h + t`'s, provided the tags turn with
//! it ([`RankAction::with_tag_turn`],
//! [`algorithms::nccl::nvls_tree::head_turn`]) and every head gets the
//! same units (each channel's block a multiple of `p`). No shift of nodes
//! does (the double binary tree is no shift of itself). The quarter turn
//! is the largest the presets have (the one `nccl_tree` folds by; a turn
//! by one GPU moves the PCIe switches' GPU pairs apart). It needs no turn
//! of NCCL's channels (nothing is framed), so `h100`, `hgx_h200`,
//! `hgx_b200` and `hgx_b300` nodes all fold by it (tested).
//!
//! In-network calls in a folded run (the world's `in_network` module):
//! each representative's contribution, moved back to its orbit's
//! canonical call, stands for one member of that gather, which completes
//! when all its members' moved contributions are in; its result goes down
//! to the representative of its receiver as that representative's own
//! call, on its own flow; a multicast's copy to member `g^k(b)` goes to
//! `b`, its group and tag moved back. Legs cross the orbit
//! representatives of their links, so the NVLink and NVSwitch counters
//! come out as the full run's. A call a step of the fold keeps (its group
//! and tag both fixed) is refused, naming them, and stops the run.
//!
//! Two engine rules make the full run itself a turn of itself, as NCCL
//! is: a member's legs of different calls (tags) are flows of their own
//! (NCCL's scatter posts a slice to every head at once; FIFO in the
//! heads' order served head 0 first on every GPU), and the results a
//! switch sends at one instant go down at its end in the receiver's own
//! order (place in the call from its source or root, tag, ticket), not
//! in the order their events fired. Both changed unfolded NVLS-Tree
//! times (see the commit); NVLS and CollNet keep one tag per call.
//! Tested (`fold/nccl_nvls_tests.rs`, 2 and 3 nodes, quarter and half
//! turn; `sim/tests/behaviour/fold_nccl.rs`): every rank's finish and
//! every link counter equal the full run with the same (turned) routes,
//! flow model. The packet model's ports serve a GPU's flows to the heads
//! in the order they started, the heads' order on every GPU, which no
//! turn keeps: validation refuses it, naming the flow model. Unfolded
//! runs without `symmetry` hash each head's inter-node flows to one of
//! its PCIe switch's NICs, so they may differ from the folded run's
//! turned routes (2.5% on 2 nodes at 1 MiB).
//!
//! Measured (2026-12-03, release `sim`, `tools/bench_trees.sh --algorithms
//! nccl_nvls_tree`, flow model, one point at a time, load 2.7-3.8; wall
//! s, peak MiB, simulated us):
//!
//! | GPUs | size | unfolded (hashed routes) | folded by the quarter turn |
//! | --- | --- | --- | --- |
//! | 64 | 1 GiB | 6.26, 33, 10 579.50 | 1.03, 19, 10 578.23 |
//! | 512 | 1 GiB | 107.84, 116, 11 522.18 | 33.43, 61, 10 805.69 |
//! | 64 | 32 GiB | - | 16.45, 19, 339 179.50 |
//! | 512 | 32 GiB | - (35-70 min, above) | > 600 |
//!
//! 3-6x less wall time and half the memory; 512 GPUs at 32 GiB is still
//! some 18 min (32 x the 1 GiB point): the max-min filling of the nodes'
//! large components, each GPU's legs to eight heads at once, is the cost.
//!
//! `nccl_tree` folded by the node turn (half of every node's GPUs
//! simulated), measured with `tools/bench_trees.sh --algorithms
//! "nccl_tree nccl_nvls_tree" --symmetry fold --timeout 120` (release
//! `sim` of commit 39398a4, the fold's first scenario commit; load 10-12
//! on the shared 2 cores, so wall times are pessimistic):
//!
//! | GPUs | size | unfolded: wall s, peak MiB | folded: wall s, peak MiB | simulated |
//! | --- | --- | --- | --- | --- |
//! | 64 | 256 MiB | 1.92, 33 | 0.58, 31 | 1 661.54 us, both |
//! | 512 | 1 GiB | > 120; 430.7, 87 with a 900 s limit (beside a cargo build) | 42.9 and 59.4 (two runs), 63 | 6 891.97 us, both |
//! | 512 | 32 GiB | > 120 | > 120 | - |
//! | 2048 | 1 GiB | > 120 | > 120 | - |
//! | 2048 | 32 GiB | > 120 | > 120 | - |
//!
//! The fold by 2 saves more than half (3.3x at 64 GPUs: each max-min
//! component has half the flows as well), but the target is still far:
//! 32 GiB is 32 times the 1 GiB point.
//!
//! **A cheaper filling** (2026-12-02, exact; see the `maxmin` module's
//! Cost and Dominated links): the routes of a component are copied once
//! by the search, the heap is built in one go, a stale key replaces the
//! heap's top instead of a pop and a push, and a link that only one flow
//! of the component crosses is left out of the heap unless it is that
//! route's narrowest (it could only be popped to be skipped). A test
//! compares, after every recomputation of random flow sets, each active
//! flow's rate with a filling of all flows over all links, bit for bit.
//! `sim run` output is the same to the byte as before (`cmp`: `tree` at
//! 512 GPUs, 256 MiB and 1 GiB; `nccl_tree` and `nccl_nvls_tree` at 512
//! GPUs, 64 MiB; `nccl_pat` allgather at 512 GPUs, 1 GiB). User CPU
//! seconds, before and after, each run alone in turn on the shared 2
//! cores (load 5-7): `tree` 512 GPUs 256 MiB 2.58 and 2.85 to 2.23 and
//! 2.24; `tree` 1 GiB 12.2-13.5 to 10.0-11.7 (an earlier build, without
//! the smaller flow marks); `nccl_nvls_tree` 64 MiB 7.52 to 6.20;
//! `nccl_pat` 1 GiB 3.11 to 2.71. `tools/bench_trees.sh --nodes 64` with
//! the binary before and after, one after the other (wall s, peak MiB;
//! simulated times equal):
//!
//! | algorithm | size | before | after |
//! | --- | --- | --- | --- |
//! | `tree` | 1 GiB | 13.43, 39 | 11.75, 39 |
//! | `nccl_pat` allgather | 1 GiB | 3.99, 231 | 4.10, 229 |
//! | `nccl_tree` | 64 MiB | 14.59, 72 | 11.07, 73 |
//! | `nccl_nvls_tree` | 64 MiB | 7.31, 301 | 8.45, 299 |
//!
//! (Wall times on the shared machine move by more than the change for
//! the short points; the CPU seconds above are the better measure.)
//! 13-21% less CPU is far from the target: `tree` at 512 GPUs
//! and 32 GiB is still about 32 x 11 s, six minutes. `perf` after the
//! change (`tree`, 512 GPUs, 256 MiB, without the smaller flow marks):
//! `MaxMin::allocate` 23% (mostly its search's marks: cache misses), the
//! heap's pops 7%, `FlowNetwork::handle` 8%, the rest the per-message
//! work of the world, the futures, routing and the tree programs.
//!
//! `nccl_tree` folded by the turn grew faster than its size (2026-12-03,
//! 512 GPUs, user CPU s: 16, 32, 64 and 128 MiB took 0.78, 1.08, 3.13
//! and 17.0 s; LL128, 16 channels). The heap whose pops took 26% at
//! 128 MiB was not the filling's but the event queue's overflow, full of
//! outdated flow finishes: a recomputation moves the finish of every flow
//! of its component whose rate changed, larger sizes keep more flows in
//! one component (43 per recomputation at 64 MiB, 87 at 128, 116 at 256),
//! and each move left the old finish to be popped and ignored (9.4
//! million outdated against 0.96 million real at 128 MiB, up to 86 000
//! waiting). Finishes are now keyed events moved in place
//! (`crate::event`), and pending receives a slab with a compact per-rank
//! list, a receive woken for another's message skipping the mailbox.
//! Output the same to the byte (`scenarios/*.toml`, presets, tree points,
//! `--links-csv`). `tools/bench_trees.sh --nodes 64`, before/after
//! alternated (wall s; load 2.3-3.3): folded `nccl_tree` 16, 64, 128, 256, 512 MiB, 1 and
//! 2 GiB 1.81/1.56, 4.72/4.45, 22.97/13.71, 31.27/14.53, 6.97/6.22,
//! 30.75/16.62, 53.60/28.27 (55-65 MiB; Simple, larger units, from
//! 512 MiB); unfolded `tree` 1 GiB 11.54/11.80 (small components:
//! unchanged); `nccl_nvls_tree` 1 GiB 208.3/137.9 (3.9 GB both).
//! `perf` at 1 GiB folded: flow model ~45% (filling 28%), world and futures the rest.
//!
//! **Later that day** (release `sim`, load 2-3, before/after
//! alternated; folded `nccl_tree` at 512 GPUs then took 4.1 s for 1 GiB,
//! the 16.6 s above not re-traced): joins now poll only woken branches
//! (`algorithms::branches`: `join_all` of up to 30 futures polled all 16
//! channels per delivery), in the same order, so the same operations in
//! the same order: `scenarios/*.toml` (stdout, `--links-csv`) and six
//! bench points the same to the byte; user CPU s, folded `nccl_tree` 512
//! GPUs, 1 GiB 4.00, 4.07 / 3.67, 3.67, 2 GiB 8.35, 8.49 / 7.85, 7.63
//! (8-10% less). Then `tools/bench_trees.sh`: folded `nccl_tree` 512
//! GPUs 1 GiB 3.90 s, **32 GiB 113 s**, 66 MiB both; 2048 GPUs 1 GiB
//! 45.1 s, 172 MiB (32 GiB about 24 min, extrapolated).
//!
//! **Folded by a quarter of a node** (the partial turn by 2 above;
//! 2026-12-03, release `sim`, `tools/bench_trees.sh --algorithms
//! nccl_tree --symmetry fold --nodes "64 256" --sizes "1G 32G"`, the
//! parent commit's binary (half turn) and this one's (quarter), one point
//! at a time, alternated, load 3.5-6 from other builds on the 2 cores;
//! wall s, peak MiB):
//!
//! | GPUs | size | half turn | quarter turn | simulated, both |
//! | --- | --- | --- | --- | --- |
//! | 512 | 1 GiB | 12.72, 66 | 6.15, 53 | 6 891.97 us |
//! | 512 | 32 GiB | 316.95, 69 | 118.35, 54 | 180 255.09 us |
//! | 2048 | 1 GiB | 149.31, 171 | 71.66, 107 | 7 254.70 us |
//! | 2048 | 32 GiB | > 300 | > 300 | - |
//!
//! 2.1-2.7x less wall time (half the ranks and flows again, each max-min
//! component smaller), memory well under 2 GB, and the same simulated
//! times; the target (a minute at 32 GiB) is still 2x away at 512 GPUs
//! and about 20x at 2048 (32 x 72 s is some 38 min at this load).
//!
//! **Cheaper per message** (2026-12-03, exact: `sim run` stdout and
//! `--links-csv` the same to the byte): the filling's sorted keys and
//! unrecomputed departures (above), and the executor's ready queue seen
//! empty without its lock. User CPU s, base and new binaries alternated
//! (load 2.5-4 on the shared 2 cores; wall times moved by more than the
//! change): folded `nccl_tree`, 2048 GPUs, 1 GiB: 30.9, 37.4 / 22.4, 29.9;
//! 512 GPUs, 1 GiB, mean of five: 2.69 / 2.51 with the sorted keys
//! alone (heap pops 9.2% of the 4 GiB profile before, the sort 3.1%
//! after). `tools/bench_trees.sh --algorithms nccl_tree --symmetry fold`
//! at load 1 (wall s): 2048 GPUs, 1 GiB 29.79, 28.98 / 25.21, 22.03
//! (108 MiB); 512 GPUs, 32 GiB 86.16 / 93.00 (one run each, 55 MiB,
//! 180 255.09 us both; same-binary runs at 4 GiB moved by 30%, so no
//! gain shows at 512 GPUs): still 1.5x from a minute. What is
//! left per message is spread (the world's delivery, 12%, mostly a cache
//! miss on the in-flight message; the trees' futures; the event queue's
//! keyed finishes).
//!
//! **`nccl_nvls_tree` memory** (model changes; see `nccl/nvls_tree.rs`):
//! posting all of a rank's node reductions and multicasts at once took
//! 3 910 MiB at 512 GPUs and 1 GiB (13 199.28 us simulated); NCCL's 8
//! units in flight per channel and head in the node took it to 122 MiB
//! (11 337.16 us), but memory still grew about 50 MiB per GiB: the
//! heads' sends up and down the tree were eager and had no credits, so
//! a head whose node sums came faster than its NIC drained them queued
//! its share in the network. With NCCL's 8 slots on every tree edge too,
//! memory is flat in the size (`tools/bench_trees.sh --nodes 64
//! --algorithms nccl_nvls_tree`, release `sim` of fe3153e before, after;
//! alternated, load 4-5, 2026-12-03; wall s, peak MiB, simulated us):
//!
//! | size | before | after |
//! | --- | --- | --- |
//! | 1 GiB | 130.7, 137, 11 337.16 | 128.4, 110, 11 993.90 |
//! | 2 GiB | 271.5, 184, 22 632.48 | 339.4, 109, 23 984.63 |
//! | 4 GiB | 607.1, 287, 45 227.11 | 508.1, 109, 48 006.13 |
//!
//! The credits make the call about 6% longer (the tree's edges now
//! throttle the node's reductions, as NCCL's do). 32 GiB should hold in
//! about 110 MiB but take 35-70 min, extrapolated (4 GiB took 288 s at
//! load 2-3 before this change, 508 s here): the max-min filling of its
//! large components is the cost (below).
//!
//! What would reach the target, and what it needs (folded `nccl_tree`
//! by the quarter turn at 512 GPUs is within 2x of a minute at 32 GiB;
//! 2048 GPUs and folded `nccl_nvls_tree` are 20x away):
//! - **A cheaper max-min filling for large components**: `nccl_nvls_tree`
//!   spends over half its time there; folded `nccl_tree` at 2048 GPUs
//!   spent 60% (64% of the flows visited were in components of 1 000 to
//!   2 000 flows, refilled whole at every change). In now, exact: sorted
//!   keys instead of heap pops (the `maxmin` module) and departures that
//!   change no rate left unrecomputed (the flow model's Departures).
//!   Restarting the filling at the changed flow's level saves only the
//!   flows below it, and these components hold one or two levels.
//!   What a recomputation of such a component spends now (2026-12-04,
//!   `perf record` of release `sim`, folded `nccl_tree`, 2048 GPUs,
//!   256 MiB, 1 815.07 us simulated; `perf annotate` of
//!   `FlowNetwork::handle`, where the allocator is inlined, 49% of the
//!   samples): mostly the component's search, not its filling. The
//!   search's loads miss the cache: each reached flow's route through
//!   its slot (12% of all samples on the route's links, most of another
//!   11% not attributed to a line), the flows' and links' marks (7.5%
//!   and 5%), each link's flow list (4%); the filling
//!   proper is under 10%, the sort of its keys 6.5% (`smallsort`,
//!   `quicksort`), `reallocate`'s loop over the new rates 5% (again one
//!   slot per flow). Tried and dropped, for no gain measurable
//!   (user CPU s, base / tried, alternated, load 5-7 from other
//!   builds: 2048 GPUs, 256 MiB 51.9, 45.9, 50.1 / 52.0, 42.7, 51.2;
//!   512 GPUs, 1 GiB 3.43, 3.37, 3.14, 3.21 / 3.12, 3.29, 3.13, 3.52;
//!   simulated times the same): every flow's route copied at its start
//!   into one 64-byte entry per flow id for the search, and the search
//!   in passes of independent loads (marks, routes, links). The miss
//!   moved to that entry (17% of the samples) rather than going: the
//!   search touches every flow of the component at every change, and
//!   the routes of that many flows do not stay cached from one change
//!   to the next. What would help: not searching the component at
//!   every change (keeping its flows and links between recomputations,
//!   updated by the starts and ends, in the order a search would reach
//!   them, since the finishes of one picosecond are queued in that
//!   order and the order reaches the output), or fewer recomputations.
//! - **Folding by more** (`nccl_tree`): by a quarter of a node now (see
//!   "Which turn `nccl_tree` has" above); one GPU per node needs another
//!   channel order; `nccl_nvls_tree` folds by the quarter turn too.
//! - **Exact steady-state skipping** (a pipeline whose whole state repeats
//!   shifted by one chunk period): the flow model's state can be compared
//!   (flows, remaining bytes, pending events relative to now), but the
//!   ranks' programs are `async` functions whose state lives in their
//!   futures; skipping needs each program's position as data (as the
//!   tree's generated program already almost is: a `Program` iterator
//!   per rank) and the world's pending receives and timers as data, so
//!   that "the same state, one chunk later" can be checked, never
//!   assumed.
//! - **Identical-subtree collapsing** for `tree`: ranks in the same
//!   position of isomorphic subtrees share a timeline only while their
//!   parents' do, and on a fat-tree their links are shared with other
//!   subtrees; it needs the same per-rank state as data to verify.
//! - What is left per message once the filling is cheap is memory-bound:
//!   `World::deliver` (11% at 1 GiB folded) stalls on the in-flight
//!   slab's slot and the mailbox's hash bucket (cache misses).

mod action;
mod channels;

use std::sync::Arc;

use topologies::Rotation;

pub use action::RankAction;
pub use channels::{nccl_channel_turn, nccl_nics_shift, nccl_rings_shift, nccl_routes_carried};

use crate::network::{ModelLevel, NetworkConfig};
use crate::world::WorldConfig;

/// Why a run cannot be folded.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("cannot fold the run: {0}")]
pub struct FoldError(pub String);

/// Makes `config` a folded run of ranks `0..shift`. On a topology, the
/// network config must carry a [`Rotation`] by `shift` of all
/// `world_size` ranks (its routes become symmetric); at packet level
/// every link must move with every step, at flow level a link with a
/// shorter orbit is weighed (see the module docs); ideal links need
/// nothing. Refused: a shift that
/// does not divide the world, rank faults and link faults. The link
/// counters and timeline come out as the full run's: each link direction
/// gets its orbit representative's.
pub fn fold(config: &mut WorldConfig, shift: usize) -> Result<(), FoldError> {
    let action = RankAction::shift(config.world_size, shift).map_err(FoldError)?;
    fold_by(config, action)
}

/// Makes `config` a folded run by `action` (see [`RankAction`]): one
/// representative per orbit simulated, at its slot. [`fold`] is this with
/// [`RankAction::shift`]. A permutation that is not a shift folds ideal
/// links (alike for every pair), or a topology whose rotation permutes
/// the ranks the same way ([`Rotation::permuting`], such as
/// [`fat_tree_node_turn`](topologies::presets::fat_tree_node_turn)); with
/// an NCCL model the channels must turn with it
/// ([`nccl_channel_turn`]), and the action then turns them too (with a
/// partial rotation, their routes from the representatives must keep to
/// the links it carries, [`nccl_routes_carried`]); under a
/// shift the channels stay, and each one's NICs and ring must move with
/// the nodes ([`nccl_rings_shift`]; exact for PAT, whose peers are a
/// shift, and for `nccl_ring`, which follows the rings).
/// Refused: an action on another number of ranks than the world's or
/// that is not the rotation's, a channel plan that does not turn (or
/// whose NICs do not shift, or whose routes cross a link the rotation
/// does not carry), NCCL launch skew (one process driving
/// several GPUs), rank faults, link faults, and what [`fold`] refuses on
/// a topology.
pub fn fold_by(config: &mut WorldConfig, action: RankAction) -> Result<(), FoldError> {
    let n = config.world_size;
    let refuse = |why: String| Err(FoldError(why));
    if action.ranks() != n {
        return refuse(format!(
            "the fold acts on {} ranks; the world has {n}",
            action.ranks()
        ));
    }
    if !config.faults.crashes.is_empty() || !config.faults.compute_slowdown.is_empty() {
        return refuse("rank faults (crashes, slow ranks) break the symmetry".into());
    }
    if let NetworkConfig::Topology(t) = &mut config.network {
        let Some(rotation) = t.rotation.clone() else {
            return refuse("the topology has no rotation to fold by".into());
        };
        match (action.as_shift(), rotation.rank_images()) {
            (Some(shift), None) => check_rotation(&rotation, n, shift)?,
            (None, Some(_)) => {
                if rotation.ranks() != n
                    || (0..n).any(|r| rotation.rank_image(r) != action.apply(r, 1))
                {
                    return refuse(
                        "the topology's rotation permutes the ranks otherwise than the fold".into(),
                    );
                }
            }
            (Some(_), Some(_)) => {
                return refuse(
                    "the topology's rotation permutes ranks, and this fold shifts them".into(),
                );
            }
            (None, None) => {
                return refuse(
                    "the topology's rotation shifts ranks, and this fold permutes them otherwise"
                        .into(),
                );
            }
        }
        if !t.changes.is_empty() {
            return refuse("link faults break the symmetry".into());
        }
        if t.level == ModelLevel::Packet {
            // Packets queue one by one: a link several copies of a flow
            // share cannot stand for them.
            let orbits = rotation
                .link_orbits(&t.topology)
                .map_err(|e| FoldError(format!("{e} (packet model)")))?;
            t.folded_links = Some(Arc::from(orbits));
        } else {
            let orbits = rotation.link_orbit_sizes(&t.topology);
            let order = rotation.order();
            // A link a partial rotation does not carry is its own orbit and
            // carries nothing (no moved route may cross it): weight 1.
            let weights: Vec<u32> = orbits
                .iter()
                .map(|&(l, members)| match rotation.carries(l) {
                    true => u32::try_from(order / members).unwrap_or(u32::MAX),
                    false => 1,
                })
                .collect();
            t.folded_links = Some(orbits.iter().map(|&(l, _)| l).collect());
            t.folded_weights = weights.iter().any(|&w| w > 1).then(|| Arc::from(weights));
        }
    }
    let mut action = action;
    if let (Some(nccl), NetworkConfig::Topology(t)) = (&config.nccl, &config.network)
        && let Some(rotation) = t.rotation.as_ref()
    {
        if nccl.config.launch.gpus_per_process > 1 {
            return refuse(
                "a process driving several GPUs starts them at different times, which no turn keeps"
                    .into(),
            );
        }
        if rotation.rank_images().is_some() && action.turns_tags() {
            // The algorithm turns its own tags (`nccl_nvls_tree`'s heads)
            // and sends nothing framed: NCCL's channels turn framed routes
            // only, so they are attached where they turn and not needed
            // otherwise. Its plain routes are checked as they are built.
            if let Ok(turn) = nccl_channel_turn(nccl, rotation) {
                action = action.with_channels(turn).map_err(FoldError)?;
            }
        } else if rotation.rank_images().is_some() {
            let turn = nccl_channel_turn(nccl, rotation).map_err(|e| {
                FoldError(format!("NCCL's channels do not turn with the GPUs: {e}"))
            })?;
            action = action.with_channels(turn).map_err(FoldError)?;
            // A partial turn: every channel's routes from the
            // representatives must keep to the links it carries.
            let mut router = t.router.lock().expect("a run never panics while routing");
            nccl_routes_carried(nccl, rotation, &action, &mut router, &t.placement)
                .map_err(FoldError)?;
        } else {
            // A shift keeps every channel: its NICs and its ring must move
            // with the nodes (the ring for `nccl_ring`, which follows it;
            // PAT's peers are a shift whatever the rings, but this has no
            // algorithm in hand, and the presets' rings do shift).
            nccl_rings_shift(nccl, rotation).map_err(|e| {
                FoldError(format!("NCCL's channels do not move with the shift: {e}"))
            })?;
        }
    }
    config.fold = Some(action);
    Ok(())
}

/// Checks that `rotation` rotates all `n` ranks by `shift`.
fn check_rotation(rotation: &Rotation, n: usize, shift: usize) -> Result<(), FoldError> {
    if rotation.ranks() != n || rotation.shift() != shift {
        return Err(FoldError(format!(
            "the topology's rotation moves {} ranks by {}; the fold needs {n} ranks by {shift}",
            rotation.ranks(),
            rotation.shift()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod nccl_tests;

#[cfg(test)]
mod nccl_pat_tests;

#[cfg(test)]
mod nccl_ring_tests;

#[cfg(test)]
mod nccl_nvls_tests;
