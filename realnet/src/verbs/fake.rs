//! An in-memory [`Wire`] for tests: ranks that are threads share a switch
//! that moves frames from a send slot into the receive slot the peer posted
//! first, in order per connection, as a reliable-connected queue pair does.
//! A frame with no posted receive waits (receiver not ready) and is
//! counted. A dropped wire is a dead process: sends to it complete with
//! `IBV_WC_RETRY_EXC_ERR`.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use crate::verbs::slots::{SlotLayout, WorkId, peer_index};
use crate::verbs::wire::{Completion, Wire};

/// `IBV_WC_RETRY_EXC_ERR`.
const RETRY_EXC_ERR: u32 = 12;

/// A frame on its way from `from` to `to`.
struct Frame {
    bytes: Vec<u8>,
    send_id: u64,
}

#[derive(Default)]
/// The shared state of a fake job: frames in flight and completions.
pub struct Switch {
    /// Frames in flight, by (to, from), in order.
    flight: Vec<Vec<VecDeque<Frame>>>,
    /// Completions waiting for each rank to poll.
    cqs: Vec<Vec<Completion>>,
    dead: Vec<bool>,
    /// Frames that found no posted receive when they arrived.
    not_ready: u64,
}

/// One rank's end of the fake.
pub struct FakeWire {
    rank: usize,
    layout: SlotLayout,
    memory: Vec<u8>,
    /// Posted receive slots per peer, in posting order.
    posted: Vec<VecDeque<u32>>,
    switch: Arc<Mutex<Switch>>,
}

/// The wires of a job of `n` ranks whose slots are laid out as `layout`,
/// with every receive slot posted, and a handle to count receiver-not-ready events.
pub fn group(n: usize, layout: SlotLayout) -> (Vec<FakeWire>, Arc<Mutex<Switch>>) {
    let switch = Arc::new(Mutex::new(Switch {
        flight: (0..n)
            .map(|_| (0..n).map(|_| VecDeque::new()).collect())
            .collect(),
        cqs: vec![Vec::new(); n],
        dead: vec![false; n],
        not_ready: 0,
    }));
    let wires = (0..n)
        .map(|rank| FakeWire {
            rank,
            layout,
            memory: vec![0; layout.total_bytes().unwrap().max(1)],
            posted: (0..n)
                .map(|p| {
                    if p == rank {
                        VecDeque::new()
                    } else {
                        (0..layout.recv_slots()).collect()
                    }
                })
                .collect(),
            switch: switch.clone(),
        })
        .collect();
    (wires, switch)
}

/// Receiver-not-ready events so far.
pub fn not_ready(switch: &Mutex<Switch>) -> u64 {
    switch.lock().unwrap().not_ready
}

impl Wire for FakeWire {
    fn memory(&mut self) -> &mut [u8] {
        &mut self.memory
    }

    fn post_recv(&mut self, peer: usize, slot: u32) -> Result<(), String> {
        self.posted[peer].push_back(slot);
        Ok(())
    }

    fn post_send(&mut self, peer: usize, range: Range<usize>, id: WorkId) -> Result<(), String> {
        let mut sw = self.switch.lock().unwrap();
        let frame = Frame {
            bytes: self.memory[range].to_vec(),
            send_id: id.encode(),
        };
        if sw.dead[peer] {
            sw.cqs[self.rank].push(failed(frame.send_id));
        } else {
            sw.flight[peer][self.rank].push_back(frame);
        }
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<(), String> {
        let mut sw = self.switch.lock().unwrap();
        for from in 0..self.posted.len() {
            while let Some(frame) = sw.flight[self.rank][from].front() {
                let Some(slot) = self.posted[from].pop_front() else {
                    sw.not_ready += 1;
                    break;
                };
                let range = self.layout.recv_range(peer_index(self.rank, from), slot);
                let len = frame.bytes.len();
                assert!(len <= range.len(), "a frame larger than a slot");
                self.memory[range.start..range.start + len].copy_from_slice(&frame.bytes);
                let send_id = frame.send_id;
                sw.flight[self.rank][from].pop_front();
                sw.cqs[from].push(Completion {
                    wr_id: send_id,
                    status: 0,
                    vendor_err: 0,
                    len: 0,
                });
                out.push(Completion {
                    wr_id: WorkId::Recv { peer: from, slot }.encode(),
                    status: 0,
                    vendor_err: 0,
                    len,
                });
            }
        }
        out.append(&mut sw.cqs[self.rank]);
        Ok(())
    }
}

fn failed(send_id: u64) -> Completion {
    Completion {
        wr_id: send_id,
        status: RETRY_EXC_ERR,
        vendor_err: 0x81,
        len: 0,
    }
}

impl Drop for FakeWire {
    /// The process is gone: what was sent to it fails at the senders.
    fn drop(&mut self) {
        let mut sw = self.switch.lock().unwrap_or_else(|e| e.into_inner());
        sw.dead[self.rank] = true;
        for from in 0..self.posted.len() {
            let frames: Vec<Frame> = sw.flight[self.rank][from].drain(..).collect();
            for f in frames {
                sw.cqs[from].push(failed(f.send_id));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::Endpoint;
    use crate::job::JobOptions;
    use crate::verbs::fabric::Core;
    use crate::verbs::options::VerbsOptions;
    use algorithms::{Collective, DType, Fabric, Params, Payload, Shape, Tag};
    use std::time::Duration;

    fn options(slot_bytes: usize, slots: u32, timeout: Duration) -> VerbsOptions {
        VerbsOptions {
            job: JobOptions {
                timeout,
                ..JobOptions::default()
            },
            slot_bytes,
            slots,
            ..VerbsOptions::default()
        }
    }

    fn cores(n: usize, o: &VerbsOptions) -> (Vec<Core<FakeWire>>, Arc<Mutex<Switch>>) {
        let (wires, switch) = group(n, o.layout(n).unwrap());
        let cores = wires
            .into_iter()
            .enumerate()
            .map(|(rank, w)| Core::new(rank, n, o, w).unwrap())
            .collect();
        (cores, switch)
    }

    #[test]
    fn every_catalogue_algorithm_is_correct_on_the_fabric_logic() {
        for (n, slot_bytes, slots) in [(2usize, 112, 1u32), (3, 256, 2), (5, 4096, 8)] {
            let o = options(slot_bytes, slots, Duration::from_secs(20));
            let (cores, switch) = cores(n, &o);
            let params = Params {
                chunk_bytes: 64,
                ranks_per_node: 2,
                root: n - 1,
                ..Params::default()
            };
            std::thread::scope(|s| {
                for c in cores {
                    let params = &params;
                    s.spawn(move || {
                        let calls =
                            crate::selftest::run_catalogue(&c, &[1, 37, 500], params, 1).unwrap();
                        assert_eq!(calls, 3 * algorithms::Registry::builtin().len() as u64);
                        assert_eq!(c.finish(), Ok(()));
                    });
                }
            });
            // Credits (and the control slots) keep every frame from
            // arriving before its receive slot is posted.
            assert_eq!(not_ready(&switch), 0, "{n} ranks, {slots} slots");
        }
    }

    #[test]
    fn a_dead_peer_is_reported_with_the_completion_status() {
        let o = options(256, 2, Duration::from_secs(5));
        let (mut cores, _switch) = cores(2, &o);
        drop(cores.pop()); // rank 1 dies before anything is sent
        let c = &cores[0];
        c.begin_call(crate::CallId::new(
            1,
            &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
        ))
        .unwrap();
        let shape = Shape::new(DType::I32, 1);
        let e = c
            .block_on(async {
                c.send(1, Tag(1), Payload::from_vec(vec![1i32])).await?;
                c.recv(1, Tag(1), shape).await
            })
            .unwrap_err();
        let text = e.to_string();
        assert!(
            matches!(e, algorithms::FabricError::Timeout { peer: 1, .. }),
            "{e:?}"
        );
        assert!(
            text.contains("RDMA send to rank 1 failed: IBV_WC_RETRY_EXC_ERR"),
            "{text}"
        );
        let e = c.finish().unwrap_err().to_string();
        assert!(e.contains("rank 1"), "{e}");
    }

    #[test]
    fn a_peer_that_never_finishes_times_out_by_name() {
        let o = options(256, 2, Duration::from_millis(300));
        let (cores, _switch) = cores(3, &o);
        let e = cores[0].finish().unwrap_err();
        assert!(
            matches!(e, algorithms::FabricError::Timeout { peer: 1, .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains("did not finish within 0.3 s"), "{e}");
    }
}
