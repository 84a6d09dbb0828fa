//! Validation of `[rdma]` (the RDMA reliable transport's timeout and
//! retry count, as NCCL's `NCCL_IB_TIMEOUT` and `NCCL_IB_RETRY_CNT`; for
//! flows over InfiniBand and RoCE), `[tcp]` (the TCP-like transport of
//! flows over plain Ethernet: Linux's `tcp_rto_min_us`, `tcp_rto_max_ms`
//! and `tcp_retries2`) and `[pfc]` (the pause thresholds of the RoCE
//! links). All need a `[topology]`: ideal links have neither a transport
//! nor switches.

use toml::Spanned;
use topologies::{LinkKind, Topology};

use super::ScenarioError;
use super::raw::{RawPfc, RawRdma, RawTcp};
use super::size::ByteSize;
use super::validate::Source;
use crate::network::{
    ModelLevel, PfcConfig, TcpConfig, TopologyConfig, TransportConfig, TransportKind,
};

/// The largest `ib_timeout`: ibverbs' local ACK timeout is a 5-bit field.
pub const IB_TIMEOUT_MAX: i64 = 31;

/// The largest `ib_retry_cnt`: ibverbs' retry count is a 3-bit field.
pub const IB_RETRY_CNT_MAX: i64 = 7;

/// Validates `[rdma]`; returns the transport (NCCL's defaults for what is
/// not given) and, if the table was given, a note for the report header.
pub(super) fn rdma(
    src: &Source,
    raw: Option<&Spanned<RawRdma>>,
    network: Option<&TopologyConfig>,
) -> Result<(TransportConfig, Option<String>), ScenarioError> {
    let mut transport = TransportConfig::default();
    let Some(spanned) = raw else {
        return Ok((transport, None));
    };
    if network.is_none() {
        return Err(src.at(
            spanned,
            "[rdma] needs a [topology]: ideal links have no transport",
        ));
    }
    let r = spanned.get_ref();
    if let Some(v) = &r.ib_timeout {
        let x = *v.get_ref();
        if !(1..=IB_TIMEOUT_MAX).contains(&x) {
            return Err(src.at(
                v,
                format!(
                    "ib_timeout must be between 1 and {IB_TIMEOUT_MAX}, got {x}: NCCL_IB_TIMEOUT is \
                     ibverbs' 5-bit local ACK timeout, 4.096 us x 2^ib_timeout (0, an endless wait, is not modelled)"
                ),
            ));
        }
        transport.ib_timeout = x as u8;
    }
    if let Some(v) = &r.ib_retry_cnt {
        let x = *v.get_ref();
        if !(0..=IB_RETRY_CNT_MAX).contains(&x) {
            return Err(src.at(
                v,
                format!(
                    "ib_retry_cnt must be between 0 and {IB_RETRY_CNT_MAX}, got {x}: NCCL_IB_RETRY_CNT is \
                     ibverbs' 3-bit retry count"
                ),
            ));
        }
        transport.ib_retry_cnt = x as u8;
    }
    let mut note = format!(
        "RDMA transport: timeout 4.096 us x 2^{} = {}, {} retries",
        transport.ib_timeout,
        duration(transport.rto_ps()),
        transport.ib_retry_cnt
    );
    note.push_str(&no_effect(network, TransportKind::Rdma));
    Ok((transport, Some(note)))
}

/// The smallest `rto_min_ms`: Linux's `tcp_rto_min_us` takes 1 us.
pub const RTO_MIN_MS_MIN: f64 = 0.001;

/// The range of `rto_max_ms`, Linux's `tcp_rto_max_ms`: 1000..=120000.
pub const RTO_MAX_MS_RANGE: (i64, i64) = (1000, 120_000);

/// The largest `retries2`: Linux's `tcp_retries2` is a `u8`.
pub const RETRIES2_MAX: i64 = 255;

/// Validates `[tcp]`; returns the TCP-like transport (Linux's defaults
/// for what is not given) and, if the table was given, a note for the
/// report header.
pub(super) fn tcp(
    src: &Source,
    raw: Option<&Spanned<RawTcp>>,
    network: Option<&TopologyConfig>,
) -> Result<(TcpConfig, Option<String>), ScenarioError> {
    let mut tcp = TcpConfig::default();
    let Some(spanned) = raw else {
        return Ok((tcp, None));
    };
    if network.is_none() {
        return Err(src.at(
            spanned,
            "[tcp] needs a [topology]: ideal links have no transport",
        ));
    }
    let r = spanned.get_ref();
    if let Some(v) = &r.rto_max_ms {
        let (min, max) = RTO_MAX_MS_RANGE;
        let ms = src.count(v, "rto_max_ms", min, max)?;
        tcp.rto_max_ps = ms as u64 * 1_000_000_000;
    }
    if let Some(v) = &r.rto_min_ms {
        let ms = src.number(v, "rto_min_ms", false)?;
        let ps = (ms * 1e9).round();
        if ms < RTO_MIN_MS_MIN || ps > tcp.rto_max_ps as f64 {
            return Err(src.at(
                v,
                format!(
                    "rto_min_ms must be between {RTO_MIN_MS_MIN} (Linux's tcp_rto_min_us takes 1 us) \
                     and rto_max_ms ({}), got {ms}",
                    tcp.rto_max_ps / 1_000_000_000
                ),
            ));
        }
        tcp.rto_min_ps = ps as u64;
    }
    if let Some(v) = &r.retries2 {
        tcp.retries2 = src.count(v, "retries2", 0, RETRIES2_MAX)? as u8;
    }
    let mut note = format!(
        "TCP transport (plain Ethernet): timeout at least {}, backed off up to {}, gives up after {} \
         timeouts without progress ({} of timeouts at the minimum)",
        duration(tcp.rto_min_ps),
        duration(tcp.rto_max_ps),
        tcp.retries2,
        duration(tcp.give_up_after_ps(tcp.rto_min_ps))
    );
    note.push_str(&no_effect(network, TransportKind::Tcp));
    Ok((tcp, Some(note)))
}

/// Why a transport table cannot act, for its note: the flow model loses
/// nothing, or no link of the topology carries that transport.
fn no_effect(network: Option<&TopologyConfig>, kind: TransportKind) -> String {
    let Some(network) = network else {
        return String::new();
    };
    if network.level == ModelLevel::Flow {
        return "; no effect in the flow model, which loses nothing".to_string();
    }
    let t = &network.topology;
    if t.link_ids()
        .any(|l| TransportKind::of_link(t.link(l)) == Some(kind))
    {
        return String::new();
    }
    match kind {
        TransportKind::Rdma => "; no effect: the topology has no InfiniBand or RoCE link",
        TransportKind::Tcp => "; no effect: the topology has no plain Ethernet link",
    }
    .to_string()
}

/// Validates `[pfc]`; returns the thresholds (`None` where not given, for
/// the model's per-link defaults) and, if the table was given, a note for
/// the report header.
pub(super) fn pfc(
    src: &Source,
    raw: Option<&Spanned<RawPfc>>,
    network: Option<&TopologyConfig>,
) -> Result<(PfcConfig, Option<String>), ScenarioError> {
    let Some(spanned) = raw else {
        return Ok((PfcConfig::default(), None));
    };
    let Some(network) = network else {
        return Err(src.at(
            spanned,
            "[pfc] needs a [topology]: ideal links have no switches to pause",
        ));
    };
    let p = spanned.get_ref();
    let bytes = |v: &Option<Spanned<ByteSize>>| v.as_ref().map(|b| b.get_ref().0);
    let (xoff, xon, headroom) = (
        bytes(&p.xoff_bytes),
        bytes(&p.xon_bytes),
        bytes(&p.headroom_bytes),
    );
    if let (Some(v), Some(0)) = (&p.xoff_bytes, xoff) {
        return Err(src.at(
            v,
            "xoff_bytes must be at least 1: a switch would pause its upstream before anything arrived",
        ));
    }
    if let (Some(v), Some(on), Some(off)) = (&p.xon_bytes, xon, xoff)
        && on >= off
    {
        return Err(src.at(
            v,
            format!(
                "xon_bytes ({on}) must be below xoff_bytes ({off}): RESUME is sent once the queue drains under XOFF"
            ),
        ));
    }
    if let (Some(v), Some(0)) = (&p.headroom_bytes, headroom) {
        return Err(src.at(
            v,
            "headroom_bytes must be at least 1: it holds what is still in flight when PAUSE takes effect",
        ));
    }
    let shown = |b: Option<u64>| b.map_or_else(|| "per-link default".to_string(), size);
    let mut note = format!(
        "PFC on RoCE links: XOFF {}, XON {}, headroom {} (per ingress port)",
        shown(xoff),
        shown(xon),
        shown(headroom)
    );
    if network.level == ModelLevel::Flow {
        note.push_str("; no effect in the flow model, which has no buffers");
    } else if !has_roce(&network.topology) {
        note.push_str("; no effect: the topology has no RoCE link");
    }
    let config = PfcConfig {
        xoff_bytes: xoff,
        xon_bytes: xon,
        headroom_bytes: headroom,
    };
    Ok((config, Some(note)))
}

/// Whether any link of `t` is RoCE, where PFC applies.
fn has_roce(t: &Topology) -> bool {
    t.link_ids()
        .any(|l| matches!(t.link(l).kind, LinkKind::Roce { .. }))
}

/// `ps` with three significant digits in us, ms or s: "1.07 s".
fn duration(ps: u64) -> String {
    let s = ps as f64 / 1e12;
    let (value, unit) = if s < 1e-3 {
        (s * 1e6, "us")
    } else if s < 1.0 {
        (s * 1e3, "ms")
    } else {
        (s, "s")
    };
    let decimals = (2 - value.log10().floor() as i32).max(0) as usize;
    format!("{value:.decimals$} {unit}")
}

/// `bytes` in the largest binary unit that divides it: "64 KiB".
fn size(bytes: u64) -> String {
    match bytes {
        b if b != 0 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b != 0 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_read_easily() {
        assert_eq!(duration(TransportConfig::default().rto_ps()), "1.07 s");
        assert_eq!(duration(4_096_000 << 1), "8.19 us");
        assert_eq!(duration(4_096_000 << 16), "268 ms");
        assert_eq!(duration(4_096_000 << 31), "8796 s");
        assert_eq!(duration(TcpConfig::default().rto_min_ps), "200 ms");
        assert_eq!(duration(TcpConfig::default().rto_max_ps), "120 s");
        assert_eq!(duration(924_600_000_000_000), "925 s");
        assert_eq!(size(64 << 10), "64 KiB");
        assert_eq!(size(3 << 20), "3 MiB");
        assert_eq!(size(1500), "1500 B");
    }
}
