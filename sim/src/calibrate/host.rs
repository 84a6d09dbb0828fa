//! The host facts a calibration records: cores, NUMA nodes, the
//! interface and its MTU, and how many hosts the ranks ran on (a network
//! namespace counts as a host of its own, so a cluster of namespaces is
//! seen as the cluster it stands for).

use std::path::Path;

use algorithms::{DType, Fabric, FabricError, Payload, Shape, Tag};
use engine::calibration::HostFacts;
use realnet::connect::FabricKind;

/// Bytes of a rank's host identity as sent to rank 0.
const IDENTITY_BYTES: usize = 64;

/// The tag of the identities.
const TAG_IDENTITY: u64 = 4;

/// This process's host: its host name and network namespace.
fn identity() -> Vec<u8> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let netns = std::fs::read_link("/proc/self/ns/net")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let mut id: Vec<u8> = format!("{}/{netns}", name.trim()).into_bytes();
    id.resize(IDENTITY_BYTES, 0);
    id
}

/// Every rank sends its host identity to rank 0, which returns how many
/// distinct ones there are (other ranks return 0).
pub async fn count_hosts<F: Fabric>(f: &F) -> Result<usize, FabricError> {
    let mine = identity();
    if f.rank() != 0 {
        let payload = Payload::from_vec(mine);
        f.send(0, Tag(TAG_IDENTITY), payload).await?;
        return Ok(0);
    }
    let mut seen = vec![mine];
    for r in 1..f.world_size() {
        let p = f
            .recv(r, Tag(TAG_IDENTITY), Shape::new(DType::U8, IDENTITY_BYTES))
            .await?;
        seen.push(p.as_bytes().map(<[u8]>::to_vec).unwrap_or_default());
    }
    seen.sort_unstable();
    seen.dedup();
    Ok(seen.len())
}

/// The facts of this host for a calibration on `kind` through
/// `interface` (TCP's `--interface`; loopback when absent).
pub fn facts(kind: FabricKind, interface: Option<&str>, hosts: usize) -> HostFacts {
    let (interface, mtu) = match kind {
        FabricKind::Tcp => {
            let name = interface.unwrap_or("lo").to_string();
            let mtu = read_number(&Path::new("/sys/class/net").join(&name).join("mtu"));
            (name, mtu)
        }
        FabricKind::Shm => ("shared memory".to_string(), None),
        other => (other.name().to_string(), None),
    };
    HostFacts {
        cores: this_host_cores(),
        numa_nodes: numa_nodes(),
        hosts,
        interface,
        mtu,
    }
}

/// The host facts `sim validate` compares with a calibration's.
pub fn this_host(kind: FabricKind, interface: Option<&str>) -> HostFacts {
    facts(kind, interface, 1)
}

/// Logical CPUs online on this host, from `/sys/devices/system/cpu/online`
/// (not this process's affinity mask: `sim launch` binds each
/// shared-memory rank to a core of its own, and a bound rank would see
/// one); this process's CPUs if that file cannot be read, 1 if unknown.
fn this_host_cores() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|list| cpu_list_len(list.trim()))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// How many CPUs a kernel CPU list names (`0-3,8,10-11` is 7); `None`
/// if it is malformed or empty.
fn cpu_list_len(list: &str) -> Option<usize> {
    let mut total = 0;
    for part in list.split(',') {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?),
            None => {
                let one = part.parse::<usize>().ok()?;
                (one, one)
            }
        };
        total += last.checked_sub(first)? + 1;
    }
    (total > 0).then_some(total)
}

/// NUMA nodes under `/sys/devices/system/node` (1 if none are listed).
fn numa_nodes() -> usize {
    let Ok(dir) = std::fs::read_dir("/sys/devices/system/node") else {
        return 1;
    };
    let n = dir
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("node"))
                .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
        })
        .count();
    n.max(1)
}

/// A small number in a sysfs file.
fn read_number(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::cpu_list_len;

    #[test]
    fn cpu_lists_count_ranges_and_single_cpus() {
        assert_eq!(cpu_list_len("0-1"), Some(2));
        assert_eq!(cpu_list_len("0-3,8,10-11"), Some(7));
        assert_eq!(cpu_list_len("5"), Some(1));
        assert_eq!(cpu_list_len(""), None);
        assert_eq!(cpu_list_len("3-1"), None);
        assert_eq!(cpu_list_len("x"), None);
    }
}
