//! `bidir-sim`: the `sim` command with the bidirectional ring registered.
//! Every subcommand accepts `bidir_ring` (and the planted-bug variants
//! `bidir_ring_sends_first` and `bidir_ring_mirrored`) wherever it accepts
//! the catalogue's names.

fn main() -> std::process::ExitCode {
    sim::main(bidir_ring::registry())
}
