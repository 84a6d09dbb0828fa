//! The speed of folded and unfolded collectives, measured: what each
//! exact saving bought, what was tried and dropped, and what would
//! bring trees at 512-2048 GPUs and 32 GiB under a minute. The design
//! of folding is in the parent [`fold`](super) module; the current
//! figures are in the README's "Trees at scale". Figures are wall
//! seconds of `tools/bench_trees.sh` (release `sim`) on a shared
//! 2-core machine unless said otherwise; the load is quoted because
//! it moves them by up to 3x.
//!
//! Unfolded, the trees' cost is what the engine spends per message: each rank
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
//!   "Which turn `nccl_tree` has" in the parent module); one GPU per node needs another
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
