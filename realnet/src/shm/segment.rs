//! [`Segment`]: the job's one shared-memory file, its layout and the
//! per-rank liveness locks.
//!
//! ```text
//!  offset 0            header: magic, version, world size, job id, ring bytes, total bytes
//!  4096                RankControl x world        (128-byte aligned, one writer each:
//!                                                  state, pid, failure reason, heartbeat)
//!  page-aligned        PairControl x n(n-1)       (the ring's head, tail, copied: 3 x 128 bytes;
//!                                                  the slots' freed: 128 bytes; 64 slots of 128 bytes)
//!  page-aligned        ring data x n(n-1)         (ring_bytes each, a power of two)
//! ```
//!
//! Rank 0 creates the file (`O_EXCL`, mode 0600), writes the header and
//! reserves the whole size (`posix_fallocate`, so a full `/dev/shm` is an
//! error now rather than a `SIGBUS` later); the others check the header
//! before mapping, so a segment of another job, version or world size is
//! refused. Each rank holds an open-file-description lock
//! (`F_OFD_SETLK`) on byte `rank` of the file: the kernel drops it when the
//! process dies (even before it is reaped) or closes the file, and a peer
//! tests it with `F_OFD_GETLK`. Locks are per open file description, so
//! ranks that are threads of one process (each opens the file itself) see
//! each other's locks too.
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};

use memmap2::{MmapOptions, MmapRaw};

use super::ring::{Ring, RingControl};
use super::slots::{Slot, Slots, SlotsControl};
use super::sync::UnsafeCell;

/// "realnshm" as a little-endian u64.
const MAGIC: u64 = u64::from_le_bytes(*b"realnshm");
/// The layout version; a segment of another version is refused.
/// Version 2: each rank's control block carries its heartbeat. Version 3:
/// each pair's message headers travel in slots (`super::slots`).
pub(crate) const VERSION: u32 = 3;

/// Slots per ordered pair of ranks (messages in flight before the
/// producer waits for the consumer).
pub(crate) const SLOTS: usize = 64;

/// The control of one ordered pair: its byte ring's positions and its
/// message slots.
#[repr(C)]
struct PairControl {
    ring: RingControl,
    slots_ctl: SlotsControl,
    slots: [Slot; SLOTS],
}
/// Bytes of the header (one page).
const HEADER_BYTES: usize = 4096;
/// Bytes of a failure reason kept in a rank's control block.
pub(crate) const REASON_BYTES: usize = 192;

/// A rank's life cycle, in its control block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RankState {
    /// Not mapped yet.
    Absent = 0,
    /// Connected and running.
    Running = 1,
    /// Called `finish`: sent everything and exits cleanly.
    Finished = 2,
    /// Failed with the reason in its control block.
    Failed = 3,
}

/// What one rank publishes to its peers; only that rank writes it.
#[repr(C, align(128))]
pub(crate) struct RankControl {
    state: AtomicU32,
    pid: AtomicU32,
    probe_addr: AtomicU64,
    reason_len: AtomicU32,
    reason: [AtomicU8; REASON_BYTES],
    /// The rank's last heartbeat: CLOCK_MONOTONIC in nanoseconds (0: none yet).
    heartbeat_ns: AtomicU64,
}

impl RankControl {
    /// The rank's state.
    pub(crate) fn state(&self) -> RankState {
        match self.state.load(Ordering::Acquire) {
            1 => RankState::Running,
            2 => RankState::Finished,
            3 => RankState::Failed,
            _ => RankState::Absent,
        }
    }

    /// Publishes `state` (after everything written before it).
    pub(crate) fn set_state(&self, state: RankState) {
        self.state.store(state as u32, Ordering::Release);
    }

    /// Marks the rank failed with `reason` (truncated), unless it already
    /// failed or finished.
    pub(crate) fn fail(&self, reason: &str) {
        if matches!(self.state(), RankState::Failed | RankState::Finished) {
            return;
        }
        let mut end = reason.len().min(REASON_BYTES);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        for (slot, b) in self.reason.iter().zip(reason.as_bytes()[..end].iter()) {
            slot.store(*b, Ordering::Relaxed);
        }
        self.reason_len.store(end as u32, Ordering::Relaxed);
        self.set_state(RankState::Failed);
    }

    /// The reason a failed rank gave.
    pub(crate) fn reason(&self) -> String {
        let len = (self.reason_len.load(Ordering::Acquire) as usize).min(REASON_BYTES);
        let bytes: Vec<u8> = self.reason[..len]
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The rank's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid.load(Ordering::Acquire)
    }

    /// The address of the word peers read to test cross-memory attach.
    pub(crate) fn probe_addr(&self) -> u64 {
        self.probe_addr.load(Ordering::Acquire)
    }

    /// Publishes a heartbeat taken at `ns` (CLOCK_MONOTONIC nanoseconds).
    pub(crate) fn beat(&self, ns: u64) {
        self.heartbeat_ns.store(ns, Ordering::Release);
    }

    /// The rank's last heartbeat (0: none yet).
    pub(crate) fn last_beat(&self) -> u64 {
        self.heartbeat_ns.load(Ordering::Acquire)
    }

    /// Publishes this rank's process id and probe address.
    pub(crate) fn set_identity(&self, pid: u32, probe_addr: u64) {
        self.pid.store(pid, Ordering::Release);
        self.probe_addr.store(probe_addr, Ordering::Release);
    }
}

/// Where everything is in a segment of `world` ranks with rings of
/// `ring_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    world: usize,
    ring_bytes: usize,
    ring_controls: usize,
    ring_data: usize,
    total: usize,
}

impl Layout {
    fn new(world: usize, ring_bytes: usize) -> Option<Layout> {
        const PAGE: usize = 4096;
        let pairs = world.checked_mul(world.saturating_sub(1))?;
        let controls = world.checked_mul(size_of::<RankControl>())?;
        let ring_controls = (HEADER_BYTES + controls).next_multiple_of(PAGE);
        let ring_data = ring_controls
            .checked_add(pairs.checked_mul(size_of::<PairControl>())?)?
            .next_multiple_of(PAGE);
        let total = ring_data.checked_add(pairs.checked_mul(ring_bytes)?)?;
        Some(Layout {
            world,
            ring_bytes,
            ring_controls,
            ring_data,
            total: total.max(PAGE),
        })
    }

    /// The index of the ring from `src` to `dst` (`src != dst`).
    fn pair(&self, src: usize, dst: usize) -> usize {
        assert!(
            src != dst && src < self.world && dst < self.world,
            "a ring joins two ranks"
        );
        src * (self.world - 1) + if dst < src { dst } else { dst - 1 }
    }
}

/// The header's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    magic: u64,
    version: u32,
    world: u32,
    job_id: u64,
    ring_bytes: u64,
    total: u64,
}

impl Header {
    fn encode(&self) -> [u8; 40] {
        let mut b = [0u8; 40];
        b[0..8].copy_from_slice(&self.magic.to_le_bytes());
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&self.world.to_le_bytes());
        b[16..24].copy_from_slice(&self.job_id.to_le_bytes());
        b[24..32].copy_from_slice(&self.ring_bytes.to_le_bytes());
        b[32..40].copy_from_slice(&self.total.to_le_bytes());
        b
    }

    fn decode(b: &[u8; 40]) -> Header {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        Header {
            magic: u64_at(0),
            version: u32_at(8),
            world: u32_at(12),
            job_id: u64_at(16),
            ring_bytes: u64_at(24),
            total: u64_at(32),
        }
    }
}

/// One rank's mapping of the job's segment.
pub(crate) struct Segment {
    file: File,
    map: MmapRaw,
    layout: Layout,
    path: PathBuf,
}

impl Segment {
    /// Creates a new segment in `dir` for `job_id` of `world` ranks with
    /// rings of `ring_bytes` (a power of two), named from the job id.
    pub(crate) fn create(
        dir: &Path,
        job_id: u64,
        world: usize,
        ring_bytes: usize,
    ) -> Result<Segment, String> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let layout = Layout::new(world, ring_bytes).ok_or_else(|| {
            format!("a segment for {world} ranks of {ring_bytes}-byte rings overflows")
        })?;
        let nonce = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = dir.join(format!(
            "realnet-shm-{job_id:016x}-{}-{}-{nonce:08x}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let header = Header {
            magic: MAGIC,
            version: VERSION,
            world: world as u32,
            job_id,
            ring_bytes: ring_bytes as u64,
            total: layout.total as u64,
        };
        let setup = || -> io::Result<()> {
            // SAFETY: plain syscall on a file descriptor we own.
            let r =
                unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, layout.total as libc::off_t) };
            if r != 0 {
                return Err(io::Error::from_raw_os_error(r));
            }
            file.write_all_at(&header.encode(), 0)
        };
        if let Err(e) = setup() {
            let _ = std::fs::remove_file(&path);
            return Err(format!(
                "cannot reserve {} bytes for {} ({e}); make the directory larger or the rings smaller",
                layout.total,
                path.display()
            ));
        }
        Self::map(file, layout, path)
    }

    /// Opens the segment at `path`, refusing one whose header is not of
    /// `job_id`, this layout version, `world` ranks and `ring_bytes` rings.
    pub(crate) fn open(
        path: &Path,
        job_id: u64,
        world: usize,
        ring_bytes: usize,
    ) -> Result<Segment, String> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let mut raw = [0u8; 40];
        file.read_exact_at(&mut raw, 0)
            .map_err(|e| format!("cannot read the header of {}: {e}", path.display()))?;
        let h = Header::decode(&raw);
        let layout = Layout::new(world, ring_bytes).ok_or_else(|| {
            format!("a segment for {world} ranks of {ring_bytes}-byte rings overflows")
        })?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        let problem = if h.magic != MAGIC {
            Some("it is not a realnet shared-memory segment".to_string())
        } else if h.version != VERSION {
            Some(format!(
                "its layout version is {}, this build's is {VERSION}",
                h.version
            ))
        } else if h.job_id != job_id {
            Some(format!(
                "it belongs to job {:#x}, not job {job_id:#x}",
                h.job_id
            ))
        } else if h.world as usize != world {
            Some(format!("it is for {} ranks, not {world}", h.world))
        } else if h.ring_bytes != ring_bytes as u64 {
            Some(format!(
                "its rings are {} bytes, not {ring_bytes}",
                h.ring_bytes
            ))
        } else if h.total != layout.total as u64 || size < h.total {
            Some(format!(
                "its size is {size} bytes, expected {}",
                layout.total
            ))
        } else {
            None
        };
        if let Some(p) = problem {
            return Err(format!("refusing segment {}: {p}", path.display()));
        }
        Self::map(file, layout, path.to_path_buf())
    }

    fn map(file: File, layout: Layout, path: PathBuf) -> Result<Segment, String> {
        let map = MmapOptions::new()
            .len(layout.total)
            .map_raw(&file)
            .map_err(|e| format!("cannot map {}: {e}", path.display()))?;
        Ok(Segment {
            file,
            map,
            layout,
            path,
        })
    }

    /// Where the file was created (it is unlinked once every rank mapped it).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the file's name; the mappings stay valid.
    pub(crate) fn unlink(&self) {
        let _ = std::fs::remove_file(&self.path);
    }

    /// Rank `rank`'s control block.
    pub(crate) fn rank_control(&self, rank: usize) -> &RankControl {
        assert!(rank < self.layout.world, "rank within the segment");
        let offset = HEADER_BYTES + rank * size_of::<RankControl>();
        // SAFETY: the block lies inside the mapping (Layout::new reserved
        // world blocks after the header), is 128-byte aligned (a page-aligned
        // map plus a multiple of 128), and every field is an atomic, valid
        // for any bit pattern and for concurrent access from other processes.
        unsafe { &*self.map.as_ptr().add(offset).cast::<RankControl>() }
    }

    /// The control of the pair from `src` to `dst`.
    fn pair_control(&self, src: usize, dst: usize) -> &PairControl {
        let l = &self.layout;
        let pair = l.pair(src, dst);
        // SAFETY: Layout::new placed n(n-1) PairControls (atomics, any bit
        // pattern valid, 128-byte aligned from a page-aligned start, their
        // size a multiple of 128) at `ring_controls`, inside the mapping.
        unsafe {
            &*self
                .map
                .as_ptr()
                .add(l.ring_controls + pair * size_of::<PairControl>())
                .cast::<PairControl>()
        }
    }

    /// The ring from `src` to `dst`.
    pub(crate) fn ring(&self, src: usize, dst: usize) -> Ring<'_> {
        let l = &self.layout;
        let pair = l.pair(src, dst);
        let ctl = &self.pair_control(src, dst).ring;
        // SAFETY: Layout::new placed n(n-1) `ring_bytes` data areas at
        // `ring_data`, inside the mapping. The data bytes are viewed as
        // UnsafeCells: the ring protocol decides who may touch which.
        let data = unsafe {
            std::slice::from_raw_parts(
                self.map
                    .as_ptr()
                    .add(l.ring_data + pair * l.ring_bytes)
                    .cast::<UnsafeCell>(),
                l.ring_bytes,
            )
        };
        Ring::new(ctl, data)
    }

    /// Maps into this process, in advance, the pages of the rings (and
    /// their controls) that `rank` sends and receives through
    /// (`MADV_POPULATE_WRITE`, Linux 5.14 and later). `posix_fallocate`
    /// reserved the memory, but each process still takes a page fault the
    /// first time it touches each 4 KiB page of its mapping, and a ring is
    /// touched in order: until 1 MiB had gone through a ring, every inline
    /// message paid those faults on both sides (measured: 8 KiB messages
    /// 6.7-7.5 us a hop instead of 1.0-1.4, so the first probes and
    /// collectives of a job ran on cold rings). Advisory: where the kernel
    /// refuses, the pages fault in as they are used; returns whether it
    /// mapped them all.
    pub(crate) fn map_rings_of(&self, rank: usize) -> bool {
        const PAGE: usize = 4096;
        let l = &self.layout;
        let base = self.map.as_ptr() as usize;
        let populate = |start: usize, len: usize| {
            let first = start / PAGE * PAGE;
            let end = (start + len).next_multiple_of(PAGE).min(l.total);
            // SAFETY: [first, end) lies inside the mapping (the offsets
            // come from the layout, rounded to the pages that hold them);
            // populating maps pages in and never changes their contents.
            let status = unsafe {
                libc::madvise(
                    (base + first) as *mut libc::c_void,
                    end - first,
                    libc::MADV_POPULATE_WRITE,
                )
            };
            status == 0
        };
        let mut mapped = true;
        for peer in (0..l.world).filter(|&p| p != rank) {
            for pair in [l.pair(rank, peer), l.pair(peer, rank)] {
                mapped &= populate(
                    l.ring_controls + pair * size_of::<PairControl>(),
                    size_of::<PairControl>(),
                );
                mapped &= populate(l.ring_data + pair * l.ring_bytes, l.ring_bytes);
            }
        }
        mapped
    }

    /// The message slots from `src` to `dst`.
    pub(crate) fn slots(&self, src: usize, dst: usize) -> Slots<'_> {
        let p = self.pair_control(src, dst);
        Slots::new(&p.slots_ctl, &p.slots)
    }

    fn lock_op(&self, cmd: libc::c_int, rank: usize) -> io::Result<libc::flock> {
        // SAFETY: an all-zero flock is a valid value of this C struct.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = libc::F_WRLCK as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_start = rank as libc::off_t;
        fl.l_len = 1;
        // SAFETY: fcntl with a pointer to a flock we own, on our own fd.
        let r = unsafe { libc::fcntl(self.file.as_raw_fd(), cmd, &mut fl) };
        if r == -1 {
            return Err(io::Error::last_os_error());
        }
        Ok(fl)
    }

    /// Takes this rank's liveness lock (held until the file is closed).
    pub(crate) fn lock(&self, rank: usize) -> io::Result<()> {
        self.lock_op(libc::F_OFD_SETLK, rank).map(|_| ())
    }

    /// Whether some process still holds rank `rank`'s liveness lock.
    pub(crate) fn is_locked(&self, rank: usize) -> io::Result<bool> {
        let fl = self.lock_op(libc::F_OFD_GETLK, rank)?;
        Ok(fl.l_type != libc::F_UNLCK as libc::c_short)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        std::env::temp_dir()
    }

    #[test]
    fn a_segment_of_another_job_world_or_ring_size_is_refused() {
        let seg = Segment::create(&dir(), 7, 3, 4096).unwrap();
        let path = seg.path().to_path_buf();
        assert!(Segment::open(&path, 7, 3, 4096).is_ok());
        let other_job = Segment::open(&path, 8, 3, 4096).err().unwrap();
        assert!(
            other_job.contains("belongs to job 0x7, not job 0x8"),
            "{other_job}"
        );
        let other_world = Segment::open(&path, 7, 4, 4096).err().unwrap();
        assert!(other_world.contains("for 3 ranks, not 4"), "{other_world}");
        let other_ring = Segment::open(&path, 7, 3, 8192).err().unwrap();
        assert!(other_ring.contains("rings are 4096 bytes"), "{other_ring}");
        seg.unlink();
        assert!(!path.exists());
        let garbage = dir().join(format!("realnet-shm-garbage-{}", std::process::id()));
        std::fs::write(&garbage, [1u8; 64]).unwrap();
        let err = Segment::open(&garbage, 7, 3, 4096).err().unwrap();
        std::fs::remove_file(&garbage).unwrap();
        assert!(err.contains("not a realnet shared-memory segment"), "{err}");
    }

    /// Whether every 4 KiB page of `len` bytes at `addr` is mapped into
    /// this process (bit 63 of its `/proc/self/pagemap` entry).
    fn all_present(addr: usize, len: usize) -> bool {
        let pagemap = File::open("/proc/self/pagemap").unwrap();
        (addr / 4096..(addr + len).div_ceil(4096)).all(|page| {
            let mut entry = [0u8; 8];
            pagemap.read_exact_at(&mut entry, page as u64 * 8).unwrap();
            u64::from_ne_bytes(entry) >> 63 == 1
        })
    }

    #[test]
    fn a_rank_maps_in_the_rings_it_uses_and_no_others() {
        // Three ranks: rank 0 uses the rings 0-1, 1-0, 0-2 and 2-0; the
        // rings between 1 and 2 stay unmapped in its process until touched.
        let ring_bytes = 64 << 10;
        let seg = Segment::create(Path::new("/dev/shm"), 9, 3, ring_bytes).unwrap();
        seg.unlink();
        let data = |src, dst| {
            seg.map.as_ptr() as usize
                + seg.layout.ring_data
                + seg.layout.pair(src, dst) * ring_bytes
        };
        let control = |src, dst| std::ptr::from_ref(seg.pair_control(src, dst)) as usize;
        let ours = [(0, 1), (1, 0), (0, 2), (2, 0)];
        assert!(
            !ours
                .iter()
                .any(|&(s, d)| all_present(data(s, d), ring_bytes))
        );
        if !seg.map_rings_of(0) {
            // A kernel before 5.14 has no MADV_POPULATE_WRITE: nothing to test.
            eprintln!("skipped: the kernel refuses MADV_POPULATE_WRITE");
            return;
        }
        for (s, d) in ours {
            assert!(all_present(data(s, d), ring_bytes), "ring {s}->{d}");
            assert!(
                all_present(control(s, d), size_of::<PairControl>()),
                "control {s}->{d}"
            );
        }
        assert!(!all_present(data(1, 2), ring_bytes));
        assert!(!all_present(data(2, 1), ring_bytes));
    }

    #[test]
    fn locks_show_which_ranks_are_alive() {
        let a = Segment::create(&dir(), 1, 2, 4096).unwrap();
        let b = Segment::open(a.path(), 1, 2, 4096).unwrap();
        a.unlink();
        a.lock(0).unwrap();
        assert!(b.is_locked(0).unwrap());
        assert!(!a.is_locked(1).unwrap());
        b.lock(1).unwrap();
        assert!(a.is_locked(1).unwrap());
        drop(b);
        assert!(!a.is_locked(1).unwrap(), "closing the file drops the lock");
    }

    #[test]
    fn control_blocks_carry_state_and_reason() {
        let a = Segment::create(&dir(), 1, 2, 4096).unwrap();
        let b = Segment::open(a.path(), 1, 2, 4096).unwrap();
        a.unlink();
        assert_eq!(b.rank_control(0).state(), RankState::Absent);
        a.rank_control(0).set_state(RankState::Running);
        a.rank_control(0).fail(&"é".repeat(200));
        assert_eq!(b.rank_control(0).state(), RankState::Failed);
        let reason = b.rank_control(0).reason();
        assert!(
            reason.len() <= REASON_BYTES && reason.starts_with("éé"),
            "{reason}"
        );
    }
}
