//! [`check_memory`]: refuses, before anything runs, a largest size whose
//! buffers this process cannot hold.
//!
//! A real fabric moves real data: every rank holds its input and its
//! working buffer at the largest size for the whole of that size's run.
//! Without this check a size beyond the host's memory would not fail at
//! allocation (the allocator reserves address space lazily) but fill the
//! memory page by page until the kernel kills the process, and a size
//! beyond the address space would panic.

/// Buffers of the largest size every rank holds at once: its input (kept
/// for the checked call) and the buffer the collective works on.
const BUFFERS_PER_RANK: u64 = 2;

/// Why `ranks` ranks in this process cannot run `max_bytes`, if they
/// cannot: the buffers exceed the address space or the host's memory
/// (`MemTotal` of `/proc/meminfo`; without it only the address space is
/// checked). The need is a lower bound, so nothing that could run is
/// refused.
pub fn check_memory(max_bytes: u64, ranks: usize) -> Result<(), String> {
    check_against(max_bytes, ranks, host_memory_bytes())
}

fn check_against(max_bytes: u64, ranks: usize, host_bytes: Option<u64>) -> Result<(), String> {
    let need = max_bytes
        .saturating_mul(BUFFERS_PER_RANK)
        .saturating_mul(ranks as u64);
    let who = if ranks == 1 {
        "a rank".to_string()
    } else {
        format!("{ranks} ranks in this process")
    };
    if max_bytes > isize::MAX as u64 {
        return Err(format!(
            "a size of {max_bytes} bytes cannot be allocated: it exceeds the address space \
             (memory for one buffer is at most {} bytes)",
            isize::MAX
        ));
    }
    match host_bytes {
        Some(host) if need > host => Err(format!(
            "a size of {max_bytes} bytes needs at least {} MiB of memory for {who} \
             (an input and a working buffer each), more than this host's {} MiB; \
             lower the largest size",
            need >> 20,
            host >> 20
        )),
        _ => Ok(()),
    }
}

/// The host's physical memory, from `/proc/meminfo` (`None` elsewhere).
fn host_memory_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_beyond_the_host_or_the_address_space_are_refused() {
        let gib = 1u64 << 30;
        assert_eq!(check_against(gib, 4, Some(16 * gib)), Ok(()));
        let e = check_against(gib, 8, Some(15 * gib)).unwrap_err();
        assert!(e.contains("16384 MiB") && e.contains("8 ranks"), "{e}");
        assert!(e.contains("15360 MiB"), "{e}");
        let e = check_against(u64::MAX, 1, None).unwrap_err();
        assert!(e.contains("address space"), "{e}");
        // Unknown host memory: only the address space is checked.
        assert_eq!(check_against(1 << 40, 64, None), Ok(()));
    }

    #[test]
    fn this_host_reports_its_memory() {
        if cfg!(target_os = "linux") {
            assert!(host_memory_bytes().is_some_and(|b| b > 1 << 20));
        }
    }
}
