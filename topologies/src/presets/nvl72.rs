//! GB200 NVL72 and GB300 NVL72 racks, and clusters of racks joined by a
//! rail-optimised network.
//!
//! ```text
//!                        rack0/nvswitch               (every GPU: 18 x NVLink 5)
//!          /      /      |      \        \
//!   gpu0  gpu1  gpu2  gpu3  ...  gpu71                (tray t: GPUs 4t..4t+3)
//!     \   /       \   /
//!    grace0      grace1   ...  grace35                (GPU i: NVLink-C2C to grace i/2)
//!     |   |       |   |
//!   nic0 nic1   nic2 nic3 ...  nic71                  (GB200: PCIe Gen5 x16 to the Grace;
//!                                                      GB300: Gen6 x16 to the GPU, Gen5 x16 to the Grace)
//! ```
//!
//! A rack is one NVLink domain of 72 GPUs, so NCCL treats it as one node
//! (MNNVL fuses the rack's hosts into one system, `src/graph/topo.cc:1542-1579`,
//! and a full NVL72 communicator has `nNodes = 1`, `src/init.cc:1176-1188`
//! @ b91894bd). Facts, with a tag saying where each was read (\[ML\]: an
//! MLCommons inference-results system JSON, submitter-provided; \[3P\]: a
//! third-party page, not NVIDIA; \[S\]: NCCL's source @ b91894bd; \[A\]:
//! assumed):
//!
//! | part | model | source |
//! |---|---|---|
//! | GPUs | 72 per rack, 18 compute trays x 4 | 72 B200 + 36 Grace, 18 compute trays, 9 NVLink switch trays \[3P\] aiwiki.ai, setloop.io, datacrunch.io; "GBx platforms only have 4 GPUs per host" \[S\] `src/init.cc:773` |
//! | NVLink | each GPU: one bundle of 18 NVLink 5 links (NCCL's 40.1 GB/s each, 721.8 GB/s) to the rack's `nvswitch` | 1.8 TB/s per GPU \[3P\]; NV18 between a tray's GPUs \[ML\] `inference_results_v6.1 closed/Crusoe/systems/GB200-NVL72_GB200-186GB_aarch64x16_Dynamo.json`; `SM100_NVLINK_BW` 40.1 \[S\] `src/graph/topo.h:23` |
//! | NVLink switches | the 9 switch trays' chips are one `nvswitch` vertex, as in [`dgx`](super::dgx) (NCCL also joins every GPU to one NVS node, `topo.cc:617-621` \[S\]) | |
//! | Grace | 2 per tray, each a `socket` vertex; GPU `i` on Grace `i / 2` by one `nvlink_c2c` link (450 GB/s per direction) | 2 superchips (1 Grace + 2 GPUs) per tray \[3P\]; NVLink-C2C 900 GB/s bidirectional \[3P\]; whether a Grace's two GPUs share that figure is not in the sources read \[A: each GPU gets it\] |
//! | GB200 NIC | one ConnectX-7 400 Gb/s (`ib_ndr`) per GPU, PCIe Gen5 x16 to the GPU's Grace | 4 x 400G NICs per 4-GPU host, host link NVLink-C2C \[ML\] Crusoe file above; NIC under the CPU, reached GPU -> C2C -> CPU -> PCIe (NCCL's P2C path, `paths.cc:712-744` \[S\]) |
//! | GB300 NIC | one ConnectX-8 800 Gb/s (`ib_xdr`) per GPU, PCIe Gen6 x16 to the GPU and Gen5 x16 to its Grace | "Gen6 x16 to the B300 GPU, Gen5 x16 to Grace" \[3P\] Hot Chips 2025 coverage (cloudnews.tech); 800 Gb/s per GPU \[3P\] acecloud.ai |
//!
//! Names: `rack<r>/gpu<i>`, `rack<r>/grace<c>`, `rack<r>/nvswitch`,
//! `rack<r>/nic<i>`, then `leaf<l>` and `spine<s>`. Ranks are rack-major:
//! rank `72r + i` is `rack<r>/gpu<i>`.

use crate::TopologyError;
use crate::graph::{Topology, VertexId};
use crate::kind::{IbRate, Link, LinkKind};
use crate::rotation::Rotation;
use crate::vertex::{Vertex, VertexKind};

use super::clos::{
    RailLayout, Rails, add_rails, check_network_kind, check_oversubscription, rail_rotation,
    rail_shape,
};
use super::{check_size, parameter};

/// GPUs in one NVL72 rack.
pub const NVL72_GPUS: usize = 72;
/// GPUs per compute tray.
pub const NVL72_GPUS_PER_TRAY: usize = 4;
/// Grace CPUs per compute tray.
pub const NVL72_GRACES_PER_TRAY: usize = 2;
/// NVLink 5 links per GPU.
pub const NVL72_NVLINKS_PER_GPU: u32 = 18;
/// Vertices of one rack: 72 GPUs, 36 Grace CPUs, one NVSwitch, 72 NICs.
pub const NVL72_RACK_VERTICES: usize = 181;

/// Which superchip a rack holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RackStyle {
    /// GB200: B200 GPUs, ConnectX-7 400G NICs under the Grace CPUs.
    Gb200,
    /// GB300: B300 GPUs, ConnectX-8 800G NICs on the GPUs (Gen6).
    Gb300,
}

impl RackStyle {
    /// The scenario name: `gb200`, `gb300`.
    pub fn name(self) -> &'static str {
        match self {
            RackStyle::Gb200 => "gb200",
            RackStyle::Gb300 => "gb300",
        }
    }

    /// Parses a name as [`RackStyle::name`] writes it.
    pub fn parse(name: &str) -> Option<RackStyle> {
        [RackStyle::Gb200, RackStyle::Gb300]
            .into_iter()
            .find(|s| s.name() == name)
    }

    /// The NICs' network port: NDR 400G (GB200), XDR 800G (GB300).
    pub fn nic(self) -> LinkKind {
        match self {
            RackStyle::Gb200 => LinkKind::InfiniBand(IbRate::Ndr),
            RackStyle::Gb300 => LinkKind::InfiniBand(IbRate::Xdr),
        }
    }

    /// Links of one rack: 216 for GB200 (72 NVLink bundles, 72 C2C, 72
    /// NIC-to-Grace PCIe), 288 for GB300 (also 72 GPU-to-NIC PCIe).
    pub fn rack_links(self) -> usize {
        match self {
            RackStyle::Gb200 => 3 * NVL72_GPUS,
            RackStyle::Gb300 => 4 * NVL72_GPUS,
        }
    }
}

/// The vertices [`add_nvl72_rack`] added.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nvl72RackIds {
    /// GPU `i` is `gpus[i]`.
    pub gpus: Vec<VertexId>,
    /// NIC `i` (GPU `i`'s) is `nics[i]`.
    pub nics: Vec<VertexId>,
    /// Grace CPU `c` (GPUs `2c`, `2c + 1`) is `graces[c]`.
    pub graces: Vec<VertexId>,
    /// The NVLink switch trays, one vertex.
    pub nvswitch: VertexId,
}

/// Adds one NVL72 rack named `name` (its vertices `<name>/gpu<i>`, ...),
/// GPUs first in order: [`NVL72_RACK_VERTICES`] vertices and
/// [`RackStyle::rack_links`] links.
pub fn add_nvl72_rack(
    t: &mut Topology,
    name: &str,
    style: RackStyle,
) -> Result<Nvl72RackIds, TopologyError> {
    let vertex = |suffix: String, kind: VertexKind| {
        Vertex::with_default_latency(format!("{name}/{suffix}"), kind)
    };
    let gpus = (0..NVL72_GPUS)
        .map(|i| t.add_vertex(vertex(format!("gpu{i}"), VertexKind::Gpu)))
        .collect::<Result<Vec<_>, _>>()?;
    let graces = (0..NVL72_GPUS / 2)
        .map(|c| t.add_vertex(vertex(format!("grace{c}"), VertexKind::Socket)))
        .collect::<Result<Vec<_>, _>>()?;
    let nvswitch = t.add_vertex(vertex("nvswitch".into(), VertexKind::NvSwitch))?;
    let nics = (0..NVL72_GPUS)
        .map(|i| t.add_vertex(vertex(format!("nic{i}"), VertexKind::Nic)))
        .collect::<Result<Vec<_>, _>>()?;
    let nvlink = Link::bundle(LinkKind::NvLink { generation: 5 }, NVL72_NVLINKS_PER_GPU);
    let c2c = Link::bundle(LinkKind::NvLinkC2c, 1);
    let pcie = |generation| {
        Link::bundle(
            LinkKind::Pcie {
                generation,
                width: 16,
            },
            1,
        )
    };
    for i in 0..NVL72_GPUS {
        t.add_link(gpus[i], nvswitch, nvlink)?;
        t.add_link(gpus[i], graces[i / 2], c2c)?;
        t.add_link(nics[i], graces[i / 2], pcie(5))?;
        if style == RackStyle::Gb300 {
            t.add_link(gpus[i], nics[i], pcie(6))?;
        }
    }
    Ok(Nvl72RackIds {
        gpus,
        nics,
        graces,
        nvswitch,
    })
}

/// One NVL72 rack named `rack0` on its own: 181 vertices, 216 links
/// (GB200) or 288 (GB300); its NICs have no network link.
pub fn nvl72_rack(style: RackStyle) -> Result<Topology, TopologyError> {
    let mut t = Topology::new();
    add_nvl72_rack(&mut t, "rack0", style)?;
    Ok(t)
}

/// The parameters of [`nvl72_cluster`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Nvl72Cluster {
    /// Racks, at least 1 (default 2).
    pub racks: usize,
    /// The racks' superchip (default GB200).
    pub style: RackStyle,
    /// The NICs' and switches' link kind (InfiniBand, RoCE or Ethernet);
    /// `None` (default) is the style's NIC, [`RackStyle::nic`].
    pub nic: Option<LinkKind>,
    /// Leaves: a positive multiple of 72 (one rail per GPU index), at most
    /// `racks` per rail; `None` (default) is one leaf per rail.
    pub leaves: Option<usize>,
    /// Spines; `None` (default) is 36 capped at the uplinks of the largest
    /// leaf (none with a single leaf).
    pub spines: Option<usize>,
    /// Downlinks per uplink at each leaf, at least 1 (default 1).
    pub oversubscription: f64,
}

impl Default for Nvl72Cluster {
    fn default() -> Nvl72Cluster {
        Nvl72Cluster {
            racks: 2,
            style: RackStyle::Gb200,
            nic: None,
            leaves: None,
            spines: None,
            oversubscription: 1.0,
        }
    }
}

/// NVL72 racks joined by a rail-optimised two-level Clos, built as
/// [`fat_tree`](super::fat_tree) joins DGX nodes (the uplinks are dealt as
/// the [`clos`](super::clos) module docs say): NIC `i` of every rack is on
/// a leaf of rail `i`, so a rail joins the GPUs with the same index in
/// every rack.
///
/// With `R` racks, `L` leaves (`k = L / 72` per rail), `S` spines and
/// `d_l` downlinks at leaf `l`: vertices `181·R + L + S`; links
/// `R·rack_links + 72·R + Σ_l ceil(d_l / oversubscription)` (no uplinks
/// when `S = 0`), with `rack_links` 216 (GB200) or 288 (GB300). Two GB200
/// racks with the defaults: 436 vertices (362 + 72 leaves + 2 spines) and
/// 720 links (432 + 144 NIC-to-leaf + 144 uplinks).
///
/// Ranks are rack-major: rank `72r + i` is `rack<r>/gpu<i>`.
pub fn nvl72_cluster(params: &Nvl72Cluster) -> Result<Topology, TopologyError> {
    let (rails, _) = params.shape()?;
    let mut t = Topology::new();
    let mut nics = Vec::with_capacity(params.racks);
    for r in 0..params.racks {
        nics.push(add_nvl72_rack(&mut t, &format!("rack{r}"), params.style)?.nics);
    }
    add_rails(&mut t, &nics, &rails)?;
    Ok(t)
}

impl Nvl72Cluster {
    /// Checks the parameters as [`nvl72_cluster`] documents them; the rail
    /// network and the number of leaves.
    fn shape(&self) -> Result<(Rails, usize), TopologyError> {
        let &Nvl72Cluster {
            racks,
            style,
            nic,
            leaves,
            spines,
            oversubscription,
        } = self;
        if racks == 0 {
            return Err(parameter("nvl72_cluster: racks must be at least 1"));
        }
        check_oversubscription("nvl72_cluster", oversubscription)?;
        let nic = nic.unwrap_or(style.nic());
        check_network_kind("nvl72_cluster", nic)?;
        let (leaf_count, per_rail, spine_count) = rail_shape(
            "nvl72_cluster",
            racks,
            NVL72_GPUS,
            leaves,
            spines,
            oversubscription,
        )?;
        let vertices = racks
            .checked_mul(NVL72_RACK_VERTICES)
            .and_then(|v| v.checked_add(leaf_count)?.checked_add(spine_count));
        check_size("nvl72_cluster", vertices)?;
        let rails = Rails {
            nic,
            per_rail,
            spines: spine_count,
            oversubscription,
        };
        Ok((rails, leaf_count))
    }
}

/// The rotation of an [`nvl72_cluster`] built from `params` with ranks on
/// `placement` (rack-major): the fat-tree's
/// ([`fat_tree_rotation`](super::fat_tree_rotation)) with racks for nodes.
/// With one leaf per rail it moves every rank on by one rack (72 ranks),
/// the uplinks and spines turning with it; with `k` leaves per rail by
/// `racks / k` racks. The same conditions apply (the spines divide a
/// leaf's uplinks, which divide the racks; or `k` divides the racks), else
/// a [`TopologyError::Symmetry`] says which fails.
pub fn nvl72_cluster_rotation(
    params: &Nvl72Cluster,
    topology: &Topology,
    placement: &[VertexId],
) -> Result<Rotation, TopologyError> {
    let (rails, leaves) = params.shape()?;
    rail_rotation(
        &RailLayout {
            preset: "nvl72_cluster_rotation",
            prefix: "rack",
            nodes: params.racks,
            ranks_per_node: NVL72_GPUS,
            leaves,
            per_rail: rails.per_rail,
            spines: rails.spines,
            oversubscription: params.oversubscription,
        },
        topology,
        placement,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::check::{bandwidth, links_between, well_formed};

    #[test]
    fn a_rack_has_the_documented_parts() {
        for style in [RackStyle::Gb200, RackStyle::Gb300] {
            let t = nvl72_rack(style).unwrap();
            assert_eq!(t.vertex_count(), NVL72_RACK_VERTICES);
            assert_eq!(t.vertex_count(), 72 + 36 + 1 + 72);
            assert_eq!(t.link_count(), style.rack_links());
            assert_eq!(t.endpoints().len(), 72);
            well_formed(&t);
            // 18 NVLink 5 links at NCCL's 40.1 GB/s; C2C 900 GB/s
            // bidirectional.
            let nvl = bandwidth(&t, "rack0/gpu71", "rack0/nvswitch");
            assert!((nvl - 721.8e9).abs() < 1.0);
            assert_eq!(bandwidth(&t, "rack0/gpu71", "rack0/grace35"), 450e9);
            assert_eq!(links_between(&t, "rack0/gpu70", "rack0/grace35"), 1);
            assert_eq!(links_between(&t, "rack0/gpu69", "rack0/grace35"), 0);
            assert!((bandwidth(&t, "rack0/nic71", "rack0/grace35") - 48e9).abs() < 1.0);
        }
        assert_eq!(nvl72_rack(RackStyle::Gb200).unwrap().link_count(), 216);
        let gb300 = nvl72_rack(RackStyle::Gb300).unwrap();
        assert_eq!(gb300.link_count(), 288);
        // ConnectX-8 on Gen6 x16: NCCL's 480 x 16 / 80 = 96 GB/s.
        assert!((bandwidth(&gb300, "rack0/gpu5", "rack0/nic5") - 96e9).abs() < 1.0);
        let gb200 = nvl72_rack(RackStyle::Gb200).unwrap();
        assert_eq!(links_between(&gb200, "rack0/gpu5", "rack0/nic5"), 0);
    }

    #[test]
    fn a_cluster_joins_rails_by_gpu_index() {
        let t = nvl72_cluster(&Nvl72Cluster::default()).unwrap();
        assert_eq!((t.vertex_count(), t.link_count()), (436, 720));
        well_formed(&t);
        assert_eq!(links_between(&t, "rack0/nic17", "leaf17"), 1);
        assert_eq!(links_between(&t, "rack1/nic17", "leaf17"), 1);
        assert_eq!(links_between(&t, "rack1/nic17", "leaf16"), 0);
        assert_eq!(bandwidth(&t, "rack1/nic17", "leaf17"), 50e9);
        // Ranks are rack-major.
        let e = t.endpoints();
        assert_eq!(t.vertex(e[72 + 5]).name, "rack1/gpu5");
        // The formula over a few shapes: 3 GB300 racks, 2 leaves per rail
        // over 3 racks (1 and 2 downlinks), 2:1 oversubscribed.
        let p = Nvl72Cluster {
            racks: 3,
            style: RackStyle::Gb300,
            nic: LinkKind::parse("roce800"),
            leaves: Some(144),
            spines: Some(1),
            oversubscription: 2.0,
        };
        let t = nvl72_cluster(&p).unwrap();
        let uplinks = 72 * (1 + 1); // ceil(1/2) + ceil(2/2) per rail
        assert_eq!(t.vertex_count(), 3 * 181 + 144 + 1);
        assert_eq!(t.link_count(), 3 * 288 + 3 * 72 + uplinks);
        assert_eq!(bandwidth(&t, "rack2/nic0", "leaf1"), 100e9);
        well_formed(&t);
        // One rack: one leaf per rail, each with one uplink to one spine.
        let t = nvl72_cluster(&Nvl72Cluster {
            racks: 1,
            ..Nvl72Cluster::default()
        })
        .unwrap();
        assert_eq!(
            (t.vertex_count(), t.link_count()),
            (181 + 72 + 1, 216 + 72 + 72)
        );
    }

    #[test]
    fn a_cluster_rotates_by_one_rack_and_folds() {
        let params = Nvl72Cluster {
            racks: 4,
            ..Nvl72Cluster::default()
        };
        let t = nvl72_cluster(&params).unwrap();
        let r = nvl72_cluster_rotation(&params, &t, &t.endpoints()).unwrap();
        assert_eq!(r.shift(), 72);
        let image = |name: &str| t.vertex(r.vertex(t.find(name).unwrap())).name.clone();
        assert_eq!(image("rack3/grace7"), "rack0/grace7");
        assert_eq!(image("leaf5"), "leaf5");
        r.link_orbits(&t).unwrap();
        // Three racks over 2 spines: 3 uplinks per leaf, not a multiple.
        let odd = Nvl72Cluster {
            racks: 3,
            spines: Some(2),
            ..Nvl72Cluster::default()
        };
        let t = nvl72_cluster(&odd).unwrap();
        let err = nvl72_cluster_rotation(&odd, &t, &t.endpoints()).unwrap_err();
        assert!(err.to_string().contains("not a multiple"), "{err}");
    }

    #[test]
    fn bad_cluster_parameters_are_named() {
        let d = Nvl72Cluster::default();
        let bad = [
            (Nvl72Cluster { racks: 0, ..d }, "racks"),
            (
                Nvl72Cluster {
                    leaves: Some(100),
                    ..d
                },
                "leaves",
            ),
            (
                Nvl72Cluster {
                    spines: Some(0),
                    ..d
                },
                "spines",
            ),
            (
                Nvl72Cluster {
                    nic: Some(LinkKind::Smp),
                    ..d
                },
                "nic",
            ),
            (
                Nvl72Cluster {
                    racks: 1 << 20,
                    ..d
                },
                "vertices",
            ),
        ];
        for (params, name) in bad {
            let err = nvl72_cluster(&params).unwrap_err();
            assert!(
                matches!(&err, TopologyError::Parameter(m) if m.contains(name)),
                "{name}: {err}"
            );
        }
    }
}
