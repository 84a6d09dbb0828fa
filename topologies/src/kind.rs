//! Link kinds and their default parameters.
//!
//! Each full-duplex link has a [`LinkKind`]; [`LinkKind::defaults`] gives
//! the per-direction bandwidth, latency, MTU, egress buffer and losslessness
//! a preset uses unless told otherwise. Every number below comes from a
//! public specification or datasheet, or, where none is published, from a
//! stated estimate; none was tuned to make a result come out.
//!
//! | kind | bandwidth per direction (one link) | latency | MTU | buffer | lossless | source |
//! |---|---|---|---|---|---|---|
//! | `nvlink2` | 20 GB/s (signalling 25) | 25 ns (est.) | 4 KiB (coalesced) | 64 KiB (est.) | yes | NCCL `SM70_NVLINK_BW`; V100 datasheet: 6 NVLink 2 links, 300 GB/s total (bidirectional) |
//! | `nvlink3` | 20 GB/s (signalling 25) | 25 ns (est.) | 4 KiB (coalesced) | 64 KiB (est.) | yes | NCCL `SM80_NVLINK_BW`; A100 datasheet: 12 NVLink 3 links, 600 GB/s total |
//! | `nvlink4` | 20.6 GB/s (signalling 25) | 25 ns (est.) | 4 KiB (coalesced) | 64 KiB (est.) | yes | NCCL `SM90_NVLINK_BW`; H100 datasheet: 18 NVLink 4 links, 900 GB/s total |
//! | `nvlink5` | 40.1 GB/s (signalling 50) | 25 ns (est.) | 4 KiB (coalesced) | 64 KiB (est.) | yes | NCCL `SM100_NVLINK_BW` (2.29); B200 / HGX B200 datasheet: 18 NVLink 5 links, 1.8 TB/s total |
//! | `pcie3x<w>` | w x 0.75 GB/s (12 GB/s for x16; signalling 15.75) | 25 ns (est.) | 4 KiB (coalesced) | 64 KiB (est.) | yes | NCCL's PCI width x speed / 80; PCI Express Base Spec 3.0: 8 GT/s per lane, 128b/130b encoding |
//! | `pcie4x<w>` | w x 1.5 GB/s (24 GB/s for x16; signalling 31.5) | 25 ns (est.) | 4 KiB (coalesced) | 64 KiB (est.) | yes | as above; PCI Express Base Spec 4.0: 16 GT/s per lane, 128b/130b |
//! | `pcie5x<w>` | w x 3 GB/s (48 GB/s for x16; signalling 63.0) | 25 ns (est.) | 4 KiB (coalesced) | 64 KiB (est.) | yes | as above; PCI Express Base Spec 5.0: 32 GT/s per lane, 128b/130b |
//! | `pcie6x<w>` | w x 6 GB/s (96 GB/s for x16; signalling 128) | 25 ns (est.) | 4 KiB (coalesced) | 64 KiB (est.) | yes | NCCL's per-lane 480 for `"64.0 GT/s PCIe"` (`src/graph/topo.cc:448` @ b91894bd); PCI Express Base Spec 6.0: 64 GT/s per lane, PAM4, Flit mode (no 128b/130b line code; a 256 B flit carries 236 B of TLP, the rest DLLP, CRC and FEC) |
//! | `nvlink_c2c` | 450 GB/s (signalling 450) | 25 ns (est.) | 4 KiB (coalesced) | 64 KiB (est.) | yes | NVIDIA GB200 NVL72 / Grace Hopper pages: NVLink-C2C 900 GB/s bidirectional between a Grace CPU and its GPUs (third-party copies; NCCL has no constant, it reads the C2C bandwidth from NVML, `src/graph/xml.cc:836-853`, `topo.cc:675-695` @ b91894bd) |
//! | `ib_hdr` | 25 GB/s | 150 ns | 4096 B | 64 KiB (derived) | yes | InfiniBand HDR 4x = 200 Gb/s (IBTA roadmap; NVIDIA ConnectX-6 and QM87xx manuals) |
//! | `ib_ndr` | 50 GB/s | 150 ns | 4096 B | 128 KiB (derived) | yes | InfiniBand NDR 4x = 400 Gb/s (ConnectX-7 and QM97xx manuals) |
//! | `ib_xdr` | 100 GB/s | 150 ns | 4096 B | 256 KiB (derived) | yes | InfiniBand XDR 4x = 800 Gb/s (NVIDIA Q3200/Q3400 XDR switch manual) |
//! | `roce<g>` (g = 100, 200, 400, 800) | g/8 GB/s (25 GB/s for 200; 100 for an 800G ConnectX-8 port, as NCCL's `speed / 8000`, `topo.cc:370` @ b91894bd) | 150 ns | 4096 B | 42 MB x g/6400 (1.31 MB for 200) | yes (PFC assumed) | Ethernet line rate (IEEE 802.3); buffer from the NVIDIA Spectrum-2 switch (42 MB shared, 6.4 Tb/s) |
//! | `ethernet<g>` | g/8 GB/s | 150 ns | 1500 B | 42 MB x g/6400 | no | Ethernet line rate, standard 1500 B payload MTU (IEEE 802.3) |
//! | `memory` | 38.4 GB/s | 25 ns (est.) | 4 KiB (coalesced) | 64 KiB (est.) | yes | one DDR5-4800 channel: 4800 MT/s x 8 bytes (JEDEC DDR5, JESD79-5); the CPU cluster preset gives each core's link to its socket a share of the socket's channels |
//! | `smp` | 32 GB/s | 25 ns (est.) | 4 KiB (coalesced) | 64 KiB (est.) | yes | Intel UPI 2.0 (4th Gen Xeon Scalable, e.g. the DGX H100's Xeon Platinum 8480C): 16 GT/s x 2 bytes per transfer |
//!
//! # How each column was chosen
//!
//! **Bandwidth** is what one physical link, one direction, achieves for
//! NCCL's traffic: the per-link figures NCCL's own topology code uses
//! (NVIDIA/nccl `src/graph/topo.h` at v2.21.5-1, commit `ab2b89c4`, lines
//! 13-31: `SM70_NVLINK_BW` 20, `SM80_NVLINK_BW` 20, `SM90_NVLINK_BW` 20.6
//! GB/s; `SM100_NVLINK_BW` 40.1 GB/s at v2.29.7-1, commit `b91894bd`;
//! PCIe as `width x speed / 80` GB/s with speed 60, 120, 240 per lane for
//! Gen3, 4, 5, `src/graph/topo.cc:393-396,451-460`, and 480 for Gen6 at
//! v2.29.7-1, `src/graph/topo.cc:448`), matched to a
//! generation by the datasheet pairing (V100 NVLink 2, A100 NVLink 3,
//! H100 NVLink 4, B200 NVLink 5). The raw signalling rate is kept as a
//! separate fact, [`LinkKind::signalling_bytes_per_s`]: each datasheet's
//! total (bidirectional) NVLink bandwidth divided by the number of links
//! and by two, and PCIe's `GT/s x 128/130 / 8` per lane (Gen6: `64 / 8`,
//! its Flit mode has no line code); the difference is protocol overhead
//! (packet headers, flow control, TLP and DLLP framing; Gen6's flit CRC
//! and FEC) that NCCL's figures account for. The
//! network kinds use the 4x-port data rate (InfiniBand) or line rate
//! (Ethernet). `smp` is one Intel UPI 2.0 link: Intel quotes first-
//! generation UPI at 10.4 GT/s as 20.8 GB/s per direction (2 bytes per
//! transfer), so UPI 2.0 at 16 GT/s carries 32 GB/s. An AMD xGMI x16 link at
//! 16 Gb/s per lane (the DGX A100's EPYC 7742 pair) gives the same raw
//! 16 x 16 / 8 = 32 GB/s, so one `smp` figure serves both nodes.
//!
//! **Latency** is the per-link propagation plus PHY latency, one way; the
//! switching latency of the vertices at either end is separate
//! ([`crate::VertexKind::default_forward_latency_ps`]). Signals travel at
//! about 5 ns per metre in copper and fibre (velocity factor about 0.67).
//! No vendor publishes a per-link PHY latency for NVLink, PCIe or UPI, so
//! the on-board links use an estimate: 0.5 m of board trace or cable
//! (2.5 ns) plus about 20 ns of SerDes transmit and receive pipeline,
//! rounded to 25 ns. The network links assume 10 m of cable (50 ns; in-rack
//! copper is 1-3 m, leaf-to-spine optics tens of metres) plus about 100 ns
//! for the RS(544,514) forward error correction that 50 Gb/s-per-lane PAM4
//! signalling (HDR, 200 GbE) and faster requires: 150 ns. Slower Ethernet
//! ports without that FEC are given the same figure for simplicity.
//!
//! **MTU.** InfiniBand's largest MTU is 4096 bytes and RoCE uses the same
//! path MTUs; plain Ethernet uses the standard 1500-byte payload. NVLink,
//! PCIe and UPI move at most 256-512 bytes per packet (a PCIe TLP's max
//! payload is typically 256 or 512 B; UPI moves 64-byte cache lines), but
//! **as a modelling simplification the simulator coalesces them into 4 KiB
//! units** to keep the number of events per message manageable; the
//! bandwidth is unaffected, only the granularity of interleaving between
//! flows on one link.
//!
//! **Buffer** is the egress buffer of one direction of one physical link
//! ([`Link::bundle`] multiplies it by the link count). No public figure
//! exists for NVLink, PCIe or UPI ports: 64 KiB (16 coalesced units) is an
//! estimate, comfortably above one credit round trip of data (about
//! 25 GB/s x 0.1 us = 2.5 KB) and small enough that backpressure forms
//! within a few units. NVIDIA does not publish the per-port buffer of its
//! Quantum InfiniBand switches either; a credit-based link runs at full
//! rate when its receive buffer holds one credit round trip, so the
//! InfiniBand buffer is `rate x 1.33 us` rounded up to a power of two,
//! where 1.33 us is the round trip over a 100 m cable (the longest NDR
//! optic listed in the QM97xx manual: 2 x (500 ns + 100 ns FEC)) plus
//! 130 ns of switch latency. Ethernet switches publish a shared buffer:
//! the NVIDIA Spectrum-2 has 42 MB shared by 6.4 Tb/s of ports, divided
//! here in proportion to port bandwidth (1.31 MB for a 200 GbE port).
//!
//! **Lossless**: NVLink, PCIe, InfiniBand and UPI use credit-based flow
//! control and never drop for lack of buffer. RoCE runs on lossless
//! Ethernet with priority flow control (PFC), as clusters that run NCCL
//! over RDMA configure it: `roce<g>` links are lossless, and NCCL's
//! traffic over them (and over InfiniBand) uses its RDMA transport.
//! Plain Ethernet (`ethernet<g>`) has no PFC and drops when a buffer is
//! full: it is a network NCCL reaches through its socket transport, over
//! TCP, and the simulator's packet model gives the flows that cross it
//! TCP's loss recovery instead of RDMA's.

use std::fmt;

/// The technology of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkKind {
    /// NVLink of generation 2 to 5, one link (bundles use [`Link::count`]).
    NvLink {
        /// Generation, 2..=5.
        generation: u8,
    },
    /// PCI Express of generation 3 to 6 with a lane width.
    Pcie {
        /// Generation, 3..=6.
        generation: u8,
        /// Lanes: 1, 2, 4, 8 or 16.
        width: u8,
    },
    /// InfiniBand 4x port.
    InfiniBand(IbRate),
    /// RDMA over Converged Ethernet port of the given rate.
    Roce {
        /// Line rate in Gb/s: 100, 200, 400 or 800.
        gbps: u32,
    },
    /// Plain (lossy, TCP) Ethernet port of the given rate.
    Ethernet {
        /// Line rate in Gb/s.
        gbps: u32,
    },
    /// The inter-socket interconnect of a host (Intel UPI, AMD xGMI).
    Smp,
    /// NVLink-C2C: the chip-to-chip link between a Grace CPU and a GPU of
    /// the same superchip (GH200, GB200, GB300).
    NvLinkC2c,
    /// A CPU core's path to its socket's memory (DDR5 channels); the CPU
    /// cluster preset sets its bandwidth to the core's share.
    Memory,
}

/// InfiniBand data rates (4x ports).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IbRate {
    /// HDR, 200 Gb/s.
    Hdr,
    /// NDR, 400 Gb/s.
    Ndr,
    /// XDR, 800 Gb/s.
    Xdr,
}

/// The parameters of one full-duplex link (each direction has them all).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    /// Technology.
    pub kind: LinkKind,
    /// Parallel physical links bundled into this one (an H100's 18
    /// NVLinks to the NVSwitch complex are one `Link` with `count = 18`).
    pub count: u32,
    /// Bandwidth per direction, in bytes per second (all `count` links).
    pub bandwidth_bytes_per_s: f64,
    /// Propagation latency, in picoseconds.
    pub latency_ps: u64,
    /// Largest packet payload, in bytes.
    pub mtu_bytes: u64,
    /// Egress buffer of each direction, in bytes.
    pub buffer_bytes: u64,
    /// Whether the link never drops for lack of buffer (credit-based
    /// flow control: NVLink, PCIe, InfiniBand; RoCE with PFC).
    pub lossless: bool,
}

impl LinkKind {
    /// Parses a scenario name: `nvlink2`..`nvlink5`, `pcie3x16` (any
    /// generation 3..6 and width 1/2/4/8/16), `ib_hdr`, `ib_ndr`, `ib_xdr`,
    /// `roce100`, `roce200`, `roce400`, `roce800`, `ethernet<gbps>` (e.g.
    /// `ethernet25`), `smp`, `nvlink_c2c`, `memory`.
    pub fn parse(name: &str) -> Option<LinkKind> {
        match name {
            "nvlink_c2c" => return Some(LinkKind::NvLinkC2c),
            "memory" => return Some(LinkKind::Memory),
            _ => {}
        }
        if let Some(g) = name.strip_prefix("nvlink") {
            let generation: u8 = g.parse().ok()?;
            return (2..=5)
                .contains(&generation)
                .then_some(LinkKind::NvLink { generation });
        }
        if let Some(rest) = name.strip_prefix("pcie") {
            let (g, w) = rest.split_once('x')?;
            let generation: u8 = g.parse().ok()?;
            let width: u8 = w.parse().ok()?;
            let ok = (3..=6).contains(&generation) && [1, 2, 4, 8, 16].contains(&width);
            return ok.then_some(LinkKind::Pcie { generation, width });
        }
        if let Some(g) = name.strip_prefix("roce") {
            let gbps: u32 = g.parse().ok()?;
            return [100, 200, 400, 800]
                .contains(&gbps)
                .then_some(LinkKind::Roce { gbps });
        }
        if let Some(g) = name.strip_prefix("ethernet") {
            let gbps: u32 = g.parse().ok()?;
            return (gbps > 0 && gbps <= 1600).then_some(LinkKind::Ethernet { gbps });
        }
        match name {
            "ib_hdr" => Some(LinkKind::InfiniBand(IbRate::Hdr)),
            "ib_ndr" => Some(LinkKind::InfiniBand(IbRate::Ndr)),
            "ib_xdr" => Some(LinkKind::InfiniBand(IbRate::Xdr)),
            "smp" => Some(LinkKind::Smp),
            _ => None,
        }
    }

    /// What [`LinkKind::parse`] accepts, for error messages.
    pub const EXPECTED: &'static str = "nvlink2..nvlink5, pcie<gen>x<width> (gen 3-6, width 1/2/4/8/16, e.g. pcie4x16), ib_hdr, ib_ndr, ib_xdr, roce100, roce200, roce400, roce800, ethernet<gbps> (e.g. ethernet25), smp, nvlink_c2c, memory";

    /// The default parameters of one link of this kind (`count = 1`); the
    /// module docs give each number's source.
    pub fn defaults(self) -> Link {
        let (bandwidth_bytes_per_s, latency_ps, mtu_bytes, buffer_bytes, lossless) = match self {
            LinkKind::NvLink { generation } => {
                let bandwidth = match generation {
                    2 | 3 => NCCL_SM70_SM80_NVLINK_BYTES_PER_S,
                    4 => NCCL_SM90_NVLINK_BYTES_PER_S,
                    _ => NCCL_SM100_NVLINK_BYTES_PER_S,
                };
                (
                    bandwidth,
                    ON_BOARD_LATENCY_PS,
                    COALESCED_MTU_BYTES,
                    ON_BOARD_BUFFER_BYTES,
                    true,
                )
            }
            LinkKind::Pcie { generation, width } => (
                nccl_pcie_lane_bytes_per_s(generation) * f64::from(width),
                ON_BOARD_LATENCY_PS,
                COALESCED_MTU_BYTES,
                ON_BOARD_BUFFER_BYTES,
                true,
            ),
            LinkKind::InfiniBand(rate) => {
                let bandwidth = f64::from(rate.gbps()) * 1e9 / 8.0;
                (
                    bandwidth,
                    NETWORK_LATENCY_PS,
                    IB_MTU_BYTES,
                    credit_loop_buffer_bytes(bandwidth),
                    true,
                )
            }
            LinkKind::Roce { gbps } => (
                f64::from(gbps) * 1e9 / 8.0,
                NETWORK_LATENCY_PS,
                IB_MTU_BYTES,
                shared_buffer_share_bytes(gbps),
                true,
            ),
            LinkKind::Ethernet { gbps } => (
                f64::from(gbps) * 1e9 / 8.0,
                NETWORK_LATENCY_PS,
                ETHERNET_MTU_BYTES,
                shared_buffer_share_bytes(gbps),
                false,
            ),
            LinkKind::Smp => (
                UPI2_BYTES_PER_S,
                ON_BOARD_LATENCY_PS,
                COALESCED_MTU_BYTES,
                ON_BOARD_BUFFER_BYTES,
                true,
            ),
            LinkKind::Memory => (
                DDR5_4800_CHANNEL_BYTES_PER_S,
                ON_BOARD_LATENCY_PS,
                COALESCED_MTU_BYTES,
                ON_BOARD_BUFFER_BYTES,
                true,
            ),
            LinkKind::NvLinkC2c => (
                NVLINK_C2C_BYTES_PER_S,
                ON_BOARD_LATENCY_PS,
                COALESCED_MTU_BYTES,
                ON_BOARD_BUFFER_BYTES,
                true,
            ),
        };
        Link {
            kind: self,
            count: 1,
            bandwidth_bytes_per_s,
            latency_ps,
            mtu_bytes,
            buffer_bytes,
            lossless,
        }
    }

    /// The raw signalling rate of one link, one direction, in bytes per
    /// second: the datasheet figure, above what NCCL's traffic achieves
    /// ([`LinkKind::defaults`] uses the achievable rate; see the module
    /// docs).
    pub fn signalling_bytes_per_s(self) -> f64 {
        match self {
            LinkKind::NvLink { generation } if generation >= 5 => NVLINK5_BYTES_PER_S,
            LinkKind::NvLink { .. } => NVLINK2_TO_4_BYTES_PER_S,
            LinkKind::Pcie { generation, width } => {
                pcie_lane_bytes_per_s(generation) * f64::from(width)
            }
            other => other.defaults().bandwidth_bytes_per_s,
        }
    }

    /// Whether this kind connects hosts to a network switch (InfiniBand,
    /// RoCE, Ethernet) rather than devices inside a host.
    pub fn is_network(self) -> bool {
        matches!(
            self,
            LinkKind::InfiniBand(_) | LinkKind::Roce { .. } | LinkKind::Ethernet { .. }
        )
    }
}

impl IbRate {
    /// The 4x-port data rate in Gb/s: HDR 200, NDR 400, XDR 800.
    pub fn gbps(self) -> u32 {
        match self {
            IbRate::Hdr => 200,
            IbRate::Ndr => 400,
            IbRate::Xdr => 800,
        }
    }
}

/// One NVLink 2, 3 or 4 link, one direction, signalling: 25 GB/s (V100:
/// 300 GB/s over 6 links; A100: 600 GB/s over 12; H100: 900 GB/s over 18;
/// totals count both directions).
const NVLINK2_TO_4_BYTES_PER_S: f64 = 25e9;
/// One NVLink 5 link, one direction, signalling: 50 GB/s (B200: 1.8 TB/s
/// over 18).
const NVLINK5_BYTES_PER_S: f64 = 50e9;
/// NCCL's per-link NVLink bandwidth on V100 and A100 (`SM70_NVLINK_BW`,
/// `SM80_NVLINK_BW` = 20.0 GB/s, `src/graph/topo.h:17,18` @ ab2b89c4).
const NCCL_SM70_SM80_NVLINK_BYTES_PER_S: f64 = 20.0e9;
/// NCCL's per-link NVLink bandwidth on H100 (`SM90_NVLINK_BW` = 20.6 GB/s,
/// `src/graph/topo.h:20` @ ab2b89c4).
const NCCL_SM90_NVLINK_BYTES_PER_S: f64 = 20.6e9;
/// NCCL's per-link NVLink bandwidth on B200 (`SM100_NVLINK_BW` = 40.1 GB/s,
/// `src/graph/topo.h` @ b91894bd, NCCL 2.29.7; 2.21 predates Blackwell).
const NCCL_SM100_NVLINK_BYTES_PER_S: f64 = 40.1e9;
/// NVLink-C2C between a Grace CPU and a GPU, one direction: 900 GB/s
/// bidirectional (NVIDIA's GB200 NVL72 and Grace Hopper product pages, as
/// copied by third parties; NCCL reads it from NVML at run time) / 2.
const NVLINK_C2C_BYTES_PER_S: f64 = 450e9;
/// One DDR5-4800 channel: 4800 MT/s x 8 bytes (64-bit channel, JEDEC
/// JESD79-5).
pub const DDR5_4800_CHANNEL_BYTES_PER_S: f64 = 38.4e9;
/// One Intel UPI 2.0 link, one direction: 16 GT/s x 2 bytes.
const UPI2_BYTES_PER_S: f64 = 32e9;
/// On-board links (NVLink, PCIe, UPI): 0.5 m at 5 ns/m plus an estimated
/// 20 ns of SerDes pipeline, rounded: 25 ns.
const ON_BOARD_LATENCY_PS: u64 = 25_000;
/// Network links: 10 m at 5 ns/m plus about 100 ns of RS(544,514) FEC.
const NETWORK_LATENCY_PS: u64 = 150_000;
/// The simulator's coalescing unit for NVLink, PCIe and UPI packets.
const COALESCED_MTU_BYTES: u64 = 4096;
/// InfiniBand's largest MTU, also RoCE's.
const IB_MTU_BYTES: u64 = 4096;
/// The standard Ethernet payload MTU.
const ETHERNET_MTU_BYTES: u64 = 1500;
/// Estimated egress buffer of an on-board link: 16 coalesced units.
const ON_BOARD_BUFFER_BYTES: u64 = 64 << 10;
/// InfiniBand credit round trip over a 100 m cable: 2 x (500 ns
/// propagation + 100 ns FEC) + 130 ns switch latency.
const IB_CREDIT_LOOP_S: f64 = 1.33e-6;
/// NVIDIA Spectrum-2: 42 MB of shared packet buffer...
const SPECTRUM2_BUFFER_BYTES: u64 = 42_000_000;
/// ...for 6.4 Tb/s of ports (32 x 200 GbE).
const SPECTRUM2_CAPACITY_GBPS: u64 = 6400;

/// One PCIe lane, one direction, as NCCL rates it: `speed / 80` GB/s with
/// `speed` 60, 120, 240 (units of 100 Mb/s) for Gen3, 4, 5
/// (`src/graph/topo.cc:393-396,451-460` @ ab2b89c4) and 480 for Gen6
/// (`src/graph/topo.cc:448` @ b91894bd): 0.75, 1.5, 3, 6 GB/s.
fn nccl_pcie_lane_bytes_per_s(generation: u8) -> f64 {
    let speed = match generation {
        3 => 60.0,
        4 => 120.0,
        5 => 240.0,
        _ => 480.0,
    };
    speed / 80.0 * 1e9
}

/// One PCIe lane, one direction, signalling: `GT/s x 128/130 / 8` bytes
/// per second for Gen3-5; Gen6's Flit mode has no line code, so
/// `64 GT/s / 8` = 8 GB/s (its flit framing, CRC and FEC are protocol
/// overhead, as the TLP and DLLP framing of the older generations).
fn pcie_lane_bytes_per_s(generation: u8) -> f64 {
    let (gigatransfers, encoding) = match generation {
        3 => (8.0, 128.0 / 130.0),
        4 => (16.0, 128.0 / 130.0),
        5 => (32.0, 128.0 / 130.0),
        _ => (64.0, 1.0),
    };
    gigatransfers * 1e9 * encoding / 8.0
}

/// The buffer that covers one InfiniBand credit round trip at
/// `bytes_per_s`, rounded up to a power of two.
fn credit_loop_buffer_bytes(bytes_per_s: f64) -> u64 {
    ((bytes_per_s * IB_CREDIT_LOOP_S).ceil() as u64).next_power_of_two()
}

/// A port's share of the Spectrum-2 shared buffer, in proportion to its
/// line rate.
fn shared_buffer_share_bytes(gbps: u32) -> u64 {
    SPECTRUM2_BUFFER_BYTES * u64::from(gbps) / SPECTRUM2_CAPACITY_GBPS
}

impl fmt::Display for LinkKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LinkKind::NvLink { generation } => write!(f, "nvlink{generation}"),
            LinkKind::Pcie { generation, width } => write!(f, "pcie{generation}x{width}"),
            LinkKind::InfiniBand(IbRate::Hdr) => write!(f, "ib_hdr"),
            LinkKind::InfiniBand(IbRate::Ndr) => write!(f, "ib_ndr"),
            LinkKind::InfiniBand(IbRate::Xdr) => write!(f, "ib_xdr"),
            LinkKind::Roce { gbps } => write!(f, "roce{gbps}"),
            LinkKind::Ethernet { gbps } => write!(f, "ethernet{gbps}"),
            LinkKind::Smp => write!(f, "smp"),
            LinkKind::NvLinkC2c => write!(f, "nvlink_c2c"),
            LinkKind::Memory => write!(f, "memory"),
        }
    }
}

impl Link {
    /// `count` parallel links of `kind` with its default parameters,
    /// bundled: the bandwidth and the egress buffer are `count` times one
    /// link's (each physical link has its own buffer); latency and MTU are
    /// one link's.
    pub fn bundle(kind: LinkKind, count: u32) -> Link {
        let one = kind.defaults();
        Link {
            count,
            bandwidth_bytes_per_s: one.bandwidth_bytes_per_s * f64::from(count),
            buffer_bytes: one.buffer_bytes.saturating_mul(u64::from(count)),
            ..one
        }
    }

    /// Time to put `bytes` on this link, in picoseconds (rounded up).
    pub fn serialization_ps(&self, bytes: u64) -> u64 {
        crate::duration_ps(bytes, self.bandwidth_bytes_per_s)
    }
}

#[cfg(test)]
mod tests;
