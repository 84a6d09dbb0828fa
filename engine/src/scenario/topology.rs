//! Validation of `[topology]`: builds the hardware graph (a preset, an
//! `nvidia-smi topo -m` file, or explicit vertices and links), places the
//! ranks, chooses the routing policy (`routing`, `routing_root`) and
//! checks every pair of ranks is connected.

use std::ops::Range;
use std::sync::Arc;

use toml::Spanned;
use topologies::presets;
use topologies::{
    Link, LinkKind, LinkSpec, Placement, Rotation, Router, Routing, Topology, TopologyError,
    Vertex, VertexId, VertexKind,
};

use super::ScenarioError;
use super::raw::{RawLink, RawTopology, RawVertex};
use super::validate::Source;
use crate::network::{ModelLevel, NetworkConfig, TopologyConfig, flow_id, path};

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
    /// GPUs by half a node ([`presets::fat_tree_node_turn`]), which folds
    /// NCCL's channels where the shift cannot, or why the topology has
    /// none.
    pub node_turn: Option<Result<Arc<Rotation>, String>>,
}

/// Builds a preset's rotation for the placed ranks (`[topology].symmetry`).
type Rotator = Box<dyn Fn(&Topology, &[VertexId]) -> Result<Rotation, TopologyError>>;

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
                let nics_per_gpu = count(src, &t.nics_per_gpu, "nics_per_gpu", 1, 2)?;
                let params = fat_tree_params(src, t, nics_per_gpu)?;
                let half = params.gpus_per_node / 2;
                node_turn = Some(
                    presets::fat_tree_node_turn(&params, &topology, &placement, half)
                        .map(Arc::new)
                        .map_err(|e| e.to_string()),
                );
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
        "explicit" => return Ok((explicit(src, spanned)?, None)),
        "nvidia_smi" => return Ok((nvidia_smi(src, spanned)?, None)),
        _ => presets_build(src, t, preset)?,
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

/// A count parameter in `1..=max`, or its default.
fn count(
    src: &Source,
    v: &Option<Spanned<i64>>,
    what: &str,
    default: usize,
    max: i64,
) -> Result<usize, ScenarioError> {
    match v {
        Some(v) => Ok(src.count(v, what, 1, max)? as usize),
        None => Ok(default),
    }
}

/// A link kind parameter, or its default.
fn link_kind(
    src: &Source,
    v: &Option<Spanned<String>>,
    default: LinkKind,
) -> Result<LinkKind, ScenarioError> {
    match v {
        None => Ok(default),
        Some(v) => LinkKind::parse(v.get_ref()).ok_or_else(|| {
            src.at(
                v,
                format!(
                    "unknown link kind `{}`; expected one of {}",
                    v.get_ref(),
                    LinkKind::EXPECTED
                ),
            )
        }),
    }
}

/// A node style parameter, or its default.
fn style(src: &Source, v: &Option<Spanned<String>>) -> Result<presets::NodeStyle, ScenarioError> {
    let Some(v) = v else {
        return Ok(presets::NodeStyle::H100);
    };
    presets::NodeStyle::parse(v.get_ref()).ok_or_else(|| {
        let names: Vec<String> = presets::NodeStyle::ALL
            .iter()
            .map(|s| format!("\"{}\"", s.name()))
            .collect();
        src.at(
            v,
            format!(
                "unknown node style `{}`; expected one of {}",
                v.get_ref(),
                names.join(", ")
            ),
        )
    })
}

/// A rack style parameter (`gb200`, `gb300`), or GB200.
fn rack_style(
    src: &Source,
    v: &Option<Spanned<String>>,
) -> Result<presets::RackStyle, ScenarioError> {
    let Some(v) = v else {
        return Ok(presets::RackStyle::Gb200);
    };
    presets::RackStyle::parse(v.get_ref()).ok_or_else(|| {
        src.at(
            v,
            format!(
                "unknown rack style `{}`; expected \"gb200\" or \"gb300\"",
                v.get_ref()
            ),
        )
    })
}

/// A CPU model parameter (`xeon_8480`, `epyc_9654`), or the Xeon.
fn cpu_model(
    src: &Source,
    v: &Option<Spanned<String>>,
) -> Result<presets::CpuModel, ScenarioError> {
    let Some(v) = v else {
        return Ok(presets::CpuModel::Xeon8480);
    };
    presets::CpuModel::parse(v.get_ref()).ok_or_else(|| {
        src.at(
            v,
            format!(
                "unknown cpu `{}`; expected \"xeon_8480\" or \"epyc_9654\"",
                v.get_ref()
            ),
        )
    })
}

/// A spine count (0 allowed), or `None`; zero spines with more than one
/// leaf is refused at the `spines` key, since only a single leaf joins
/// every host without a spine.
fn spines(
    src: &Source,
    v: &Option<Spanned<i64>>,
    leaves: usize,
) -> Result<Option<usize>, ScenarioError> {
    let Some(v) = v else {
        return Ok(None);
    };
    let n = src.count(v, "spines", 0, PRESET_COUNT_MAX)? as usize;
    if n == 0 && leaves > 1 {
        return Err(src.at(
            v,
            format!(
                "spines = 0 needs a single leaf (it joins every host on its own), but there are \
                 {leaves} leaves; give at least 1 spine or put every host on one leaf"
            ),
        ));
    }
    Ok(Some(n))
}

/// A ratio parameter (at least 1), or 1.
fn oversubscription(src: &Source, v: &Option<Spanned<f64>>) -> Result<f64, ScenarioError> {
    match v {
        None => Ok(1.0),
        Some(v) => {
            let x = src.number(v, "oversubscription", false)?;
            if !(1.0..=1024.0).contains(&x) {
                return Err(src.at(
                    v,
                    format!("oversubscription must be between 1 and 1024, got {x}"),
                ));
            }
            Ok(x)
        }
    }
}

/// The `fat_tree` preset's parameters from `[topology]`.
fn fat_tree_params(
    src: &Source,
    t: &RawTopology,
    nics_per_gpu: usize,
) -> Result<presets::FatTree, ScenarioError> {
    let max = PRESET_COUNT_MAX;
    let d = presets::FatTree::default();
    let nodes = count(src, &t.nodes, "nodes", d.nodes, max)?;
    let gpus_per_node = count(src, &t.gpus_per_node, "gpus_per_node", d.gpus_per_node, 8)?;
    let leaves = match (&t.leaves, &t.nodes_per_leaf) {
        (Some(_), Some(p)) => {
            return Err(src.at(p, "give leaves or nodes_per_leaf, not both"));
        }
        (Some(v), None) => Some(src.count(v, "leaves", 1, max)? as usize),
        // A rail needs as many leaves as it takes to hold its nodes.
        (None, Some(p)) => {
            let per_leaf = src.count(p, "nodes_per_leaf", 1, max)? as usize;
            Some(gpus_per_node * nodes.div_ceil(per_leaf))
        }
        (None, None) => d.leaves,
    };
    let rails = gpus_per_node * nics_per_gpu;
    let spines = spines(src, &t.spines, leaves.unwrap_or(rails))?;
    let nic = match &t.nic {
        Some(_) => Some(link_kind(src, &t.nic, LinkKind::Smp)?),
        None => d.nic,
    };
    Ok(presets::FatTree {
        nodes,
        gpus_per_node,
        nics_per_gpu,
        style: if t.style.is_some() {
            style(src, &t.style)?
        } else {
            d.style
        },
        leaves,
        spines,
        oversubscription: oversubscription(src, &t.oversubscription)?,
        nic,
    })
}

/// The largest count any preset parameter may have (keeps a typo from
/// building a graph that exhausts memory).
const PRESET_COUNT_MAX: i64 = 1 << 16;

/// A preset's topology (or why its parameters are out of range) and its
/// rotation builder.
type Built = (Result<Topology, TopologyError>, Option<Rotator>);

fn presets_build(src: &Source, t: &RawTopology, preset: &str) -> Result<Built, ScenarioError> {
    let max = PRESET_COUNT_MAX;
    let nics_per_gpu = count(src, &t.nics_per_gpu, "nics_per_gpu", 1, 2)?;
    Ok(match preset {
        "dgx_a100" | "dgx_h100" | "hgx_h200" | "h20" | "hgx_b200" | "hgx_b300" => {
            let style = match preset {
                "dgx_a100" => presets::NodeStyle::A100,
                "dgx_h100" => presets::NodeStyle::H100,
                "hgx_h200" => presets::NodeStyle::H200,
                "h20" => presets::NodeStyle::H20,
                "hgx_b200" => presets::NodeStyle::B200,
                _ => presets::NodeStyle::B300,
            };
            let gpus = count(src, &t.gpus_per_node, "gpus_per_node", 8, 8)?;
            let node = presets::DgxNode {
                style,
                gpus,
                nics_per_gpu,
            };
            (presets::dgx_node(&node), None)
        }
        "gb200_nvl72" => (presets::nvl72_rack(presets::RackStyle::Gb200), None),
        "gb300_nvl72" => (presets::nvl72_rack(presets::RackStyle::Gb300), None),
        "nvl72_cluster" => {
            let d = presets::Nvl72Cluster::default();
            let leaves = match &t.leaves {
                Some(v) => Some(src.count(v, "leaves", 1, max)? as usize),
                None => d.leaves,
            };
            let nic = match &t.nic {
                Some(_) => Some(link_kind(src, &t.nic, LinkKind::Smp)?),
                None => d.nic,
            };
            let params = presets::Nvl72Cluster {
                racks: count(src, &t.racks, "racks", d.racks, max)?,
                style: rack_style(src, &t.style)?,
                nic,
                leaves,
                spines: spines(src, &t.spines, leaves.unwrap_or(presets::nvl72::NVL72_GPUS))?,
                oversubscription: oversubscription(src, &t.oversubscription)?,
            };
            (
                presets::nvl72_cluster(&params),
                Some(Box::new(move |t: &Topology, p: &[VertexId]| {
                    presets::nvl72_cluster_rotation(&params, t, p)
                })),
            )
        }
        "cpu_cluster" => {
            let d = presets::CpuCluster::default();
            let hosts = count(src, &t.hosts, "hosts", d.hosts, max)?;
            let hosts_per_leaf = count(
                src,
                &t.hosts_per_leaf,
                "hosts_per_leaf",
                d.hosts_per_leaf,
                max,
            )?;
            let memory_bytes_per_s = match &t.memory_gb_per_s {
                Some(v) => Some(src.number(v, "memory_gb_per_s", false)? * 1e9),
                None => None,
            };
            let params = presets::CpuCluster {
                hosts,
                sockets: count(src, &t.sockets, "sockets", d.sockets, 8)?,
                cpu: cpu_model(src, &t.cpu)?,
                cores_per_socket: match &t.cores_per_socket {
                    Some(v) => Some(src.count(v, "cores_per_socket", 1, 512)? as usize),
                    None => None,
                },
                memory_bytes_per_s,
                smp_links: count(src, &t.smp_links, "smp_links", d.smp_links as usize, 64)? as u32,
                nic: link_kind(src, &t.nic, d.nic)?,
                hosts_per_leaf,
                spines: spines(src, &t.spines, hosts.div_ceil(hosts_per_leaf))?,
                oversubscription: oversubscription(src, &t.oversubscription)?,
            };
            (
                presets::cpu_cluster(&params),
                Some(Box::new(move |t: &Topology, p: &[VertexId]| {
                    presets::cpu_cluster_rotation(&params, t, p)
                })),
            )
        }
        "pcie_box" => {
            let d = presets::PcieBox::default();
            let built = presets::pcie_box(&presets::PcieBox {
                sockets: count(src, &t.sockets, "sockets", d.sockets, 64)?,
                switches_per_socket: count(
                    src,
                    &t.switches_per_socket,
                    "switches_per_socket",
                    d.switches_per_socket,
                    max,
                )?,
                gpus_per_switch: count(
                    src,
                    &t.gpus_per_switch,
                    "gpus_per_switch",
                    d.gpus_per_switch,
                    max,
                )?,
                pcie: link_kind(src, &t.pcie, d.pcie)?,
                smp_links: count(src, &t.smp_links, "smp_links", d.smp_links as usize, 64)? as u32,
            });
            (built, None)
        }
        "fat_tree" => {
            let params = fat_tree_params(src, t, nics_per_gpu)?;
            (
                presets::fat_tree(&params),
                Some(Box::new(move |t: &Topology, p: &[VertexId]| {
                    presets::fat_tree_rotation(&params, t, p)
                })),
            )
        }
        "leaf_spine" => {
            let d = presets::LeafSpine::default();
            let hosts = count(src, &t.hosts, "hosts", d.hosts, max)?;
            let hosts_per_leaf = count(
                src,
                &t.hosts_per_leaf,
                "hosts_per_leaf",
                d.hosts_per_leaf,
                max,
            )?;
            let params = presets::LeafSpine {
                hosts,
                hosts_per_leaf,
                spines: spines(src, &t.spines, hosts.div_ceil(hosts_per_leaf))?.unwrap_or(d.spines),
                nic: link_kind(src, &t.nic, d.nic)?,
                oversubscription: oversubscription(src, &t.oversubscription)?,
            };
            (
                presets::leaf_spine(&params),
                Some(Box::new(move |t: &Topology, p: &[VertexId]| {
                    presets::leaf_spine_rotation(&params, t, p)
                })),
            )
        }
        "ring" => {
            let d = presets::RingParams::default();
            let params = presets::RingParams {
                gpus: count(src, &t.gpus, "gpus", d.gpus, max)?,
                link: link_kind(src, &t.kind, d.link)?,
                links_per_pair: count(
                    src,
                    &t.links_per_pair,
                    "links_per_pair",
                    d.links_per_pair as usize,
                    64,
                )? as u32,
            };
            (
                presets::ring(&params),
                Some(Box::new(move |t: &Topology, p: &[VertexId]| {
                    presets::ring_rotation(&params, t, p)
                })),
            )
        }
        "torus2d" => {
            let d = presets::Torus::default();
            let params = presets::Torus {
                x: count(src, &t.x, "x", d.x, 4096)?,
                y: count(src, &t.y, "y", d.y, 4096)?,
                link: link_kind(src, &t.kind, d.link)?,
                links_per_pair: count(
                    src,
                    &t.links_per_pair,
                    "links_per_pair",
                    d.links_per_pair as usize,
                    64,
                )? as u32,
            };
            (
                presets::torus2d(&params),
                Some(Box::new(move |t: &Topology, p: &[VertexId]| {
                    presets::torus2d_rotation(&params, t, p)
                })),
            )
        }
        other => unreachable!("preset `{other}` is in PRESETS"),
    })
}

/// A topology imported from an `nvidia-smi topo -m` file, named relative
/// to the scenario's directory; errors in it point into that file.
fn nvidia_smi(src: &Source, spanned: &Spanned<RawTopology>) -> Result<Topology, ScenarioError> {
    let t = spanned.get_ref();
    let Some(file) = &t.file else {
        return Err(src.at(
            spanned,
            "preset nvidia_smi needs `file`, the saved output of `nvidia-smi topo -m`",
        ));
    };
    let dir = src.path.parent().unwrap_or(std::path::Path::new("."));
    let path = dir.join(file.get_ref());
    // Text that is not UTF-8 is located in that file; a file that may
    // not be read (missing, a device, over the cap) at `file =`.
    let text = inputs::read_text(&path, &inputs::kind::NVIDIA_SMI_TOPOLOGY).map_err(|e| match e
        .line_column()
    {
        Some(_) => ScenarioError::from(e),
        None => src.at(
            file,
            format!("cannot read {}: {}", path.display(), e.reason()),
        ),
    })?;
    let d = topologies::nvsmi::NvsmiOptions::default();
    let options = topologies::nvsmi::NvsmiOptions {
        nvlink: link_kind(src, &t.nvlink, d.nvlink)?,
        pcie: link_kind(src, &t.pcie, d.pcie)?,
        nic: link_kind(src, &t.nic, d.nic)?,
    };
    topologies::nvsmi::import(&text, &options)
        .map_err(|e| ScenarioError::at(&path, e.line, e.column, &e.message))
}

/// An explicit topology: `[[topology.vertex]]` and `[[topology.link]]`.
fn explicit(src: &Source, spanned: &Spanned<RawTopology>) -> Result<Topology, ScenarioError> {
    let t = spanned.get_ref();
    if t.vertex.is_empty() {
        return Err(src.at(
            spanned,
            "an explicit topology lists its vertices as [[topology.vertex]] tables",
        ));
    }
    let mut topology = Topology::new();
    for v in &t.vertex {
        topology
            .add_vertex(vertex(src, v.get_ref())?)
            .map_err(|e| src.at(&v.get_ref().name, e.to_string()))?;
    }
    for l in &t.link {
        let raw = l.get_ref();
        let end = |name: &Spanned<String>| {
            topology.find(name.get_ref()).ok_or_else(|| {
                src.at(
                    name,
                    format!(
                        "link to `{}`, which is not a [[topology.vertex]]",
                        name.get_ref()
                    ),
                )
            })
        };
        let (a, b) = (end(&raw.from)?, end(&raw.to)?);
        let link = link(src, raw)?;
        topology
            .add_link(a, b, link)
            .map_err(|e| src.at(l, e.to_string()))?;
    }
    Ok(topology)
}

fn vertex(src: &Source, v: &RawVertex) -> Result<Vertex, ScenarioError> {
    let kind = VertexKind::parse(v.kind.get_ref()).ok_or_else(|| {
        let names: Vec<&str> = VertexKind::ALL.iter().map(|k| k.name()).collect();
        src.at(
            &v.kind,
            format!(
                "unknown vertex kind `{}`; expected one of {}",
                v.kind.get_ref(),
                names.join(", ")
            ),
        )
    })?;
    // Switches and NICs get their kind's forwarding latency unless told.
    let mut vertex = Vertex::with_default_latency(v.name.get_ref().clone(), kind);
    if let Some(f) = v.forwards {
        vertex = vertex.with_forwarding(f);
    }
    if let Some(ns) = &v.forward_latency_ns {
        let ns = src.number(ns, "forward_latency_ns", true)?;
        vertex = vertex.with_forward_latency_ps(ps_of_ns(src, &v.forward_latency_ns, ns)?);
    }
    Ok(vertex)
}

fn ps_of_ns(src: &Source, at: &Option<Spanned<f64>>, ns: f64) -> Result<u64, ScenarioError> {
    let ps = (ns * 1e3).round();
    if ps > 1e15 {
        let at = at.as_ref().expect("a value was given");
        return Err(src.at(at, "latency is unreasonably large (over 1000 s)"));
    }
    Ok(ps as u64)
}

fn link(src: &Source, l: &RawLink) -> Result<Link, ScenarioError> {
    let kind = link_kind(src, &Some(l.kind.clone()), LinkKind::Smp)?;
    let count = count(src, &l.count, "count", 1, 1 << 16)? as u32;
    let mut link = Link::bundle(kind, count);
    if let Some(bw) = &l.bandwidth_gb_per_s {
        link.bandwidth_bytes_per_s = src.number(bw, "bandwidth_gb_per_s", false)? * 1e9;
    }
    if let Some(ns) = &l.latency_ns {
        let v = src.number(ns, "latency_ns", true)?;
        link.latency_ps = ps_of_ns(src, &l.latency_ns, v)?;
    }
    if let Some(m) = &l.mtu_bytes {
        link.mtu_bytes = src.count(m, "mtu_bytes", 1, 1 << 30)? as u64;
    }
    if let Some(b) = &l.buffer_bytes {
        link.buffer_bytes = src.count(b, "buffer_bytes", 1, 1 << 40)? as u64;
    }
    if let Some(lossless) = l.lossless {
        link.lossless = lossless;
    }
    Ok(link)
}
