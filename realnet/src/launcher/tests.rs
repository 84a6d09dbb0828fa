//! Tests of the launcher: which ranks are bound to a core.

use super::*;

fn job(ranks: usize, fabric: Option<FabricKind>) -> LocalJob {
    LocalJob {
        fabric,
        ..LocalJob::new(ranks, Vec::new())
    }
}

#[test]
fn only_shared_memory_ranks_with_a_core_each_are_bound() {
    let allowed = rustix::thread::sched_getaffinity(None)
        .map(|set| set.count() as usize)
        .unwrap_or(0);
    if allowed == 0 || std::env::var(BIND_VAR).is_ok_and(|v| v == "none") {
        return;
    }
    let cores = job(allowed, Some(FabricKind::Shm)).cores_to_bind();
    assert_eq!(cores.len(), allowed);
    assert!(
        cores.windows(2).all(|w| w[0] < w[1]),
        "distinct, in order: {cores:?}"
    );
    assert!(
        job(allowed + 1, Some(FabricKind::Shm))
            .cores_to_bind()
            .is_empty()
    );
    assert!(job(1, Some(FabricKind::Tcp)).cores_to_bind().is_empty());
    assert!(job(1, None).cores_to_bind().is_empty());
}
