//! Byte sizes as nccl-tests users write them: `8`, `"64K"`, `"128M"`, `"1G"`
//! (powers of 1024; `KiB`, `MiB`, `GiB` and `B` are accepted too).

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// A number of bytes read from a scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// Parses `"64K"`-style text.
    pub fn parse(text: &str) -> Result<ByteSize, String> {
        let t = text.trim();
        let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (digits, unit) = t.split_at(digits_end);
        let expected = || {
            format!(
                "invalid size `{text}`; expected a whole number of bytes with an optional unit K, M or G (powers of 1024), e.g. 8, \"64K\", \"128M\""
            )
        };
        let value: u64 = digits.parse().map_err(|_| expected())?;
        let shift = match unit.trim() {
            "" | "B" => 0,
            "K" | "KB" | "KiB" | "k" => 10,
            "M" | "MB" | "MiB" => 20,
            "G" | "GB" | "GiB" => 30,
            _ => return Err(expected()),
        };
        value
            .checked_mul(1 << shift)
            .map(ByteSize)
            .ok_or_else(|| format!("size `{text}` is too large"))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes", self.0)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ByteSize;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size in bytes: a non-negative integer or a string like \"64K\"")
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v)
                    .map(ByteSize)
                    .map_err(|_| E::custom(format!("a size cannot be negative, got {v}")))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                ByteSize::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nccl_tests_style_sizes() {
        assert_eq!(ByteSize::parse("8"), Ok(ByteSize(8)));
        assert_eq!(ByteSize::parse("64K"), Ok(ByteSize(65536)));
        assert_eq!(ByteSize::parse("128M"), Ok(ByteSize(128 << 20)));
        assert_eq!(ByteSize::parse("1GiB"), Ok(ByteSize(1 << 30)));
        assert!(ByteSize::parse("1.5M").is_err());
        assert!(ByteSize::parse("-8").is_err());
        assert!(ByteSize::parse("12Q").is_err());
        assert!(ByteSize::parse("99999999999999999G").is_err());
    }
}
