//! Writes axis values into a scenario document: which keys each axis sets,
//! and whether the scenario has them at all.

use toml::{Table, Value};

use super::axes::{Axis, AxisKind, AxisValue};
use crate::scenario::{ByteSize, ScenarioError, Source};

/// The topology presets whose node count the `nodes` axis sets, with the
/// key that holds it.
const NODE_KEYS: &[(&str, &str)] = &[
    ("fat_tree", "nodes"),
    ("nvl72_cluster", "racks"),
    ("leaf_spine", "hosts"),
    ("cpu_cluster", "hosts"),
];

/// The presets that take `oversubscription`.
const OVERSUBSCRIBED: &[&str] = &["fat_tree", "nvl72_cluster", "leaf_spine", "cpu_cluster"];

/// The presets that take `nic`.
const WITH_NIC: &[&str] = &[
    "fat_tree",
    "nvl72_cluster",
    "leaf_spine",
    "cpu_cluster",
    "nvidia_smi",
];

/// Checks that `doc` has what `axis` varies: a preset with nodes, an
/// oversubscription or a NIC, a lossy link fault.
pub(super) fn check(src: &Source, doc: &Table, axis: &Axis) -> Result<(), ScenarioError> {
    let preset = preset(doc);
    let needs = |presets: &[&str], what: &str| {
        if preset.is_some_and(|p| presets.contains(&p)) {
            return Ok(());
        }
        Err(src.error(
            Some(axis.span.clone()),
            format!(
                "the {} axis needs a [topology] preset with {what} ({}); this scenario has {}",
                axis.kind.name(),
                presets.join(", "),
                preset.map_or_else(|| "none".to_string(), |p| format!("preset `{p}`"))
            ),
        ))
    };
    match axis.kind {
        AxisKind::Nodes => {
            let presets: Vec<&str> = NODE_KEYS.iter().map(|(p, _)| *p).collect();
            needs(&presets, "a node count")
        }
        AxisKind::Oversubscription => needs(OVERSUBSCRIBED, "an oversubscription"),
        AxisKind::Nic => needs(WITH_NIC, "a NIC"),
        AxisKind::LossRate if lossy_faults(doc) == 0 => Err(src.error(
            Some(axis.span.clone()),
            "the loss_rate axis sets the loss_rate of every [[link_fault]] of kind \"lossy\", \
             and this scenario has none",
        )),
        _ => Ok(()),
    }
}

/// The `[topology]` preset's name, if any.
fn preset(doc: &Table) -> Option<&str> {
    doc.get("topology")?.get("preset")?.as_str()
}

fn lossy_faults(doc: &Table) -> usize {
    tables(doc, "link_fault")
        .filter(|f| f.get("kind").and_then(Value::as_str) == Some("lossy"))
        .count()
}

/// The bytes a size value (`8`, `"64K"`) stands for, if it is one.
fn bytes_of(v: &Value) -> Option<u64> {
    match v {
        Value::Integer(i) => u64::try_from(*i).ok(),
        Value::String(s) => ByteSize::parse(s).ok().map(|b| b.0),
        _ => None,
    }
}

/// The tables of the array of tables `[[key]]`.
fn tables<'a>(doc: &'a Table, key: &str) -> impl Iterator<Item = &'a Table> {
    doc.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_table)
}

/// The mutable tables of `[[key]]`.
fn tables_mut<'a>(doc: &'a mut Table, key: &str) -> impl Iterator<Item = &'a mut Table> {
    doc.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_table_mut)
}

/// Sets the keys `kind` stands for to `value` in `doc` (checked by
/// [`check`] first).
pub(super) fn apply(doc: &mut Table, kind: AxisKind, value: &AxisValue) {
    let v = value.to_toml();
    let topology = |doc: &mut Table, key: &str, v: Value| {
        if let Some(t) = doc.get_mut("topology").and_then(Value::as_table_mut) {
            t.insert(key.to_string(), v);
        }
    };
    match kind {
        AxisKind::WorldSize => {
            // Ideal links need the scenario's world size; a topology's
            // follows the axis where the file fixes it.
            if doc.contains_key("world_size") || doc.contains_key("links") {
                doc.insert("world_size".into(), v.clone());
            }
            for c in tables_mut(doc, "collective") {
                c.insert("world_size".into(), v.clone());
            }
        }
        AxisKind::Bytes => {
            for c in tables_mut(doc, "collective") {
                c.insert("min_bytes".into(), v.clone());
                c.insert("max_bytes".into(), v.clone());
                // A size at or below the entry's `extrapolate_above` is
                // simulated anyway: its point has nothing to extrapolate.
                let above = c.get("extrapolate_above").and_then(bytes_of);
                if bytes_of(&v).zip(above).is_some_and(|(size, t)| size <= t) {
                    c.remove("extrapolate_above");
                }
            }
        }
        AxisKind::Algorithm => {
            for c in tables_mut(doc, "collective") {
                c.insert("algorithm".into(), v.clone());
            }
        }
        AxisKind::Nodes => {
            let key = preset(doc)
                .and_then(|p| NODE_KEYS.iter().find(|(name, _)| *name == p))
                .map(|(_, key)| *key);
            if let Some(key) = key {
                topology(doc, key, v);
            }
        }
        AxisKind::Oversubscription => topology(doc, "oversubscription", v),
        AxisKind::Nic => topology(doc, "nic", v),
        AxisKind::LossRate => {
            for f in tables_mut(doc, "link_fault") {
                if f.get("kind").and_then(Value::as_str) == Some("lossy") {
                    f.insert("loss_rate".into(), v.clone());
                }
            }
        }
        AxisKind::Seed => {
            doc.insert("seed".into(), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_axis_sets_its_keys() {
        let mut doc: Table = "world_size = 4\n[links]\nlatency_us = 1.0\n\
             [[collective]]\nkind = \"allreduce\"\nmin_bytes = 8\nmax_bytes = 16\n\
             [[collective]]\nkind = \"allgather\"\nmin_bytes = 8\nmax_bytes = 16\n"
            .parse()
            .unwrap();
        apply(&mut doc, AxisKind::WorldSize, &AxisValue::Int(16));
        apply(&mut doc, AxisKind::Bytes, &AxisValue::Int(1024));
        apply(&mut doc, AxisKind::Seed, &AxisValue::Int(7));
        assert_eq!(doc["world_size"].as_integer(), Some(16));
        assert_eq!(doc["seed"].as_integer(), Some(7));
        for c in tables(&doc, "collective") {
            assert_eq!(c["world_size"].as_integer(), Some(16));
            assert_eq!(c["min_bytes"].as_integer(), Some(1024));
            assert_eq!(c["max_bytes"].as_integer(), Some(1024));
        }

        let mut doc: Table = "[topology]\npreset = \"leaf_spine\"\nhosts = 4\n\
             [[link_fault]]\nkind = \"lossy\"\n[[link_fault]]\nkind = \"down\"\n"
            .parse()
            .unwrap();
        apply(&mut doc, AxisKind::Nodes, &AxisValue::Int(8));
        apply(
            &mut doc,
            AxisKind::Oversubscription,
            &AxisValue::Number(2.0),
        );
        apply(&mut doc, AxisKind::LossRate, &AxisValue::Number(0.01));
        assert_eq!(doc["topology"]["hosts"].as_integer(), Some(8));
        assert_eq!(doc["topology"]["oversubscription"].as_float(), Some(2.0));
        assert!(!doc.contains_key("world_size"));
        let faults: Vec<&Table> = tables(&doc, "link_fault").collect();
        assert_eq!(faults[0]["loss_rate"].as_float(), Some(0.01));
        assert!(!faults[1].contains_key("loss_rate"));
    }
}
