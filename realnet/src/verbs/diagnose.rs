//! Decisions and messages that need no device: which device and GID to
//! use, how long the hardware retries, and what a failed work completion
//! is called. Kept pure so that they are tested on machines without RDMA.

use std::time::Duration;

use algorithms::{FabricError, Rank};

/// The index of the device to open among `names`: the one called
/// `wanted`, else the first. The error lists what exists.
pub fn choose_device(names: &[String], wanted: Option<&str>) -> Result<usize, String> {
    if names.is_empty() {
        return Err(no_device("the device list is empty"));
    }
    match wanted {
        None => Ok(0),
        Some(w) => names.iter().position(|n| n == w).ok_or_else(|| {
            format!(
                "RDMA device {w:?} not found; available: {}",
                names.join(", ")
            )
        }),
    }
}

/// The error for a machine without RDMA devices, with `detail` from the library.
pub fn no_device(detail: &str) -> String {
    format!(
        "no RDMA device found ({detail}): is an InfiniBand/RoCE adapter present and its driver \
         loaded (ibv_devices lists it), or a Soft-RoCE link added (rdma link add rxe0 type rxe \
         netdev <iface>)?"
    )
}

/// One entry of a port's GID table, as far as the choice needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GidInfo {
    /// Its index in the table.
    pub index: u32,
    /// Whether it is a RoCE v2 GID (routable over UDP/IP).
    pub roce_v2: bool,
    /// Whether it is all zeros (unset).
    pub zero: bool,
}

/// The GID index to use given the port's table: `wanted` if it exists,
/// else the first RoCE v2 GID, else index 0, else none (LID routing).
/// The ibverbs crate indexes its table by position, so a table whose
/// positions and indices differ is refused for an explicit choice.
pub fn choose_gid(table: &[GidInfo], wanted: Option<u32>) -> Result<Option<u32>, String> {
    let dense = table.iter().enumerate().all(|(i, g)| g.index as usize == i);
    if let Some(w) = wanted {
        return match table.get(w as usize) {
            Some(g) if dense && !g.zero => Ok(Some(w)),
            Some(_) if !dense => Err(format!(
                "GID index {w}: the port's GID table has gaps, which the ibverbs crate cannot address"
            )),
            Some(_) => Err(format!("GID index {w} is unset (all zeros) on this port")),
            None => Err(format!(
                "GID index {w} is out of range: the port has {} GIDs",
                table.len()
            )),
        };
    }
    if !dense {
        return Ok(None);
    }
    if let Some(g) = table.iter().find(|g| g.roce_v2 && !g.zero) {
        return Ok(Some(g.index));
    }
    Ok(table.first().filter(|g| !g.zero).map(|g| g.index))
}

/// The exponent `t` of the RC ack timeout (4.096 us x 2^t per try) such
/// that `retries + 1` tries take at most `budget` (clamped to 1..=31):
/// a dead peer is then reported by the hardware within the job timeout.
pub fn ack_timeout_exponent(budget: Duration, retries: u8) -> u8 {
    let per_try_ns = budget.as_nanos() / (u128::from(retries) + 1);
    let units = per_try_ns / 4096;
    let t = if units == 0 {
        0
    } else {
        127 - units.leading_zeros()
    };
    t.clamp(1, 31) as u8
}

/// The name and meaning of work-completion status `status` (the values of
/// `enum ibv_wc_status` in rdma-core's verbs.h).
pub fn wc_status_name(status: u32) -> (&'static str, &'static str) {
    const NAMES: [(&str, &str); 23] = [
        ("IBV_WC_SUCCESS", "success"),
        ("IBV_WC_LOC_LEN_ERR", "local length error"),
        ("IBV_WC_LOC_QP_OP_ERR", "local QP operation error"),
        ("IBV_WC_LOC_EEC_OP_ERR", "local EE context operation error"),
        ("IBV_WC_LOC_PROT_ERR", "local protection error"),
        (
            "IBV_WC_WR_FLUSH_ERR",
            "work request flushed (the queue pair is in error)",
        ),
        ("IBV_WC_MW_BIND_ERR", "memory window bind error"),
        ("IBV_WC_BAD_RESP_ERR", "bad response"),
        ("IBV_WC_LOC_ACCESS_ERR", "local access error"),
        ("IBV_WC_REM_INV_REQ_ERR", "remote invalid request"),
        ("IBV_WC_REM_ACCESS_ERR", "remote access error"),
        ("IBV_WC_REM_OP_ERR", "remote operation error"),
        (
            "IBV_WC_RETRY_EXC_ERR",
            "transport retry counter exceeded: the peer stopped acknowledging (dead, or its queue pair is gone)",
        ),
        (
            "IBV_WC_RNR_RETRY_EXC_ERR",
            "receiver-not-ready retry counter exceeded: the peer posted no receive",
        ),
        ("IBV_WC_LOC_RDD_VIOL_ERR", "local RDD violation"),
        ("IBV_WC_REM_INV_RD_REQ_ERR", "remote invalid RD request"),
        ("IBV_WC_REM_ABORT_ERR", "remote aborted"),
        ("IBV_WC_INV_EECN_ERR", "invalid EE context number"),
        ("IBV_WC_INV_EEC_STATE_ERR", "invalid EE context state"),
        ("IBV_WC_FATAL_ERR", "fatal error"),
        ("IBV_WC_RESP_TIMEOUT_ERR", "response timeout"),
        ("IBV_WC_GENERAL_ERR", "general error"),
        ("IBV_WC_TM_ERR", "tag matching error"),
    ];
    NAMES
        .get(status as usize)
        .copied()
        .unwrap_or(("IBV_WC_UNKNOWN", "unknown status"))
}

/// The error a failed work completion of `what` (a send to or a receive
/// from `peer`) becomes: a timeout for exhausted retries (the peer is dead
/// or hung), a transport error for anything else.
pub fn completion_error(
    rank: Rank,
    peer: Rank,
    what: &str,
    status: u32,
    vendor_err: u32,
) -> FabricError {
    let (name, meaning) = wc_status_name(status);
    let reason = format!(
        "RDMA {what} rank {peer} failed: {name} ({meaning}; status {status}, vendor error {vendor_err:#x})"
    );
    if status == 12 || status == 13 {
        FabricError::Timeout { rank, peer, reason }
    } else {
        FabricError::Transport { rank, reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_device_is_named_or_the_first_and_errors_list_what_exists() {
        assert_eq!(choose_device(&names(&["mlx5_0", "mlx5_1"]), None), Ok(0));
        assert_eq!(
            choose_device(&names(&["mlx5_0", "mlx5_1"]), Some("mlx5_1")),
            Ok(1)
        );
        let e = choose_device(&names(&["mlx5_0", "mlx5_1"]), Some("rxe0")).unwrap_err();
        assert_eq!(
            e,
            "RDMA device \"rxe0\" not found; available: mlx5_0, mlx5_1"
        );
        let e = choose_device(&[], None).unwrap_err();
        assert!(
            e.starts_with("no RDMA device found (the device list is empty)"),
            "{e}"
        );
        assert!(e.contains("rdma link add"), "{e}");
    }

    #[test]
    fn the_gid_is_roce_v2_by_default_and_checked_when_asked() {
        let g = |index, roce_v2, zero| GidInfo {
            index,
            roce_v2,
            zero,
        };
        let roce = [
            g(0, false, false),
            g(1, true, false),
            g(2, false, false),
            g(3, true, false),
        ];
        assert_eq!(choose_gid(&roce, None), Ok(Some(1)));
        assert_eq!(choose_gid(&roce, Some(3)), Ok(Some(3)));
        assert!(
            choose_gid(&roce, Some(4))
                .unwrap_err()
                .contains("port has 4 GIDs")
        );
        let ib = [g(0, false, false)];
        assert_eq!(choose_gid(&ib, None), Ok(Some(0)));
        assert_eq!(choose_gid(&[], None), Ok(None));
        assert_eq!(choose_gid(&[g(0, false, true)], None), Ok(None));
        assert!(
            choose_gid(&[g(0, false, true)], Some(0))
                .unwrap_err()
                .contains("unset")
        );
        let gaps = [g(0, false, false), g(2, true, false)];
        assert!(choose_gid(&gaps, Some(1)).unwrap_err().contains("gaps"));
    }

    #[test]
    fn the_ack_timeout_fits_the_job_timeout() {
        for (budget, retries) in [(30.0, 7u8), (1.0, 7), (0.001, 7), (300.0, 0)] {
            let t = ack_timeout_exponent(Duration::from_secs_f64(budget), retries);
            let total = 4.096e-6 * 2f64.powi(i32::from(t)) * (f64::from(retries) + 1.0);
            assert!(
                total <= budget || t == 1,
                "t={t} gives {total} s over {budget} s"
            );
            let doubled = 2.0 * total;
            assert!(
                doubled > budget || t == 31,
                "t={t} is not the largest that fits"
            );
        }
        assert_eq!(ack_timeout_exponent(Duration::from_secs(30), 7), 19);
        assert_eq!(ack_timeout_exponent(Duration::ZERO, 7), 1);
    }

    #[test]
    fn a_failed_completion_names_the_peer_and_the_status() {
        let e = completion_error(0, 3, "send to", 12, 0x81);
        let FabricError::Timeout {
            rank: 0,
            peer: 3,
            reason,
        } = &e
        else {
            panic!("{e:?}")
        };
        assert!(
            reason.contains("RDMA send to rank 3 failed: IBV_WC_RETRY_EXC_ERR"),
            "{reason}"
        );
        assert!(reason.contains("vendor error 0x81"), "{reason}");
        let e = completion_error(1, 2, "receive from", 4, 0).to_string();
        assert!(
            e.contains("rank 1: RDMA receive from rank 2 failed: IBV_WC_LOC_PROT_ERR"),
            "{e}"
        );
        assert_eq!(wc_status_name(99).0, "IBV_WC_UNKNOWN");
    }
}
