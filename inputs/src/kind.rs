//! What an input is, and how large it may be.
//!
//! The caps are far above anything the tools write or a person types, and
//! far below what would strain memory: a refused file is almost certainly
//! the wrong file.

/// One kind of input: its name in messages and its size cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputKind {
    /// What the file is, as messages name it ("scenario").
    pub name: &'static str,
    /// The largest file accepted, in bytes.
    pub bytes_max: u64,
    /// What to do about a file over the cap, one clause.
    pub too_large_hint: &'static str,
}

const MIB: u64 = 1 << 20;

/// A scenario, a sweep file or a check scenario (`sim run`, `sim sweep`,
/// `sim check`, `sim compare`): 8 MiB. Scenarios are TOML of a few KiB;
/// an explicit topology of 16 384 vertices and their links is about
/// 3 MiB.
pub const SCENARIO: InputKind = InputKind {
    name: "scenario",
    bytes_max: 8 * MIB,
    too_large_hint: "is it the right file? Scenarios are TOML of a few KiB; \
                     describe large machines with a [topology] preset",
};

/// An `nvidia-smi topo -m` matrix named by a scenario's `file =`: 1 MiB
/// (the matrix of a 64-GPU machine with 32 NICs is under 64 KiB).
pub const NVIDIA_SMI_TOPOLOGY: InputKind = InputKind {
    name: "nvidia-smi topology",
    bytes_max: MIB,
    too_large_hint: "is it the right file? It should be the saved output of \
                     `nvidia-smi topo -m`, a few KiB",
};

/// A counterexample (`sim replay`): 64 MiB, room for the longest schedule
/// a check may explore (a million choices of about 25 bytes each).
pub const COUNTEREXAMPLE: InputKind = InputKind {
    name: "counterexample",
    bytes_max: 64 * MIB,
    too_large_hint: "is it the right file? `sim check` writes counterexamples \
                     far smaller than this",
};

/// An nccl-tests log (`sim compare`): 64 MiB, thousands of runs' tables.
pub const NCCL_TESTS_LOG: InputKind = InputKind {
    name: "nccl-tests log",
    bytes_max: 64 * MIB,
    too_large_hint: "split the log and compare the parts separately",
};

/// A shard file of `sim sweep --shard I/N` (`sim merge`): 256 MiB.
pub const SWEEP_SHARD: InputKind = InputKind {
    name: "sweep shard",
    bytes_max: 256 * MIB,
    too_large_hint: "run the sweep in more shards (--shard I/N with a larger N)",
};

impl InputKind {
    /// The cap as people read it (`8 MiB`, or bytes below 1 MiB).
    pub fn cap(&self) -> String {
        if self.bytes_max >= MIB && self.bytes_max.is_multiple_of(MIB) {
            format!("{} MiB", self.bytes_max / MIB)
        } else {
            format!("{} bytes", self.bytes_max)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_read_in_mebibytes() {
        assert_eq!(SCENARIO.cap(), "8 MiB");
        assert_eq!(NVIDIA_SMI_TOPOLOGY.cap(), "1 MiB");
        let small = InputKind {
            bytes_max: 100,
            ..SCENARIO
        };
        assert_eq!(small.cap(), "100 bytes");
    }
}
