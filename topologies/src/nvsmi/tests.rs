//! Tests of the nvidia-smi topology reader: DGX A100, DGX-1 V100 and PCIe samples, uniform NVLink, small matrices, located errors, inconsistent relations, the NUMA fallback.

use std::sync::Arc;

use super::*;
use crate::routing::Router;

fn sample(name: &str) -> String {
    let path = format!("{}/../scenarios/topo/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn load(text: &str) -> Topology {
    import(text, &NvsmiOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn id(t: &Topology, name: &str) -> VertexId {
    t.find(name).unwrap_or_else(|| panic!("no vertex {name}"))
}

fn route(t: &Arc<Topology>, a: &str, b: &str) -> Vec<String> {
    let mut r = Router::new(Arc::clone(t), 0);
    let route = r.route(id(t, a), id(t, b), 0).unwrap();
    route.iter().map(|&l| t.link_name(l)).collect()
}

fn count(t: &Topology, kind: VertexKind) -> usize {
    t.vertex_ids().filter(|&v| t.vertex(v).kind == kind).count()
}

fn error(text: &str) -> (usize, usize, String) {
    let e = import(text, &NvsmiOptions::default()).unwrap_err();
    (e.line, e.column, e.message)
}

#[test]
fn dgx_a100_is_an_nvswitch_node() {
    // 8 GPUs + 10 NICs + nvswitch + 2 sockets + 4 PCIe switches (one per
    // PXB tree of 2 GPUs and 2 NICs); the storage NICs mlx5_4/5 sit on
    // their sockets. Links: 8 NVLink, 18 device and 4 switch uplinks,
    // 1 SMP.
    let t = Arc::new(load(&sample("dgx_a100.txt")));
    assert_eq!((t.vertex_count(), t.link_count()), (25, 31));
    assert_eq!(count(&t, VertexKind::Gpu), 8);
    assert_eq!(count(&t, VertexKind::Nic), 10);
    assert_eq!(count(&t, VertexKind::NvSwitch), 1);
    assert_eq!(count(&t, VertexKind::Socket), 2);
    assert_eq!(count(&t, VertexKind::PcieSwitch), 4);
    for a in 0..8 {
        for b in (0..8).filter(|&b| b != a) {
            let r = route(&t, &format!("gpu{a}"), &format!("gpu{b}"));
            assert_eq!(
                r,
                [format!("gpu{a}->nvswitch"), format!("nvswitch->gpu{b}")]
            );
        }
    }
    let up = t.out_links(id(&t, "gpu0"));
    let nv = t.link(up[0]);
    assert_eq!((nv.kind, nv.count), (NvsmiOptions::default().nvlink, 12));
    // mlx5_0 is nic0, under gpu0's switch; mlx5_6 (nic6) under gpu4's.
    assert_eq!(
        route(&t, "gpu0", "nic0"),
        ["gpu0->pcie_switch0", "pcie_switch0->nic0"]
    );
    assert_eq!(
        route(&t, "gpu4", "nic6"),
        ["gpu4->pcie_switch2", "pcie_switch2->nic6"]
    );
    assert_eq!(
        route(&t, "nic0", "nic9"),
        [
            "nic0->pcie_switch0",
            "pcie_switch0->socket0",
            "socket0->socket1",
            "socket1->pcie_switch3",
            "pcie_switch3->nic9"
        ]
    );
    assert_eq!(
        route(&t, "nic4", "nic2"),
        [
            "nic4->socket0",
            "socket0->pcie_switch1",
            "pcie_switch1->nic2"
        ]
    );
}

#[test]
fn dgx1_v100_is_a_hybrid_cube_mesh() {
    // 16 direct NVLink bundles (each GPU has 4 peers), 12 devices,
    // 4 PIX switches (2 GPUs + 1 NIC each), 2 host bridges (PHB between
    // a socket's switches), 2 sockets: 20 vertices; links 16 + 12
    // device uplinks + 4 + 2 group uplinks + 1 SMP = 35.
    let t = Arc::new(load(&sample("dgx1_v100.txt")));
    assert_eq!((t.vertex_count(), t.link_count()), (20, 35));
    assert_eq!(count(&t, VertexKind::NvSwitch), 0);
    let nvlinks: Vec<u32> = t
        .link_ids()
        .step_by(2)
        .map(|l| t.link(l))
        .filter(|l| matches!(l.kind, LinkKind::NvLink { .. }))
        .map(|l| l.count)
        .collect();
    assert_eq!(nvlinks.len(), 16);
    assert_eq!(nvlinks.iter().filter(|&&c| c == 2).count(), 8);
    assert_eq!(route(&t, "gpu0", "gpu4"), ["gpu0->gpu4"]);
    // No NVLink between gpu0 and gpu5, and GPUs do not forward: PCIe
    // across both sockets.
    assert_eq!(
        route(&t, "gpu0", "gpu5"),
        [
            "gpu0->pcie_switch0",
            "pcie_switch0->host_bridge0",
            "host_bridge0->socket0",
            "socket0->socket1",
            "socket1->host_bridge1",
            "host_bridge1->pcie_switch2",
            "pcie_switch2->gpu5"
        ]
    );
    // The NVLink-hidden PCIe relation of gpu0/gpu1 is PIX (both PIX
    // with mlx5_0): they share a switch.
    assert_eq!(
        route(&t, "nic0", "gpu1"),
        ["nic0->pcie_switch0", "pcie_switch0->gpu1"]
    );
}

#[test]
fn pcie_box_uses_every_level() {
    // socket0: host_bridge0 over {PXB switch over two PIX switches of
    // 2 GPUs} and NIC0; socket1: two PIX switches (GPU4/5, GPU6/7 and
    // NIC1), NODE apart. Vertices 10 + 2 + 1 + 5 = 18; links 10 device
    // uplinks + 6 group uplinks + 1 SMP = 17.
    let text = sample("pcie_8gpu.txt");
    let t = Arc::new(load(&text));
    assert_eq!((t.vertex_count(), t.link_count()), (18, 17));
    assert_eq!(count(&t, VertexKind::PcieSwitch), 6);
    assert_eq!(route(&t, "gpu0", "gpu1").len(), 2);
    assert_eq!(route(&t, "gpu0", "gpu2").len(), 4);
    assert_eq!(route(&t, "gpu0", "nic0").len(), 4); // via the PXB switch and host bridge
    assert_eq!(route(&t, "gpu4", "gpu6").len(), 4); // via socket1
    assert_eq!(route(&t, "gpu6", "nic1").len(), 2);
    assert_eq!(route(&t, "gpu0", "gpu7").len(), 7);
    // Rows may use the NIC Legend's names; spaces work as separators.
    let renamed = text.replace("\nNIC0\t", "\nmlx5_0\t").replace('\t', "   ");
    let u = load(&renamed);
    let names = |t: &Topology| t.link_ids().map(|l| t.link_name(l)).collect::<Vec<_>>();
    assert_eq!(names(&u), names(&t));
}

#[test]
fn uniform_nvlink_is_a_switch_only_beyond_one_gpus_links() {
    let matrix = |n: usize, nv: u32, numa: &dyn Fn(usize) -> usize| {
        let mut s: String = (0..n).map(|i| format!("\tGPU{i}")).collect();
        s += "\tCPU Affinity\tNUMA Affinity\n";
        for i in 0..n {
            s += &format!("GPU{i}");
            for j in 0..n {
                s += &if i == j {
                    "\t X ".to_string()
                } else {
                    format!("\tNV{nv}")
                };
            }
            s += &format!("\t0-7\t{}\n", numa(i));
        }
        s
    };
    // H100-like: 8 x NV18, no NICs; sockets from the NUMA column.
    let t = load(&matrix(8, 18, &|i| i / 4));
    assert_eq!(count(&t, VertexKind::NvSwitch), 1);
    assert_eq!(count(&t, VertexKind::Socket), 2);
    // 8 + 1 + 2 vertices; 8 NVLink + 8 uplinks + 1 SMP.
    assert_eq!((t.vertex_count(), t.link_count()), (11, 17));
    // 4 x NV4 needs 12 links per GPU: a full mesh of 6 bundles.
    let t = load(&matrix(4, 4, &|_| 0));
    assert_eq!(count(&t, VertexKind::NvSwitch), 0);
    assert_eq!(count(&t, VertexKind::Socket), 1);
    assert_eq!((t.vertex_count(), t.link_count()), (5, 6 + 4));
}

/// GPU0, GPU1 (NV4) and NIC0, all PIX: columns of row 2 are 1 (name),
/// 7 (X), 10 (NV4), 14 (PIX), 18 (affinity), 22 (NUMA).
const SMALL: &str = "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n\
                     GPU0\t X \tNV4\tPIX\t0-7\t0\n\
                     GPU1\tNV4\t X \tPIX\t0-7\t0\n\
                     NIC0\tPIX\tPIX\t X \n";

#[test]
fn small_matrix_imports() {
    // 3 devices + socket + PIX switch; 1 NVLink + 3 + 1 uplinks.
    let t = load(SMALL);
    assert_eq!((t.vertex_count(), t.link_count()), (5, 5));
}

#[test]
fn malformed_inputs_are_located() {
    let case = |from: &str, to: &str| error(&SMALL.replacen(from, to, 1));
    let (l, c, m) = case("\t X \tNV4", "\t X \tNVX");
    assert_eq!((l, c), (2, 10), "{m}");
    assert!(m.starts_with("unknown cell `NVX`"), "{m}");
    // A bond wider than any GPU's NVLink count is not a real matrix.
    let (l, c, m) = case("\t X \tNV4", "\t X \tNV19");
    assert_eq!((l, c), (2, 10), "{m}");
    assert!(m.contains("NV1..NV18"), "{m}");
    let (l, c, m) = case("NIC0\tPIX\tPIX", "NIC0\tPIX\tFOO");
    assert_eq!((l, c), (4, 10), "{m}");
    // Too few cells: reported just past the end of "GPU1\tNV4\t X ".
    let (l, c, m) = case("GPU1\tNV4\t X \tPIX\t0-7\t0", "GPU1\tNV4\t X ");
    assert_eq!((l, c), (3, 13), "{m}");
    assert!(
        m.contains("has 2 cells, expected one per device column (3)"),
        "{m}"
    );
    // Too many: the third value after two affinity columns.
    let (l, c, m) = case("\t X \n", "\t X \t1\t2\t3\n");
    assert_eq!((l, c), (4, 22), "{m}");
    let (l, c, m) = case("GPU1\tNV4\t X ", "GPU1\tNV4\tPIX");
    assert_eq!((l, c), (3, 10), "{m}");
    assert!(m.contains("diagonal"), "{m}");
    let (l, c, m) = case("GPU1\tNV4\t X \tPIX", "GPU1\tNV4\t X \tX");
    assert_eq!((l, c), (3, 14), "{m}");
    assert!(m.contains("`X` marks a device itself"), "{m}");
    let (l, c, m) = case("\nGPU1\t", "\nGPU9\t");
    assert_eq!((l, c), (3, 1), "{m}");
    let (l, c, m) = case("\nGPU1\t", "\nGPU0\t");
    assert_eq!((l, c, m.as_str()), (3, 1, "a second row for `GPU0`"));
    // Asymmetric: the NIC0 row (read last) disagrees.
    let (l, c, m) = case("NIC0\tPIX\tPIX", "NIC0\tPIX\tPXB");
    assert_eq!((l, c), (4, 10), "{m}");
    assert!(m.contains("symmetric"), "{m}");
    // A missing row is reported at its header cell.
    let (l, c, m) = case("NIC0\tPIX\tPIX\t X \n", "");
    assert_eq!((l, c, m.as_str()), (1, 12, "no row for `NIC0`"));
    let (l, c, m) = case("PIX\t0-7", "NV2\t0-7");
    assert_eq!((l, c), (2, 14), "{m}");
    assert!(m.contains("NVLink joins GPUs only"), "{m}");
    assert_eq!(error("").0, 1);
    assert_eq!(error(" \n\t\n").1, 1);
    // A matrix without its header row.
    let (l, c, _) = error(&SMALL[SMALL.find("GPU0\t X").unwrap()..]);
    assert_eq!((l, c), (1, 7));
}

#[test]
fn inconsistent_pcie_relations_are_rejected() {
    // GPU0-GPU1 PIX and GPU0-NIC0 PIX force GPU1-NIC0 PIX, not SYS:
    // reported at the later of the two SYS cells (NIC0's row).
    let text = SMALL
        .replacen("NV4", "PIX", 2)
        .replacen("\t X \tPIX\t0", "\t X \tSYS\t0", 1)
        .replacen("NIC0\tPIX\tPIX", "NIC0\tPIX\tSYS", 1);
    let (l, c, m) = error(&text);
    assert_eq!((l, c), (4, 10), "{m}");
    assert!(
        m.contains("GPU1/NIC0 is SYS") || m.contains("NIC0/GPU1 is SYS"),
        "{m}"
    );
    // NVLink-hidden relation with contradicting witnesses: NIC0 says
    // PXB (PIX vs PXB), NIC1 says NODE (PIX vs NODE).
    let text = "\tGPU0\tGPU1\tNIC0\tNIC1\n\
                GPU0\t X \tNV2\tPIX\tPIX\n\
                GPU1\tNV2\t X \tPXB\tNODE\n\
                NIC0\tPIX\tPXB\t X \tPIX\n\
                NIC1\tPIX\tNODE\tPIX\t X \n";
    let (l, c, m) = error(text);
    assert_eq!((l, c), (2, 10), "{m}");
    assert!(m.contains("cannot infer"), "{m}");
}

#[test]
fn hidden_relations_fall_back_to_numa() {
    let text = |numa1: &str| {
        format!(
            "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n\
             GPU0\t X \tNV4\t0-7\t0\n\
             GPU1\tNV4\t X \t8-15\t{numa1}\n"
        )
    };
    // Different NUMA nodes: two sockets (2 GPUs + 2 sockets; NVLink,
    // 2 uplinks, SMP).
    let t = load(&text("1"));
    assert_eq!((t.vertex_count(), t.link_count()), (4, 4));
    let t = load(&text("0"));
    assert_eq!((t.vertex_count(), t.link_count()), (3, 3));
    let t = load(&text("N/A"));
    assert_eq!((t.vertex_count(), t.link_count()), (3, 3));
}

#[test]
fn errors_display_as_line_colon_column() {
    let e = import("", &NvsmiOptions::default()).unwrap_err();
    assert!(e.to_string().starts_with("1:1: empty input"), "{e}");
}
