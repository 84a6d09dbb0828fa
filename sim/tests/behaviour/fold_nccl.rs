//! `nccl_tree` folded by a fat-tree's node turn (every node's GPUs
//! turned by a quarter node with NCCL's channels, the socket links left
//! in place, or by half a node where the quarter does not fit), and
//! `nccl_pat` and
//! `nccl_ring` folded by the preset's shift of whole nodes:
//! scenarios time as their full runs, and what breaks the fold is refused
//! saying why.

use crate::fold::{parse, rows, scenario_text, times};

#[test]
fn nccl_tree_folds_by_the_node_turn_exactly_and_what_breaks_the_turn_is_refused() {
    let tree = "kind = \"allreduce\"\nalgorithm = \"nccl_tree\"\n";
    for (nodes, spines) in [(2, 2), (4, 4)] {
        // NCCL runs these sizes on all 16 channels.
        let folded = scenario_text(nodes, "fold", tree, "")
            .replace("spines = 4\n", &format!("spines = {spines}\n"))
            .replace("\"64K\"", "\"1M\"")
            .replace("\"4M\"", "\"8M\"");
        let scenario = parse(&folded).unwrap();
        assert!(scenario.fold.is_none() && scenario.fold_turn.is_some());
        // The largest exact fold: a quarter of every node's GPUs.
        assert_eq!(scenario.fold_turn.as_ref().unwrap().order(), 4);
        assert!(
            scenario.network_description.contains(&format!(
                "folded by turning every node's GPUs by 2 with NCCL's channels ({} of {} ranks \
                 simulated, symmetric routes; the socket links, which no route of the run \
                 crosses, stay in place)",
                nodes * 2,
                nodes * 8
            )),
            "{}",
            scenario.network_description
        );
        let full = folded.replace("symmetry = \"fold\"\n", "");
        assert_eq!(times(&folded), times(&full), "{nodes} nodes");
    }
    // DGX A100-style nodes fold by the quarter turn too (NCCL's channels
    // there turn with it).
    let a100 = scenario_text(2, "fold", tree, "")
        .replace("nodes = 2\n", "nodes = 2\nstyle = \"a100\"\n")
        .replace("spines = 4\n", "spines = 2\n")
        .replace("\"64K\"", "\"1M\"")
        .replace("\"4M\"", "\"8M\"");
    let scenario = parse(&a100).unwrap();
    assert_eq!(scenario.fold_turn.as_ref().unwrap().order(), 4);
    let full = a100.replace("symmetry = \"fold\"\n", "");
    assert_eq!(times(&a100), times(&full), "DGX A100 nodes");
    // Up*/down* routing: the turn moves the rails' leaves, so from the
    // default root (a leaf, which the node shift keeps) turned routes
    // would not be up*/down* routes and the fold is refused naming the
    // link; a spine root is moved by the shift itself.
    let up_down = |root: &str| {
        scenario_text(2, "fold", tree, "")
            .replace(
                "spines = 4\n",
                &format!("spines = 2\nrouting = \"up_down\"\n{root}"),
            )
            .replace("\"64K\"", "\"1M\"")
            .replace("\"4M\"", "\"8M\"")
    };
    let err = parse(&up_down("")).unwrap_err();
    assert!(
        err.contains("f.toml:9:12")
            && err.contains("link node0/nic1->node0/pcie0 is up but its image")
            && err.contains("the default routing folds"),
        "{err}"
    );
    let spine_root = up_down("routing_root = \"spine0\"\n");
    let err = parse(&spine_root).unwrap_err();
    assert!(
        err.contains("leaf0->spine0 is up but its image leaf0->spine1"),
        "{err}"
    );
    // At 512 KiB NCCL runs 14 channels, which the turn (channel c to
    // c + 2 in each tree's block of 8) does not map onto themselves.
    let fewer = scenario_text(4, "fold", tree, "");
    let err = parse(&fewer).unwrap_err();
    assert!(
        err.contains("f.toml:13:13")
            && err.contains("NCCL runs 524288 B on 14 of the 16 channels")
            && err.contains("takes channel 12 to channel 14"),
        "{err}"
    );
    // 16 channels: the elements must split into 16 equal blocks.
    let uneven = scenario_text(4, "fold", tree, "").replace("\"64K\"", "\"1048580\"");
    let err = parse(&uneven).unwrap_err();
    assert!(
        err.contains("f.toml:12:13")
            && err.contains("262145 elements, which do not split into 16 equal channel blocks")
            && err.contains("the nearest sizes that fold are 1048576 B and 1048640 B"),
        "{err}"
    );
    // Every collective folds by the same turn: a ring beside it is refused.
    let ring = "kind = \"allreduce\"\nalgorithm = \"ring\"\n";
    let mixed = format!(
        "{}[[collective]]\n{ring}min_bytes = \"64K\"\nmax_bytes = \"64K\"\nphantom = true\n",
        scenario_text(4, "fold", tree, "")
    );
    let err = parse(&mixed).unwrap_err();
    assert!(
        err.contains("allreduce ring is neither nccl_tree nor nccl_nvls_tree"),
        "{err}"
    );
    // Nodes of 6 GPUs have no turn by half a node (PCIe switches hold
    // two GPUs): refused at symmetry, saying why.
    let six =
        scenario_text(4, "fold", tree, "").replace("nodes = 4\n", "nodes = 4\ngpus_per_node = 6\n");
    let err = parse(&six).unwrap_err();
    assert!(
        err.contains("f.toml:9:12")
            && err.contains("this topology has no such turn")
            && err.contains("must be even"),
        "{err}"
    );
}

#[test]
fn nccl_pat_allgather_and_reduce_scatter_fold_by_a_node_shift_exactly() {
    let gather = "kind = \"allgather\"\nalgorithm = \"nccl_pat\"\n";
    // The reduce-scatter's reductions, which take time here, tie
    // (channels' messages reaching a GPU at one picosecond): served in
    // channel order on every rank. (At 32 MiB with 16 KiB chunks on 8
    // nodes the folded call ends 5 ps of 1.73 ms before the full run's,
    // with or without that order, and without the reductions' time it is
    // exact: not reduced further.)
    let scatter = "kind = \"reduce_scatter\"\nalgorithm = \"nccl_pat\"\nchunk_bytes = \"16K\"\n";
    let compute = "[compute]\nreduce_gb_per_s = 200\n";
    for (kind, collective, max) in [
        ("allgather", gather, "\"32M\""),
        ("reduce_scatter", scatter, "\"4M\""),
    ] {
        // One leaf per rail (a shift by one node), and two (by half the
        // nodes).
        for (nodes, leaves) in [(4, ""), (8, "leaves = 16\n")] {
            let folded = scenario_text(nodes, "fold", collective, compute)
                .replace("spines = 4\n", &format!("spines = 4\n{leaves}"))
                .replace("\"4M\"", max);
            let scenario = parse(&folded).unwrap();
            assert!(scenario.fold.is_some() && scenario.fold_turn.is_none());
            let full = folded.replace("\"fold\"", "\"routes\"");
            assert_eq!(times(&folded), times(&full), "{kind}, {nodes} nodes");
        }
    }
    // Uneven sizes are refused naming the nearest that fold.
    let uneven = scenario_text(4, "fold", gather, "").replace("\"64K\"", "\"65540\"");
    let err = parse(&uneven).unwrap_err();
    assert!(
        err.contains("f.toml:12:13") && err.contains("the nearest sizes that fold are 65536 B"),
        "{err}"
    );
    // A process driving several GPUs skews their starts: refused.
    let skewed = format!(
        "{}[nccl]\ngpus_per_process = 8\n",
        scenario_text(4, "fold", gather, "")
    );
    let err = parse(&skewed).unwrap_err();
    assert!(err.contains("needs one GPU per process"), "{err}");
    // Beside nccl_tree (which folds by the turn) it is refused.
    let tree = "kind = \"allreduce\"\nalgorithm = \"nccl_tree\"\n";
    let mixed = format!(
        "{}[[collective]]\n{gather}min_bytes = \"1M\"\nmax_bytes = \"1M\"\nphantom = true\n",
        scenario_text(4, "fold", tree, "").replace("\"64K\"", "\"1M\"")
    );
    let err = parse(&mixed).unwrap_err();
    assert!(
        err.contains("allgather nccl_pat is neither nccl_tree nor nccl_nvls_tree"),
        "{err}"
    );
}

#[test]
fn nccl_ring_folds_by_a_node_shift_exactly_and_uneven_channel_segments_are_refused() {
    for kind in ["allreduce", "allgather", "reduce_scatter"] {
        let ring = format!("kind = \"{kind}\"\nalgorithm = \"nccl_ring\"\n");
        // One leaf per rail (a shift by one node), and two (by half the
        // nodes); 256 KiB and 1 MiB (NCCL runs them on all 16 channels).
        for (nodes, leaves) in [(4, ""), (8, "leaves = 16\n")] {
            let folded = scenario_text(nodes, "fold", &ring, "")
                .replace("spines = 4\n", &format!("spines = 4\n{leaves}"))
                .replace("\"64K\"", "\"256K\"")
                .replace("\"4M\"", "\"1M\"")
                .replace("step_factor = 8", "step_factor = 4");
            let scenario = parse(&folded).unwrap();
            assert!(scenario.fold.is_some() && scenario.fold_turn.is_none());
            let full = folded.replace("\"fold\"", "\"routes\"");
            assert_eq!(times(&folded), times(&full), "{kind}, {nodes} nodes");
        }
    }
    // 1 MiB + 128 B is a multiple of the 32 ranks' floats but not of 16
    // channels of 32 segments: refused naming the nearest sizes.
    let ring = "kind = \"allreduce\"\nalgorithm = \"nccl_ring\"\n";
    let uneven = scenario_text(4, "fold", ring, "").replace("\"64K\"", "\"1048704\"");
    let err = parse(&uneven).unwrap_err();
    assert!(
        err.contains("f.toml:12:13")
            && err.contains("do not split into 16 channels of 32 equal ring segments")
            && err.contains("the nearest sizes that fold are 1048576 B and 1050624 B"),
        "{err}"
    );
    // NCCL runs a 4 MiB allgather on 4 nodes on 14 channels, which no
    // power of two splits evenly: refused at max_bytes.
    let gather = "kind = \"allgather\"\nalgorithm = \"nccl_ring\"\n";
    let err = parse(&scenario_text(4, "fold", gather, "")).err().unwrap();
    assert!(
        err.contains("f.toml:13:13")
            && err.contains("NCCL runs 4194304 B on 14 channels")
            && err.contains("the nearest sizes that fold are 4193280 B and 4195072 B"),
        "{err}"
    );
    // Beside nccl_tree (which folds by the turn) it is refused.
    let tree = "kind = \"allreduce\"\nalgorithm = \"nccl_tree\"\n";
    let mixed = format!(
        "{}[[collective]]\n{ring}min_bytes = \"1M\"\nmax_bytes = \"1M\"\nphantom = true\n",
        scenario_text(4, "fold", tree, "").replace("\"64K\"", "\"1M\"")
    );
    let err = parse(&mixed).unwrap_err();
    assert!(
        err.contains("allreduce nccl_ring is neither nccl_tree nor nccl_nvls_tree"),
        "{err}"
    );
}

#[test]
fn nccl_tuner_folds_by_a_node_shift_where_each_choice_does_and_names_the_size_otherwise() {
    let tuned = |kind: &str, nodes: usize, min: &str, max: &str| {
        format!(
            "tuner = \"nccl\"\n{}",
            scenario_text(nodes, "fold", &format!("kind = \"{kind}\"\n"), "")
                .replace("\"64K\"", &format!("\"{min}\""))
                .replace("\"4M\"", &format!("\"{max}\""))
                .replace("step_factor = 8", "step_factor = 4")
        )
    };
    // NCCL picks its ring for these (the allgather at 256 KiB and 1 MiB
    // on all 16 channels, the allreduce at 64 MiB): each folds, and the
    // scenario times as its full run with the same routes.
    for folded in [
        tuned("allgather", 4, "256K", "1M"),
        tuned("allreduce", 4, "64M", "64M"),
    ] {
        let scenario = parse(&folded).unwrap();
        assert!(scenario.fold.is_some() && scenario.fold_turn.is_none());
        let full = folded.replace("\"fold\"", "\"routes\"");
        assert_eq!(times(&folded), times(&full), "{folded}");
    }
    // NCCL 2.29.7 picks PAT for a reduce-scatter across 16 nodes of one
    // GPU (reductions taking time): it folds too.
    let pat = tuned("reduce_scatter", 16, "256K", "4M")
        .replace("nodes = 16\n", "nodes = 16\ngpus_per_node = 1\n")
        .replace(
            "phantom = true\n",
            "phantom = true\n[nccl]\nversion = \"2.29.7\"\n[compute]\nreduce_gb_per_s = 200\n",
        );
    let scenario = parse(&pat).unwrap();
    let rows = rows(&scenario);
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|r| r.algorithm == "nccl_pat"), "{rows:?}");
    let full = pat.replace("\"fold\"", "\"routes\"");
    assert_eq!(times(&pat), times(&full));
    // At 16 MiB NCCL picks its tree, which does not fold by the shift:
    // refused at the size, naming the algorithm.
    let err = parse(&tuned("allreduce", 4, "16M", "16M")).err().unwrap();
    assert!(
        err.contains("f.toml:12:13")
            && err.contains("at 16777216 B NCCL's tuner picks allreduce nccl_tree")
            && err.contains("drop symmetry = \"fold\""),
        "{err}"
    );
}

#[test]
fn nccl_nvls_tree_folds_by_the_node_turn_exactly_and_what_breaks_it_is_refused() {
    let nvls = "kind = \"allreduce\"\nalgorithm = \"nccl_nvls_tree\"\n";
    for nodes in [2, 3] {
        let folded = scenario_text(nodes, "fold", nvls, "")
            .replace("spines = 4\n", &format!("spines = {nodes}\n"))
            .replace("\"64K\"", "\"1M\"")
            .replace("\"4M\"", "\"8M\"");
        let scenario = parse(&folded).unwrap();
        assert!(scenario.fold.is_none() && scenario.fold_turn.is_some());
        // A quarter of every node's GPUs simulated, the heads turned.
        assert_eq!(scenario.fold_turn.as_ref().unwrap().order(), 4);
        assert!(
            scenario.network_description.contains(&format!(
                "folded by turning every node's GPUs by 2 with NVLS-Tree's heads ({} of {} ranks \
                 simulated",
                nodes * 2,
                nodes * 8
            )),
            "{}",
            scenario.network_description
        );
        // Against the full run with the same routes (the turn's moved
        // copies; unfolded, `symmetry` unset, each head's flows hash to
        // one of the NICs of its PCIe switch on their own).
        let times = |s: &engine::scenario::Scenario| -> Vec<(u64, u64)> {
            rows(s).iter().map(|r| (r.size_bytes, r.time_ps)).collect()
        };
        let mut full = parse(&folded).unwrap();
        full.fold_turn = None;
        let (folded, full) = (times(&scenario), times(&full));
        assert_eq!(folded.len(), 2);
        assert_eq!(folded, full, "{nodes} nodes");
    }
    // HGX H200, B200 and B300 nodes fold by the quarter turn too (B300,
    // whose NCCL channels do not turn, included: NVLS-Tree sends nothing
    // on them).
    for style in ["hgx_h200", "hgx_b200", "hgx_b300"] {
        let text = scenario_text(2, "fold", nvls, "")
            .replace("nodes = 2\n", &format!("nodes = 2\nstyle = \"{style}\"\n"))
            .replace("spines = 4\n", "spines = 2\n")
            .replace("\"64K\"", "\"1M\"")
            .replace("\"4M\"", "\"1M\"");
        let scenario = parse(&text).unwrap();
        assert_eq!(scenario.fold_turn.as_ref().unwrap().order(), 4, "{style}");
        let mut full = parse(&text).unwrap();
        full.fold_turn = None;
        let t = |s: &engine::scenario::Scenario| -> Vec<u64> {
            rows(s).iter().map(|r| r.time_ps).collect()
        };
        assert_eq!(t(&scenario), t(&full), "{style}");
    }
    // The packet model serves a GPU's legs to the heads in the heads'
    // order on every GPU: refused, naming the flow model.
    let packet = scenario_text(2, "fold", nvls, "")
        .replace("spines = 4\n", "spines = 2\n")
        .replace("model = \"flow\"\n", "");
    let err = parse(&packet).unwrap_err();
    assert!(
        err.contains("nccl_nvls_tree folds exactly in the flow model only")
            && err.contains("use model = \"flow\""),
        "{err}"
    );
    // A size whose channel blocks do not split over a node's 8 heads.
    let uneven = scenario_text(2, "fold", nvls, "")
        .replace("spines = 4\n", "spines = 2\n")
        .replace("\"64K\"", "\"65540\"");
    let err = parse(&uneven).unwrap_err();
    assert!(
        err.contains("a folded run of nccl_nvls_tree")
            && err.contains("do not give the 8 heads of a node equal units")
            && err.contains("the nearest sizes that fold are"),
        "{err}"
    );
    // Every collective of the scenario turns the heads' tags.
    let tree = "kind = \"allreduce\"\nalgorithm = \"nccl_tree\"\n";
    let mixed = format!(
        "{}[[collective]]\n{tree}min_bytes = \"1M\"\nmax_bytes = \"1M\"\nphantom = true\n",
        scenario_text(2, "fold", nvls, "").replace("spines = 4\n", "spines = 2\n")
    );
    let err = parse(&mixed).unwrap_err();
    assert!(
        err.contains("allreduce nccl_tree is not nccl_nvls_tree"),
        "{err}"
    );
}
