//! Tests of what folding needs of a scenario's collectives (`super`).

use std::path::Path;

use algorithms::Registry;

use crate::scenario::Scenario;

/// The refusal of a 32 GiB `kind` by `algorithm` on `ranks` ideal
/// ranks, one call: over the message cap.
fn over_the_cap(kind: &str, algorithm: &str, ranks: usize) -> String {
    let text = format!(
        "world_size = {ranks}\n\
         [links]\n\
         latency_us = 1.0\n\
         bandwidth_gb_per_s = 50.0\n\
         [[collective]]\n\
         kind = \"{kind}\"\n\
         algorithm = \"{algorithm}\"\n\
         min_bytes = \"32G\"\n\
         max_bytes = \"32G\"\n\
         iters = 1\n\
         warmup = 0\n\
         phantom = true\n"
    );
    match Scenario::parse(Path::new("cap.toml"), &text, &Registry::builtin()) {
        Ok(_) => panic!("{kind} {algorithm} on {ranks} ranks fits under the cap"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_message_cap_says_when_folding_would_fit() {
    // A ring folds: the cap names the fold besides the chunk size.
    let ring = over_the_cap("allreduce", "ring", 16384);
    assert!(
        ring.contains("more than the 1073741824 limit")
            && ring.contains("use a larger chunk_bytes")
            && ring.contains("set symmetry = \"fold\" under [topology]: allreduce ring folds"),
        "{ring}"
    );
    // The trees do not: the cap names the collectives that do, PAT
    // among them.
    let tree = over_the_cap("allreduce", "tree", 16384);
    assert!(
        tree.contains("use a larger chunk_bytes")
            && tree.contains("allreduce tree does not fold")
            && tree.contains("allgather ring, bruck or pat"),
        "{tree}"
    );
    // NCCL's PAT folds by a node shift, its reduce-scatter too.
    let pat = over_the_cap("allgather", "nccl_pat", 16384);
    assert!(
        pat.contains("allgather nccl_pat folds on a fat_tree by a shift of one node"),
        "{pat}"
    );
    // NCCL's ring folds by the node shift, its reduce-scatter too.
    let ring = over_the_cap("reduce_scatter", "nccl_ring", 16384);
    assert!(
        ring.contains("reduce_scatter nccl_ring folds on a fat_tree by a shift of one node"),
        "{ring}"
    );
    let scatter = over_the_cap("reduce_scatter", "nccl_pat", 16384);
    assert!(
        scatter.contains("reduce_scatter nccl_pat folds on a fat_tree by a shift of one node"),
        "{scatter}"
    );
}
