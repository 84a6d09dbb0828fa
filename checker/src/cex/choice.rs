//! Choices as counterexample files spell them: [`Choice`]'s `Display`
//! read back.

use std::str::FromStr;

use crate::world::{ChannelKey, Choice};

fn parse_key(text: &str) -> Option<ChannelKey> {
    // "S->D tag T"
    let (pair, tag) = text.split_once(" tag ")?;
    let (src, dst) = pair.split_once("->")?;
    Some(ChannelKey {
        src: src.trim().parse().ok()?,
        dst: dst.trim().parse().ok()?,
        tag: tag.trim().parse().ok()?,
    })
}

impl FromStr for Choice {
    type Err = String;

    /// Reads a choice as [`Choice`]'s `Display` writes it.
    fn from_str(s: &str) -> Result<Choice, String> {
        let bad = || format!("cannot read choice `{s}`");
        let (verb, rest) = s.split_once(' ').ok_or_else(bad)?;
        let choice = match verb {
            "deliver" => Choice::Deliver(parse_key(rest).ok_or_else(bad)?),
            "drop" => Choice::Drop(parse_key(rest).ok_or_else(bad)?),
            "timeout" => Choice::Timeout(parse_key(rest).ok_or_else(bad)?),
            "crash" => Choice::Crash(rest.trim().parse().map_err(|_| bad())?),
            "start" => {
                let (rank, call) = rest.split_once(" call ").ok_or_else(bad)?;
                Choice::Start {
                    rank: rank.trim().parse().map_err(|_| bad())?,
                    call: call.trim().parse().map_err(|_| bad())?,
                }
            }
            "notify" => {
                let (from, to) = rest.split_once("->").ok_or_else(bad)?;
                Choice::Notify {
                    from: from.trim().parse().map_err(|_| bad())?,
                    to: to.trim().parse().map_err(|_| bad())?,
                }
            }
            _ => return Err(bad()),
        };
        Ok(choice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_choice_reads_back_as_written() {
        let key = ChannelKey {
            src: 2,
            dst: 0,
            tag: (3 << 56) | 7,
        };
        for choice in [
            Choice::Start { rank: 1, call: 2 },
            Choice::Deliver(key),
            Choice::Drop(key),
            Choice::Crash(3),
            Choice::Timeout(key),
            Choice::Notify { from: 0, to: 2 },
        ] {
            assert_eq!(choice.to_string().parse::<Choice>(), Ok(choice));
        }
        for bad in [
            "deliver",
            "deliver 0-1 tag 0",
            "crash x",
            "start 1",
            "fly 0->1",
        ] {
            assert!(bad.parse::<Choice>().is_err(), "{bad}");
        }
    }
}
