//! Wire identities of algorithms: the 16-bit id a real fabric's frames
//! carry, and the names of the ids this process knows.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use crate::collective::Collective;

/// Every wire identity this process has made a handle for, with the
/// algorithm's collective and name: how a real fabric names the algorithm
/// of a peer's message in an error. Only ever added to.
pub(super) fn wire_names() -> &'static Mutex<BTreeMap<u16, String>> {
    static NAMES: OnceLock<Mutex<BTreeMap<u16, String>>> = OnceLock::new();
    NAMES.get_or_init(Mutex::default)
}

/// `collective, name` of the algorithm with wire identity `id`, if this
/// process has a handle to one (a real job's ranks agree on their
/// registries first, so a peer's algorithm is known here).
pub fn describe_wire_id(id: u16) -> Option<String> {
    wire_names()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&id)
        .cloned()
}

/// The wire identity of algorithm `name` of `collective` (see
/// [`Algorithm::wire_id`](super::Algorithm::wire_id)).
pub fn wire_id(collective: Collective, name: &str) -> u16 {
    const OFFSET: u32 = 0x811c_9dc5;
    const PRIME: u32 = 0x0100_0193;
    let text = format!("{}/{name}", collective.name());
    let hash = text
        .bytes()
        .fold(OFFSET, |h, b| (h ^ u32::from(b)).wrapping_mul(PRIME));
    (hash >> 16) as u16 ^ hash as u16
}
