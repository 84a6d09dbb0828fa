//! [`VerbsOptions`]: which device, port and GID to use, and the slots.

use crate::job::JobOptions;
use crate::verbs::frame::HEADER_BYTES;
use crate::verbs::slots::SlotLayout;

/// Environment variable naming the RDMA device (like `NCCL_IB_HCA`).
pub const ENV_DEVICE: &str = "REALNET_VERBS_DEVICE";
/// Environment variable with the port number.
pub const ENV_PORT: &str = "REALNET_VERBS_PORT";
/// Environment variable with the GID index (like `NCCL_IB_GID_INDEX`).
pub const ENV_GID_INDEX: &str = "REALNET_VERBS_GID_INDEX";
/// Environment variable with the bytes of one slot.
pub const ENV_SLOT_BYTES: &str = "REALNET_VERBS_SLOT_BYTES";
/// Environment variable with the slots per connection and direction.
pub const ENV_SLOTS: &str = "REALNET_VERBS_SLOTS";

/// The smallest slot: a header and 64 bytes of message.
pub const SLOT_BYTES_MIN: usize = HEADER_BYTES + 64;
/// The largest slot (one RDMA message is at most 2 GiB; keep well below).
pub const SLOT_BYTES_MAX: usize = 1 << 30;
/// The most slots per connection and direction.
pub const SLOTS_MAX: u32 = 1024;
/// The most memory the slots of all connections may register.
pub const REGION_BYTES_MAX: usize = 64 << 30;

/// Settings of the verbs fabric.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerbsOptions {
    /// Job id, token and timeout shared by every rank.
    pub job: JobOptions,
    /// The RDMA device (`mlx5_0`, `rxe0`); the first one found if `None`.
    pub device: Option<String>,
    /// The device port; the `ibverbs` crate drives port 1 only, so any
    /// other value is refused with an error saying so.
    pub port: u8,
    /// The GID table index for routed traffic (RoCE needs one): the first
    /// RoCE v2 GID, else index 0, else none (InfiniBand LID routing) if `None`.
    pub gid_index: Option<u32>,
    /// Bytes of one slot, its 48-byte frame header included.
    pub slot_bytes: usize,
    /// Slots per connection and direction (NCCL uses 8).
    pub slots: u32,
    /// The largest message a peer may announce (a sanity cap on the
    /// allocation a first frame asks for).
    pub message_bytes_max: u64,
}

impl Default for VerbsOptions {
    /// The first device, port 1, automatic GID, 8 slots of 128 KiB.
    fn default() -> Self {
        VerbsOptions {
            job: JobOptions::default(),
            device: None,
            port: 1,
            gid_index: None,
            slot_bytes: 128 << 10,
            slots: 8,
            message_bytes_max: 1 << 36,
        }
    }
}

impl VerbsOptions {
    /// The defaults for `job`, overridden by the `REALNET_VERBS_*`
    /// environment variables that are set.
    pub fn from_env(job: JobOptions) -> Result<VerbsOptions, String> {
        Self::from_lookup(job, |name| std::env::var(name).ok())
    }

    /// Like [`VerbsOptions::from_env`], reading variables through `lookup`.
    pub fn from_lookup(
        job: JobOptions,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<VerbsOptions, String> {
        fn parse<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, String> {
            value
                .trim()
                .parse()
                .map_err(|_| format!("{name}={value:?} is not a valid number"))
        }
        let mut o = VerbsOptions {
            job,
            ..VerbsOptions::default()
        };
        if let Some(v) = lookup(ENV_DEVICE).filter(|v| !v.is_empty()) {
            o.device = Some(v);
        }
        if let Some(v) = lookup(ENV_PORT) {
            o.port = parse(ENV_PORT, &v)?;
        }
        if let Some(v) = lookup(ENV_GID_INDEX) {
            o.gid_index = Some(parse(ENV_GID_INDEX, &v)?);
        }
        if let Some(v) = lookup(ENV_SLOT_BYTES) {
            o.slot_bytes = parse(ENV_SLOT_BYTES, &v)?;
        }
        if let Some(v) = lookup(ENV_SLOTS) {
            o.slots = parse(ENV_SLOTS, &v)?;
        }
        o.validate()?;
        Ok(o)
    }

    /// Checks the settings that do not need a device.
    pub fn validate(&self) -> Result<(), String> {
        if self.port != 1 {
            return Err(format!(
                "port {} requested, but the ibverbs crate (0.9) drives port 1 of a device only: \
                 pick the device whose port 1 is the one you want ({ENV_DEVICE})",
                self.port
            ));
        }
        if !(SLOT_BYTES_MIN..=SLOT_BYTES_MAX).contains(&self.slot_bytes) {
            return Err(format!(
                "slot size {} bytes is outside {SLOT_BYTES_MIN}..={SLOT_BYTES_MAX}",
                self.slot_bytes
            ));
        }
        if !(1..=SLOTS_MAX).contains(&self.slots) {
            return Err(format!(
                "{} slots per connection is outside 1..={SLOTS_MAX}",
                self.slots
            ));
        }
        Ok(())
    }

    /// The slot layout for a job of `world_size` ranks, or why it does not fit.
    pub fn layout(&self, world_size: usize) -> Result<SlotLayout, String> {
        self.validate()?;
        let layout = SlotLayout {
            slot_bytes: self.slot_bytes,
            slots: self.slots,
            peers: world_size.saturating_sub(1),
        };
        match layout.total_bytes() {
            Some(b) if b <= REGION_BYTES_MAX => Ok(layout),
            _ => Err(format!(
                "{} slots of {} bytes for {} peers need more than {} GiB of registered memory: \
                 lower {ENV_SLOT_BYTES} or {ENV_SLOTS}",
                self.slots,
                self.slot_bytes,
                layout.peers,
                REGION_BYTES_MAX >> 30
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn environment_overrides_the_defaults() {
        let o = VerbsOptions::from_lookup(
            JobOptions::default(),
            lookup(&[
                (ENV_DEVICE, "mlx5_1"),
                (ENV_GID_INDEX, "3"),
                (ENV_SLOT_BYTES, "65536"),
                (ENV_SLOTS, "4"),
            ]),
        )
        .unwrap();
        assert_eq!(o.device.as_deref(), Some("mlx5_1"));
        assert_eq!(o.gid_index, Some(3));
        assert_eq!((o.slot_bytes, o.slots, o.port), (65536, 4, 1));
        let d = VerbsOptions::from_lookup(JobOptions::default(), lookup(&[])).unwrap();
        assert_eq!(d, VerbsOptions::default());
    }

    #[test]
    fn bad_values_name_the_variable_or_setting() {
        let e = VerbsOptions::from_lookup(JobOptions::default(), lookup(&[(ENV_GID_INDEX, "x")]))
            .unwrap_err();
        assert_eq!(e, "REALNET_VERBS_GID_INDEX=\"x\" is not a valid number");
        let e = VerbsOptions::from_lookup(JobOptions::default(), lookup(&[(ENV_PORT, "2")]))
            .unwrap_err();
        assert!(e.contains("drives port 1 of a device only"), "{e}");
        let e = VerbsOptions::from_lookup(JobOptions::default(), lookup(&[(ENV_SLOTS, "0")]))
            .unwrap_err();
        assert!(e.contains("0 slots per connection"), "{e}");
        let small = VerbsOptions {
            slot_bytes: 10,
            ..VerbsOptions::default()
        };
        assert!(small.layout(2).unwrap_err().contains("slot size 10 bytes"));
    }

    #[test]
    fn the_layout_has_one_connection_per_peer() {
        let l = VerbsOptions::default().layout(4).unwrap();
        assert_eq!(l.peers, 3);
        assert_eq!(l.slots, 8);
        let huge = VerbsOptions {
            slot_bytes: SLOT_BYTES_MAX,
            slots: SLOTS_MAX,
            ..VerbsOptions::default()
        };
        let e = huge.layout(3).unwrap_err();
        assert!(
            e.contains("need more than 64 GiB of registered memory"),
            "{e}"
        );
        assert!(huge.layout(1 << 40).is_err(), "no overflow either");
    }
}
