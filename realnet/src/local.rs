//! [`LocalFabric`]: ranks that are threads of one process, handing
//! messages straight to each other's [`Mailbox`].
//!
//! The simplest real fabric: no bytes are copied beyond the payload clone a
//! send makes. It is the reference the other transports are compared with
//! in tests, and the way to test drivers without sockets or shared memory.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use algorithms::{Fabric, FabricError, Payload, Rank, Shape, Tag, Time, Work};

use crate::call::CallId;
use crate::endpoint::Endpoint;
use crate::job::JobOptions;
use crate::mailbox::Mailbox;

/// One rank of a job whose ranks are threads of this process.
pub struct LocalFabric {
    rank: Rank,
    mailboxes: Arc<Vec<Mailbox>>,
    call: Mutex<CallId>,
    start: Instant,
}

impl LocalFabric {
    /// The fabrics of every rank of a job of `world_size` threads.
    pub fn group(world_size: usize, job: &JobOptions) -> Vec<LocalFabric> {
        let mailboxes: Arc<Vec<Mailbox>> = Arc::new(
            (0..world_size)
                .map(|r| Mailbox::new(r, world_size, job.timeout))
                .collect(),
        );
        let start = Instant::now();
        (0..world_size)
            .map(|rank| LocalFabric {
                rank,
                mailboxes: mailboxes.clone(),
                call: Mutex::new(CallId::NONE),
                start,
            })
            .collect()
    }

    fn current_call(&self) -> CallId {
        *self.call.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Fabric for LocalFabric {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.mailboxes.len()
    }

    fn now(&self) -> Time {
        crate::endpoint::time_since(self.start)
    }

    async fn send(&self, to: Rank, tag: Tag, payload: Payload) -> Result<(), FabricError> {
        crate::endpoint::refuse_symbols(self.rank, to, &payload)?;
        let Some(target) = self.mailboxes.get(to) else {
            return Err(FabricError::PeerOutOfRange {
                rank: self.rank,
                peer: to,
                world_size: self.world_size(),
            });
        };
        if let Some(e) = self.mailbox().fatal() {
            return Err(e);
        }
        target.deliver(self.rank, tag, self.current_call(), payload);
        Ok(())
    }

    async fn recv(&self, from: Rank, tag: Tag, expect: Shape) -> Result<Payload, FabricError> {
        self.mailbox().recv(from, tag, expect).await
    }

    async fn compute(&self, _work: Work) -> Result<(), FabricError> {
        Ok(())
    }
}

impl Endpoint for LocalFabric {
    fn mailbox(&self) -> &Mailbox {
        &self.mailboxes[self.rank]
    }

    fn progress(&self) -> bool {
        false
    }

    fn begin_call(&self, call: CallId) -> Result<(), FabricError> {
        *self.call.lock().unwrap_or_else(|e| e.into_inner()) = call;
        self.mailbox().begin_call(call)
    }

    fn finish(&self) -> Result<(), FabricError> {
        match self.mailbox().fatal() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use algorithms::Params;

    #[test]
    fn every_catalogue_algorithm_is_correct_on_threads() {
        for n in 2usize..=8 {
            let fabrics = LocalFabric::group(n, &JobOptions::default());
            let params = Params {
                chunk_bytes: 16,
                ranks_per_node: 2,
                root: n - 1,
                ..Params::default()
            };
            std::thread::scope(|s| {
                for f in &fabrics {
                    s.spawn(move || {
                        let calls =
                            crate::selftest::run_catalogue(f, &[1, 37], &params, 1).unwrap();
                        assert_eq!(calls, 2 * algorithms::Registry::builtin().len() as u64);
                        assert_eq!(f.finish(), Ok(()));
                    });
                }
            });
        }
    }

    #[test]
    fn thread_ranks_have_no_switch_to_multicast_or_reduce_in() {
        use algorithms::in_network::{NO_MULTICAST_REASON, NO_SWITCH_REASON};
        use algorithms::{DType, ReduceOp};
        let fabrics = LocalFabric::group(2, &JobOptions::default());
        let f = &fabrics[0];
        let data = || Payload::phantom(DType::F32, 4);
        let refusals = [
            f.can_multicast_in_network(&[0, 1]).err(),
            f.block_on(f.multicast_in_network(&[0, 1], Tag(0), data()))
                .err(),
            f.block_on(f.reduce_to_in_network(&[0, 1], 0, Tag(0), data(), ReduceOp::Sum))
                .err(),
        ];
        let words: Vec<String> = refusals
            .iter()
            .map(|e| e.as_ref().expect("refused").to_string())
            .collect();
        assert!(words[0].contains(NO_MULTICAST_REASON), "{}", words[0]);
        assert!(words[1].contains(NO_MULTICAST_REASON), "{}", words[1]);
        assert!(words[0].contains("NVSwitch"), "{}", words[0]);
        assert!(words[2].contains(NO_SWITCH_REASON), "{}", words[2]);
    }

    #[test]
    fn ranks_calling_different_collectives_fail_clearly() {
        let job = JobOptions {
            timeout: std::time::Duration::from_millis(300),
            ..JobOptions::default()
        };
        let fabrics = LocalFabric::group(2, &job);
        let errors: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = fabrics
                .iter()
                .map(|f| {
                    s.spawn(move || {
                        crate::selftest::run_mismatched_collectives(f).unwrap_or_default()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(
            errors
                .iter()
                .any(|e| e.contains("called different collectives")),
            "{errors:?}"
        );
    }
}
