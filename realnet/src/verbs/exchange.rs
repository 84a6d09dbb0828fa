//! What each rank contributes to the bootstrap allgather at connect time:
//! the address of its queue pair for every peer, or the reason it could
//! not open its device (so that every rank fails at once with that reason
//! instead of waiting for a rank that is not coming).
//!
//! ```text
//! ok:      "RVQP" 1u8 | job_id u64 | token hash u64 | world u32 | rank u32 | world x entry
//! entry:   qp number u32 | lid u16 | has gid u8 | gid [u8; 16]      (23 bytes, zero for oneself)
//! failure: "RVQP" 2u8 | job_id u64 | rank u32 | reason (UTF-8, the rest)
//! ```
//!
//! Integers are little-endian. The token travels only as a 64-bit FNV-1a
//! hash: enough to tell ranks started with different tokens apart.

use crate::job::JobOptions;

const MAGIC: &[u8; 4] = b"RVQP";
const OK: u8 = 1;
const FAILED: u8 = 2;
const ENTRY_BYTES: usize = 23;
const OK_HEAD_BYTES: usize = 4 + 1 + 8 + 8 + 4 + 4;

/// The address of one queue pair, as a peer needs it to connect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct QpAddr {
    /// The queue pair number.
    pub qp_num: u32,
    /// The port's local identifier (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// The port's global identifier, for routed (RoCE, or IB with a GRH) traffic.
    pub gid: Option<[u8; 16]>,
}

/// FNV-1a 64 of the job token.
fn token_hash(token: &str) -> u64 {
    token.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The contribution of `rank` whose queue pair for peer `p` is `addrs[p]`
/// (`None` for itself).
pub fn encode(job: &JobOptions, rank: usize, addrs: &[Option<QpAddr>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(OK_HEAD_BYTES + addrs.len() * ENTRY_BYTES);
    out.extend_from_slice(MAGIC);
    out.push(OK);
    out.extend_from_slice(&job.job_id.to_le_bytes());
    out.extend_from_slice(&token_hash(&job.token).to_le_bytes());
    out.extend_from_slice(&(addrs.len() as u32).to_le_bytes());
    out.extend_from_slice(&(rank as u32).to_le_bytes());
    for a in addrs {
        let a = a.unwrap_or_default();
        out.extend_from_slice(&a.qp_num.to_le_bytes());
        out.extend_from_slice(&a.lid.to_le_bytes());
        out.push(u8::from(a.gid.is_some()));
        out.extend_from_slice(&a.gid.unwrap_or_default());
    }
    out
}

/// The contribution of a rank that could not set up its side, saying why.
pub fn encode_failure(job: &JobOptions, rank: usize, reason: &str) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.push(FAILED);
    out.extend_from_slice(&job.job_id.to_le_bytes());
    out.extend_from_slice(&(rank as u32).to_le_bytes());
    out.extend_from_slice(reason.as_bytes());
    out
}

/// From every rank's contribution, the address of each peer's queue pair
/// for `me` (`None` at `me`), after checking that all belong to this job,
/// token and world size and agree on GID use. The error names the rank.
pub fn decode_for(
    job: &JobOptions,
    me: usize,
    all: &[Vec<u8>],
) -> Result<Vec<Option<QpAddr>>, String> {
    let world = all.len();
    let mut out = vec![None; world];
    for (r, bytes) in all.iter().enumerate() {
        if r == me {
            continue;
        }
        out[r] = Some(decode_one(job, me, r, world, bytes)?);
    }
    let mine_global = decode_one(job, (me + 1) % world.max(1), me, world, &all[me])
        .map(|a| a.gid.is_some())
        .unwrap_or(false);
    if world > 1 {
        for (r, a) in out.iter().enumerate() {
            if let Some(a) = a
                && a.gid.is_some() != mine_global
            {
                return Err(format!(
                    "rank {r} {} a GID and this rank {}: set the same GID index on every rank",
                    if a.gid.is_some() {
                        "uses"
                    } else {
                        "does not use"
                    },
                    if mine_global { "does" } else { "does not" }
                ));
            }
        }
    }
    Ok(out)
}

/// Rank `r`'s address for `me` from its contribution.
fn decode_one(
    job: &JobOptions,
    me: usize,
    r: usize,
    world: usize,
    b: &[u8],
) -> Result<QpAddr, String> {
    let bad = |what: &str| format!("rank {r} sent a malformed address ({what})");
    if b.len() < 5 || &b[..4] != MAGIC {
        return Err(bad("no RVQP magic: is it running the verbs fabric?"));
    }
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    match b[4] {
        FAILED if b.len() >= 17 => {
            return Err(format!(
                "rank {r} could not set up verbs: {}",
                String::from_utf8_lossy(&b[17..])
            ));
        }
        OK if b.len() == OK_HEAD_BYTES + world * ENTRY_BYTES => {}
        OK => {
            return Err(bad(&format!(
                "{} bytes, expected {} for {world} ranks",
                b.len(),
                OK_HEAD_BYTES + world * ENTRY_BYTES
            )));
        }
        _ => return Err(bad("unknown kind")),
    }
    if u64_at(5) != job.job_id {
        return Err(format!(
            "rank {r} belongs to job {}, this rank to job {}",
            u64_at(5),
            job.job_id
        ));
    }
    if u64_at(13) != token_hash(&job.token) {
        return Err(format!("rank {r} presented a different job token"));
    }
    if u32_at(21) as usize != world || u32_at(25) as usize != r {
        return Err(bad(&format!(
            "it says rank {} of {}, expected rank {r} of {world}",
            u32_at(25),
            u32_at(21)
        )));
    }
    let e = OK_HEAD_BYTES + me * ENTRY_BYTES;
    let gid: [u8; 16] = b[e + 7..e + 23].try_into().expect("16 bytes");
    Ok(QpAddr {
        qp_num: u32_at(e),
        lid: u16::from_le_bytes([b[e + 4], b[e + 5]]),
        gid: (b[e + 6] != 0).then_some(gid),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn job() -> JobOptions {
        JobOptions {
            job_id: 77,
            token: "secret".into(),
            ..JobOptions::default()
        }
    }

    /// Rank r's queue pair for peer p has number 100 * r + p.
    fn contributions(world: usize, gid: bool) -> Vec<Vec<u8>> {
        (0..world)
            .map(|r| {
                let addrs: Vec<Option<QpAddr>> = (0..world)
                    .map(|p| {
                        (p != r).then_some(QpAddr {
                            qp_num: (100 * r + p) as u32,
                            lid: r as u16 + 1,
                            gid: gid.then_some([r as u8; 16]),
                        })
                    })
                    .collect();
                encode(&job(), r, &addrs)
            })
            .collect()
    }

    #[test]
    fn each_rank_gets_every_peers_queue_pair_for_itself() {
        let all = contributions(4, true);
        for me in 0..4 {
            let got = decode_for(&job(), me, &all).unwrap();
            for (r, a) in got.iter().enumerate() {
                if r == me {
                    assert_eq!(*a, None);
                } else {
                    let a = a.unwrap();
                    assert_eq!(a.qp_num as usize, 100 * r + me);
                    assert_eq!(a.lid as usize, r + 1);
                    assert_eq!(a.gid, Some([r as u8; 16]));
                }
            }
        }
    }

    #[test]
    fn another_job_token_or_world_is_refused_naming_the_rank() {
        let mut all = contributions(3, false);
        let other = JobOptions {
            job_id: 78,
            ..job()
        };
        all[2] = encode(&other, 2, &[None, None, None]);
        let e = decode_for(&job(), 0, &all).unwrap_err();
        assert!(
            e.contains("rank 2 belongs to job 78, this rank to job 77"),
            "{e}"
        );
        let mut all = contributions(3, false);
        let other = JobOptions {
            token: "guess".into(),
            ..job()
        };
        all[1] = encode(&other, 1, &[None, None, None]);
        let e = decode_for(&job(), 0, &all).unwrap_err();
        assert!(e.contains("rank 1 presented a different job token"), "{e}");
        let all4 = contributions(4, false);
        let mut all = contributions(3, false);
        all[1] = all4[1].clone();
        let e = decode_for(&job(), 0, &all).unwrap_err();
        assert!(e.contains("rank 1 sent a malformed address"), "{e}");
        all[1] = b"hello".to_vec();
        assert!(decode_for(&job(), 0, &all).is_err());
    }

    #[test]
    fn a_rank_that_failed_to_open_its_device_is_named_with_its_reason() {
        let mut all = contributions(3, false);
        all[1] = encode_failure(&job(), 1, "no RDMA device found");
        let e = decode_for(&job(), 0, &all).unwrap_err();
        assert_eq!(e, "rank 1 could not set up verbs: no RDMA device found");
    }

    #[test]
    fn ranks_must_agree_on_gid_use() {
        let mut all = contributions(2, false);
        all[1] = contributions(2, true)[1].clone();
        let e = decode_for(&job(), 0, &all).unwrap_err();
        assert!(
            e.contains("rank 1 uses a GID and this rank does not"),
            "{e}"
        );
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic_the_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..200), me in 0usize..3) {
            let mut all = contributions(3, true);
            all[(me + 1) % 3] = bytes;
            let _ = decode_for(&job(), me, &all);
        }
    }
}
