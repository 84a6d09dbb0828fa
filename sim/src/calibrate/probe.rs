//! The microbenchmarks `sim calibrate` measures, written once over any
//! [`Fabric`] and timed with [`Fabric::now`]: real time on a real fabric,
//! virtual time in the simulator (so the same probes on the fitted
//! simulator give the fit's residuals, and on a simulator of known
//! parameters test the fit).
//!
//! Each timed run of a probe is one call: a dissemination barrier, then
//! the probe, timed on rank 0 from the barrier's end:
//! - `pingpong`: ranks 0 and 1 bounce a message `rounds` times; half a
//!   round trip.
//! - `shift`: every rank sends a message to the next rank and receives
//!   one from the previous as one exchange (the operation a collective's
//!   step is), `rounds` times, each round forwarding what
//!   the one before received, as a collective's steps do (every rank busy
//!   at once; the bytes sent just written by the sender, the bytes
//!   received landing where the peer just read); one round.
//! - `stream`: rank 0 sends `messages` messages to rank 1 back to back,
//!   rank 1 answers one element after the last; the whole.
//! - `flows`: every rank sends one message to every other rank at once
//!   (in the order `r+1, r+2, ...`), then receives theirs; the whole.
//! - `fanin`: every rank but 0 sends one message to rank 0 at once, rank
//!   0 receives them all; the whole.
//!   Beside the shift of the same size it shows the receiver's software
//!   time per message, paid one message after another.
//! - `calls`: [`CALLS`] calls in a row, each one round of the shift (each
//!   its own call on a real fabric: `begin_call` and `block_on`, see
//!   [`calls_start`]; [`run_calls`] charges a per-call time before each
//!   in the simulator); one call. Beside
//!   the shift of the same size it shows the software time of a call.
//! - `reduce`: every rank reduces a buffer into another `rounds` times
//!   (the reduction really runs and is charged as [`Work::Reduce`]); one
//!   reduction.

use algorithms::{
    CollectiveError, DType, Fabric, FabricError, Payload, ReduceOp, Shape, Tag, Time, Work,
};
use engine::calibration::Measurement;

/// Round trips (ping-pong) or reductions (reduce) per timed run.
pub const ROUNDS: u32 = 4;

/// Calls per timed run of the `calls` probe.
pub const CALLS: u32 = 8;

/// One microbenchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// Half a round trip of `bytes` between ranks 0 and 1.
    PingPong {
        /// Message size.
        bytes: u64,
    },
    /// Every rank sends `bytes` to the next and receives from the previous.
    Shift {
        /// Message size.
        bytes: u64,
    },
    /// `messages` messages of `bytes` from rank 0 to rank 1, then an
    /// answer.
    Stream {
        /// Message size.
        bytes: u64,
        /// Messages per run.
        messages: u32,
    },
    /// One message of `bytes` from every rank to every other at once.
    Flows {
        /// Message size.
        bytes: u64,
    },
    /// One message of `bytes` from every rank but 0 to rank 0 at once.
    FanIn {
        /// Message size.
        bytes: u64,
    },
    /// [`CALLS`] calls of one shift round of `bytes` each.
    Calls {
        /// Message size.
        bytes: u64,
    },
    /// One local reduction of `bytes` of `dtype`.
    Reduce {
        /// The element type.
        dtype: DType,
        /// Bytes of one operand.
        bytes: u64,
    },
}

impl Probe {
    /// Its name in the calibration file.
    pub fn name(self) -> &'static str {
        match self {
            Probe::PingPong { .. } => "pingpong",
            Probe::Shift { .. } => "shift",
            Probe::Stream { .. } => "stream",
            Probe::Flows { .. } => "flows",
            Probe::FanIn { .. } => "fanin",
            Probe::Calls { .. } => "calls",
            Probe::Reduce { .. } => "reduce",
        }
    }

    /// The probe a calibration file's `[[measurement]]` row measured (the
    /// inverse of [`Probe::name`]), or why it names none.
    pub fn of_measurement(m: &Measurement) -> Result<Probe, String> {
        let bytes = m.bytes;
        Ok(match m.probe.as_str() {
            "pingpong" => Probe::PingPong { bytes },
            "shift" => Probe::Shift { bytes },
            "stream" => Probe::Stream {
                bytes,
                messages: m.messages,
            },
            "flows" => Probe::Flows { bytes },
            "fanin" => Probe::FanIn { bytes },
            "calls" => Probe::Calls { bytes },
            "reduce" => {
                let name = m
                    .dtype
                    .as_deref()
                    .ok_or("a reduce measurement without its dtype")?;
                let dtype = name.parse::<DType>().map_err(|e| e.to_string())?;
                Probe::Reduce { dtype, bytes }
            }
            other => return Err(format!("unknown probe `{other}` in a [[measurement]]")),
        })
    }

    /// Bytes per message (per operand).
    pub fn bytes(self) -> u64 {
        match self {
            Probe::PingPong { bytes }
            | Probe::Shift { bytes }
            | Probe::Stream { bytes, .. }
            | Probe::Flows { bytes }
            | Probe::FanIn { bytes }
            | Probe::Calls { bytes }
            | Probe::Reduce { bytes, .. } => bytes,
        }
    }

    /// Messages per run (1 but for streams).
    pub fn messages(self) -> u32 {
        match self {
            Probe::Stream { messages, .. } => messages,
            _ => 1,
        }
    }

    /// Peers each rank sends to at once on `world_size` ranks.
    pub fn peers(self, world_size: usize) -> u32 {
        match self {
            Probe::Flows { .. } | Probe::FanIn { .. } => world_size.saturating_sub(1) as u32,
            Probe::Reduce { .. } => 0,
            _ => 1,
        }
    }

    /// Whether it runs on `world_size` ranks (point-to-point probes need
    /// two, flows and fan-ins three).
    pub fn runs_on(self, world_size: usize) -> bool {
        match self {
            Probe::Reduce { .. } => true,
            Probe::Flows { .. } | Probe::FanIn { .. } => world_size >= 3,
            _ => world_size >= 2,
        }
    }
}

/// What to measure, and how often.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The probes, in order.
    pub probes: Vec<Probe>,
    /// Untimed runs of each probe first.
    pub warmup: u32,
    /// Timed runs of each probe (the median is kept).
    pub reps: u32,
}

impl Plan {
    /// The standard plan up to `max_bytes` per message: ping-pongs and
    /// shifts from 8 B in steps of 4, streams of 8 B, a fan-in and calls of
    /// 8 B, flows at the three largest ping-pong sizes, reductions of every real element type at 256 KiB,
    /// 1 MiB and 4 MiB (those below `max_bytes`) and `max_bytes`.
    pub fn standard(max_bytes: u64, world_size: usize) -> Plan {
        let mut sizes = Vec::new();
        let mut b = 8u64;
        while b <= max_bytes.max(8) {
            sizes.push(b);
            b *= 4;
        }
        let mut probes: Vec<Probe> = sizes
            .iter()
            .map(|&bytes| Probe::PingPong { bytes })
            .collect();
        probes.extend(sizes.iter().map(|&bytes| Probe::Shift { bytes }));
        probes.extend([8, 32].map(|messages| Probe::Stream { bytes: 8, messages }));
        probes.extend([Probe::FanIn { bytes: 8 }, Probe::Calls { bytes: 8 }]);
        let large = sizes.len().saturating_sub(3);
        probes.extend(sizes[large..].iter().map(|&bytes| Probe::Flows { bytes }));
        for dtype in [DType::F32, DType::F64, DType::I32, DType::I64, DType::U8] {
            let mut sizes: Vec<u64> = [256 << 10, 1 << 20, 4 << 20]
                .into_iter()
                .filter(|&b| b < max_bytes)
                .collect();
            sizes.push(max_bytes.max(256 << 10));
            sizes.dedup();
            for bytes in sizes {
                probes.push(Probe::Reduce { dtype, bytes });
            }
        }
        probes.retain(|p| p.runs_on(world_size));
        Plan {
            probes,
            warmup: 1,
            reps: 5,
        }
    }
}

/// Tags of the probes (below the bits the algorithms reserve).
const TAG_BARRIER: u64 = 1;
const TAG_PROBE: u64 = 2;
const TAG_ANSWER: u64 = 3;

/// A payload of `bytes` (rounded down to whole bytes of `u8`), phantom if
/// asked (the simulator needs no data).
fn message(bytes: u64, phantom: bool) -> Payload {
    Payload::zeros(DType::U8, bytes as usize, phantom)
}

/// The buffer a timed run sends from: `bytes` written before the run, so
/// that its pages exist, as a collective's buffer's do after its first
/// call. A fresh zeroed buffer per message would be mapped lazily by the
/// kernel and its page faults timed with the transfer: on shared memory
/// a 2 MiB shift took 3.3 ms that way against 0.12-0.29 ms for a 2 MiB
/// collective on its reused buffer.
pub fn source(bytes: u64, phantom: bool) -> Payload {
    let mut p = message(bytes, phantom);
    if let Some(b) = p.as_bytes_mut() {
        b.fill(1);
    }
    p
}

/// Sends all of `src` to `to` as a collective sends a part of its buffer
/// ([`Fabric::send_from`]: lent where the transport can, else copied
/// into recycled memory).
async fn send_all<F: Fabric>(f: &F, to: usize, tag: Tag, src: &Payload) -> Result<(), FabricError> {
    f.send_from(to, tag, src, 0..src.len()).await
}

/// Receives the next message from `from` into `dst` (copied into place,
/// as a collective's receive combines into its buffer: the copy out of
/// where the bytes arrived is part of a message's cost).
async fn recv_into<F: Fabric>(
    f: &F,
    from: usize,
    tag: Tag,
    dst: &mut Payload,
) -> Result<(), FabricError> {
    let all = 0..dst.len();
    f.recv_combine(from, tag, dst, all, None)
        .await
        .map_err(|e| as_fabric_error(f, e))
}

/// Receives `bytes` from `from` and hands the memory back for the next
/// message (a probe's answer).
async fn recv_bytes<F: Fabric>(
    f: &F,
    from: usize,
    tag: Tag,
    bytes: u64,
) -> Result<(), FabricError> {
    let m = f
        .recv(from, tag, Shape::new(DType::U8, bytes as usize))
        .await?;
    f.recycle(m);
    Ok(())
}

/// A dissemination barrier of one-byte messages.
async fn barrier<F: Fabric>(f: &F, phantom: bool) -> Result<(), FabricError> {
    let (rank, n) = (f.rank(), f.world_size());
    let mut distance = 1;
    while distance < n {
        f.send((rank + distance) % n, Tag(TAG_BARRIER), message(1, phantom))
            .await?;
        f.recv(
            (rank + n - distance) % n,
            Tag(TAG_BARRIER),
            Shape::new(DType::U8, 1),
        )
        .await?;
        distance *= 2;
    }
    Ok(())
}

/// Runs `probe` once on this rank and returns the time it measured (rank
/// 0's is the one kept; reductions are timed on every rank).
pub async fn run_once<F: Fabric>(f: &F, probe: Probe, phantom: bool) -> Result<Time, FabricError> {
    let bytes = if matches!(probe, Probe::Reduce { .. }) {
        0
    } else {
        probe.bytes()
    };
    let (src, dst) = (&mut source(bytes, phantom), &mut source(bytes, phantom));
    barrier(f, phantom).await?;
    let start = f.now();
    let divide = match probe {
        Probe::PingPong { .. } => {
            pingpong(f, src, dst).await?;
            2 * u64::from(ROUNDS)
        }
        Probe::Shift { bytes } => {
            shift(f, &mut halves(bytes, phantom)).await?;
            u64::from(ROUNDS)
        }
        Probe::Stream { messages, .. } => {
            stream(f, src, dst, messages, phantom).await?;
            1
        }
        Probe::Flows { .. } => {
            flows(f, src, dst).await?;
            1
        }
        Probe::FanIn { .. } => {
            fan_in(f, src, dst).await?;
            1
        }
        Probe::Calls { bytes } => {
            let buf = &mut halves(bytes, phantom);
            for call in 0..CALLS {
                shift_round(f, buf, call).await?;
            }
            u64::from(CALLS)
        }
        Probe::Reduce { dtype, bytes } => {
            reduce(f, dtype, bytes, phantom).await?;
            u64::from(ROUNDS)
        }
    };
    let elapsed = f.now().0.saturating_sub(start.0);
    Ok(Time(elapsed / divide))
}

async fn pingpong<F: Fabric>(f: &F, src: &Payload, dst: &mut Payload) -> Result<(), FabricError> {
    match f.rank() {
        0 => {
            for _ in 0..ROUNDS {
                send_all(f, 1, Tag(TAG_PROBE), src).await?;
                recv_into(f, 1, Tag(TAG_PROBE), dst).await?;
            }
        }
        1 => {
            for _ in 0..ROUNDS {
                recv_into(f, 0, Tag(TAG_PROBE), dst).await?;
                send_all(f, 0, Tag(TAG_PROBE), src).await?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The buffer of a shift: two halves of `bytes` each, written before the
/// run (see [`source`]); a round sends one half and receives into the
/// other.
pub fn halves(bytes: u64, phantom: bool) -> Payload {
    source(2 * bytes, phantom)
}

/// [`ROUNDS`] rounds of the shift, each forwarding what the one before
/// received, as a ring's steps do: the bytes a rank sends were just
/// written by it (its receive into that half), and the bytes it
/// receives land where the peer just read. On shared memory that is what
/// a collective's messages cost: the peer copies lines dirty in the
/// sender's cache, and the receiver writes over lines the peer holds,
/// where sending one clean buffer over and over (the peer reading lines
/// shared by both) measured a rate the collectives never see.
async fn shift<F: Fabric>(f: &F, buf: &mut Payload) -> Result<(), FabricError> {
    for round in 0..ROUNDS {
        shift_round(f, buf, round).await?;
    }
    Ok(())
}

/// Round `round` of the shift on `buf` ([`halves`]): one half to the
/// next rank and a message of its size from the previous into the other
/// (the halves alternate, so a round sends what the one before
/// received), as one [`Fabric::exchange_in_place`], the operation a
/// collective's step is (the ring's, the recursive doubling's and the
/// schedules' steps all send and receive together). A send awaited
/// before the receive is posted costs more per message: on 2 shm ranks
/// an 8 B shift took 0.32 us that way against 0.29-0.30 us for a
/// recursive-doubling allreduce of 8 B, one such exchange.
pub async fn shift_round<F: Fabric>(
    f: &F,
    buf: &mut Payload,
    round: u32,
) -> Result<(), FabricError> {
    let (rank, n) = (f.rank(), f.world_size());
    let half = buf.len() / 2;
    let (sent, received) = if round.is_multiple_of(2) {
        (0..half, half..2 * half)
    } else {
        (half..2 * half, 0..half)
    };
    f.exchange_in_place(
        (rank + 1) % n,
        (rank + n - 1) % n,
        Tag(TAG_PROBE),
        buf,
        sent,
        received,
        None,
    )
    .await
    .map_err(|e| as_fabric_error(f, e))
}

/// A fabric operation's error as the probes report it: the fabric's own,
/// or any other named as this rank's transport failing.
fn as_fabric_error<F: Fabric>(f: &F, e: CollectiveError) -> FabricError {
    match e {
        CollectiveError::Fabric(e) => e,
        other => FabricError::Transport {
            rank: f.rank(),
            reason: other.to_string(),
        },
    }
}

/// Opens the timed run of a `calls` probe on a real fabric: the barrier,
/// then the time it starts from (each of the [`CALLS`] calls then runs
/// one [`shift_round`]).
pub async fn calls_start<F: Fabric>(f: &F, phantom: bool) -> Result<Time, FabricError> {
    barrier(f, phantom).await?;
    Ok(f.now())
}

/// A timed run of `Probe::Calls { bytes }` within one call, each of the
/// [`CALLS`] calls charged `call_ps` of software time first (as the
/// simulator starts every call of a calibrated scenario); its time per
/// call.
pub async fn run_calls<F: Fabric>(
    f: &F,
    bytes: u64,
    phantom: bool,
    call_ps: u64,
) -> Result<Time, FabricError> {
    let buf = &mut halves(bytes, phantom);
    let start = calls_start(f, phantom).await?;
    for call in 0..CALLS {
        if call_ps > 0 {
            f.compute(Work::Latency { ps: call_ps }).await?;
        }
        shift_round(f, buf, call).await?;
    }
    Ok(Time(f.now().0.saturating_sub(start.0) / u64::from(CALLS)))
}

/// Every rank but 0 sends `bytes` to rank 0; rank 0 receives them in rank
/// order.
async fn fan_in<F: Fabric>(f: &F, src: &Payload, dst: &mut Payload) -> Result<(), FabricError> {
    let (rank, n) = (f.rank(), f.world_size());
    if rank == 0 {
        for from in 1..n {
            recv_into(f, from, Tag(TAG_PROBE), dst).await?;
        }
    } else {
        send_all(f, 0, Tag(TAG_PROBE), src).await?;
    }
    Ok(())
}

async fn stream<F: Fabric>(
    f: &F,
    src: &Payload,
    dst: &mut Payload,
    messages: u32,
    phantom: bool,
) -> Result<(), FabricError> {
    match f.rank() {
        0 => {
            for _ in 0..messages {
                send_all(f, 1, Tag(TAG_PROBE), src).await?;
            }
            recv_bytes(f, 1, Tag(TAG_ANSWER), 1).await?;
        }
        1 => {
            for _ in 0..messages {
                recv_into(f, 0, Tag(TAG_PROBE), dst).await?;
            }
            f.send(0, Tag(TAG_ANSWER), message(1, phantom)).await?;
        }
        _ => {}
    }
    Ok(())
}

/// The sends are copies ([`Fabric::send_copy`]) sent at once: a lent
/// buffer completes only once its peer has copied it, which would send
/// to the peers one after another.
async fn flows<F: Fabric>(f: &F, src: &Payload, dst: &mut Payload) -> Result<(), FabricError> {
    let (rank, n) = (f.rank(), f.world_size());
    for d in 1..n {
        let part = f.send_copy(src, 0..src.len());
        f.send((rank + d) % n, Tag(TAG_PROBE), part).await?;
    }
    for d in 1..n {
        recv_into(f, (rank + n - d) % n, Tag(TAG_PROBE), dst).await?;
    }
    Ok(())
}

async fn reduce<F: Fabric>(
    f: &F,
    dtype: DType,
    bytes: u64,
    phantom: bool,
) -> Result<(), FabricError> {
    let count = (bytes / dtype.size_bytes() as u64) as usize;
    let incoming = Payload::zeros(dtype, count, phantom);
    let mut local = Payload::zeros(dtype, count, phantom);
    for _ in 0..ROUNDS {
        local
            .reduce_from(0..count, &incoming, ReduceOp::Sum)
            .expect("two buffers of one shape");
        f.compute(Work::Reduce {
            bytes: count as u64 * dtype.size_bytes() as u64,
        })
        .await?;
    }
    std::hint::black_box(&local);
    Ok(())
}

#[cfg(test)]
mod tests;
