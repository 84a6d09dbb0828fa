//! Cross-memory attach: one copy of a large message straight from the
//! sender's memory into the receiver's buffer (`process_vm_readv`, as Open
//! MPI's vader/CMA and MPICH's nemesis do), and the allocation advice that
//! keeps the receiver's fresh buffers cheap.
//!
//! The kernel allows the read when the reader may ptrace the sender: same
//! user and, under Yama's `ptrace_scope = 1`, only if the sender declared
//! the reader an allowed tracer. [`allow_readers`] declares any process
//! allowed (what Open MPI does at start-up); the fabric probes each pair at
//! connect time and falls back to the ring for pairs where the read is
//! refused (`EPERM`, or no `process_vm_readv` in a sandbox).
#![allow(unsafe_code)]

use std::io;

use algorithms::payload::{Buffer, IntoBuffer};
use algorithms::{DType, Payload, Shape};

/// Lets any process of this user read this process's memory with
/// `process_vm_readv` under Yama's `ptrace_scope = 1` (no effect, and no
/// error, where Yama is absent).
pub(crate) fn allow_readers() {
    // SAFETY: prctl with integer arguments touches no memory of ours.
    let _ = unsafe {
        libc::prctl(
            libc::PR_SET_PTRACER,
            libc::PR_SET_PTRACER_ANY as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
}

/// Copies `dst.len()` bytes at address `addr` of process `pid` into `dst`.
pub(crate) fn read(pid: u32, addr: u64, dst: &mut [u8]) -> io::Result<()> {
    let mut done = 0usize;
    while done < dst.len() {
        let rest = &mut dst[done..];
        let local = libc::iovec {
            iov_base: rest.as_mut_ptr().cast(),
            iov_len: rest.len(),
        };
        let remote = libc::iovec {
            iov_base: (addr as usize + done) as *mut libc::c_void,
            iov_len: rest.len(),
        };
        // SAFETY: `local` describes `rest`, memory we borrow mutably for
        // the call; the kernel only writes there. `remote` is an address
        // in the other process, which the kernel checks (EFAULT), so a
        // wrong address cannot touch our memory.
        let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
        match n {
            n if n > 0 => done += n as usize,
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "process_vm_readv copied nothing",
                ));
            }
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

/// Copies a payload of `shape` at address `addr` of process `pid` into the
/// allocation of `spare` if it has the element type (a recycled buffer,
/// see `crate::pool`), else into a new one, never zeroed first (zeroing
/// would be a whole extra pass over the memory, 10% of a large
/// shared-memory allreduce's time).
pub(crate) fn read_into(
    pid: u32,
    addr: u64,
    shape: Shape,
    spare: Option<Buffer>,
) -> io::Result<Payload> {
    let n = shape.count;
    Ok(match shape.dtype {
        DType::F32 => Payload::from_vec(read_vec::<f32>(pid, addr, n, spare)?),
        DType::F64 => Payload::from_vec(read_vec::<f64>(pid, addr, n, spare)?),
        DType::I32 => Payload::from_vec(read_vec::<i32>(pid, addr, n, spare)?),
        DType::I64 => Payload::from_vec(read_vec::<i64>(pid, addr, n, spare)?),
        DType::U8 => Payload::from_vec(read_vec::<u8>(pid, addr, n, spare)?),
        // Symbols are ids in the sender's interner: no header carries them
        // (sends refuse them), and their bytes would mean nothing here.
        DType::Sym => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "symbolic elements cannot cross processes",
            ));
        }
    })
}

/// Reads `count` elements of `T` from `addr` in process `pid` into
/// `spare`'s vector (if it holds `T`) or a new one.
fn read_vec<T: IntoBuffer>(
    pid: u32,
    addr: u64,
    count: usize,
    spare: Option<Buffer>,
) -> io::Result<Vec<T>> {
    let mut v: Vec<T> = spare.and_then(|b| T::vec_of(b).ok()).unwrap_or_default();
    v.clear();
    v.reserve(count);
    let bytes = count * std::mem::size_of::<T>();
    {
        let spare = v.spare_capacity_mut();
        // SAFETY: `spare` is the vector's allocation of at least `count`
        // elements, `bytes` long in all, which we borrow mutably; viewing
        // uninitialised memory as bytes only to let the kernel write into
        // it (never reading it) is sound for MaybeUninit storage.
        let raw = unsafe { std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast::<u8>(), bytes) };
        advise_huge_pages(raw);
        read(pid, addr, raw)?;
    }
    // SAFETY: `read` returned only after the kernel wrote all `bytes` bytes
    // of the first `count` elements, and every bit pattern is a valid value
    // of the element types (f32, f64, i32, i64, u8).
    unsafe { v.set_len(count) };
    Ok(v)
}

/// Bytes from which a fresh receive buffer is worth advising.
const HUGE_ADVICE_MIN_BYTES: usize = 4 << 20;

/// Asks for transparent huge pages behind a large fresh buffer before it
/// is first written, so that filling it takes one page fault per 2 MiB
/// instead of one per 4 KiB (the faults, not the copy, bound a large
/// receive into new memory). Advisory: errors are ignored.
///
/// Measured here (`transparent_hugepage` = madvise, CPU time of one
/// thread, loaded machine): a 64 MiB cross-memory copy into a fresh
/// buffer took 45-52 ms without the advice and 21 ms with it once huge
/// pages were available; the very first advised buffer of a process may
/// pay for compaction (90-170 ms).
pub(crate) fn advise_huge_pages(buf: &mut [u8]) {
    advise_huge_range(buf.as_mut_ptr() as usize, buf.len());
}

/// [`advise_huge_pages`] for the `len` bytes at `start`, memory the caller
/// owns (initialised or not: the advice never reads it).
fn advise_huge_range(start: usize, len: usize) {
    const HUGE: usize = 2 << 20;
    if len < HUGE_ADVICE_MIN_BYTES {
        return;
    }
    let first = start.next_multiple_of(HUGE);
    let end = (start + len) / HUGE * HUGE;
    if end <= first {
        return;
    }
    // SAFETY: [first, end) lies inside the caller's buffer;
    // MADV_HUGEPAGE changes how the range is backed, never its contents.
    let _ = unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) };
}

/// Asks the kernel to back the whole 2 MiB pages inside `buf` (memory of
/// the caller that a peer will copy out of) with transparent huge pages
/// now, moving the bytes if they sit on 4 KiB pages
/// (`MADV_HUGEPAGE`, then `MADV_COLLAPSE`, Linux 6.1 and later). The
/// contents never change. Advisory: where the kernel refuses (an older
/// kernel, memory that is not private anonymous, pages a peer has pinned
/// this instant) nothing happens and the copies are only slower.
///
/// Why: `process_vm_readv` pins the *source* pages one by one, and on this
/// machine (kernel 6.18, a VM) that bounds the copy: out of a 32 MiB
/// buffer on 4 KiB pages it copied 4-5 GB/s of CPU time, out of the same
/// buffer on huge pages 12-16 GB/s (the destination's pages hardly matter,
/// 3-5 GB/s with only the destination huge). Collapsing 32 MiB took 11 ms
/// of CPU once and 0.07 ms when already collapsed.
pub(crate) fn collapse_huge_pages(buf: &[u8]) {
    const HUGE: usize = 2 << 20;
    if buf.len() < HUGE_ADVICE_MIN_BYTES {
        return;
    }
    let start = buf.as_ptr() as usize;
    let first = start.next_multiple_of(HUGE);
    let end = (start + buf.len()) / HUGE * HUGE;
    if end <= first {
        return;
    }
    advise_huge_range(first, end - first);
    // SAFETY: [first, end) lies inside `buf`, which we borrow;
    // MADV_COLLAPSE moves the pages behind the range into huge pages with
    // the same contents (the kernel copies under its own locks, and
    // concurrent readers, this process or a peer's process_vm_readv, see
    // the same bytes throughout); it never writes new values.
    let _ = unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_COLLAPSE) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process_and_reports_a_bad_address() {
        let src: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let mut dst = vec![0u8; src.len()];
        match read(std::process::id(), src.as_ptr() as u64, &mut dst) {
            Ok(()) => assert_eq!(dst, src),
            // A sandbox without process_vm_readv: the fabric falls back.
            Err(e) => assert!(
                matches!(e.raw_os_error(), Some(libc::EPERM | libc::ENOSYS)),
                "{e}"
            ),
        }
        let mut one = [0u8; 8];
        assert!(read(std::process::id(), 8, &mut one).is_err());
    }

    #[test]
    fn huge_page_advice_leaves_contents_alone() {
        let mut buf = vec![7u8; 9 << 20];
        advise_huge_pages(&mut buf);
        assert!(buf.iter().all(|b| *b == 7));
    }

    #[test]
    fn collapsing_into_huge_pages_leaves_contents_alone() {
        let buf: Vec<u8> = (0..(9usize << 20)).map(|i| (i % 253) as u8).collect();
        collapse_huge_pages(&buf);
        collapse_huge_pages(&buf[1..]);
        assert!(buf.iter().enumerate().all(|(i, b)| *b == (i % 253) as u8));
    }
}
