//! Importer for the matrix `nvidia-smi topo -m` prints: one node's GPUs,
//! NICs, NVLinks and PCIe tree as a [`Topology`].
//!
//! # Input
//! A header row of device columns (`GPU0`.., then NICs as `NIC0`.. or
//! `mlx5_0`..) followed by `CPU Affinity`, `NUMA Affinity` and possibly
//! `GPU NUMA ID`; one row per device holding a cell per device column
//! (`X`, `NV#`, `PIX`, `PXB`, `PHB`, `NODE`, `SYS`; the old name `SOC` is
//! read as `SYS`) and then its affinity values, which may be absent (NIC
//! rows leave them blank). Cells are separated by tabs or runs of spaces;
//! the multi-word header names are recognised as such. The matrix ends at
//! a blank line or `Legend:`; a `NIC Legend:` section (`NIC0: mlx5_0`)
//! lets rows use either name. Errors carry the 1-based line and column.
//!
//! # Mapping
//! - Devices: every `GPU<n>` column is a GPU, `gpu<i>` in column order; any
//!   other device column is a NIC, `nic<i>`. GPUs are added first.
//! - NVLink: `NV#` is a bundle of `#` [`NvsmiOptions::nvlink`] links. When
//!   every GPU pair shows the same `NV#` and a direct mesh would need more
//!   than [`NVLINKS_PER_GPU_MAX`] links per GPU (`#` times the number of
//!   peers), the GPUs sit on an NVSwitch: one `nvswitch` vertex with a
//!   bundle of `#` links to each GPU. Otherwise each `NV#` pair is a direct
//!   GPU-GPU bundle (DGX-1's hybrid cube-mesh; the 4-GPU boards whose
//!   pairs all show `NV2` or `NV4` are full meshes, not switches).
//! - PCIe: the levels `PIX < PXB < PHB < NODE < SYS` form an ultrametric
//!   (any three devices: the two largest of their three relations are
//!   equal), so "at most level L apart" groups the devices, and the groups
//!   nest. Each group whose members are exactly L apart gets a vertex:
//!   `PIX` and `PXB` groups a `pcie_switch<i>` (kind `PcieSwitch`), `PHB`
//!   groups a `host_bridge<i>` (kind `PcieSwitch`), and every `NODE` group
//!   (NUMA node) a `socket<i>` (kind `Socket`), even of one device. A
//!   device or group links with one [`NvsmiOptions::pcie`] link to the
//!   smallest group vertex above it; sockets are joined pairwise by an
//!   [`LinkKind::Smp`] link. A `PXB` group's inner switches are not
//!   visible in the matrix, so its members hang off one switch.
//! - Hidden PCIe relations: for a pair shown as `NV#`, the PCIe relation is
//!   inferred from every third device `x` whose relations to both are
//!   shown. If they differ, the pair's relation is the larger (ultrametric);
//!   if they are equal, it is at most that. The pair takes the exact value
//!   if some `x` gives one, else the smallest such bound (the coarsest
//!   relation consistent with the matrix), and with no witness at all
//!   `NODE` when both NUMA affinities are equal or unknown, `SYS` when
//!   they differ.
//! - [`NvsmiOptions::nic`] is not used for the node itself: it is the port
//!   kind for whoever attaches the imported NICs to a network.
//!
//! A matrix that is not symmetric, or not ultrametric once the hidden
//! relations are filled in, is rejected at an offending cell.

use std::fmt;

use crate::graph::{Topology, VertexId};
use crate::kind::LinkKind;
use crate::vertex::{Vertex, VertexKind};

/// The most NVLinks one GPU has (H100 and B200: 18); a uniform `NV#`
/// needing more links per GPU than this must be an NVSwitch.
pub const NVLINKS_PER_GPU_MAX: u32 = 18;

/// The link kinds an imported node uses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NvsmiOptions {
    /// One NVLink (an `NV#` cell is `#` of them).
    pub nvlink: LinkKind,
    /// Every PCIe link of the tree.
    pub pcie: LinkKind,
    /// The NICs' network ports (for attaching the node to a network).
    pub nic: LinkKind,
}

impl Default for NvsmiOptions {
    fn default() -> Self {
        NvsmiOptions {
            nvlink: LinkKind::NvLink { generation: 3 },
            pcie: LinkKind::Pcie {
                generation: 4,
                width: 16,
            },
            nic: LinkKind::InfiniBand(crate::kind::IbRate::Hdr),
        }
    }
}

/// An input that is not a valid `nvidia-smi topo -m` matrix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct NvsmiError {
    /// 1-based line of the offending text.
    pub line: usize,
    /// 1-based column (in characters) of the offending text.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

/// A 1-based (line, column) position in the input.
type Pos = (usize, usize);

fn err(pos: Pos, message: impl Into<String>) -> NvsmiError {
    NvsmiError {
        line: pos.0,
        column: pos.1,
        message: message.into(),
    }
}

/// One cell of the device matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cell {
    /// `X`: the device itself.
    Same,
    /// `NV#`: `#` NVLinks (the PCIe relation is hidden).
    NvLink(u32),
    /// A PCIe relation, 1 (`PIX`) to 5 (`SYS`).
    Pcie(u8),
}

const PIX: u8 = 1;
const PHB: u8 = 3;
const NODE: u8 = 4;
const SYS: u8 = 5;
const LEVEL_NAMES: [&str; 6] = ["X", "PIX", "PXB", "PHB", "NODE", "SYS"];

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Cell::Same => write!(f, "X"),
            Cell::NvLink(n) => write!(f, "NV{n}"),
            Cell::Pcie(l) => write!(f, "{}", LEVEL_NAMES[usize::from(l)]),
        }
    }
}

impl Cell {
    fn parse(token: &str) -> Option<Cell> {
        let level = match token {
            "X" => return Some(Cell::Same),
            "PIX" => 1,
            "PXB" => 2,
            "PHB" => 3,
            "NODE" => 4,
            "SYS" | "SOC" => 5,
            _ => {
                let n: u32 = token.strip_prefix("NV")?.parse().ok()?;
                // No GPU has more than NVLINKS_PER_GPU_MAX links, so no
                // bond between two GPUs can be wider.
                let digits = token[2..].bytes().all(|b| b.is_ascii_digit());
                return (digits && (1..=NVLINKS_PER_GPU_MAX).contains(&n))
                    .then_some(Cell::NvLink(n));
            }
        };
        Some(Cell::Pcie(level))
    }
}

/// The whitespace-separated tokens of a line with their 1-based columns.
fn tokenize(line: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start: Option<(usize, usize)> = None; // (byte, column)
    let mut column = 0;
    for (byte, ch) in line.char_indices() {
        column += 1;
        match (ch.is_whitespace(), start) {
            (true, Some((b, c))) => {
                out.push((c, &line[b..byte]));
                start = None;
            }
            (false, None) => start = Some((byte, column)),
            _ => {}
        }
    }
    if let Some((b, c)) = start {
        out.push((c, &line[b..]));
    }
    out
}

/// One device column.
#[derive(Debug)]
struct Device<'a> {
    name: &'a str,
    /// Position of its header cell.
    header: Pos,
    is_gpu: bool,
    /// Another name for its row (from the NIC Legend).
    alias: Option<&'a str>,
}

/// A parsed, checked matrix.
#[derive(Debug)]
struct Matrix<'a> {
    devices: Vec<Device<'a>>,
    /// `cells[i][j]` with its position; filled for every pair.
    cells: Vec<Vec<(Cell, Pos)>>,
    /// Each device's NUMA Affinity (`None`: absent or `N/A`).
    numa: Vec<Option<&'a str>>,
}

fn is_gpu_name(name: &str) -> bool {
    name.strip_prefix("GPU")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn starts_matrix_end(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with("Legend:") || t.starts_with("NIC Legend:")
}

/// Parses the header, the rows and the NIC legend, and checks the cells.
fn parse(text: &str) -> Result<Matrix<'_>, NvsmiError> {
    let lines: Vec<&str> = text.lines().collect();
    let Some(header_index) = lines.iter().position(|l| !l.trim().is_empty()) else {
        return Err(err(
            (1, 1),
            "empty input: expected the matrix `nvidia-smi topo -m` prints",
        ));
    };
    let header_line = header_index + 1;
    // Header: device columns, then the (multi-word) affinity columns.
    let tokens = tokenize(lines[header_index]);
    let mut devices: Vec<Device> = Vec::new();
    let mut affinity: Vec<String> = Vec::new();
    let mut k = 0;
    while k < tokens.len() {
        let (column, token) = tokens[k];
        let words = |names: &[&str]| {
            names.len() <= tokens.len() - k
                && names.iter().zip(&tokens[k..]).all(|(n, t)| *n == t.1)
        };
        let multi = [
            &["CPU", "Affinity"][..],
            &["NUMA", "Affinity"][..],
            &["GPU", "NUMA", "ID"][..],
        ]
        .into_iter()
        .find(|names| words(names));
        if let Some(names) = multi {
            affinity.push(names.join(" "));
            k += names.len();
            continue;
        }
        if !affinity.is_empty() || token == "NUMA" {
            affinity.push(token.to_string());
        } else if Cell::parse(token).is_some() {
            return Err(err(
                (header_line, column),
                format!("expected the header row of device names, found the cell `{token}`"),
            ));
        } else if devices.iter().any(|d| d.name == token) {
            return Err(err(
                (header_line, column),
                format!("device `{token}` appears twice in the header"),
            ));
        } else {
            devices.push(Device {
                name: token,
                header: (header_line, column),
                is_gpu: is_gpu_name(token),
                alias: None,
            });
        }
        k += 1;
    }
    if devices.is_empty() {
        return Err(err((header_line, 1), "the header row names no devices"));
    }
    let numa_column = affinity
        .iter()
        .position(|a| a == "NUMA Affinity" || a == "NUMA");
    // Rows run to a blank line or a legend; then read the NIC Legend.
    let rows_end = (header_index + 1..lines.len())
        .find(|&i| starts_matrix_end(lines[i]))
        .unwrap_or(lines.len());
    read_nic_legend(&lines[rows_end..], &mut devices);

    let n = devices.len();
    let mut rows: Vec<Option<Vec<(Cell, Pos)>>> = (0..n).map(|_| None).collect();
    let mut numa = vec![None; n];
    for (index, line) in lines
        .iter()
        .enumerate()
        .take(rows_end)
        .skip(header_index + 1)
    {
        let line_no = index + 1;
        let tokens = tokenize(line);
        let (column, name) = tokens[0];
        let Some(i) = devices
            .iter()
            .position(|d| d.name == name || d.alias == Some(name))
        else {
            return Err(err(
                (line_no, column),
                format!("row `{name}` is not a device column of the header"),
            ));
        };
        if rows[i].is_some() {
            return Err(err((line_no, column), format!("a second row for `{name}`")));
        }
        let cells = &tokens[1..];
        if cells.len() < n {
            let end = line.chars().count() + 1;
            return Err(err(
                (line_no, end),
                format!(
                    "row `{name}` has {} cells, expected one per device column ({n})",
                    cells.len()
                ),
            ));
        }
        if let Some(&(column, extra)) = cells.get(n + affinity.len()) {
            return Err(err(
                (line_no, column),
                format!(
                    "unexpected cell `{extra}`: the header has {n} device and {} affinity columns",
                    affinity.len()
                ),
            ));
        }
        let mut row = Vec::with_capacity(n);
        for (j, &(column, token)) in cells[..n].iter().enumerate() {
            let pos = (line_no, column);
            let cell = Cell::parse(token).ok_or_else(|| {
                err(
                    pos,
                    format!(
                        "unknown cell `{token}` (expected X, NV1..NV{NVLINKS_PER_GPU_MAX}, PIX, PXB, PHB, NODE or SYS)"
                    ),
                )
            })?;
            check_cell(cell, i, j, &devices, pos)?;
            row.push((cell, pos));
        }
        numa[i] = numa_column
            .and_then(|c| cells.get(n + c))
            .map(|&(_, v)| v)
            .filter(|&v| v != "N/A");
        rows[i] = Some(row);
    }
    let mut cells = Vec::with_capacity(n);
    for (device, row) in devices.iter().zip(rows) {
        let Some(row) = row else {
            return Err(err(device.header, format!("no row for `{}`", device.name)));
        };
        cells.push(row);
    }
    // Symmetry: report the cell read second.
    for (i, row) in cells.iter().enumerate() {
        for (j, &a) in row.iter().enumerate().skip(i + 1) {
            let b = cells[j][i];
            if a.0 != b.0 {
                let (late, early, (p, q)) = if a.1 > b.1 {
                    (a, b, (i, j))
                } else {
                    (b, a, (j, i))
                };
                return Err(err(
                    late.1,
                    format!(
                        "{}/{} is {} but {}/{} is {}: the matrix must be symmetric",
                        devices[p].name,
                        devices[q].name,
                        late.0,
                        devices[q].name,
                        devices[p].name,
                        early.0
                    ),
                ));
            }
        }
    }
    Ok(Matrix {
        devices,
        cells,
        numa,
    })
}

/// `X` exactly on the diagonal; NVLink only between GPUs.
fn check_cell(
    cell: Cell,
    i: usize,
    j: usize,
    devices: &[Device],
    pos: Pos,
) -> Result<(), NvsmiError> {
    let (a, b) = (devices[i].name, devices[j].name);
    match cell {
        Cell::Same if i != j => Err(err(
            pos,
            format!("`X` marks a device itself, but this is {a}/{b}"),
        )),
        _ if i == j && cell != Cell::Same => Err(err(
            pos,
            format!("the diagonal cell {a}/{a} must be `X`, found `{cell}`"),
        )),
        Cell::NvLink(_) if !(devices[i].is_gpu && devices[j].is_gpu) => Err(err(
            pos,
            format!("`{cell}` between {a} and {b}: NVLink joins GPUs only"),
        )),
        _ => Ok(()),
    }
}

/// Reads `NIC<k>: <name>` lines after a `NIC Legend:` line as aliases.
fn read_nic_legend<'a>(lines: &[&'a str], devices: &mut [Device<'a>]) {
    let Some(start) = lines.iter().position(|l| l.trim() == "NIC Legend:") else {
        return;
    };
    for line in &lines[start + 1..] {
        let Some((name, alias)) = line.split_once(':') else {
            continue;
        };
        let (name, alias) = (name.trim(), alias.trim());
        if let Some(d) = devices.iter_mut().find(|d| d.name == name)
            && !alias.is_empty()
            && !alias.contains(char::is_whitespace)
        {
            d.alias = Some(alias);
        }
    }
}

/// The shown PCIe level of a pair (0 for `X`), `None` when NVLink hides it.
fn shown_level(m: &Matrix, i: usize, j: usize) -> Option<u8> {
    match m.cells[i][j].0 {
        Cell::Pcie(l) => Some(l),
        Cell::Same => Some(0),
        Cell::NvLink(_) => None,
    }
}

/// The PCIe level NVLink hides between devices `i < j` (module docs).
fn infer(m: &Matrix, i: usize, j: usize) -> Result<u8, NvsmiError> {
    let n = m.devices.len();
    let mut exact: Option<(u8, usize)> = None;
    let mut bound: Option<u8> = None;
    for x in (0..n).filter(|&x| x != i && x != j) {
        let (Some(a), Some(b)) = (shown_level(m, i, x), shown_level(m, j, x)) else {
            continue;
        };
        if a == b {
            bound = Some(bound.map_or(a, |c| c.min(a)));
            continue;
        }
        let value = a.max(b);
        match exact {
            Some((e, y)) if e != value => {
                return Err(err(
                    m.cells[i][j].1,
                    format!(
                        "cannot infer the PCIe relation NVLink hides between {} and {}: \
                         {} implies {}, {} implies {}",
                        m.devices[i].name,
                        m.devices[j].name,
                        m.devices[y].name,
                        LEVEL_NAMES[usize::from(e)],
                        m.devices[x].name,
                        LEVEL_NAMES[usize::from(value)]
                    ),
                ));
            }
            _ => exact = Some((value, x)),
        }
    }
    Ok(match (exact, bound) {
        (Some((e, _)), _) => e,
        (None, Some(b)) => b,
        (None, None) => match (m.numa[i], m.numa[j]) {
            (Some(a), Some(b)) if a != b => SYS,
            _ => NODE,
        },
    })
}

/// Every pair's PCIe level (0 on the diagonal), hidden ones inferred;
/// checked to be an ultrametric.
fn pcie_levels(m: &Matrix) -> Result<Vec<Vec<u8>>, NvsmiError> {
    let n = m.devices.len();
    let shown = |i: usize, j: usize| shown_level(m, i, j);
    let level = (0..n)
        .map(|i| {
            (0..n)
                .map(|j| match shown(i, j) {
                    Some(l) => Ok(l),
                    None => infer(m, i.min(j), i.max(j)),
                })
                .collect::<Result<Vec<u8>, NvsmiError>>()
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Ultrametric: in every triple the largest relation occurs twice.
    for i in 0..n {
        for j in i + 1..n {
            for k in j + 1..n {
                let pairs = [(i, j), (i, k), (j, k)];
                let values = pairs.map(|(p, q)| level[p][q]);
                let max = *values.iter().max().expect("three values");
                if values.iter().filter(|&&v| v == max).count() >= 2 {
                    continue;
                }
                let at = values
                    .iter()
                    .position(|&v| v == max)
                    .expect("the max is there");
                let (p, q) = pairs[at];
                let o = [i, j, k]
                    .into_iter()
                    .find(|&d| d != p && d != q)
                    .expect("third");
                let pos = m.cells[p][q].1.max(m.cells[q][p].1);
                let name = |d: usize| m.devices[d].name;
                return Err(err(
                    pos,
                    format!(
                        "{}/{} is {}, but {} is {} from {} and {} from {}: PCIe relations must nest",
                        name(p),
                        name(q),
                        LEVEL_NAMES[usize::from(max)],
                        name(o),
                        LEVEL_NAMES[usize::from(level[o][p])],
                        name(p),
                        LEVEL_NAMES[usize::from(level[o][q])],
                        name(q)
                    ),
                ));
            }
        }
    }
    Ok(level)
}

/// Imports the matrix `nvidia-smi topo -m` prints as one node's topology
/// (see the module docs for the mapping).
pub fn import(text: &str, options: &NvsmiOptions) -> Result<Topology, NvsmiError> {
    let m = parse(text)?;
    let level = pcie_levels(&m)?;
    let n = m.devices.len();
    let topo_err = |e: crate::TopologyError| err((1, 1), e.to_string());
    let mut t = Topology::new();
    // Devices: GPUs, then NICs, each in column order.
    let mut vertex: Vec<Option<VertexId>> = vec![None; n];
    for gpus in [true, false] {
        let (prefix, kind) = if gpus {
            ("gpu", VertexKind::Gpu)
        } else {
            ("nic", VertexKind::Nic)
        };
        let of_kind = (0..n).filter(|&i| m.devices[i].is_gpu == gpus);
        for (count, i) in of_kind.enumerate() {
            let v = Vertex::new(format!("{prefix}{count}"), kind);
            vertex[i] = Some(t.add_vertex(v).map_err(topo_err)?);
        }
    }
    let vertex: Vec<VertexId> = vertex
        .into_iter()
        .map(|v| v.expect("every device added"))
        .collect();
    build::add_nvlinks(&m, &vertex, options, &mut t).map_err(topo_err)?;
    build::add_pcie_tree(&level, &vertex, options, &mut t).map_err(topo_err)?;
    Ok(t)
}

mod build;
#[cfg(test)]
mod tests;
