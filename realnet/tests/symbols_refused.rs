//! Symbolic elements (`DType::Sym`) are ids in one thread's interner: every
//! real fabric refuses to send them, with an error that says why, and
//! stays usable afterwards.
#![cfg(not(loom))]

use std::time::Duration;

use algorithms::symbolic::leaf;
use algorithms::{Collective, DType, FabricError, Params, Payload, ReduceOp, Tag};
use realnet::shm::{ShmFabric, ShmOptions};
use realnet::tcp::{TcpFabric, TcpOptions};
use realnet::{CallId, Endpoint, JobOptions, LocalBootstrap, LocalFabric};

fn job(job_id: u64) -> JobOptions {
    JobOptions {
        job_id,
        timeout: Duration::from_secs(10),
        ..JobOptions::default()
    }
}

/// One rank of a two-rank job: symbols to the peer and to itself are
/// refused, then an ordinary allreduce still completes.
fn refuses_then_works<E: Endpoint>(f: &E) {
    f.begin_call(CallId::new(
        1,
        &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
    ))
    .unwrap();
    let peer = 1 - f.rank();
    for to in [peer, f.rank()] {
        let symbols = Payload::from_vec(vec![leaf(7), leaf(8)]);
        match f.block_on(f.send(to, Tag(5), symbols)) {
            Err(FabricError::Transport { rank, reason }) => {
                assert_eq!(rank, f.rank());
                assert!(reason.contains("symbolic elements"), "{reason}");
                assert!(reason.contains(&format!("rank {to}")), "{reason}");
            }
            other => panic!("a symbol payload was not refused: {other:?}"),
        }
        let phantom = Payload::phantom(DType::Sym, 3);
        assert!(f.block_on(f.send(to, Tag(5), phantom)).is_err());
    }
    f.begin_call(CallId::new(
        2,
        &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
    ))
    .unwrap();
    let mut buf = Payload::from_vec(vec![f.rank() as i32 + 1; 5]);
    f.block_on(
        algorithms::catalogue_algorithm(Collective::Allreduce, "ring").run(
            f,
            &mut buf,
            ReduceOp::Sum,
            &Params::default(),
        ),
    )
    .unwrap();
    assert_eq!(buf.as_slice::<i32>().unwrap(), &[3; 5]);
    f.finish().unwrap();
}

#[test]
fn local_fabric_refuses_symbols() {
    let fabrics = LocalFabric::group(2, &job(0));
    std::thread::scope(|s| {
        for f in &fabrics {
            s.spawn(move || refuses_then_works(f));
        }
    });
}

#[test]
fn shm_fabric_refuses_symbols() {
    let opts = ShmOptions {
        job: job(901),
        dir: std::env::temp_dir(),
        ring_bytes: 1 << 16,
        ..ShmOptions::default()
    };
    let group = LocalBootstrap::group(2);
    std::thread::scope(|s| {
        for b in &group {
            let opts = &opts;
            s.spawn(move || refuses_then_works(&ShmFabric::connect(b, opts).unwrap()));
        }
    });
}

#[test]
fn tcp_fabric_refuses_symbols() {
    let opts = TcpOptions {
        job: job(902),
        ..TcpOptions::default()
    };
    let group = LocalBootstrap::group(2);
    std::thread::scope(|s| {
        for b in &group {
            let opts = &opts;
            s.spawn(move || refuses_then_works(&TcpFabric::connect(b, opts).unwrap()));
        }
    });
}
