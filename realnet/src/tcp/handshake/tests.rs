//! Tests of the TCP handshake: lower ranks accepted once, impostors and strangers refused, ranks that never dial named, whole-token comparison.

use super::*;

fn hand(rank: u32) -> Hand {
    Hand {
        rank,
        world_size: 4,
        job_id: 1,
        token: b"t".as_slice().into(),
        timeout: Duration::from_secs(2),
    }
}

#[test]
fn each_lower_rank_is_accepted_once_and_impostors_are_refused() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let refusals = Arc::new(Refusals::default());
    let stop = AtomicBool::new(false);
    let deadline = Instant::now() + Duration::from_secs(10);
    let me = hand(2);
    thread::scope(|s| {
        let acceptor = s.spawn(|| me.accept_lower(&listener, deadline, &stop, &refusals));
        let zero = hand(0).dial(2, addr, deadline, &stop).unwrap();
        let again = hand(0).dial(2, addr, deadline, &stop).unwrap_err();
        assert!(
            again.ends_with("refused this rank's connection: rank 0 is already connected"),
            "{again}"
        );
        let higher = hand(3).dial(2, addr, deadline, &stop).unwrap_err();
        assert!(
            higher.contains("higher ranks wait for lower ones"),
            "{higher}"
        );
        let wrong = hand(1).dial(3, addr, deadline, &stop).unwrap_err();
        assert!(
            wrong.contains("hello addressed to rank 3, but this is rank 2"),
            "{wrong}"
        );
        let one = hand(1).dial(2, addr, deadline, &stop).unwrap();
        let got = acceptor.join().unwrap().unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].peer_addr().unwrap(), zero.local_addr().unwrap());
        assert_eq!(got[1].peer_addr().unwrap(), one.local_addr().unwrap());
    });
    let logged = refusals.all();
    assert_eq!(logged.len(), 3, "{logged:?}");
    assert!(logged[0].starts_with("rank 2 refused a connection from 127.0.0.1:"));
}

#[test]
fn strangers_learn_nothing_and_junk_gets_no_answer() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let refusals = Refusals::default();
    let stop = AtomicBool::new(false);
    let deadline = Instant::now() + Duration::from_secs(10);
    let me = hand(1);
    thread::scope(|s| {
        let acceptor = s.spawn(|| me.accept_lower(&listener, deadline, &stop, &refusals));
        for stranger in [
            Hand {
                job_id: 7,
                ..hand(0)
            },
            Hand {
                token: b"guess".as_slice().into(),
                ..hand(0)
            },
        ] {
            let mut stream = TcpStream::connect(addr).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let mut bytes = Vec::new();
            stranger.hello(1).encode(&mut bytes);
            stream.write_all(&bytes).unwrap();
            let Ok(reply) = read_control(&mut stream) else {
                panic!("a refusal frame")
            };
            assert_eq!(reply.body, Body::Refuse("wrong job id or token".into()));
            assert_eq!((reply.job_id, reply.src), (0, u32::MAX), "{reply:?}");
        }
        let mut junk = TcpStream::connect(addr).unwrap();
        junk.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        junk.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut answer = Vec::new();
        let _ = junk.read_to_end(&mut answer);
        assert!(answer.is_empty(), "{answer:?}");
        let zero = hand(0).dial(1, addr, deadline, &stop).unwrap();
        let got = acceptor.join().unwrap().unwrap();
        assert_eq!(got[0].peer_addr().unwrap(), zero.local_addr().unwrap());
    });
    let logged = refusals.all();
    assert_eq!(logged.len(), 2, "{logged:?}");
    assert!(
        logged[0].ends_with("job id 7 (this job is 1)"),
        "{logged:?}"
    );
    assert!(logged[1].ends_with("wrong job token"), "{logged:?}");
}

#[test]
fn ranks_that_never_dial_are_named_at_the_deadline() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let refusals = Arc::new(Refusals::default());
    let deadline = Instant::now() + Duration::from_millis(50);
    let e = hand(2)
        .accept_lower(&listener, deadline, &AtomicBool::new(false), &refusals)
        .unwrap_err();
    assert!(
        e.starts_with("rank(s) 0, 1 did not connect to 127.0.0.1:"),
        "{e}"
    );
}

#[test]
fn tokens_compare_whole() {
    assert!(same_token(b"abc", b"abc"));
    assert!(!same_token(b"abc", b"abd"));
    assert!(!same_token(b"abc", b"abcd"));
    assert!(same_token(b"", b""));
}
