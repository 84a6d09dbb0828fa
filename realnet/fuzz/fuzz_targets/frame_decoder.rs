//! Fuzzes the TCP frame decoder: no input may panic it, make it allocate
//! beyond the cap, or decode to a frame that does not re-encode to the
//! very bytes it came from.
//!
//! Run (needs a nightly toolchain and `cargo install cargo-fuzz`):
//!
//! ```text
//! cd realnet/fuzz
//! cargo +nightly fuzz run frame_decoder -- -max_total_time=60 -rss_limit_mb=512
//! ```
//!
//! Without cargo-fuzz, `cargo build` here links the target against
//! libFuzzer without coverage instrumentation, which still runs it on
//! random inputs: `./target/debug/frame_decoder -max_total_time=10`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use realnet::frame::{Decoder, HEADER_LEN, TRAILER_LEN, decode};

fuzz_target!(|data: &[u8]| {
    // The first two bytes choose the cap, how the stream is cut up and
    // whether to fix the checksums (so that the fuzzer reaches the checks
    // behind them).
    let (cap, split, fix, stream) = match data {
        [a, b, rest @ ..] => (
            HEADER_LEN as u64 + (u64::from(*a >> 1) << 8),
            usize::from(*b).max(1),
            *a & 1 == 1,
            rest,
        ),
        _ => return,
    };
    let mut owned = stream.to_vec();
    if fix && owned.len() >= HEADER_LEN + TRAILER_LEN && owned[6] == 1 {
        // A data frame: its payload checksum goes in the trailer.
        let end = owned.len() - TRAILER_LEN;
        let payload = crc32c::crc32c(&owned[HEADER_LEN..end]);
        owned[end..].copy_from_slice(&payload.to_le_bytes());
        owned[52..56].fill(0);
        let header = crc32c::crc32c(&owned[..64]);
        owned[64..68].copy_from_slice(&header.to_le_bytes());
    } else if fix && owned.len() >= HEADER_LEN {
        let payload = crc32c::crc32c(&owned[HEADER_LEN..]);
        owned[52..56].copy_from_slice(&payload.to_le_bytes());
        let header = crc32c::crc32c(&owned[..64]);
        owned[64..68].copy_from_slice(&header.to_le_bytes());
    }
    let stream = &owned[..];
    if let Ok(Some((frame, used))) = decode(stream, cap) {
        let mut again = Vec::new();
        frame.encode(&mut again);
        assert_eq!(again, &stream[..used], "the encoding is canonical");
    }
    let mut decoder = Decoder::new(cap);
    for piece in stream.chunks(split) {
        decoder.push(piece);
        loop {
            match decoder.next_frame() {
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
    }
    assert!(decoder.buffered() <= stream.len());
});
