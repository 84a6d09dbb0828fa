//! A cluster of multi-socket CPU hosts with one rank per core (MPI jobs
//! with many ranks per host), joined by a leaf-spine network.
//!
//! ```text
//!   host0/socket0/core0 ... core<C-1>     host0/socket1/core0 ...
//!            \   |   /                         \   |   /
//!          host0/socket0 ====== smp ====== host0/socket1
//!               |  (PCIe Gen5 x16)
//!           host0/nic ---- leaf0 ---- spine0 ...
//! ```
//!
//! **Memory.** A rank's messages to another rank of its host move through
//! shared memory. Each core links to its socket by one `memory` link
//! carrying `memory_bandwidth / cores_per_socket`: the socket's memory
//! bandwidth divided equally among its cores, which is what each core gets
//! when all of them move data at once (a collective's steps). A core alone
//! gets no more than its share (a modelling simplification: a single core
//! on a real socket can use more, up to its own load/store limit).
//!
//! The CPU models give the defaults (\[M\]: from the vendor's product page,
//! named here but not re-read):
//!
//! | `cpu` | cores per socket | memory per socket | PCIe | inter-socket |
//! |---|---|---|---|---|
//! | `xeon_8480` (Intel Xeon Platinum 8480+) | 56 | 8 channels DDR5-4800 = 8 x 38.4 = 307.2 GB/s | Gen5 | 4 UPI 2.0 links at 16 GT/s (the `smp` kind, 32 GB/s each) |
//! | `epyc_9654` (AMD EPYC 9654) | 96 | 12 channels DDR5-4800 = 12 x 38.4 = 460.8 GB/s | Gen5 | 4 xGMI links, modelled as `smp` (32 GB/s each; Genoa's xGMI may run faster, not modelled) |
//!
//! Core, channel and link counts: Intel ARK "Intel Xeon Platinum 8480+
//! Processor" and AMD "EPYC 9654" product pages \[M\]; the DDR5-4800 channel
//! rate is JEDEC's (4800 MT/s x 8 bytes). NCCL rates the Sapphire Rapids
//! inter-socket path lower (`SRP_QPI_BW` 22 GB/s, `src/graph/topo.h:28`
//! @ b91894bd), which applies to GPU traffic routed over it, not to these
//! CPU ranks.
//!
//! Each pair of sockets is joined by one bundle of `smp_links` `smp` links
//! (a full mesh; two sockets is one bundle). The host's NIC hangs off
//! socket 0 by PCIe Gen5 x16, and the NICs join a leaf-spine network laid
//! out as [`leaf_spine`](super::leaf_spine)'s.

use crate::TopologyError;
use crate::graph::{Topology, VertexId};
use crate::kind::{DDR5_4800_CHANNEL_BYTES_PER_S, IbRate, Link, LinkKind};
use crate::rotation::Rotation;
use crate::vertex::{Vertex, VertexKind};

use super::clos::{
    HostLayout, add_leaves, check_network_kind, check_oversubscription, check_spines,
    host_rotation, uplink_count,
};
use super::{check_size, parameter};

/// A CPU model: the defaults of [`CpuCluster`] (module docs give sources).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CpuModel {
    /// Intel Xeon Platinum 8480+ (Sapphire Rapids): 56 cores, 8 DDR5-4800
    /// channels per socket.
    Xeon8480,
    /// AMD EPYC 9654 (Genoa): 96 cores, 12 DDR5-4800 channels per socket.
    Epyc9654,
}

impl CpuModel {
    /// The scenario name: `xeon_8480`, `epyc_9654`.
    pub fn name(self) -> &'static str {
        match self {
            CpuModel::Xeon8480 => "xeon_8480",
            CpuModel::Epyc9654 => "epyc_9654",
        }
    }

    /// Parses a name as [`CpuModel::name`] writes it.
    pub fn parse(name: &str) -> Option<CpuModel> {
        [CpuModel::Xeon8480, CpuModel::Epyc9654]
            .into_iter()
            .find(|m| m.name() == name)
    }

    /// Cores per socket: 56 or 96.
    pub fn cores(self) -> usize {
        match self {
            CpuModel::Xeon8480 => 56,
            CpuModel::Epyc9654 => 96,
        }
    }

    /// DDR5-4800 memory channels per socket: 8 or 12.
    pub fn memory_channels(self) -> u32 {
        match self {
            CpuModel::Xeon8480 => 8,
            CpuModel::Epyc9654 => 12,
        }
    }

    /// Memory bandwidth per socket, bytes per second: channels x 38.4 GB/s.
    pub fn memory_bytes_per_s(self) -> f64 {
        f64::from(self.memory_channels()) * DDR5_4800_CHANNEL_BYTES_PER_S
    }
}

/// The parameters of [`cpu_cluster`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuCluster {
    /// Hosts, at least 1 (default 4).
    pub hosts: usize,
    /// Sockets per host, 1..=8 (default 2).
    pub sockets: usize,
    /// The CPU model (default Xeon 8480+).
    pub cpu: CpuModel,
    /// Cores (ranks) per socket, 1..=512; `None` (default) is the model's.
    pub cores_per_socket: Option<usize>,
    /// Memory bandwidth per socket in bytes per second, positive and
    /// finite; `None` (default) is the model's.
    pub memory_bytes_per_s: Option<f64>,
    /// `smp` links between each pair of sockets, at least 1 (default 4).
    pub smp_links: u32,
    /// The NICs' and switches' link kind (default `ib_ndr`).
    pub nic: LinkKind,
    /// Hosts per leaf, at least 1 (default 8); the last leaf takes the
    /// remainder.
    pub hosts_per_leaf: usize,
    /// Spines; `None` (default) is 2 capped at a leaf's uplinks, or 0 with
    /// a single leaf. Zero is only allowed with one leaf.
    pub spines: Option<usize>,
    /// Downlinks per uplink at each leaf, at least 1 (default 1).
    pub oversubscription: f64,
}

impl Default for CpuCluster {
    fn default() -> CpuCluster {
        CpuCluster {
            hosts: 4,
            sockets: 2,
            cpu: CpuModel::Xeon8480,
            cores_per_socket: None,
            memory_bytes_per_s: None,
            smp_links: 4,
            nic: LinkKind::InfiniBand(IbRate::Ndr),
            hosts_per_leaf: 8,
            spines: None,
            oversubscription: 1.0,
        }
    }
}

/// A cluster of CPU hosts, one rank per core, as the module docs lay it
/// out. Host `h`'s cores are `host<h>/socket<s>/core<c>` (endpoints), its
/// sockets `host<h>/socket<s>`, its NIC `host<h>/nic`; leaves `leaf<l>`
/// and spines `spine<s>`.
///
/// With `H` hosts, `S` sockets of `C` cores, `L = ceil(H / hosts_per_leaf)`
/// leaves, `P` spines and `d_l` hosts on leaf `l`: vertices
/// `H·(S·C + S + 1) + L + P`; links `H·(S·C + S(S-1)/2 + 1) + H +
/// Σ_l ceil(d_l / oversubscription)` (no uplinks when `P = 0`).
///
/// Ranks are host-major: rank `h·S·C + s·C + c` is
/// `host<h>/socket<s>/core<c>`.
pub fn cpu_cluster(params: &CpuCluster) -> Result<Topology, TopologyError> {
    let Shape {
        cores,
        memory,
        spines,
        ..
    } = params.shape()?;
    let &CpuCluster {
        hosts,
        sockets,
        smp_links,
        nic,
        hosts_per_leaf,
        oversubscription,
        ..
    } = params;
    let mut t = Topology::new();
    let core_link = Link {
        bandwidth_bytes_per_s: memory / cores as f64,
        ..Link::bundle(LinkKind::Memory, 1)
    };
    let smp = Link::bundle(LinkKind::Smp, smp_links);
    let pcie = Link::bundle(
        LinkKind::Pcie {
            generation: 5,
            width: 16,
        },
        1,
    );
    let mut nics = Vec::with_capacity(hosts);
    for h in 0..hosts {
        let vertex = |name: String, kind| Vertex::with_default_latency(name, kind);
        let mut core_ids = Vec::with_capacity(sockets * cores);
        for s in 0..sockets {
            for c in 0..cores {
                let name = format!("host{h}/socket{s}/core{c}");
                core_ids.push(t.add_vertex(vertex(name, VertexKind::Cpu))?);
            }
        }
        let socket_ids = (0..sockets)
            .map(|s| t.add_vertex(vertex(format!("host{h}/socket{s}"), VertexKind::Socket)))
            .collect::<Result<Vec<_>, _>>()?;
        let card = t.add_vertex(vertex(format!("host{h}/nic"), VertexKind::Nic))?;
        for (i, &core) in core_ids.iter().enumerate() {
            t.add_link(core, socket_ids[i / cores], core_link)?;
        }
        for a in 0..sockets {
            for b in a + 1..sockets {
                t.add_link(socket_ids[a], socket_ids[b], smp)?;
            }
        }
        t.add_link(card, socket_ids[0], pcie)?;
        nics.push(card);
    }
    add_leaves(&mut t, &nics, hosts_per_leaf, spines, nic, oversubscription)?;
    Ok(t)
}

/// What [`cpu_cluster`] builds from its parameters, once they are checked.
struct Shape {
    /// Cores (ranks) per socket.
    cores: usize,
    /// Memory bandwidth per socket, bytes per second.
    memory: f64,
    /// Leaves.
    leaves: usize,
    /// Spines.
    spines: usize,
}

impl CpuCluster {
    /// Checks the parameters as [`cpu_cluster`] documents them; an error
    /// names the parameter out of range.
    fn shape(&self) -> Result<Shape, TopologyError> {
        let &CpuCluster {
            hosts,
            sockets,
            cpu,
            cores_per_socket,
            memory_bytes_per_s,
            smp_links,
            nic,
            hosts_per_leaf,
            spines,
            oversubscription,
        } = self;
        if hosts == 0 {
            return Err(parameter("cpu_cluster: hosts must be at least 1"));
        }
        if !(1..=8).contains(&sockets) {
            return Err(parameter(format!(
                "cpu_cluster: sockets must be 1..=8, got {sockets}"
            )));
        }
        let cores = cores_per_socket.unwrap_or(cpu.cores());
        if !(1..=512).contains(&cores) {
            return Err(parameter(format!(
                "cpu_cluster: cores_per_socket must be 1..=512, got {cores}"
            )));
        }
        let memory = memory_bytes_per_s.unwrap_or(cpu.memory_bytes_per_s());
        if !(memory.is_finite() && memory > 0.0) {
            return Err(parameter(format!(
                "cpu_cluster: memory bandwidth must be a positive number, got {memory}"
            )));
        }
        if smp_links == 0 {
            return Err(parameter("cpu_cluster: smp_links must be at least 1"));
        }
        if hosts_per_leaf == 0 {
            return Err(parameter("cpu_cluster: hosts_per_leaf must be at least 1"));
        }
        check_oversubscription("cpu_cluster", oversubscription)?;
        check_network_kind("cpu_cluster", nic)?;
        let leaves = hosts.div_ceil(hosts_per_leaf);
        let max_downlinks = hosts.min(hosts_per_leaf);
        let default_spines = 2.min(uplink_count(max_downlinks, oversubscription));
        let spines = spines.unwrap_or(if leaves > 1 { default_spines } else { 0 });
        check_spines(
            "cpu_cluster",
            spines,
            leaves,
            max_downlinks,
            oversubscription,
        )?;
        let per_host = sockets * cores + sockets + 1;
        let vertices = hosts
            .checked_mul(per_host)
            .and_then(|v| v.checked_add(leaves)?.checked_add(spines));
        check_size("cpu_cluster", vertices)?;
        Ok(Shape {
            cores,
            memory,
            leaves,
            spines,
        })
    }
}

/// The rotation of a [`cpu_cluster`] built from `params` with ranks on
/// `placement` (host-major), as
/// [`leaf_spine_rotation`](super::leaf_spine_rotation) turns its hosts
/// (each host with its cores, sockets and NIC): one leaf moves every rank
/// on by one host (`sockets · cores` ranks), leaves and spines staying;
/// several leaves by one leaf's hosts, leaf `l` to `l + 1`, spines
/// staying. An error when `hosts_per_leaf` does not divide `hosts`.
pub fn cpu_cluster_rotation(
    params: &CpuCluster,
    topology: &Topology,
    placement: &[VertexId],
) -> Result<Rotation, TopologyError> {
    let shape = params.shape()?;
    host_rotation(
        &HostLayout {
            preset: "cpu_cluster_rotation",
            hosts: params.hosts,
            hosts_per_leaf: params.hosts_per_leaf,
            ranks_per_host: params.sockets * shape.cores,
            leaves: shape.leaves,
            spines: shape.spines,
        },
        topology,
        placement,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::check::{bandwidth, links_between, well_formed};

    /// (hosts, sockets, cores, hosts per leaf, spines, oversubscription,
    /// leaf sizes)
    type Case = (
        usize,
        usize,
        usize,
        usize,
        Option<usize>,
        f64,
        &'static [usize],
    );

    #[test]
    fn counts_follow_the_formula() {
        let cases: [Case; 4] = [
            (4, 2, 3, 8, None, 1.0, &[4]),
            (5, 1, 36, 2, Some(1), 2.0, &[2, 2, 1]),
            (2, 4, 2, 1, None, 1.0, &[1, 1]),
            (1, 2, 144, 1, None, 1.0, &[1]),
        ];
        for (h, s, c, per_leaf, spines, o, sizes) in cases {
            let params = CpuCluster {
                hosts: h,
                sockets: s,
                cores_per_socket: Some(c),
                hosts_per_leaf: per_leaf,
                spines,
                oversubscription: o,
                ..CpuCluster::default()
            };
            let t = cpu_cluster(&params).unwrap();
            let max_uplinks = (h.min(per_leaf) as f64 / o).ceil() as usize;
            let p = spines.unwrap_or(if sizes.len() > 1 {
                max_uplinks.min(2)
            } else {
                0
            });
            let uplinks: usize = if p == 0 {
                0
            } else {
                sizes.iter().map(|&d| (d as f64 / o).ceil() as usize).sum()
            };
            assert_eq!(
                t.vertex_count(),
                h * (s * c + s + 1) + sizes.len() + p,
                "{params:?}"
            );
            assert_eq!(
                t.link_count(),
                h * (s * c + s * (s - 1) / 2 + 1) + h + uplinks,
                "{params:?}"
            );
            assert_eq!(t.endpoints().len(), h * s * c, "{params:?}");
            well_formed(&t);
        }
    }

    #[test]
    fn defaults_follow_the_cpu_models() {
        let t = cpu_cluster(&CpuCluster {
            hosts: 2,
            hosts_per_leaf: 1,
            ..CpuCluster::default()
        })
        .unwrap();
        // 112 ranks per host; 8 x 38.4 GB/s shared by 56 cores.
        assert_eq!(t.endpoints().len(), 224);
        let share = bandwidth(&t, "host1/socket1/core55", "host1/socket1");
        assert!((share - 307.2e9 / 56.0).abs() < 1.0);
        assert_eq!(bandwidth(&t, "host1/socket0", "host1/socket1"), 4.0 * 32e9);
        assert!((bandwidth(&t, "host1/nic", "host1/socket0") - 48e9).abs() < 1.0);
        assert_eq!(bandwidth(&t, "host1/nic", "leaf1"), 50e9);
        // One host per leaf has one uplink: one spine.
        assert_eq!(links_between(&t, "leaf1", "spine0"), 1);
        assert!(t.find("spine1").is_none());
        // Host-major ranks.
        let e = t.endpoints();
        assert_eq!(t.vertex(e[112 + 56 + 3]).name, "host1/socket1/core3");
        let epyc = CpuModel::Epyc9654;
        assert_eq!((epyc.cores(), epyc.memory_bytes_per_s()), (96, 460.8e9));
        assert_eq!(CpuModel::parse("epyc_9654"), Some(epyc));
        // 288 ranks per host: two 144-core sockets.
        let big = cpu_cluster(&CpuCluster {
            hosts: 1,
            cores_per_socket: Some(144),
            ..CpuCluster::default()
        })
        .unwrap();
        assert_eq!(big.endpoints().len(), 288);
    }

    #[test]
    fn hosts_rotate_with_their_cores() {
        let params = CpuCluster {
            hosts: 4,
            cores_per_socket: Some(3),
            hosts_per_leaf: 2,
            ..CpuCluster::default()
        };
        let t = cpu_cluster(&params).unwrap();
        let r = cpu_cluster_rotation(&params, &t, &t.endpoints()).unwrap();
        // One leaf's hosts: 2 hosts x 2 sockets x 3 cores.
        assert_eq!(r.shift(), 12);
        let image = |name: &str| t.vertex(r.vertex(t.find(name).unwrap())).name.clone();
        assert_eq!(image("host3/socket1/core2"), "host1/socket1/core2");
        assert_eq!(image("leaf1"), "leaf0");
        r.link_orbits(&t).unwrap();
        let uneven = CpuCluster { hosts: 5, ..params };
        let t = cpu_cluster(&uneven).unwrap();
        let err = cpu_cluster_rotation(&uneven, &t, &t.endpoints()).unwrap_err();
        assert!(err.to_string().contains("do not divide"), "{err}");
    }

    #[test]
    fn bad_parameters_are_named() {
        let d = CpuCluster::default();
        let bad = [
            (CpuCluster { hosts: 0, ..d }, "hosts"),
            (CpuCluster { sockets: 9, ..d }, "sockets"),
            (
                CpuCluster {
                    cores_per_socket: Some(0),
                    ..d
                },
                "cores_per_socket",
            ),
            (
                CpuCluster {
                    memory_bytes_per_s: Some(f64::NAN),
                    ..d
                },
                "memory",
            ),
            (CpuCluster { smp_links: 0, ..d }, "smp_links"),
            (
                CpuCluster {
                    hosts: 16,
                    spines: Some(0),
                    ..d
                },
                "spines",
            ),
            (
                CpuCluster {
                    nic: LinkKind::Smp,
                    ..d
                },
                "nic",
            ),
            (
                CpuCluster {
                    hosts: 1 << 20,
                    ..d
                },
                "vertices",
            ),
        ];
        for (params, name) in bad {
            let err = cpu_cluster(&params).unwrap_err();
            assert!(
                matches!(&err, TopologyError::Parameter(m) if m.contains(name)),
                "{name}: {err}"
            );
        }
    }
}
