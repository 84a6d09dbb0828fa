//! The presets of `[topology]`: each preset's parameters read from the
//! scenario (checked, located, defaulted as the preset's `Default` says)
//! and its topology built, with the rotation builder of the presets that
//! have one (`symmetry`).

use toml::Spanned;
use topologies::presets;
use topologies::{LinkKind, Rotation, Topology, TopologyError, VertexId};

use super::super::ScenarioError;
use super::super::raw::RawTopology;
use super::super::validate::Source;

/// Builds a preset's rotation for the placed ranks (`[topology].symmetry`).
pub(super) type Rotator = Box<dyn Fn(&Topology, &[VertexId]) -> Result<Rotation, TopologyError>>;

/// A preset's topology (or why its parameters are out of range) and its
/// rotation builder.
pub(super) type Built = (Result<Topology, TopologyError>, Option<Rotator>);

/// The largest count any preset parameter may have (keeps a typo from
/// building a graph that exhausts memory).
const PRESET_COUNT_MAX: i64 = 1 << 16;

/// The most links one pair of vertices (`links_per_pair`) or one pair of
/// sockets (`smp_links`) may have.
const LINKS_MAX: i64 = 64;

/// A count parameter in `1..=max`, or `None` when not given.
fn count_given(
    src: &Source,
    v: &Option<Spanned<i64>>,
    what: &str,
    max: i64,
) -> Result<Option<usize>, ScenarioError> {
    v.as_ref()
        .map(|v| Ok(src.count(v, what, 1, max)? as usize))
        .transpose()
}

/// A count parameter in `1..=max`, or its default.
pub(super) fn count(
    src: &Source,
    v: &Option<Spanned<i64>>,
    what: &str,
    default: usize,
    max: i64,
) -> Result<usize, ScenarioError> {
    Ok(count_given(src, v, what, max)?.unwrap_or(default))
}

/// A count of links (`links_per_pair`, `smp_links`) in `1..=64`, or its
/// default.
fn link_count(
    src: &Source,
    v: &Option<Spanned<i64>>,
    what: &str,
    default: u32,
) -> Result<u32, ScenarioError> {
    Ok(count(src, v, what, default as usize, LINKS_MAX)? as u32)
}

/// A parameter naming one of a few choices (`what`: "node style", ...),
/// parsed by `parse`, or `None` when not given; an unknown name is refused
/// listing the `expected` ones.
fn choice_given<T>(
    src: &Source,
    v: &Option<Spanned<String>>,
    what: &str,
    parse: impl Fn(&str) -> Option<T>,
    expected: &str,
) -> Result<Option<T>, ScenarioError> {
    let Some(v) = v else {
        return Ok(None);
    };
    match parse(v.get_ref()) {
        Some(x) => Ok(Some(x)),
        None => Err(src.at(
            v,
            format!("unknown {what} `{}`; expected {expected}", v.get_ref()),
        )),
    }
}

/// [`choice_given`], or `default` when not given.
fn choice<T>(
    src: &Source,
    v: &Option<Spanned<String>>,
    what: &str,
    parse: impl Fn(&str) -> Option<T>,
    expected: &str,
    default: T,
) -> Result<T, ScenarioError> {
    Ok(choice_given(src, v, what, parse, expected)?.unwrap_or(default))
}

/// A link kind parameter, or `None` when not given.
fn link_kind_given(
    src: &Source,
    v: &Option<Spanned<String>>,
) -> Result<Option<LinkKind>, ScenarioError> {
    let expected = format!("one of {}", LinkKind::EXPECTED);
    choice_given(src, v, "link kind", LinkKind::parse, &expected)
}

/// A link kind parameter, or its default.
pub(super) fn link_kind(
    src: &Source,
    v: &Option<Spanned<String>>,
    default: LinkKind,
) -> Result<LinkKind, ScenarioError> {
    Ok(link_kind_given(src, v)?.unwrap_or(default))
}

/// A node style parameter, or `default`.
fn style(
    src: &Source,
    v: &Option<Spanned<String>>,
    default: presets::NodeStyle,
) -> Result<presets::NodeStyle, ScenarioError> {
    let names: Vec<String> = presets::NodeStyle::ALL
        .iter()
        .map(|s| format!("\"{}\"", s.name()))
        .collect();
    let expected = format!("one of {}", names.join(", "));
    choice(
        src,
        v,
        "node style",
        presets::NodeStyle::parse,
        &expected,
        default,
    )
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

/// `hosts` and `hosts_per_leaf` of a leaf-spine network (`leaf_spine`,
/// `cpu_cluster`), or their defaults.
fn hosts_on_leaves(
    src: &Source,
    t: &RawTopology,
    hosts: usize,
    hosts_per_leaf: usize,
) -> Result<(usize, usize), ScenarioError> {
    let max = PRESET_COUNT_MAX;
    Ok((
        count(src, &t.hosts, "hosts", hosts, max)?,
        count(
            src,
            &t.hosts_per_leaf,
            "hosts_per_leaf",
            hosts_per_leaf,
            max,
        )?,
    ))
}

/// A preset built from `params` whose rotation `rotation` builds from the
/// same parameters.
fn rotating<P: 'static>(
    params: P,
    build: fn(&P) -> Result<Topology, TopologyError>,
    rotation: fn(&P, &Topology, &[VertexId]) -> Result<Rotation, TopologyError>,
) -> Built {
    let built = build(&params);
    let rotator: Rotator = Box::new(move |t: &Topology, p: &[VertexId]| rotation(&params, t, p));
    (built, Some(rotator))
}

/// The `fat_tree` preset's parameters from `[topology]`.
pub(super) fn fat_tree_params(
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
    let nic = link_kind_given(src, &t.nic)?.or(d.nic);
    Ok(presets::FatTree {
        nodes,
        gpus_per_node,
        nics_per_gpu,
        style: style(src, &t.style, d.style)?,
        leaves,
        spines,
        oversubscription: oversubscription(src, &t.oversubscription)?,
        nic,
    })
}

/// Builds `preset` (one of the presets with parameters, not `explicit` or
/// `nvidia_smi`) from the parameters `t` gives.
pub(super) fn build(src: &Source, t: &RawTopology, preset: &str) -> Result<Built, ScenarioError> {
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
            let leaves = count_given(src, &t.leaves, "leaves", max)?.or(d.leaves);
            let nic = link_kind_given(src, &t.nic)?.or(d.nic);
            let params = presets::Nvl72Cluster {
                racks: count(src, &t.racks, "racks", d.racks, max)?,
                style: choice(
                    src,
                    &t.style,
                    "rack style",
                    presets::RackStyle::parse,
                    "\"gb200\" or \"gb300\"",
                    presets::RackStyle::Gb200,
                )?,
                nic,
                leaves,
                spines: spines(src, &t.spines, leaves.unwrap_or(presets::nvl72::NVL72_GPUS))?,
                oversubscription: oversubscription(src, &t.oversubscription)?,
            };
            rotating(
                params,
                presets::nvl72_cluster,
                presets::nvl72_cluster_rotation,
            )
        }
        "cpu_cluster" => {
            let d = presets::CpuCluster::default();
            let (hosts, hosts_per_leaf) = hosts_on_leaves(src, t, d.hosts, d.hosts_per_leaf)?;
            let memory_bytes_per_s = match &t.memory_gb_per_s {
                Some(v) => Some(src.number(v, "memory_gb_per_s", false)? * 1e9),
                None => None,
            };
            let params = presets::CpuCluster {
                hosts,
                sockets: count(src, &t.sockets, "sockets", d.sockets, 8)?,
                cpu: choice(
                    src,
                    &t.cpu,
                    "cpu",
                    presets::CpuModel::parse,
                    "\"xeon_8480\" or \"epyc_9654\"",
                    presets::CpuModel::Xeon8480,
                )?,
                cores_per_socket: count_given(src, &t.cores_per_socket, "cores_per_socket", 512)?,
                memory_bytes_per_s,
                smp_links: link_count(src, &t.smp_links, "smp_links", d.smp_links)?,
                nic: link_kind(src, &t.nic, d.nic)?,
                hosts_per_leaf,
                spines: spines(src, &t.spines, hosts.div_ceil(hosts_per_leaf))?,
                oversubscription: oversubscription(src, &t.oversubscription)?,
            };
            rotating(params, presets::cpu_cluster, presets::cpu_cluster_rotation)
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
                smp_links: link_count(src, &t.smp_links, "smp_links", d.smp_links)?,
            });
            (built, None)
        }
        "fat_tree" => {
            let params = fat_tree_params(src, t, nics_per_gpu)?;
            rotating(params, presets::fat_tree, presets::fat_tree_rotation)
        }
        "leaf_spine" => {
            let d = presets::LeafSpine::default();
            let (hosts, hosts_per_leaf) = hosts_on_leaves(src, t, d.hosts, d.hosts_per_leaf)?;
            let params = presets::LeafSpine {
                hosts,
                hosts_per_leaf,
                spines: spines(src, &t.spines, hosts.div_ceil(hosts_per_leaf))?.unwrap_or(d.spines),
                nic: link_kind(src, &t.nic, d.nic)?,
                oversubscription: oversubscription(src, &t.oversubscription)?,
            };
            rotating(params, presets::leaf_spine, presets::leaf_spine_rotation)
        }
        "ring" => {
            let d = presets::RingParams::default();
            let params = presets::RingParams {
                gpus: count(src, &t.gpus, "gpus", d.gpus, max)?,
                link: link_kind(src, &t.kind, d.link)?,
                links_per_pair: link_count(
                    src,
                    &t.links_per_pair,
                    "links_per_pair",
                    d.links_per_pair,
                )?,
            };
            rotating(params, presets::ring, presets::ring_rotation)
        }
        "torus2d" => {
            let d = presets::Torus::default();
            let params = presets::Torus {
                x: count(src, &t.x, "x", d.x, 4096)?,
                y: count(src, &t.y, "y", d.y, 4096)?,
                link: link_kind(src, &t.kind, d.link)?,
                links_per_pair: link_count(
                    src,
                    &t.links_per_pair,
                    "links_per_pair",
                    d.links_per_pair,
                )?,
            };
            rotating(params, presets::torus2d, presets::torus2d_rotation)
        }
        other => unreachable!("preset `{other}` is in PRESETS"),
    })
}
