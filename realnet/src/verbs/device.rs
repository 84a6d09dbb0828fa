//! [`Resources`]: everything this rank holds on its RDMA device (context,
//! protection domain, completion queue, one queue pair per peer, the one
//! registered memory region), behind safe methods.
//!
//! The `ibverbs` crate ties each object to the one it was made from by a
//! lifetime (a queue pair borrows its protection domain, which borrows the
//! context). To keep them in one struct the context, protection domain and
//! completion queue are boxed and leaked to `'static`, and taken back in
//! [`Drop`] after the queue pairs and the memory region that use them are
//! gone. This is the only module of the crate with unsafe code besides the
//! shared-memory one.
#![allow(unsafe_code)]

use std::ops::Range;

use ibverbs::{
    CompletionQueue, Context, MemoryRegion, PreparedQueuePair, ProtectionDomain, QueuePair,
    QueuePairEndpoint, ibv_qp_type, ibv_wc,
};

use crate::verbs::diagnose::{self, GidInfo};
use crate::verbs::exchange::QpAddr;
use crate::verbs::options::VerbsOptions;
use crate::verbs::slots::{CONTROL_SLOTS, SlotLayout, WorkId, peer_index};
use crate::verbs::wire::{Completion, Wire};

/// Transport retries before a send fails with `IBV_WC_RETRY_EXC_ERR` (the most allowed).
const RETRIES: u8 = 7;
/// Receiver-not-ready retries: 7 means without limit.
const RNR_RETRIES: u8 = 7;
/// Receiver-not-ready back-off: 12 is 0.64 ms.
const MIN_RNR_TIMER: u8 = 12;
/// `IBV_GID_TYPE_ROCE_V2` of `enum ibv_gid_type` (the crate re-exports the
/// type, an integer, but not its constants).
const GID_TYPE_ROCE_V2: ibverbs::ibv_gid_type = 2;

/// The leaked device objects, taken back in [`Device::drop`].
struct Device {
    ctx: *mut Context,
    pd: Option<*mut ProtectionDomain<'static>>,
    cq: Option<*mut CompletionQueue<'static>>,
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: each pointer came from `Box::into_raw` in `Resources::open`
        // and is dropped once, here, children before parents. `Resources`
        // declares its queue pairs and memory region before this field, so
        // they (the only holders of the `'static` borrows) are gone already.
        unsafe {
            if let Some(cq) = self.cq.take() {
                drop(Box::from_raw(cq));
            }
            if let Some(pd) = self.pd.take() {
                drop(Box::from_raw(pd));
            }
            drop(Box::from_raw(self.ctx));
        }
    }
}

/// This rank's verbs objects. Field order is drop order: queue pairs and
/// the memory region before the device objects they borrow.
pub struct Resources {
    prepared: Vec<Option<PreparedQueuePair<'static>>>,
    qps: Vec<Option<QueuePair<'static>>>,
    mr: MemoryRegion<u8>,
    device: Device,
    name: String,
    gid_index: Option<u32>,
    layout: SlotLayout,
    rank: usize,
    wc: Vec<ibv_wc>,
}

impl Resources {
    /// Opens the device of `options`, makes a protection domain, a
    /// completion queue and a queue pair for every peer of `rank` in a job
    /// of `world_size`, and registers the slots' memory.
    pub fn open(
        options: &VerbsOptions,
        rank: usize,
        world_size: usize,
    ) -> Result<Resources, String> {
        let layout = options.layout(world_size)?;
        let list = ibverbs::devices().map_err(|e| diagnose::no_device(&e.to_string()))?;
        let names: Vec<String> = list
            .iter()
            .map(|d| {
                d.name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            })
            .collect();
        // choose_device explains an empty list.
        let index = diagnose::choose_device(&names, options.device.as_deref())?;
        let name = names[index].clone();
        let ctx = list
            .get(index)
            .expect("index from the list")
            .open()
            .map_err(|e| format!("opening RDMA device {name} (port 1): {e}"))?;
        let ctx: *mut Context = Box::into_raw(Box::new(ctx));
        let mut device = Device {
            ctx,
            pd: None,
            cq: None,
        };
        // SAFETY: `ctx` lives until `device` is dropped, after everything
        // that borrows it (see `Device::drop`).
        let ctx: &'static Context = unsafe { &*ctx };
        let table: Vec<GidInfo> = ctx
            .gid_table()
            .iter()
            .map(|g| GidInfo {
                index: g.gid_index,
                roce_v2: g.gid_type == GID_TYPE_ROCE_V2,
                zero: g.gid.subnet_prefix() == 0 && g.gid.interface_id() == 0,
            })
            .collect();
        let gid_index = diagnose::choose_gid(&table, options.gid_index)
            .map_err(|e| format!("RDMA device {name}: {e}"))?;
        let per_qp = layout.recv_slots() + layout.slots + CONTROL_SLOTS;
        let cq_entries = i32::try_from(per_qp as usize * layout.peers.max(1)).map_err(|_| {
            format!(
                "{per_qp} completions for {} peers is too many",
                layout.peers
            )
        })?;
        let cq = ctx.create_cq(cq_entries, 0).map_err(|e| {
            format!("RDMA device {name}: creating a completion queue of {cq_entries}: {e}")
        })?;
        let cq = Box::into_raw(Box::new(cq));
        device.cq = Some(cq);
        let pd = ctx
            .alloc_pd()
            .map_err(|e| format!("RDMA device {name}: allocating a protection domain: {e}"))?;
        let pd = Box::into_raw(Box::new(pd));
        device.pd = Some(pd);
        // SAFETY: as for `ctx`: both live until `device` is dropped.
        let (cq, pd): (
            &'static CompletionQueue<'static>,
            &'static ProtectionDomain<'static>,
        ) = unsafe { (&*cq, &*pd) };
        let timeout = diagnose::ack_timeout_exponent(options.job.timeout, RETRIES);
        let mut prepared = Vec::with_capacity(world_size);
        for peer in 0..world_size {
            if peer == rank {
                prepared.push(None);
                continue;
            }
            let mut b = pd.create_qp(cq, cq, ibv_qp_type::IBV_QPT_RC);
            b.set_max_send_wr(layout.slots + CONTROL_SLOTS)
                .set_max_recv_wr(layout.recv_slots())
                .set_timeout(timeout)
                .set_retry_count(RETRIES)
                .set_rnr_retry(RNR_RETRIES)
                .set_min_rnr_timer(MIN_RNR_TIMER);
            if let Some(g) = gid_index {
                b.set_gid_index(g);
            }
            let qp = b.build().map_err(|e| {
                format!("RDMA device {name}: creating the queue pair for rank {peer}: {e}")
            })?;
            prepared.push(Some(qp));
        }
        let bytes = layout
            .total_bytes()
            .expect("checked by options.layout")
            .max(1);
        let mr = pd
            .allocate::<u8>(bytes)
            .map_err(|e| format!("RDMA device {name}: registering {bytes} bytes: {e}"))?;
        Ok(Resources {
            prepared,
            qps: (0..world_size).map(|_| None).collect(),
            mr,
            device,
            name,
            gid_index,
            layout,
            rank,
            wc: vec![ibv_wc::default(); 32],
        })
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The GID index in use, if any.
    pub fn gid_index(&self) -> Option<u32> {
        self.gid_index
    }

    /// This rank's queue-pair address for every peer (`None` for itself).
    pub fn local_addrs(&self) -> Vec<Option<QpAddr>> {
        self.prepared
            .iter()
            .map(|p| {
                p.as_ref().map(|p| {
                    let e = p.endpoint();
                    QpAddr {
                        qp_num: e.num,
                        lid: e.lid,
                        gid: e.gid.map(|g| {
                            let mut raw = [0u8; 16];
                            raw[..8].copy_from_slice(&g.subnet_prefix().to_be_bytes());
                            raw[8..].copy_from_slice(&g.interface_id().to_be_bytes());
                            raw
                        }),
                    }
                })
            })
            .collect()
    }

    /// Connects every queue pair to its peer's (`remote[p]` is peer `p`'s
    /// queue pair for this rank) and posts every receive slot.
    pub fn connect(&mut self, remote: &[Option<QpAddr>]) -> Result<(), String> {
        for (peer, addr) in remote.iter().enumerate() {
            let (Some(prepared), Some(addr)) = (self.prepared[peer].take(), addr) else {
                continue;
            };
            let mut endpoint = QueuePairEndpoint {
                num: addr.qp_num,
                lid: addr.lid,
                gid: None,
            };
            if let Some(raw) = addr.gid {
                let mut gid = ibverbs::Gid::default();
                // Writing a `Copy` field of a union is safe; this sets all 16 bytes.
                AsMut::as_mut(&mut gid).raw = raw;
                endpoint.gid = Some(gid);
            }
            let qp = prepared.handshake(endpoint).map_err(|e| {
                format!(
                    "RDMA device {}: connecting the queue pair to rank {peer} (qp {}): {e}",
                    self.name, addr.qp_num
                )
            })?;
            self.qps[peer] = Some(qp);
            for slot in 0..self.layout.recv_slots() {
                self.post_recv(peer, slot)?;
            }
        }
        Ok(())
    }
}

impl Wire for Resources {
    fn memory(&mut self) -> &mut [u8] {
        &mut self.mr
    }

    /// The slot's bytes are not read until its completion is polled: the
    /// fabric reads a receive slot only on its receive completion.
    fn post_recv(&mut self, peer: usize, slot: u32) -> Result<(), String> {
        let range = self.layout.recv_range(peer_index(self.rank, peer), slot);
        let id = WorkId::Recv { peer, slot }.encode();
        let qp = self.qps[peer].as_mut().ok_or("no queue pair")?;
        // SAFETY: the range lies in `mr`, which outlives the queue pair
        // (field order); the fabric neither reads nor writes the slot
        // until the completion with `id` is polled, then re-posts it.
        unsafe { qp.post_receive(&mut self.mr, range, id) }
            .map_err(|e| format!("posting a receive for rank {peer}: {e}"))
    }

    /// The slot is not written again until its completion is polled:
    /// [`Channel`](crate::verbs::channel::Channel) hands a slot out again only then.
    fn post_send(&mut self, peer: usize, range: Range<usize>, id: WorkId) -> Result<(), String> {
        let qp = self.qps[peer].as_mut().ok_or("no queue pair")?;
        // SAFETY: the range lies in `mr`, which outlives the queue pair;
        // the channel does not reuse the slot before its completion.
        unsafe { qp.post_send(&mut self.mr, range, id.encode()) }
            .map_err(|e| format!("posting a send to rank {peer}: {e}"))
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<(), String> {
        let cq = self.device.cq.expect("made in open");
        // SAFETY: `cq` lives as long as `self.device`.
        let cq = unsafe { &*cq };
        let done = cq
            .poll(&mut self.wc)
            .map_err(|e| format!("polling the completion queue of {}: {e}", self.name))?;
        out.extend(done.iter().map(|wc| {
            let (status, vendor_err) = wc.error().unwrap_or((0, 0));
            Completion {
                wr_id: wc.wr_id(),
                status,
                vendor_err,
                len: wc.len(),
            }
        }));
        Ok(())
    }
}

/// The names of the RDMA devices on this machine, or why there are none.
pub fn device_names() -> Result<Vec<String>, String> {
    let list = ibverbs::devices().map_err(|e| diagnose::no_device(&e.to_string()))?;
    let names: Vec<String> = list
        .iter()
        .map(|d| {
            d.name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect();
    if names.is_empty() {
        return Err(diagnose::no_device("the device list is empty"));
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibverbs::ibv_wc_status;

    #[test]
    fn status_names_match_the_library_constants() {
        for (value, name) in [
            (ibv_wc_status::IBV_WC_SUCCESS, "IBV_WC_SUCCESS"),
            (ibv_wc_status::IBV_WC_WR_FLUSH_ERR, "IBV_WC_WR_FLUSH_ERR"),
            (
                ibv_wc_status::IBV_WC_REM_ACCESS_ERR,
                "IBV_WC_REM_ACCESS_ERR",
            ),
            (ibv_wc_status::IBV_WC_RETRY_EXC_ERR, "IBV_WC_RETRY_EXC_ERR"),
            (
                ibv_wc_status::IBV_WC_RNR_RETRY_EXC_ERR,
                "IBV_WC_RNR_RETRY_EXC_ERR",
            ),
            (ibv_wc_status::IBV_WC_GENERAL_ERR, "IBV_WC_GENERAL_ERR"),
            (ibv_wc_status::IBV_WC_TM_ERR, "IBV_WC_TM_ERR"),
        ] {
            assert_eq!(diagnose::wc_status_name(value).0, name);
        }
    }
}
