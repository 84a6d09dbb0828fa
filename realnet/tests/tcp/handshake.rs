//! The handshake: strangers, other jobs and wrong tokens are refused and
//! logged while the real job still connects; the interface and port range
//! options are honoured.

use algorithms::{Collective, Fabric, Params, Rank, ReduceOp};
use realnet::frame::Body;
use realnet::selftest::input;
use realnet::tcp::{TcpFabric, TcpOptions};
use realnet::{Bootstrap, BootstrapError, CallId, Endpoint, LocalBootstrap};

use crate::support::{JOB_ID, TOKEN, connect_all, hello, options, read_frames};

/// Rank 0's bootstrap, which lets strangers knock on rank 1's door before
/// rank 0 itself connects; it keeps what each was told.
struct Meddler {
    inner: LocalBootstrap,
    told: std::sync::Mutex<Vec<String>>,
}

impl Bootstrap for Meddler {
    fn rank(&self) -> Rank {
        self.inner.rank()
    }

    fn world_size(&self) -> usize {
        self.inner.world_size()
    }

    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        let all = self.inner.allgather(mine)?;
        if self.rank() == 0 {
            let target = String::from_utf8(all[1].clone()).unwrap();
            let mut told = Vec::new();
            for (job, token) in [(JOB_ID, "guess"), (JOB_ID + 1, TOKEN)] {
                let (_, replies) = hello(&target, 0, 1, 2, job, token);
                told.push(refusal(&replies));
            }
            let mut http = std::net::TcpStream::connect(&target).unwrap();
            std::io::Write::write_all(&mut http, b"GET / HTTP/1.1\r\n\r\n").unwrap();
            http.set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .unwrap();
            let answer = read_frames(&mut http, 1);
            assert!(answer.is_empty(), "junk gets no answer: {answer:?}");
            *self.told.lock().unwrap() = told;
        }
        Ok(all)
    }
}

/// The reason of a refusal frame; a stranger's refusal carries job id 0,
/// never the job's.
fn refusal(replies: &[realnet::frame::Frame]) -> String {
    match replies.first() {
        Some(
            f @ realnet::frame::Frame {
                body: Body::Refuse(why),
                ..
            },
        ) => {
            assert_eq!(f.job_id, 0, "{f:?}");
            why.clone()
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn strangers_are_refused_and_logged_and_the_job_still_connects() {
    let boots: Vec<Meddler> = LocalBootstrap::group(2)
        .into_iter()
        .map(|inner| Meddler {
            inner,
            told: Default::default(),
        })
        .collect();
    let fabrics = connect_all(&boots, &options(2_000));
    // The strangers learn nothing of the job, not even which guess was wrong.
    let told = boots[0].told.lock().unwrap().clone();
    assert_eq!(told, ["wrong job id or token", "wrong job id or token"]);
    // The rank's own log says what was wrong.
    let logged = fabrics[1].refusals();
    assert_eq!(logged.len(), 2, "{logged:?}");
    for (line, why) in logged.iter().zip([
        "wrong job token".to_string(),
        format!("job id {} (this job is {JOB_ID})", JOB_ID + 1),
    ]) {
        assert!(
            line.starts_with("rank 1 refused a connection from 127.0.0.1:"),
            "{line}"
        );
        assert!(line.ends_with(why.as_str()), "{line}");
    }
    assert!(fabrics[0].refusals().is_empty());
    // The real job works.
    std::thread::scope(|s| {
        for f in &fabrics {
            s.spawn(move || {
                f.begin_call(CallId::new(
                    1,
                    &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
                ))
                .unwrap();
                let mut buf = input(f.rank(), 10);
                f.block_on(
                    algorithms::catalogue_algorithm(Collective::Allreduce, "ring").run(
                        f,
                        &mut buf,
                        ReduceOp::Sum,
                        &Params::default(),
                    ),
                )
                .unwrap();
                assert_eq!(buf.as_slice::<i32>().unwrap()[9], 1000 + 2 * 9);
                f.finish().unwrap();
            });
        }
    });
}

#[test]
fn the_interface_and_port_range_are_honoured() {
    let opts = TcpOptions {
        interface: Some("lo".into()),
        ports: 47100..=47199,
        ..options(2_000)
    };
    let fabrics = crate::support::group(3, &opts);
    for f in &fabrics {
        for addr in f.addresses() {
            assert_eq!(addr.ip().to_string(), "127.0.0.1");
            assert!(opts.ports.contains(&addr.port()), "{addr}");
        }
    }
    std::thread::scope(|s| {
        for f in &fabrics {
            s.spawn(move || f.finish().unwrap());
        }
    });
}

#[test]
fn a_bad_interface_is_a_clear_error() {
    let opts = TcpOptions {
        interface: Some("nosuch0".into()),
        ..options(2_000)
    };
    let boot = LocalBootstrap::group(1);
    let err = TcpFabric::connect(&boot[0], &opts)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.starts_with("rank 0: TCP setup: no network interface named \"nosuch0\""),
        "{err}"
    );
}
