//! What a folded run (`symmetry = "fold"`, see [`crate::fold`]) needs of
//! a scenario's collectives, and the advice of refusals that a fold could
//! avoid: which algorithms fold, which sizes fold, and when a run over the
//! message cap would fit folded.

use std::sync::Arc;

use algorithms::{Algorithm, Collective, RotationSymmetry};
use topologies::Rotation;

use super::raw::RawScenario;
use super::validate::Source;
use super::{CollectiveSpec, ScenarioError};

/// A folded run (`symmetry = "fold"`, see [`crate::fold`]) simulates one
/// orbit's representatives: every rank must do the same thing shifted.
/// Rank faults, injected mistakes and link faults break that; real data
/// would need every rank; a collective on fewer ranks or with a root is
/// not symmetric. Each refusal points at what breaks it.
pub(super) fn check_foldable(
    src: &Source,
    raw: &RawScenario,
    collectives: &[CollectiveSpec],
    world_size: usize,
    shift: usize,
) -> Result<(), ScenarioError> {
    let why = "a folded run (symmetry = \"fold\") simulates one node's ranks for all";
    if let Some(f) = raw.fault.first() {
        return Err(src.at(f, format!("{why}: rank faults break its symmetry")));
    }
    if let Some(i) = raw.inject.first() {
        return Err(src.at(i, format!("{why}: injected mistakes break its symmetry")));
    }
    if let Some(l) = raw.link_fault.first() {
        return Err(src.at(l, format!("{why}: link faults break its symmetry")));
    }
    for (raw_c, c) in raw.collective.iter().zip(collectives) {
        let problem = if !c.phantom {
            Some("it needs phantom = true (the folded ranks carry no real data)".to_string())
        } else if c.world_size != world_size {
            Some(format!(
                "it needs every collective on all {world_size} ranks, not {}",
                c.world_size
            ))
        } else if c.kind.has_root() {
            Some(format!(
                "{} has a root, which no rotation keeps",
                c.kind.name()
            ))
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(src.at(raw_c, format!("{why}: {problem}")));
        }
        let at_algorithm = |problem: String| {
            let r = raw_c.get_ref();
            let span = r.algorithm.as_ref().map_or(raw_c.span(), |a| a.span());
            Err(src.error(Some(span), format!("{why}: {problem}")))
        };
        if let Some(a) = &c.algorithm {
            match a.facts().rotation_symmetry() {
                RotationSymmetry::None => {
                    return at_algorithm(format!(
                        "{} {} does not do the same on every rank shifted (its partners are not a rotation), \
                         so it cannot fold; drop symmetry = \"fold\" to simulate every rank, or name an \
                         algorithm that folds ({})",
                        c.kind.name(),
                        a.name(),
                        FOLDING_EXAMPLES
                    ));
                }
                RotationSymmetry::WholeNodes if !shift.is_multiple_of(c.ranks_per_node) => {
                    return at_algorithm(format!(
                        "the rotation moves {shift} ranks, not whole nodes of ranks_per_node = {}",
                        c.ranks_per_node
                    ));
                }
                RotationSymmetry::WholeNodes | RotationSymmetry::Any => {}
            }
            // Of NCCL's channels only PAT (peers `r ± 2^d`, a shift) and
            // the ring (its rings move with the shift, checked with the
            // plan) get here; the rest fold by the node turn
            // (`check_turn_foldable`).
        }
        let elem = c.dtype.size_bytes() as u64;
        if let Some(&size) = c
            .simulated_sizes()
            .iter()
            .find(|&&b| !(b / elem).is_multiple_of(world_size as u64))
        {
            let span = raw_c.get_ref().size_span(size, c);
            return Err(src.error(
                Some(span),
                format!(
                    "{why}: every size must split into equal blocks, but {size} B is {} elements, \
                     not a multiple of {world_size} ranks; {}",
                    size / elem,
                    foldable_sizes(size, world_size as u64, elem)
                ),
            ));
        }
    }
    Ok(())
}

/// Whether `a` is NCCL's tree, which folds by a `fat_tree`'s node turn
/// (see [`check_turn_foldable`]).
fn folds_by_node_turn(a: &Algorithm) -> bool {
    a.facts().runs_nccl_channels() && a.facts().nccl_algorithm() == Some("tree")
}

/// Whether `a` is NCCL's NVLS-Tree, which folds by a `fat_tree`'s node
/// turn with its heads' tags turned (see [`crate::fold`]).
pub(super) fn is_nvls_tree(a: &Algorithm) -> bool {
    is_nccl(a, "nvls_tree")
}

/// Whether a folded scenario's collectives are NVLS-Tree's (its tags turn
/// by the heads, [`algorithms::nccl::nvls_tree::head_turn`]).
pub(super) fn folds_nvls_tree(collectives: &[CollectiveSpec]) -> bool {
    collectives
        .iter()
        .any(|c| c.algorithm.as_ref().is_some_and(is_nvls_tree))
}

/// The tag channels NVLS-Tree's turn covers per rank of a node: NCCL's
/// `MAXCHANNELS` (`src/include/device.h:91` @5067397c).
pub(super) const NVLS_TREE_MAX_CHANNELS: usize = 64;

/// Whether `a` runs NCCL's algorithm `name` on NCCL's channels.
fn is_nccl(a: &Algorithm, name: &str) -> bool {
    a.facts().runs_nccl_channels() && a.facts().nccl_algorithm() == Some(name)
}

/// Whether `a` folds by a shift of whole nodes with every channel kept:
/// NCCL's PAT (its peers are `r ± 2^d` in rank order, whatever the plan)
/// and NCCL's ring (when each channel's ring moves onto itself,
/// [`crate::fold::nccl_rings_shift`]); see [`crate::fold`].
fn folds_by_node_shift(a: &Algorithm) -> bool {
    is_nccl(a, "pat") || is_nccl(a, "ring")
}

/// Whether a folded scenario runs NCCL's channels (some collective names
/// an algorithm that does).
pub(super) fn folds_nccl_channels(collectives: &[CollectiveSpec]) -> bool {
    collectives.iter().any(|c| {
        c.algorithm
            .as_ref()
            .is_some_and(|a| a.facts().runs_nccl_channels())
    })
}

/// Whether a folded scenario folds by the node turn: some collective runs
/// NCCL's channels other than by PAT or the ring (which fold by the
/// shift).
pub(super) fn folds_by_turn(collectives: &[CollectiveSpec]) -> bool {
    collectives.iter().any(|c| {
        c.algorithm
            .as_ref()
            .is_some_and(|a| a.facts().runs_nccl_channels() && !folds_by_node_shift(a))
    })
}

/// A folded run of NCCL's channels (see [`crate::fold`]): it folds by
/// turning every node's GPUs by half a node together with the channels
/// (`node_turn`, the `fat_tree` preset's; validation then folds by the
/// quarter turn instead where it fits), which is tested exact for
/// `nccl_tree` allreduces, and for `nccl_nvls_tree` allreduces (their
/// heads' tags turned, flow model only), on every rank, phantom, without
/// faults; the two not mixed.
/// Returns the turn; each refusal says what breaks it and what to do.
pub(super) fn check_turn_foldable(
    src: &Source,
    raw: &RawScenario,
    collectives: &[CollectiveSpec],
    world_size: usize,
    node_turn: Option<&Result<Arc<Rotation>, String>>,
) -> Result<Arc<Rotation>, ScenarioError> {
    let why = "a folded run of NCCL's channels (symmetry = \"fold\") turns every node's GPUs \
               by a quarter or half a node with the channels";
    let symmetry = raw
        .topology
        .as_ref()
        .and_then(|t| t.get_ref().symmetry.as_ref().map(|s| s.span()));
    let turn = match node_turn {
        None => {
            return Err(src.error(
                symmetry,
                format!(
                    "{why}, which only the fat_tree preset builds; use preset = \"fat_tree\" or \
                     drop symmetry = \"fold\" to simulate every rank"
                ),
            ));
        }
        Some(Err(e)) => {
            return Err(src.error(
                symmetry,
                format!("{why}, and this topology has no such turn: {e}; drop symmetry = \"fold\" to simulate every rank"),
            ));
        }
        Some(Ok(turn)) => Arc::clone(turn),
    };
    if let Some(f) = raw.fault.first() {
        return Err(src.at(f, format!("{why}: rank faults break its symmetry")));
    }
    if let Some(i) = raw.inject.first() {
        return Err(src.at(i, format!("{why}: injected mistakes break its symmetry")));
    }
    if let Some(l) = raw.link_fault.first() {
        return Err(src.at(l, format!("{why}: link faults break its symmetry")));
    }
    let nvls = folds_nvls_tree(collectives);
    let flow = raw
        .topology
        .as_ref()
        .and_then(|t| t.get_ref().model.as_ref().map(|m| m.get_ref().as_str()))
        .is_some_and(|m| m == "flow");
    for (raw_c, c) in raw.collective.iter().zip(collectives) {
        let is_nccl_tree = c.algorithm.as_ref().is_some_and(folds_by_node_turn);
        let is_nvls = c.algorithm.as_ref().is_some_and(is_nvls_tree);
        let problem = if !c.phantom {
            Some("it needs phantom = true (the folded ranks carry no real data)".to_string())
        } else if c.world_size != world_size {
            Some(format!(
                "it needs every collective on all {world_size} ranks, not {}",
                c.world_size
            ))
        } else if nvls && !is_nvls {
            let name = c.algorithm.as_ref().map_or("auto (tuner)", |a| a.name());
            Some(format!(
                "{} {name} is not nccl_nvls_tree, and a scenario folded with nccl_nvls_tree \
                 turns its heads' tags, which no other algorithm numbers so; run it in its own \
                 scenario, or drop symmetry = \"fold\" to simulate every rank",
                c.kind.name()
            ))
        } else if is_nvls && !flow {
            Some(
                "allreduce nccl_nvls_tree folds exactly in the flow model only (at packet level \
                 a GPU's ports serve its legs to the heads in the heads' order, the same on every \
                 GPU, which no turn keeps); use model = \"flow\", or drop symmetry = \"fold\" to \
                 simulate every rank"
                    .to_string(),
            )
        } else if !is_nccl_tree && !is_nvls {
            let name = c.algorithm.as_ref().map_or("auto (tuner)", |a| a.name());
            Some(format!(
                "{} {name} is neither nccl_tree nor nccl_nvls_tree, the algorithms this fold is \
                 tested exact for (every collective of the scenario folds by the same turn; \
                 nccl_pat and nccl_ring fold by a shift of whole nodes instead); run it in its \
                 own scenario, or drop symmetry = \"fold\" to simulate every rank",
                c.kind.name()
            ))
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(src.at(raw_c, format!("{why}: {problem}")));
        }
    }
    Ok(turn)
}

/// A folded run of NCCL's channels needs one GPU per process: a process
/// driving several GPUs starts them at different times (NCCL's launch
/// skew), which no rotation keeps.
pub(super) fn check_one_gpu_per_process(
    src: &Source,
    raw: &RawScenario,
    nccl: Option<&crate::nccl::NcclConfig>,
) -> Result<(), ScenarioError> {
    match nccl {
        Some(config) if config.launch.gpus_per_process > 1 => Err(src.error(
            raw.nccl.as_ref().map(|n| n.span()),
            "a folded run of NCCL's channels (symmetry = \"fold\") needs one GPU per process: a \
             process driving several GPUs starts them at different times, which no rotation \
             keeps; drop gpus_per_process or symmetry = \"fold\"",
        )),
        _ => Ok(()),
    }
}

/// A folded run of NCCL's PAT or ring keeps every channel under the
/// topology's shift: each of `systems`' channels must cross every node
/// through the same NIC moved, and its ring moved must be itself
/// ([`crate::fold::nccl_rings_shift`], what the fold checks too). The
/// error is at `symmetry` and names the channel.
pub(super) fn check_shifted_nics<'a>(
    src: &Source,
    raw: &RawScenario,
    systems: impl Iterator<Item = &'a Arc<crate::nccl::NcclSystem>>,
    rotation: Option<&Rotation>,
) -> Result<(), ScenarioError> {
    let Some(rotation) = rotation else {
        return Ok(());
    };
    for system in systems {
        crate::fold::nccl_rings_shift(system, rotation).map_err(|e| {
            let symmetry = raw
                .topology
                .as_ref()
                .and_then(|t| t.get_ref().symmetry.as_ref().map(|s| s.span()));
            src.error(
                symmetry,
                format!(
                    "a folded run of NCCL's PAT or ring (symmetry = \"fold\") shifts whole nodes \
                     with every channel kept, and here {e}; drop symmetry = \"fold\" to simulate \
                     every rank"
                ),
            )
        })?;
    }
    Ok(())
}

/// The sizes of a scenario folded by the node turn (`action`, with its
/// channel turn): at each, NCCL's channels for the call must be a set the
/// turn maps onto itself, and the elements must split into as many equal
/// channel blocks. An error names the size, the channels and the nearest
/// sizes that fold.
pub(super) fn check_turned_sizes(
    src: &Source,
    raw: &RawScenario,
    scenario: &super::Scenario,
    action: &crate::fold::RankAction,
) -> Result<(), ScenarioError> {
    let filter = crate::tuning::AlgoFilter::default();
    for (raw_c, c) in raw.collective.iter().zip(&scenario.collectives) {
        let elem = c.dtype.size_bytes() as u64;
        for size in c.simulated_sizes() {
            let count = usize::try_from(size / elem).unwrap_or(usize::MAX);
            let selection = crate::study::select(scenario, c, &filter, count);
            let all = scenario.nccl_system(c.world_size).map_or(1, |s| s.channels);
            let wanted = match selection.params.channels {
                0 => all,
                m => m,
            };
            let m = wanted.clamp(1, count.max(1));
            if is_nvls_tree(&selection.algorithm) {
                let params = &selection.params;
                let problem =
                    nvls_tree_size_problem(size, count, elem, params, c.world_size, action);
                if let Some(problem) = problem {
                    let span = raw_c.get_ref().size_span(size, c);
                    return Err(src.error(
                        Some(span),
                        format!(
                            "a folded run of nccl_nvls_tree (symmetry = \"fold\"): {problem}; \
                             drop symmetry = \"fold\" to simulate this size on every rank"
                        ),
                    ));
                }
                continue;
            }
            let lost = (0..m).find(|&ch| action.channel(ch, 1) >= m);
            let problem = if let Some(ch) = lost {
                Some(format!(
                    "NCCL runs {size} B on {m} of the {all} channels, and the turn takes channel \
                     {ch} to channel {}, which the call does not use",
                    action.channel(ch, 1)
                ))
            } else if !(count as u64).is_multiple_of(m as u64) {
                let unit = m as u64 * elem;
                Some(format!(
                    "{size} B is {count} elements, which do not split into {m} equal channel \
                     blocks; the nearest sizes that fold are {} B and {} B",
                    size / unit * unit,
                    (size / unit + 1) * unit
                ))
            } else {
                None
            };
            if let Some(problem) = problem {
                let span = raw_c.get_ref().size_span(size, c);
                return Err(src.error(
                    Some(span),
                    format!(
                        "a folded run of NCCL's channels (symmetry = \"fold\"): {problem}; \
                         drop symmetry = \"fold\" to simulate this size on every rank"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// What keeps a size of `nccl_nvls_tree` (`count` elements of `elem`
/// bytes, NCCL's `params`) from folding by `action`'s turn, if anything:
/// its tags must be within the turn's, and every head must get the same
/// units (each channel's block a multiple of the ranks per node).
fn nvls_tree_size_problem(
    size: u64,
    count: usize,
    elem: u64,
    params: &algorithms::Params,
    world: usize,
    action: &crate::fold::RankAction,
) -> Option<String> {
    use algorithms::nccl::nvls_tree;
    let e = elem as usize;
    let channels = nvls_tree::channels_used(count, e, params, world);
    let p = params.ranks_per_node.max(1);
    if action
        .tag_channels()
        .is_some_and(|covered| channels * p > covered)
    {
        return Some(format!(
            "NCCL runs {size} B on {channels} channels, more than the {NVLS_TREE_MAX_CHANNELS} \
             the heads' turn covers"
        ));
    }
    if nvls_tree::turns_evenly(count, e, params, world) {
        return None;
    }
    let unit = (channels * p) as u64 * elem;
    let below = size / unit * unit;
    Some(format!(
        "{size} B is {count} elements, which do not give the {p} heads of a node equal units on \
         {channels} channels; the nearest sizes that fold are {} B and {} B (multiples of \
         {channels} x {p} x {elem} B)",
        below,
        below + unit
    ))
}

/// The sizes of a scenario folded by a node shift with NCCL's channels:
/// where NCCL's tuner chooses (`tuner = "nccl"`), its choice at every size
/// must fold by the shift (`nccl_ring` or `nccl_pat`), or
/// the error names the size and the algorithm; and for `nccl_ring` each
/// channel NCCL runs the call on must split into equal ring segments, one
/// per rank (`count` a multiple of channels x ranks), or the ranks of an
/// orbit would send segments of different sizes. An error names the size,
/// the channels and the nearest sizes that fold.
pub(super) fn check_shifted_sizes(
    src: &Source,
    raw: &RawScenario,
    scenario: &super::Scenario,
) -> Result<(), ScenarioError> {
    let filter = crate::tuning::AlgoFilter::default();
    for (raw_c, c) in raw.collective.iter().zip(&scenario.collectives) {
        let tuned = c.algorithm.is_none();
        if !tuned && !c.algorithm.as_ref().is_some_and(|a| is_nccl(a, "ring")) {
            continue;
        }
        let elem = c.dtype.size_bytes() as u64;
        let n = c.world_size as u64;
        for size in c.simulated_sizes() {
            let count = size / elem;
            let selection = crate::study::select(
                scenario,
                c,
                &filter,
                usize::try_from(count).unwrap_or(usize::MAX),
            );
            let chosen = &selection.algorithm;
            if tuned && !folds_by_node_shift(chosen) {
                let span = raw_c.get_ref().size_span(size, c);
                return Err(src.error(
                    Some(span),
                    format!(
                        "a folded run with tuner = \"nccl\" (symmetry = \"fold\") shifts whole \
                         nodes, and at {size} B NCCL's tuner picks {} {}, which does not fold so \
                         (nccl_ring and nccl_pat do); name algorithm = \"nccl_ring\", \
                         use sizes where NCCL picks it, or drop symmetry = \"fold\" to simulate \
                         every rank",
                        c.kind.name(),
                        chosen.name()
                    ),
                ));
            }
            if !is_nccl(chosen, "ring") {
                continue;
            }
            let all = scenario
                .nccl_system(c.world_size)
                .map_or(1, |s| s.plan.channels());
            let wanted = match selection.params.channels {
                0 => all,
                m => m,
            };
            // As `channels_used`: no more channels than elements of the
            // smallest buffer a channel splits (a rank's block, or all).
            let smallest = if c.kind == Collective::Allreduce {
                count
            } else {
                count / n.max(1)
            };
            let m = (wanted as u64).clamp(1, smallest.max(1));
            let unit = m * n * elem;
            if !size.is_multiple_of(unit) {
                let span = raw_c.get_ref().size_span(size, c);
                let below = size / unit * unit;
                return Err(src.error(
                    Some(span),
                    format!(
                        "a folded run of NCCL's ring (symmetry = \"fold\"): NCCL runs {size} B \
                         on {m} channels, and {count} elements do not split into {m} channels of \
                         {n} equal ring segments; the nearest sizes that fold are {} B and {} B \
                         (multiples of {m} x {n} x {elem} B); drop symmetry = \"fold\" to \
                         simulate this size on every rank",
                        below,
                        below + unit
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The catalogue's collectives that fold, named in refusals.
const FOLDING_EXAMPLES: &str = "allreduce ring or hierarchical, allgather ring, bruck or pat, \
     reduce_scatter ring or pat, alltoall pairwise or bruck";

/// The rest of the message cap's advice for a run that is not folded:
/// fold it when its algorithm folds (a folded run sends one node's share
/// of the messages), or else name the collectives that fold. Empty for a
/// folded run (it already sends its share only).
pub(super) fn fold_hint(
    algorithm: Option<&Algorithm>,
    kind: Collective,
    fold: Option<usize>,
) -> String {
    if fold.is_some() {
        return String::new();
    }
    let Some(a) = algorithm else {
        return format!(
            "; or name a {} algorithm that folds and set symmetry = \"fold\" under [topology] \
             (a preset's rotation simulates one node's ranks for all): {FOLDING_EXAMPLES}",
            kind.name()
        );
    };
    let folds =
        a.facts().rotation_symmetry() != RotationSymmetry::None && !a.facts().runs_nccl_channels();
    if folds_by_node_shift(a) {
        format!(
            "; or set symmetry = \"fold\" under [topology]: {} {} folds on a fat_tree by a shift \
             of one node with every channel kept, simulating one node's GPUs for all",
            kind.name(),
            a.name()
        )
    } else if folds_by_node_turn(a) || is_nvls_tree(a) {
        format!(
            "; or set symmetry = \"fold\" under [topology]: {} {} folds on a fat_tree by turning \
             every node's GPUs by a quarter (8-GPU nodes) or half a node with the channels, \
             simulating a quarter or half of them",
            kind.name(),
            a.name()
        )
    } else if folds {
        format!(
            "; or set symmetry = \"fold\" under [topology]: {} {} folds on a preset's rotation, \
             simulating one node's ranks for all",
            kind.name(),
            a.name()
        )
    } else {
        format!(
            "; {} {} does not fold, but these do under symmetry = \"fold\" on a preset topology \
             (one node's ranks simulated for all): {FOLDING_EXAMPLES}",
            kind.name(),
            a.name()
        )
    }
}

/// What to do instead of an uneven `size` in a folded run: the nearest
/// sizes that split into `ranks` equal blocks of `elem`-byte elements, or
/// the unfolded run. Blocks of different sizes would give the ranks of an
/// orbit different messages (the first `count mod ranks` blocks hold one
/// element more), so no rotation maps the run onto itself: an uneven size
/// cannot fold exactly.
fn foldable_sizes(size: u64, ranks: u64, elem: u64) -> String {
    let unit = ranks.saturating_mul(elem);
    let below = size / unit * unit;
    let above = below.saturating_add(unit);
    let nearest = if below == 0 {
        format!("the smallest size that folds is {above} B")
    } else {
        format!("the nearest sizes that fold are {below} B and {above} B")
    };
    format!(
        "{nearest} (multiples of {ranks} ranks x {elem} B; with step_factor, a min_bytes that is \
         one keeps every size one), or drop symmetry = \"fold\" to simulate this size on every rank"
    )
}

#[cfg(test)]
mod tests;
