//! Topologies that are not presets: written out in the scenario
//! (`preset = "explicit"`: `[[topology.vertex]]` and `[[topology.link]]`)
//! or imported from the saved output of `nvidia-smi topo -m`
//! (`preset = "nvidia_smi"`).

use toml::Spanned;
use topologies::{Link, LinkKind, Topology, Vertex, VertexKind};

use super::super::ScenarioError;
use super::super::raw::{RawLink, RawTopology, RawVertex};
use super::super::validate::Source;
use super::preset::{count, link_kind};

/// A topology imported from an `nvidia-smi topo -m` file, named relative
/// to the scenario's directory; errors in it point into that file.
pub(super) fn nvidia_smi(
    src: &Source,
    spanned: &Spanned<RawTopology>,
) -> Result<Topology, ScenarioError> {
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
pub(super) fn explicit(
    src: &Source,
    spanned: &Spanned<RawTopology>,
) -> Result<Topology, ScenarioError> {
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
