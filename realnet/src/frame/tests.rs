//! Tests of the frame format: round trips of every kind, lengths refused from the header alone, corruption and strangers, the decoder over a split stream.

use super::*;
use algorithms::Collective;
use proptest::prelude::*;

fn data_payload() -> impl Strategy<Value = Payload> {
    prop_oneof![
        proptest::collection::vec(any::<i32>(), 0..64).prop_map(Payload::from_vec),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Payload::from_vec),
        proptest::collection::vec(any::<i64>(), 0..16).prop_map(Payload::from_vec),
        proptest::collection::vec(proptest::num::f64::NORMAL, 0..16).prop_map(Payload::from_vec),
        proptest::collection::vec(proptest::num::f32::NORMAL, 0..16).prop_map(Payload::from_vec),
        (0..5usize, 0..1usize << 40).prop_map(|(d, n)| Payload::phantom(DType::ALL[d], n)),
    ]
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        data_payload().prop_map(Body::Payload),
        (any::<u64>(), proptest::collection::vec(any::<u8>(), 0..40))
            .prop_map(|(world_size, token)| Body::Hello { world_size, token }),
        Just(Body::Bye),
        Just(Body::Heartbeat),
        "[ -~]{0,40}".prop_map(Body::Refuse),
    ]
}

prop_compose! {
    fn frame()(job_id: u64, src: u32, dst: u32, tag: u64, seq: u64, cseq: u64,
               kind: u16, body in body()) -> Frame {
        Frame { job_id, src, dst, tag: Tag(tag), seq,
                call: CallId { seq: cseq, kind }, body }
    }
}

proptest! {
    #[test]
    fn decode_inverts_encode(f in frame()) {
        let mut bytes = Vec::new();
        f.encode(&mut bytes);
        let (back, used) = decode(&bytes, DEFAULT_FRAME_CAP).unwrap().unwrap();
        prop_assert_eq!(used, bytes.len());
        prop_assert_eq!(&back, &f);
        // Byte by byte through the incremental decoder too.
        let mut d = Decoder::new(DEFAULT_FRAME_CAP);
        for (i, b) in bytes.iter().enumerate() {
            prop_assert_eq!(d.next_frame().unwrap(), None, "early at byte {}", i);
            d.push(std::slice::from_ref(b));
        }
        prop_assert_eq!(d.next_frame().unwrap(), Some(f));
        prop_assert_eq!(d.buffered(), 0);
    }

    #[test]
    fn random_bytes_never_panic_the_decoder(
        bytes in proptest::collection::vec(any::<u8>(), 0..400),
        cap in 0u64..1 << 20,
    ) {
        let _ = decode(&bytes, cap);
        let mut d = Decoder::new(cap);
        for piece in bytes.chunks(7) {
            d.push(piece);
            while let Ok(Some(_)) = d.next_frame() {}
        }
    }

    #[test]
    fn valid_headers_with_random_fields_never_panic(
        raw in proptest::array::uniform32(any::<u8>()),
        more in proptest::array::uniform32(any::<u8>()),
        payload in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        // Random fields behind a correct magic, version and checksum:
        // the decoder's checks, not the checksum, must stop them.
        let mut b = [0u8; HEADER_LEN];
        b[..32].copy_from_slice(&raw);
        b[32..64].copy_from_slice(&more);
        b[0..4].copy_from_slice(&MAGIC);
        b[4..6].copy_from_slice(&VERSION.to_le_bytes());
        let crc = crc32c::crc32c(&b[..64]);
        b[64..68].copy_from_slice(&crc.to_le_bytes());
        let mut bytes = b.to_vec();
        bytes.extend_from_slice(&payload);
        let _ = decode(&bytes, DEFAULT_FRAME_CAP);
    }

    #[test]
    fn a_single_flipped_bit_is_always_caught(f in frame(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
        let mut bytes = Vec::new();
        f.encode(&mut bytes);
        let i = at.index(bytes.len());
        bytes[i] ^= 1 << bit;
        prop_assert!(decode(&bytes, DEFAULT_FRAME_CAP).is_err(), "flip at byte {} bit {} passed", i, bit);
    }
}

fn sample() -> Frame {
    Frame {
        job_id: 7,
        src: 1,
        dst: 2,
        tag: Tag(5),
        seq: 3,
        call: CallId::new(
            4,
            &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
        ),
        body: Body::Payload(Payload::from_vec(vec![1i32, 2, 3, 4])),
    }
}

#[test]
fn over_cap_lengths_are_refused_from_the_header_alone() {
    let mut f = sample();
    f.body = Body::Payload(Payload::phantom(DType::I32, 4));
    let mut h = f.header();
    h.kind = Kind::Data(DType::F64);
    h.count = u64::MAX / 4;
    // Only the header: the decoder must refuse before asking for the body.
    let e = decode(&h.encode(), DEFAULT_FRAME_CAP).unwrap_err();
    assert_eq!(
        e,
        FrameError::OverCap {
            len: u64::MAX,
            cap: DEFAULT_FRAME_CAP
        }
    );
    h.count = 1000;
    let e = decode(&h.encode(), 4096).unwrap_err();
    assert_eq!(
        e,
        FrameError::OverCap {
            len: 8068,
            cap: 4096
        }
    );
    assert!(e.to_string().contains("over the cap of 4096 bytes"), "{e}");
    h.kind = Kind::Hello;
    h.count = CONTROL_CAP + 1;
    assert!(matches!(
        decode(&h.encode(), DEFAULT_FRAME_CAP),
        Err(FrameError::OverCap {
            cap: CONTROL_CAP,
            ..
        })
    ));
}

#[test]
fn corruption_and_strangers_get_clear_errors() {
    let mut bytes = Vec::new();
    sample().encode(&mut bytes);
    let mut flipped = bytes.clone();
    // The trailer's last byte.
    *flipped.last_mut().unwrap() ^= 0x10;
    let e = decode(&flipped, DEFAULT_FRAME_CAP).unwrap_err();
    assert!(matches!(e, FrameError::PayloadCrc { .. }), "{e}");
    assert!(e.to_string().contains("payload checksum mismatch"), "{e}");
    let mut flipped = bytes.clone();
    flipped[30] ^= 1;
    assert!(matches!(
        decode(&flipped, DEFAULT_FRAME_CAP),
        Err(FrameError::HeaderCrc { .. })
    ));
    let http = b"GET / HTTP/1.1\r\n";
    assert!(matches!(
        decode(http, DEFAULT_FRAME_CAP),
        Err(FrameError::BadMagic { .. })
    ));
    let mut other = bytes.clone();
    other[4] = 9;
    assert_eq!(
        decode(&other, DEFAULT_FRAME_CAP).unwrap_err(),
        FrameError::Version { found: 9 }
    );
}

#[test]
fn the_decoder_splits_a_stream_and_stays_failed() {
    let mut bytes = Vec::new();
    let mut a = sample();
    a.encode(&mut bytes);
    a.seq = 4;
    a.body = Body::Bye;
    a.encode(&mut bytes);
    let mut d = Decoder::new(DEFAULT_FRAME_CAP);
    d.push(&bytes[..100]);
    assert_eq!(d.next_frame().unwrap().unwrap().seq, 3);
    assert_eq!(d.next_frame().unwrap(), None);
    d.push(&bytes[100..]);
    assert_eq!(d.next_frame().unwrap().unwrap().body, Body::Bye);
    d.push(b"garbage that is long enough to hold a header, and then some more bytes");
    assert!(d.next_frame().is_err());
    assert!(d.next_frame().is_err(), "a failed stream stays failed");
    assert_eq!(d.buffered(), 0);
}

#[test]
fn a_checksum_taken_piece_by_piece_is_checked_as_the_whole_payload() {
    let mut f = sample();
    let values: Vec<i32> = (0..100_000).collect();
    f.body = Body::Payload(Payload::from_vec(values));
    let mut bytes = Vec::new();
    f.encode(&mut bytes);
    let head: &[u8; HEADER_LEN] = bytes[..HEADER_LEN].try_into().unwrap();
    let header = Header::decode(head, DEFAULT_FRAME_CAP).unwrap();
    assert_eq!(
        header.payload_crc, 0,
        "a data frame's checksum is in its trailer"
    );
    let (payload, trailer) = bytes[HEADER_LEN..].split_at(400_000);
    let mut payload = payload.to_vec();
    let trailer: [u8; TRAILER_LEN] = trailer.try_into().unwrap();
    assert_eq!(u32::from_le_bytes(trailer), crc32c::crc32c(&payload));
    let pieces = |p: &[u8]| p.chunks(4096).fold(0, crc32c::crc32c_append);
    header
        .check_payload_crc(payload.len(), pieces(&payload), Some(trailer))
        .unwrap();
    assert!(matches!(
        header.check_payload_crc(payload.len() - 1, pieces(&payload[1..]), Some(trailer)),
        Err(FrameError::Malformed(_))
    ));
    assert_eq!(
        header.check_payload_crc(payload.len(), pieces(&payload), None),
        Err(FrameError::Malformed("a data frame without its trailer"))
    );
    let mut spoiled = trailer;
    spoiled[3] ^= 0x80;
    assert!(matches!(
        header.check_payload_crc(payload.len(), pieces(&payload), Some(spoiled)),
        Err(FrameError::PayloadCrc { .. })
    ));
    payload[77_777] ^= 4;
    assert!(matches!(
        header.check_payload_crc(payload.len(), pieces(&payload), Some(trailer)),
        Err(FrameError::PayloadCrc { .. })
    ));
}

#[test]
fn only_data_frames_have_a_trailer_and_it_is_exact() {
    let mut bytes = Vec::new();
    sample().encode(&mut bytes);
    assert_eq!(bytes.len(), HEADER_LEN + 16 + TRAILER_LEN);
    // Cut anywhere, even inside the trailer: not a frame yet.
    for keep in HEADER_LEN..bytes.len() {
        assert_eq!(
            decode(&bytes[..keep], DEFAULT_FRAME_CAP),
            Ok(None),
            "{keep}"
        );
    }
    // A payload flip, a trailer flip: both refused as checksum mismatches.
    for at in [
        HEADER_LEN,
        HEADER_LEN + 15,
        HEADER_LEN + 16,
        bytes.len() - 1,
    ] {
        let mut flipped = bytes.clone();
        flipped[at] ^= 0x01;
        assert!(
            matches!(
                decode(&flipped, DEFAULT_FRAME_CAP),
                Err(FrameError::PayloadCrc { .. })
            ),
            "byte {at}"
        );
    }
    // A data header with a checksum in it (a version-3 sender) is refused.
    let mut h = sample().header();
    h.payload_crc = crc32c::crc32c(&sample().body.bytes());
    assert_eq!(
        Header::decode(&h.encode(), DEFAULT_FRAME_CAP),
        Err(FrameError::Malformed(
            "a data frame with a payload checksum in its header"
        ))
    );
    // A control frame has none: its checksum is in the header.
    let mut refuse = sample();
    refuse.body = Body::Refuse("why".into());
    let mut bytes = Vec::new();
    refuse.encode(&mut bytes);
    assert_eq!(bytes.len(), HEADER_LEN + 3);
    let header = refuse.header();
    assert_eq!(header.payload_crc, crc32c::crc32c(b"why"));
    assert_eq!(
        header.check_payload_crc(3, crc32c::crc32c(b"why"), Some([0; TRAILER_LEN])),
        Err(FrameError::Malformed("a trailer on a control frame"))
    );
}
