//! Large data frames over TCP (written in pieces, checksummed in one pass
//! with the sum in a trailer): a flipped bit anywhere in one, or one cut
//! short, is refused naming the peer and never delivered; intact ones
//! arrive whole.

use std::io::Write;
use std::net::Shutdown;

use algorithms::{Collective, DType, Fabric, Payload, Shape, Tag};
use realnet::frame::HEADER_LEN;
use realnet::{CallId, Endpoint};

use crate::support::{group, options, real_and_raw};

/// Elements of a payload that spans several reader and sender pieces.
const COUNT: usize = 700_000;

fn values() -> Vec<i32> {
    (0..COUNT as i32)
        .map(|i| i.wrapping_mul(2_654_435))
        .collect()
}

/// Sends a large frame from a raw peer with `spoil` applied to its bytes
/// and returns the error the real rank's receive reports.
fn receive_spoiled(spoil: impl FnOnce(&mut Vec<u8>)) -> String {
    let (fabric, mut raw) = real_and_raw(&options(2_000));
    let call = CallId::new(
        1,
        &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
    );
    let mut bytes = Vec::new();
    raw.frame(5, call, large_body()).encode(&mut bytes);
    assert_eq!(
        bytes.len(),
        HEADER_LEN + COUNT * 4 + 4,
        "header, payload, trailer"
    );
    spoil(&mut bytes);
    fabric.begin_call(call).unwrap();
    // The rank may refuse a spoiled header and close before the rest of the
    // frame is written, so a broken pipe here is expected, not a failure.
    let _ = raw.stream.write_all(&bytes);
    let _ = raw.stream.shutdown(Shutdown::Write);
    fabric
        .block_on(fabric.recv(0, Tag(5), Shape::new(DType::I32, COUNT)))
        .unwrap_err()
        .to_string()
}

fn large_body() -> realnet::frame::Body {
    realnet::frame::Body::Payload(Payload::from_vec(values()))
}

#[test]
fn a_flipped_bit_in_a_large_payload_or_its_trailer_is_refused() {
    for at in [
        HEADER_LEN,
        HEADER_LEN + COUNT * 2 + 1,
        HEADER_LEN + COUNT * 4 - 1,
    ] {
        let err = receive_spoiled(|b| b[at] ^= 0x20);
        assert!(
            err.contains("corrupt frame from rank 0"),
            "byte {at}: {err}"
        );
        assert!(
            err.contains("payload checksum mismatch"),
            "byte {at}: {err}"
        );
    }
    let err = receive_spoiled(|b| *b.last_mut().unwrap() ^= 1);
    assert!(err.contains("corrupt frame from rank 0"), "trailer: {err}");
    assert!(err.contains("payload checksum mismatch"), "trailer: {err}");
    let err = receive_spoiled(|b| b[60] ^= 1);
    assert!(err.contains("header checksum mismatch"), "header: {err}");
}

#[test]
fn a_large_frame_cut_short_is_refused() {
    // Cut in the payload, and inside the trailer.
    for keep in [HEADER_LEN + COUNT * 3, HEADER_LEN + COUNT * 4 + 2] {
        let err = receive_spoiled(|b| b.truncate(keep));
        assert!(
            err.contains("rank 0") && err.contains("in the middle of a frame"),
            "{keep} bytes: {err}"
        );
    }
}

#[test]
fn large_frames_both_ways_arrive_whole() {
    let fabrics = group(2, &options(5_000));
    std::thread::scope(|s| {
        for f in &fabrics {
            s.spawn(move || {
                let peer = 1 - f.rank();
                let call = CallId::new(
                    1,
                    &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
                );
                f.begin_call(call).unwrap();
                let mine: Vec<i32> = values().iter().map(|v| v ^ f.rank() as i32).collect();
                f.block_on(f.send(peer, Tag(9), Payload::from_vec(mine)))
                    .unwrap();
                let got = f
                    .block_on(f.recv(peer, Tag(9), Shape::new(DType::I32, COUNT)))
                    .unwrap();
                let want: Vec<i32> = values().iter().map(|v| v ^ peer as i32).collect();
                assert_eq!(got.as_slice::<i32>(), Some(&want[..]));
                f.finish().unwrap();
            });
        }
    });
}
