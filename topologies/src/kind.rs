//! Link kinds and their default parameters.
//!
//! Each full-duplex link has a [`LinkKind`]; [`LinkKind::defaults`] gives
//! the per-direction bandwidth, latency, MTU, egress buffer and losslessness
//! a preset uses unless told otherwise. The numbers and their sources:
//!
//! | kind | bandwidth per direction | source |
//! |---|---|---|
//! | (filled in with sources by the presets work) | | |

use std::fmt;

/// The technology of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkKind {
    /// NVLink of generation 2 to 5, one link (bundles use [`Link::count`]).
    NvLink {
        /// Generation, 2..=5.
        generation: u8,
    },
    /// PCI Express of generation 3 to 5 with a lane width.
    Pcie {
        /// Generation, 3..=5.
        generation: u8,
        /// Lanes: 1, 2, 4, 8 or 16.
        width: u8,
    },
    /// InfiniBand 4x port.
    InfiniBand(IbRate),
    /// RDMA over Converged Ethernet port of the given rate.
    Roce {
        /// Line rate in Gb/s: 100, 200 or 400.
        gbps: u32,
    },
    /// Plain (lossy, TCP) Ethernet port of the given rate.
    Ethernet {
        /// Line rate in Gb/s.
        gbps: u32,
    },
    /// The inter-socket interconnect of a host (Intel UPI, AMD xGMI).
    Smp,
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
    /// generation 3..5 and width 1/2/4/8/16), `ib_hdr`, `ib_ndr`, `ib_xdr`,
    /// `roce100`, `roce200`, `roce400`, `ethernet<gbps>` (e.g. `ethernet25`),
    /// `smp`.
    pub fn parse(name: &str) -> Option<LinkKind> {
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
            let ok = (3..=5).contains(&generation) && [1, 2, 4, 8, 16].contains(&width);
            return ok.then_some(LinkKind::Pcie { generation, width });
        }
        if let Some(g) = name.strip_prefix("roce") {
            let gbps: u32 = g.parse().ok()?;
            return [100, 200, 400]
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
    pub const EXPECTED: &'static str = "nvlink2..nvlink5, pcie<gen>x<width> (gen 3-5, width 1/2/4/8/16, e.g. pcie4x16), ib_hdr, ib_ndr, ib_xdr, roce100, roce200, roce400, ethernet<gbps> (e.g. ethernet25), smp";

    /// The default parameters of one link of this kind (`count = 1`).
    pub fn defaults(self) -> Link {
        // Placeholder numbers, replaced with cited ones by the presets work.
        let (bandwidth_bytes_per_s, latency_ps, mtu_bytes, buffer_bytes, lossless) = match self {
            LinkKind::NvLink { generation } => {
                let bw = if generation >= 5 { 50e9 } else { 25e9 };
                (bw, 100_000, 4096, 64 << 10, true)
            }
            LinkKind::Pcie { generation, width } => {
                let lane = match generation {
                    3 => 8e9 * 128.0 / 130.0 / 8.0,
                    4 => 16e9 * 128.0 / 130.0 / 8.0,
                    _ => 32e9 * 128.0 / 130.0 / 8.0,
                };
                (lane * f64::from(width), 100_000, 4096, 64 << 10, true)
            }
            LinkKind::InfiniBand(rate) => {
                let gbps = match rate {
                    IbRate::Hdr => 200.0,
                    IbRate::Ndr => 400.0,
                    IbRate::Xdr => 800.0,
                };
                (gbps * 1e9 / 8.0, 25_000, 4096, 256 << 10, true)
            }
            LinkKind::Roce { gbps } => (f64::from(gbps) * 1e9 / 8.0, 25_000, 4096, 256 << 10, true),
            LinkKind::Ethernet { gbps } => {
                (f64::from(gbps) * 1e9 / 8.0, 25_000, 1500, 256 << 10, false)
            }
            LinkKind::Smp => (20.8e9, 100_000, 4096, 64 << 10, true),
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
        }
    }
}

impl Link {
    /// `count` parallel links of `kind` with its default parameters,
    /// bundled: the bandwidth is `count` times one link's.
    pub fn bundle(kind: LinkKind, count: u32) -> Link {
        let one = kind.defaults();
        Link {
            count,
            bandwidth_bytes_per_s: one.bandwidth_bytes_per_s * f64::from(count),
            ..one
        }
    }

    /// Time to put `bytes` on this link, in picoseconds (rounded up).
    pub fn serialization_ps(&self, bytes: u64) -> u64 {
        crate::duration_ps(bytes, self.bandwidth_bytes_per_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for name in [
            "nvlink2",
            "nvlink5",
            "pcie3x1",
            "pcie5x16",
            "ib_hdr",
            "ib_ndr",
            "ib_xdr",
            "roce100",
            "roce400",
            "ethernet25",
            "smp",
        ] {
            let kind = LinkKind::parse(name).unwrap_or_else(|| panic!("{name} parses"));
            assert_eq!(kind.to_string(), name);
        }
        for bad in [
            "nvlink1",
            "nvlink6",
            "pcie6x16",
            "pcie4x3",
            "roce300",
            "ethernet0",
            "ib",
            "",
        ] {
            assert_eq!(LinkKind::parse(bad), None, "{bad}");
        }
    }
}
