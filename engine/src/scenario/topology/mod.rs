//! Validation of `[topology]`: builds the hardware graph (a preset, an
//! `nvidia-smi topo -m` file, or explicit vertices and links), places the
//! ranks, chooses the routing policy (`routing`, `routing_root`) and
//! checks every pair of ranks is connected. `preset.rs` reads each
//! preset's parameters and builds it; `explicit.rs` builds the topologies
//! that are not presets (explicit vertices and links, `nvidia-smi` files).

use std::ops::Range;
use std::sync::Arc;

use toml::Spanned;
use topologies::{LinkKind, LinkSpec, Placement, Router, Routing, Topology, TopologyError};

use super::ScenarioError;
use super::raw::RawTopology;
use super::validate::Source;
use crate::network::{ModelLevel, NetworkConfig, TopologyConfig, flow_id, path};
use preset::Rotator;

mod explicit;
mod preset;

/// A validated `[topology]`.
pub(super) struct Network {
    /// The network the runs simulate.
    pub config: NetworkConfig,
    /// Number of ranks.
    pub world_size: usize,
    /// One line for the report header.
    pub description: String,
    /// The link the tuner's alpha-beta model assumes (see [`tuner_link`]).
    pub tuner_link: LinkSpec,
    /// The most ranks one `[[collective]]` may use: the placed ranks on a
    /// topology; any number on ideal links, which exist for every pair.
    pub max_collective_ranks: usize,
    /// A folded run's shift (`symmetry = "fold"`).
    pub fold: Option<usize>,
    /// With `symmetry = "fold"` on a `fat_tree`: the turn of every node's
    /// GPUs by half a node ([`topologies::presets::fat_tree_node_turn`]),
    /// which folds NCCL's channels where the shift cannot, or why the
    /// topology has none.
    pub node_turn: Option<Result<Arc<topologies::Rotation>, String>>,
    /// With `symmetry = "fold"` on a `fat_tree` whose nodes turn by a
    /// quarter (8 GPUs: by 2): that turn, a partial rotation that leaves
    /// the socket links in place, not carried
    /// ([`topologies::presets::fat_tree_partial_node_turn`]); validation
    /// folds by it where NCCL's channels turn with it and keep to the
    /// links it carries, else by [`Network::node_turn`].
    pub quarter_turn: Option<Arc<topologies::Rotation>>,
}

/// The most ranks a topology scenario may place: the fat-tree preset at
/// this size (2048 DGX nodes, 47,116 vertices) builds and checks its
/// connectivity in well under a second, and routing finds each rank
/// pair's route with a search around that pair, not a distance array over
/// the whole graph per destination. What limits a run at this size is the
/// simulation itself (a flat ring allreduce sends `2N(N-1)` messages).
pub const TOPOLOGY_RANKS_MAX: usize = 16384;

/// The presets and the parameters each takes.
const PRESETS: &[(&str, &[&str])] = &[
    ("dgx_a100", &["gpus_per_node", "nics_per_gpu"]),
    ("dgx_h100", &["gpus_per_node", "nics_per_gpu"]),
    ("hgx_h200", &["gpus_per_node", "nics_per_gpu"]),
    ("h20", &["gpus_per_node", "nics_per_gpu"]),
    ("hgx_b200", &["gpus_per_node", "nics_per_gpu"]),
    ("hgx_b300", &["gpus_per_node", "nics_per_gpu"]),
    ("gb200_nvl72", &[]),
    ("gb300_nvl72", &[]),
    (
        "nvl72_cluster",
        &[
            "racks",
            "style",
            "nic",
            "leaves",
            "spines",
            "oversubscription",
        ],
    ),
    (
        "pcie_box",
        &[
            "sockets",
            "switches_per_socket",
            "gpus_per_switch",
            "pcie",
            "smp_links",
        ],
    ),
    (
        "fat_tree",
        &[
            "nodes",
            "gpus_per_node",
            "nics_per_gpu",
            "style",
            "leaves",
            "nodes_per_leaf",
            "spines",
            "oversubscription",
            "nic",
            "sharp",
        ],
    ),
    (
        "leaf_spine",
        &[
            "hosts",
            "hosts_per_leaf",
            "spines",
            "nic",
            "oversubscription",
            "sharp",
        ],
    ),
    (
        "cpu_cluster",
        &[
            "hosts",
            "sockets",
            "cpu",
            "cores_per_socket",
            "memory_gb_per_s",
            "smp_links",
            "nic",
            "hosts_per_leaf",
            "spines",
            "oversubscription",
        ],
    ),
    ("ring", &["gpus", "kind", "links_per_pair"]),
    ("torus2d", &["x", "y", "kind", "links_per_pair"]),
    ("nvidia_smi", &["file", "nvlink", "pcie", "nic"]),
    ("explicit", &["vertex", "link"]),
];

/// The parameters `t` sets, with where.
fn given(t: &RawTopology) -> Vec<(&'static str, Range<usize>)> {
    fn span<T>(v: &Option<Spanned<T>>) -> Option<Range<usize>> {
        v.as_ref().map(Spanned::span)
    }
    let all = [
        ("nodes", span(&t.nodes)),
        ("gpus_per_node", span(&t.gpus_per_node)),
        ("nics_per_gpu", span(&t.nics_per_gpu)),
        ("style", span(&t.style)),
        ("racks", span(&t.racks)),
        ("cpu", span(&t.cpu)),
        ("cores_per_socket", span(&t.cores_per_socket)),
        ("memory_gb_per_s", span(&t.memory_gb_per_s)),
        ("leaves", span(&t.leaves)),
        ("nodes_per_leaf", span(&t.nodes_per_leaf)),
        ("spines", span(&t.spines)),
        ("oversubscription", span(&t.oversubscription)),
        ("nic", span(&t.nic)),
        ("sharp", span(&t.sharp)),
        ("sockets", span(&t.sockets)),
        ("switches_per_socket", span(&t.switches_per_socket)),
        ("gpus_per_switch", span(&t.gpus_per_switch)),
        ("pcie", span(&t.pcie)),
        ("smp_links", span(&t.smp_links)),
        ("hosts", span(&t.hosts)),
        ("hosts_per_leaf", span(&t.hosts_per_leaf)),
        ("gpus", span(&t.gpus)),
        ("x", span(&t.x)),
        ("y", span(&t.y)),
        ("kind", span(&t.kind)),
        ("links_per_pair", span(&t.links_per_pair)),
        ("file", span(&t.file)),
        ("nvlink", span(&t.nvlink)),
        ("vertex", t.vertex.first().map(Spanned::span)),
        ("link", t.link.first().map(Spanned::span)),
    ];
    let mut given: Vec<(&'static str, Range<usize>)> = all
        .into_iter()
        .filter_map(|(name, span)| span.map(|s| (name, s)))
        .collect();
    // Report the first misplaced parameter in file order.
    given.sort_by_key(|(_, span)| span.start);
    given
}

/// Validates `[topology]`; `world_size` is the scenario's, if it gave one.
pub(super) fn network(
    src: &Source,
    spanned: &Spanned<RawTopology>,
    world_size: Option<&Spanned<i64>>,
    seed: u64,
) -> Result<Network, ScenarioError> {
    let t = spanned.get_ref();
    let preset = t.preset.get_ref().as_str();
    let Some(&(_, params)) = PRESETS.iter().find(|(name, _)| *name == preset) else {
        let names: Vec<&str> = PRESETS.iter().map(|(n, _)| *n).collect();
        return Err(src.at(
            &t.preset,
            format!(
                "unknown preset `{preset}`; expected one of {}",
                names.join(", ")
            ),
        ));
    };
    for (name, span) in given(t) {
        if !params.contains(&name) {
            return Err(src.error(
                Some(span),
                format!(
                    "`{name}` does not apply to preset `{preset}`; it takes: {}",
                    if params.is_empty() {
                        "nothing".to_string()
                    } else {
                        params.join(", ")
                    }
                ),
            ));
        }
    }
    let level = match &t.model {
        None => ModelLevel::Packet,
        Some(m) => match m.get_ref().as_str() {
            "packet" => ModelLevel::Packet,
            "flow" => ModelLevel::Flow,
            other => {
                return Err(src.at(
                    m,
                    format!("unknown model `{other}`; expected \"packet\" or \"flow\""),
                ));
            }
        },
    };
    let up_down = routing_name(src, t)?;
    let fold = symmetry_name(src, t)?;
    let (topology, rotator) = build(src, spanned, preset)?;
    let routing = routing(src, t, up_down, &topology)?;
    let endpoints = topology.endpoints().len();
    let world_size = match (world_size, &t.placement) {
        (Some(w), _) => {
            let max = endpoints.min(TOPOLOGY_RANKS_MAX) as i64;
            src.count(w, "world_size", 1, max)? as usize
        }
        (None, Some(p)) if p.get_ref().is_empty() => {
            return Err(src.at(
                p,
                "placement lists no rank; give at least one endpoint index",
            ));
        }
        (None, Some(p)) => p.get_ref().len(),
        (None, None) => endpoints,
    };
    if world_size > TOPOLOGY_RANKS_MAX {
        return Err(src.error(
            Some(t.placement.as_ref().map_or(t.preset.span(), |p| p.span())),
            format!(
                "{world_size} ranks on a topology; at most {TOPOLOGY_RANKS_MAX} are supported; \
                 set world_size"
            ),
        ));
    }
    if world_size == 0 {
        return Err(src.at(
            &t.preset,
            "the topology has no GPU or CPU endpoint to run ranks on",
        ));
    }
    let placement = place(src, t, &topology, world_size)?;
    let topology = Arc::new(topology);
    let mut router = Router::with_routing(Arc::clone(&topology), seed, routing).map_err(|e| {
        let at = t
            .routing_root
            .as_ref()
            .map_or(t.preset.span(), |r| r.span());
        src.error(Some(at), e.to_string())
    })?;
    router
        .check_connected(&placement)
        .map_err(|e| src.at(&t.preset, e.to_string()))?;
    let tuner_link = tuner_link(&topology, &mut router, &placement)
        .map_err(|e| src.at(&t.preset, e.to_string()))?;
    let mut description = format!(
        "{preset} topology ({} vertices, {} links), {} model",
        topology.vertex_count(),
        topology.link_count(),
        level.name()
    );
    if let Routing::UpDown { root } = routing {
        let root = root.map_or_else(|| "default".into(), |v| topology.vertex(v).name.clone());
        description.push_str(&format!(", up_down routing (root {root})"));
    }
    let placement: Arc<[_]> = (0..world_size).map(|r| placement.vertex(r)).collect();
    let mut rotation = None;
    let mut folded = None;
    let mut node_turn = None;
    let mut quarter_turn = None;
    if let (Some(symmetry), Some(fold)) = (&t.symmetry, fold) {
        let Some(rotator) = rotator else {
            return Err(src.at(
                symmetry,
                format!(
                    "preset `{preset}` has no rotation; symmetry applies to fat_tree, nvl72_cluster, leaf_spine, cpu_cluster, ring and torus2d"
                ),
            ));
        };
        let located = |e: TopologyError| src.at(symmetry, e.to_string());
        let r = rotator(&topology, &placement).map_err(located)?;
        if let Some(up) = router.up_directions() {
            // Rotated routes must stay up*/down* routes, or the run
            // would not use the routing the scenario asks for.
            r.check_orientation(&topology, up).map_err(|e| {
                src.at(
                    symmetry,
                    format!(
                        "{e}; routing = \"up_down\" with symmetry needs a rotation that keeps \
                         the up*/down* order (a routing_root it leaves in place); \
                         use routing = \"shortest\" or no symmetry"
                    ),
                )
            })?;
        }
        if fold {
            if level == ModelLevel::Packet {
                // Packets cannot be weighed: every link must move (see
                // `crate::fold`); the flow model weighs shared links.
                r.link_orbits(&topology).map_err(|e| {
                    src.at(
                        symmetry,
                        format!(
                            "{e} in the packet model (model = \"flow\" folds shared links by weight)"
                        ),
                    )
                })?;
            }
            folded = Some(r.shift());
            if preset == "fat_tree" {
                let nics_per_gpu = preset::count(src, &t.nics_per_gpu, "nics_per_gpu", 1, 2)?;
                let params = preset::fat_tree_params(src, t, nics_per_gpu)?;
                let half = params.gpus_per_node / 2;
                node_turn = Some(
                    topologies::presets::fat_tree_node_turn(&params, &topology, &placement, half)
                        .map(Arc::new)
                        .map_err(|e| e.to_string()),
                );
                // A quarter (half of the half) where PCIe switches allow it:
                // an even number of GPUs.
                let quarter = half / 2;
                if quarter > 0 && quarter.is_multiple_of(2) {
                    quarter_turn = topologies::presets::fat_tree_partial_node_turn(
                        &params, &topology, &placement, quarter,
                    )
                    .ok()
                    .map(Arc::new);
                }
                // Under up*/down* routing a turn, like the shift, must keep
                // the orientation, or its moved routes would not be the
                // routes the full run takes.
                if let Some(up) = router.up_directions() {
                    node_turn = node_turn.map(|turn| {
                        turn.and_then(|r| {
                            r.check_orientation(&topology, up).map(|()| r).map_err(|e| {
                                format!("{e} (routing = \"up_down\"; the default routing folds)")
                            })
                        })
                    });
                    quarter_turn =
                        quarter_turn.filter(|r| r.check_orientation(&topology, up).is_ok());
                }
            }
            description.push_str(&format!(
                ", folded by {} ranks (symmetric routes)",
                r.shift()
            ));
        } else {
            description.push_str(", symmetric routes");
        }
        rotation = Some(Arc::new(r));
    }
    let mut config = TopologyConfig::with_router(Arc::clone(&topology), placement, level, router);
    config.rotation = rotation;
    Ok(Network {
        config: NetworkConfig::Topology(config),
        world_size,
        description,
        tuner_link,
        max_collective_ranks: world_size,
        fold: folded,
        node_turn,
        quarter_turn,
    })
}

/// Whether `symmetry` asks for a folded run (`Some(true)`), symmetric
/// routes only (`Some(false)`), or nothing (`None`).
fn symmetry_name(src: &Source, t: &RawTopology) -> Result<Option<bool>, ScenarioError> {
    match &t.symmetry {
        None => Ok(None),
        Some(s) => match s.get_ref().as_str() {
            "routes" => Ok(Some(false)),
            "fold" => Ok(Some(true)),
            other => Err(src.at(
                s,
                format!("unknown symmetry `{other}`; expected \"routes\" or \"fold\""),
            )),
        },
    }
}

/// Whether `routing` asks for up*/down* routing (`"up_down"`) rather
/// than shortest paths (`"shortest"`, the default).
fn routing_name(src: &Source, t: &RawTopology) -> Result<bool, ScenarioError> {
    match &t.routing {
        None => Ok(false),
        Some(r) => match r.get_ref().as_str() {
            "shortest" => Ok(false),
            "up_down" => Ok(true),
            other => Err(src.at(
                r,
                format!("unknown routing `{other}`; expected \"shortest\" or \"up_down\""),
            )),
        },
    }
}

/// The routing policy: shortest paths, or up*/down* from `routing_root`
/// (a vertex name) or the default root.
fn routing(
    src: &Source,
    t: &RawTopology,
    up_down: bool,
    topology: &Topology,
) -> Result<Routing, ScenarioError> {
    let root = match &t.routing_root {
        None => None,
        Some(r) if !up_down => {
            return Err(src.at(r, "`routing_root` applies only to routing = \"up_down\""));
        }
        Some(r) => Some(topology.find(r.get_ref()).ok_or_else(|| {
            src.at(
                r,
                format!(
                    "routing_root `{}` is not a vertex of the topology",
                    r.get_ref()
                ),
            )
        })?),
    };
    Ok(if up_down {
        Routing::UpDown { root }
    } else {
        Routing::Shortest
    })
}

/// The alpha-beta link the tuner assumes on a topology: the slowest route
/// between ring neighbours `r -> r+1` (its bottleneck bandwidth) and the
/// largest fixed latency of those routes for one MTU packet. Collectives
/// run on the full model; only the tuner's choice uses this.
fn tuner_link(
    topology: &Topology,
    router: &mut Router,
    placement: &Placement,
) -> Result<LinkSpec, topologies::routing::RouteError> {
    let n = placement.len();
    let mut bandwidth = f64::INFINITY;
    let mut latency_ps = 0u64;
    for r in 0..n {
        let (a, b) = (placement.vertex(r), placement.vertex((r + 1) % n));
        if a == b {
            continue;
        }
        let route = router.route(a, b, flow_id(r, (r + 1) % n, n))?;
        bandwidth = bandwidth.min(path::bottleneck_bytes_per_s(topology, &route));
        let mtu = path::path_mtu(topology, &route);
        latency_ps = latency_ps.max(path::idle_latency_ps(topology, &route, mtu));
    }
    if !bandwidth.is_finite() {
        bandwidth = 1e12; // one rank: no link is ever used
    }
    Ok(LinkSpec::new(latency_ps, bandwidth).expect("route bandwidths are positive"))
}

/// The placement `[topology].placement` gives, or ranks in order.
fn place(
    src: &Source,
    t: &RawTopology,
    topology: &Topology,
    world_size: usize,
) -> Result<Placement, ScenarioError> {
    let Some(p) = &t.placement else {
        return Placement::in_order(topology, world_size)
            .map_err(|e| src.at(&t.preset, e.to_string()));
    };
    let entries = p.get_ref();
    if entries.len() != world_size {
        return Err(src.at(
            p,
            format!(
                "placement lists {} ranks but the scenario has {world_size}",
                entries.len()
            ),
        ));
    }
    let endpoints = topology.endpoints().len();
    let mut map = Vec::with_capacity(world_size);
    for (rank, e) in entries.iter().enumerate() {
        let i = *e.get_ref();
        if i < 0 || i as usize >= endpoints {
            return Err(src.at(
                e,
                format!(
                    "rank {rank} is placed on endpoint {i}, but the topology has endpoints 0..{}",
                    endpoints.saturating_sub(1)
                ),
            ));
        }
        if let Some(other) = map.iter().position(|&m| m == i as usize) {
            return Err(src.at(
                e,
                format!("rank {rank} is placed on endpoint {i}, which rank {other} already uses"),
            ));
        }
        map.push(i as usize);
    }
    Placement::from_endpoints(topology, &map).map_err(|e| src.at(p, e.to_string()))
}

/// Builds the topology of `preset`, with its rotation builder if the
/// preset has one.
fn build(
    src: &Source,
    spanned: &Spanned<RawTopology>,
    preset: &str,
) -> Result<(Topology, Option<Rotator>), ScenarioError> {
    let t = spanned.get_ref();
    let (built, rotator) = match preset {
        "explicit" => return Ok((explicit::explicit(src, spanned)?, None)),
        "nvidia_smi" => return Ok((explicit::nvidia_smi(src, spanned)?, None)),
        _ => preset::build(src, t, preset)?,
    };
    let mut topology = built.map_err(|e| src.at(&t.preset, e.to_string()))?;
    if let Some(sharp) = &t.sharp
        && *sharp.get_ref()
    {
        let kinds: Vec<LinkKind> = topology
            .link_ids()
            .map(|l| topology.link(l).kind)
            .filter(|k| k.is_network())
            .collect();
        if let Some(other) = kinds.iter().find(|k| !matches!(k, LinkKind::InfiniBand(_))) {
            return Err(src.at(
                sharp,
                format!(
                    "sharp = true needs InfiniBand switches (SHARP is an InfiniBand feature); \
                     this {preset}'s network links are {other}: set nic to an InfiniBand kind \
                     (ib_hdr, ib_ndr, ib_xdr) or drop sharp"
                ),
            ));
        }
        topology.enable_sharp();
    }
    Ok((topology, rotator))
}
