//! Tests of link kinds: names, NVLink and PCIe rates against the datasheets, network rates, MTU, buffers and losslessness, bundles.

use super::*;

#[test]
fn names_round_trip() {
    for name in [
        "nvlink2",
        "nvlink5",
        "pcie3x1",
        "pcie5x16",
        "pcie6x16",
        "ib_hdr",
        "ib_ndr",
        "ib_xdr",
        "roce100",
        "roce400",
        "roce800",
        "ethernet25",
        "smp",
        "nvlink_c2c",
        "memory",
    ] {
        let kind = LinkKind::parse(name).unwrap_or_else(|| panic!("{name} parses"));
        assert_eq!(kind.to_string(), name);
    }
    for bad in [
        "nvlink1",
        "nvlink6",
        "pcie7x16",
        "pcie6x3",
        "pcie4x3",
        "roce300",
        "roce1600",
        "ethernet0",
        "ib",
        "",
    ] {
        assert_eq!(LinkKind::parse(bad), None, "{bad}");
    }
}

/// Each datasheet's total NVLink bandwidth counts both directions: the
/// signalling rates; the defaults are NCCL's per-link figures.
#[test]
fn nvlink_signalling_matches_the_datasheets_and_defaults_nccls_figures() {
    let signalling = |name: &str, links: u32| {
        f64::from(links) * LinkKind::parse(name).unwrap().signalling_bytes_per_s()
    };
    assert_eq!(signalling("nvlink2", 6), 300e9 / 2.0); // V100
    assert_eq!(signalling("nvlink3", 12), 600e9 / 2.0); // A100
    assert_eq!(signalling("nvlink4", 18), 900e9 / 2.0); // H100
    assert_eq!(signalling("nvlink5", 18), 1800e9 / 2.0); // B200
    let achievable = |name: &str| {
        LinkKind::parse(name)
            .unwrap()
            .defaults()
            .bandwidth_bytes_per_s
    };
    assert_eq!(achievable("nvlink2"), 20e9);
    assert_eq!(achievable("nvlink3"), 20e9);
    assert_eq!(achievable("nvlink4"), 20.6e9);
    assert_eq!(achievable("nvlink5"), 40.1e9);
}

#[test]
fn pcie_and_network_rates() {
    let bw = |name: &str| {
        LinkKind::parse(name)
            .unwrap()
            .defaults()
            .bandwidth_bytes_per_s
    };
    // Signalling, x16: 16 lanes x GT/s x 128/130 bits per transfer / 8
    // bits per byte; achievable: NCCL's 12, 24 and 48 GB/s.
    let close = |a: f64, b: f64| (a - b).abs() < 1e-6 * b;
    let raw = |name: &str| LinkKind::parse(name).unwrap().signalling_bytes_per_s();
    assert!(close(raw("pcie3x16"), 15.753_846e9));
    assert!(close(raw("pcie4x16"), 31.507_692e9));
    assert!(close(raw("pcie5x16"), 63.015_384e9));
    assert!(close(bw("pcie3x16"), 12e9));
    assert!(close(bw("pcie4x16"), 24e9));
    assert!(close(bw("pcie5x16"), 48e9));
    // Gen6: NCCL's 480 x 16 / 80 = 96 GB/s; 64 GT/s x 16 / 8 = 128
    // GB/s signalling (Flit mode, no line code).
    assert!(close(bw("pcie6x16"), 96e9));
    assert!(close(raw("pcie6x16"), 128e9));
    assert_eq!(bw("roce800"), 100e9);
    // NVLink-C2C: 900 GB/s bidirectional.
    assert_eq!(bw("nvlink_c2c"), 450e9);
    assert!(!LinkKind::NvLinkC2c.is_network());
    assert_eq!(bw("memory"), 38.4e9);
    assert!(close(bw("pcie4x1") * 16.0, bw("pcie4x16")));
    assert_eq!(raw("ib_ndr"), bw("ib_ndr"));
    assert_eq!(bw("ib_hdr"), 25e9);
    assert_eq!(bw("ib_ndr"), 50e9);
    assert_eq!(bw("ib_xdr"), 100e9);
    assert_eq!(bw("roce400"), 50e9);
    assert_eq!(bw("ethernet25"), 3.125e9);
    assert_eq!(bw("smp"), 32e9);
}

#[test]
fn mtu_buffer_and_losslessness() {
    let d = |name: &str| LinkKind::parse(name).unwrap().defaults();
    for name in ["nvlink4", "pcie5x16", "ib_ndr", "roce200", "smp"] {
        assert!(d(name).lossless, "{name}");
        assert_eq!(d(name).mtu_bytes, 4096, "{name}");
    }
    assert!(!d("ethernet100").lossless);
    assert_eq!(d("ethernet100").mtu_bytes, 1500);
    // An InfiniBand buffer covers one 1.33 us credit round trip, and is
    // the smallest power of two that does.
    for name in ["ib_hdr", "ib_ndr", "ib_xdr"] {
        let l = d(name);
        let round_trip_bytes = l.bandwidth_bytes_per_s * 1.33e-6;
        assert!(l.buffer_bytes as f64 >= round_trip_bytes, "{name}");
        assert!(((l.buffer_bytes / 2) as f64) < round_trip_bytes, "{name}");
        assert!(l.buffer_bytes.is_power_of_two(), "{name}");
    }
    // A 200 GbE port's share of 42 MB over 32 such ports.
    assert_eq!(d("roce200").buffer_bytes, 42_000_000 / 32);
    // Every buffer holds several MTUs.
    for name in [
        "nvlink2",
        "pcie3x1",
        "ib_hdr",
        "roce100",
        "ethernet10",
        "smp",
    ] {
        assert!(d(name).buffer_bytes >= 4 * d(name).mtu_bytes, "{name}");
    }
}

#[test]
fn bundles_scale_bandwidth_and_buffer_only() {
    let one = LinkKind::parse("nvlink4").unwrap().defaults();
    let b = Link::bundle(one.kind, 18);
    assert_eq!(b.count, 18);
    assert_eq!(b.bandwidth_bytes_per_s, 18.0 * one.bandwidth_bytes_per_s);
    assert_eq!(b.buffer_bytes, 18 * one.buffer_bytes);
    assert_eq!((b.latency_ps, b.mtu_bytes), (one.latency_ps, one.mtu_bytes));
    // 4 KiB at 18 x 20.6 = 370.8 GB/s: 4096 / 370.8e9 s = 11.046 ns,
    // rounded up.
    assert_eq!(b.serialization_ps(4096), 11047);
}
