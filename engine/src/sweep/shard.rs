//! Shards: `--shard I/N` runs the points whose index is `I` modulo `N`;
//! and the `# sweep` line every sweep CSV opens with, which lets `sim
//! merge` check that its inputs are the shards of one sweep, all of them,
//! and `sim sweep --resume` that it completes the same sweep.

use std::fmt;

/// Shard `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// Which shard, `0..count`.
    pub index: usize,
    /// How many shards.
    pub count: usize,
}

/// The most shards a sweep may be split into.
pub const SHARDS_MAX: usize = 1 << 20;

impl Shard {
    /// Parses `I/N` with `0 <= I < N`.
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || format!("invalid shard `{text}`; expected I/N with 0 <= I < N, e.g. 0/16");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if index >= count || count > SHARDS_MAX {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// Whether `point` belongs to this shard.
    pub fn has(self, point: usize) -> bool {
        point % self.count == self.index
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The first line of every sweep CSV: `# sweep <fingerprint> <points>`,
/// followed by ` shard I/N` in a shard file. `sim merge` checks with it
/// that its inputs are the shards of one sweep, and `sim sweep --resume`
/// that the file it completes is of the same sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SweepLine {
    /// The sweep's fingerprint ([`super::Sweep::fingerprint`]).
    pub fingerprint: u64,
    /// The number of points of the whole sweep.
    pub points: usize,
    /// Which shard the file holds (`None`: the whole sweep).
    pub shard: Option<Shard>,
}

impl SweepLine {
    /// Reads the line (without its newline); `None` if it is not one.
    pub fn parse(line: &str) -> Option<SweepLine> {
        let mut words = line.split(' ');
        if words.next() != Some("#") || words.next() != Some("sweep") {
            return None;
        }
        let fingerprint = u64::from_str_radix(words.next()?, 16).ok()?;
        let points = words.next()?.parse().ok()?;
        let shard = match words.next() {
            None => None,
            Some("shard") => Some(Shard::parse(words.next()?).ok()?),
            Some(_) => return None,
        };
        words.next().is_none().then_some(SweepLine {
            fingerprint,
            points,
            shard,
        })
    }

    /// Whether `point` is one this file may hold.
    pub fn holds(&self, point: usize) -> bool {
        point < self.points && self.shard.is_none_or(|s| s.has(point))
    }
}

impl fmt::Display for SweepLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "# sweep {:016x} {}", self.fingerprint, self.points)?;
        if let Some(shard) = self.shard {
            write!(f, " shard {shard}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_and_their_line_round_trip() {
        assert_eq!(
            Shard::parse("3/16"),
            Ok(Shard {
                index: 3,
                count: 16
            })
        );
        for bad in ["16/16", "1", "a/2", "0/0", "-1/4"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
        let s = Shard::parse("1/3").unwrap();
        let mine: Vec<usize> = (0..8).filter(|&p| s.has(p)).collect();
        assert_eq!(mine, [1, 4, 7]);
        let line = SweepLine {
            fingerprint: 0xabc,
            points: 12,
            shard: Some(s),
        };
        assert_eq!(line.to_string(), "# sweep 0000000000000abc 12 shard 1/3");
        assert_eq!(SweepLine::parse(&line.to_string()), Some(line));
        assert!(line.holds(4) && !line.holds(5) && !line.holds(13));
        let whole = SweepLine {
            shard: None,
            ..line
        };
        assert_eq!(whole.to_string(), "# sweep 0000000000000abc 12");
        assert_eq!(SweepLine::parse("# sweep 0abc 12"), Some(whole));
        assert!(whole.holds(5) && !whole.holds(12));
        assert_eq!(SweepLine::parse("# sweep 0abc 12 shard"), None);
        assert_eq!(SweepLine::parse("# sweep 0abc 12 part 1/3"), None);
        assert_eq!(SweepLine::parse("point,world_size"), None);
    }
}
