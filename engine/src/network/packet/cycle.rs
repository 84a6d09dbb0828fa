//! The buffer-dependency graph of a stuck packet network, and its cycle:
//! the evidence of a credit deadlock (InfiniBand-style flow control) or a
//! PFC deadlock (lossless Ethernet).

use topologies::LinkId;

use super::PacketNetwork;

/// Why a link direction on a buffer cycle cannot send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stall {
    /// Its packet waits for credit: room in the next link's buffer.
    Credit,
    /// Its receiver sent PFC PAUSE: what it holds from the link waits on
    /// the next link.
    Paused,
}

/// A cycle of link directions, each unable to send until the next one
/// does, written from its lowest link id.
pub type BufferCycle = Vec<(LinkId, Stall)>;

impl PacketNetwork {
    /// The cycle of the buffer-dependency graph, if it has one. An edge
    /// `a -> b` says link `a` waits on link `b`: `a` waits for credit in
    /// `b`'s buffer, or `a` is paused and a packet that arrived over it
    /// waits in `b`'s queue. When nothing in the network moves, such a
    /// cycle is permanent: each link waits for the next to drain.
    pub fn buffer_cycle(&self) -> Option<BufferCycle> {
        let n = self.ports.len();
        let mut edges: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (link, port) in self.ports.iter().enumerate() {
            for &waiter in &port.waiters {
                edges[waiter as usize].push(link);
            }
            for &p in &port.transit {
                let prev = self.packets[p].prev as usize;
                if self.ports[prev].pfc.paused {
                    edges[prev].push(link);
                }
            }
        }
        for e in &mut edges {
            e.sort_unstable();
            e.dedup();
        }
        let cycle = crate::cycle::find_cycle(&edges, 0..n)?;
        Some(
            cycle
                .into_iter()
                .map(|l| {
                    let stall = if self.ports[l].pfc.paused {
                        Stall::Paused
                    } else {
                        Stall::Credit
                    };
                    (LinkId::new(l), stall)
                })
                .collect(),
        )
    }
}
