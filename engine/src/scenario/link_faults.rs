//! Validation of `[[link_fault]]`: scheduled faults of the links between
//! two vertices (down, degraded, flapping, lossy), expanded into the timed
//! link changes the network models apply.

use toml::Spanned;
use topologies::{LinkId, Topology};

use super::ScenarioError;
use super::raw::RawLinkFault;
use super::validate::{Source, micros};
use crate::network::{LinkChange, ModelLevel, TopologyConfig};
use algorithms::Time;

/// The most link changes a scenario may schedule (a flapping link over a
/// long window could otherwise ask for millions).
pub const LINK_CHANGES_MAX: usize = 100_000;

/// The state a link change gives a link direction.
#[derive(Clone, Copy, Debug, PartialEq)]
struct State {
    bandwidth_factor: f64,
    loss_rate: f64,
    corruption_rate: f64,
}

impl State {
    /// Full bandwidth, no loss: where every fault ends.
    const NOMINAL: State = State::bandwidth(1.0);
    /// No bandwidth at all.
    const DOWN: State = State::bandwidth(0.0);

    const fn bandwidth(factor: f64) -> State {
        State {
            bandwidth_factor: factor,
            loss_rate: 0.0,
            corruption_rate: 0.0,
        }
    }

    fn change(self, time: u64, link: LinkId) -> LinkChange {
        LinkChange {
            time: Time(time),
            link,
            bandwidth_factor: self.bandwidth_factor,
            loss_rate: self.loss_rate,
            corruption_rate: self.corruption_rate,
        }
    }
}

/// Validates every `[[link_fault]]` against the topology of `network`;
/// returns the changes, sorted by time (stable, so faults apply in file
/// order at equal times), and one note per fault.
pub(super) fn link_faults(
    src: &Source,
    faults: &[Spanned<RawLinkFault>],
    network: Option<&TopologyConfig>,
) -> Result<(Vec<LinkChange>, Vec<String>), ScenarioError> {
    let mut changes: Vec<(LinkChange, bool)> = Vec::new();
    let mut notes = Vec::new();
    // (link, [start, end), where it was given) of every fault so far.
    let mut windows: Vec<(LinkId, (u64, u64), String)> = Vec::new();
    for spanned in faults {
        let f = spanned.get_ref();
        let Some(network) = network else {
            return Err(src.at(
                spanned,
                "link faults need a [topology]: ideal links have no links to name",
            ));
        };
        let t = network.topology.as_ref();
        let vertex = |name: &Spanned<String>| {
            t.find(name.get_ref()).ok_or_else(|| {
                src.at(
                    name,
                    format!("no vertex named `{}` in the topology", name.get_ref()),
                )
            })
        };
        let (a, b) = (vertex(&f.from)?, vertex(&f.to)?);
        let both = f.both_directions.unwrap_or(true);
        let links: Vec<_> = t
            .link_ids()
            .filter(|&l| {
                let (x, y) = t.ends(l);
                (x, y) == (a, b) || (both && (x, y) == (b, a))
            })
            .collect();
        if links.is_empty() {
            return Err(src.at(
                &f.to,
                format!(
                    "no link joins `{}` and `{}`",
                    f.from.get_ref(),
                    f.to.get_ref()
                ),
            ));
        }
        let at = micros(src, &f.at_us, "at_us")?;
        let until = match &f.until_us {
            Some(u) => {
                let until = micros(src, u, "until_us")?;
                if until <= at {
                    return Err(src.at(u, "until_us must be after at_us"));
                }
                Some(until)
            }
            None => None,
        };
        // The window this fault holds its links in, for the overlap check.
        let end = until.unwrap_or(u64::MAX);
        for &link in &links {
            if let Some((_, _, earlier)) = windows
                .iter()
                .find(|(l, (s, e), _)| *l == link && at < *e && *s < end)
            {
                return Err(src.at(
                    &f.at_us,
                    format!(
                        "this fault overlaps the fault on {} at {}; give one fault per link and time window",
                        t.link_name(link),
                        earlier
                    ),
                ));
            }
        }
        let here = format!("line {}", src.line_of(spanned));
        windows.extend(links.iter().map(|&l| (l, (at, end), here.clone())));
        let fault = Fault {
            src,
            raw: f,
            at,
            until,
        };
        let (steps, what) = match f.kind.get_ref().as_str() {
            "down" => fault.down()?,
            "degraded" => fault.degraded(spanned)?,
            "flapping" => fault.flapping(spanned, links.len())?,
            "lossy" => fault.lossy(spanned, network.level, t, &links)?,
            other => {
                return Err(src.at(
                    &f.kind,
                    format!(
                        "unknown link fault kind `{other}`; expected down, degraded, flapping or lossy"
                    ),
                ));
            }
        };
        for (i, &(time, state)) in steps.iter().enumerate() {
            // Steps alternate: a period starts, then (odd steps) it ends.
            let ends = i % 2 == 1;
            for &link in &links {
                changes.push((state.change(time, link), ends));
            }
        }
        if changes.len() > LINK_CHANGES_MAX {
            return Err(src.at(
                spanned,
                format!("the link faults schedule more than {LINK_CHANGES_MAX} link changes; use a longer period or a shorter window"),
            ));
        }
        let arrow = if both { "<->" } else { "->" };
        notes.push(format!(
            "link fault: {}{arrow}{} ({} link direction(s)) {what}",
            f.from.get_ref(),
            f.to.get_ref(),
            links.len()
        ));
    }
    // At equal times, a fault's end applies before another's start, so two
    // windows that meet hand over whatever their order in the file.
    changes.sort_by_key(|(c, ends)| (c.time, !*ends));
    Ok((changes.into_iter().map(|(c, _)| c).collect(), notes))
}

/// The (time, state) steps of one fault, starts and ends alternating, and
/// the words for its note.
type Steps = (Vec<(u64, State)>, String);

/// One `[[link_fault]]` whose links and window are valid; its methods
/// check the parameters of each kind.
struct Fault<'a> {
    src: &'a Source<'a>,
    raw: &'a RawLinkFault,
    /// Start, in ps.
    at: u64,
    /// End, in ps, if it ends.
    until: Option<u64>,
}

impl Fault<'_> {
    /// An error if parameter `name` is given, which this kind does not take.
    fn reject<T>(&self, name: &str, value: &Option<Spanned<T>>) -> Result<(), ScenarioError> {
        if value.is_some() {
            return Err(self.src.at(
                &self.raw.kind,
                format!(
                    "`{name}` does not apply to a {} link fault",
                    self.raw.kind.get_ref()
                ),
            ));
        }
        Ok(())
    }

    /// Rejects the loss parameters, which only a lossy fault takes.
    fn reject_loss(&self) -> Result<(), ScenarioError> {
        self.reject("loss_rate", &self.raw.loss_rate)?;
        self.reject("corruption_rate", &self.raw.corruption_rate)
    }

    /// `from X to Y` or `from X on`.
    fn window(&self) -> String {
        match self.until {
            Some(u) => format!("from {} to {}", Time(self.at), Time(u)),
            None => format!("from {} on", Time(self.at)),
        }
    }

    /// `state` from `at`, nominal again at `until` if it ends.
    fn held(&self, state: State) -> Vec<(u64, State)> {
        let mut steps = vec![(self.at, state)];
        if let Some(u) = self.until {
            steps.push((u, State::NOMINAL));
        }
        steps
    }

    fn down(&self) -> Result<Steps, ScenarioError> {
        let f = self.raw;
        self.reject("bandwidth_factor", &f.bandwidth_factor)?;
        self.reject("period_us", &f.period_us)?;
        self.reject("down_us", &f.down_us)?;
        self.reject_loss()?;
        Ok((self.held(State::DOWN), format!("down {}", self.window())))
    }

    fn degraded(&self, spanned: &Spanned<RawLinkFault>) -> Result<Steps, ScenarioError> {
        let (src, f) = (self.src, self.raw);
        self.reject("period_us", &f.period_us)?;
        self.reject("down_us", &f.down_us)?;
        self.reject_loss()?;
        let Some(factor) = &f.bandwidth_factor else {
            return Err(src.at(
                spanned,
                "a degraded link needs bandwidth_factor (e.g. 0.25)",
            ));
        };
        let x = src.number(factor, "bandwidth_factor", false)?;
        if x > 1.0 {
            return Err(src.at(
                factor,
                format!("bandwidth_factor must be at most 1, got {x}"),
            ));
        }
        Ok((
            self.held(State::bandwidth(x)),
            format!("degraded to {x:.3e} of its bandwidth {}", self.window()),
        ))
    }

    fn flapping(
        &self,
        spanned: &Spanned<RawLinkFault>,
        links: usize,
    ) -> Result<Steps, ScenarioError> {
        let (src, f) = (self.src, self.raw);
        self.reject("bandwidth_factor", &f.bandwidth_factor)?;
        self.reject_loss()?;
        let (Some(period), Some(down)) = (&f.period_us, &f.down_us) else {
            return Err(src.at(
                spanned,
                "a flapping link needs period_us and down_us (down for down_us in every period_us)",
            ));
        };
        let Some(u) = self.until else {
            return Err(src.at(spanned, "a flapping link needs until_us, when it settles"));
        };
        let (period_ps, down_ps) = (
            micros(src, period, "period_us")?,
            micros(src, down, "down_us")?,
        );
        if period_ps == 0 || down_ps == 0 || down_ps >= period_ps {
            return Err(src.at(down, "down_us must be positive and shorter than period_us"));
        }
        let mut steps = Vec::new();
        let mut t0 = self.at;
        while t0 < u {
            steps.push((t0, State::DOWN));
            steps.push(((t0 + down_ps).min(u), State::NOMINAL));
            if steps.len() * links > LINK_CHANGES_MAX {
                break; // the caller reports it
            }
            t0 += period_ps;
        }
        let what = format!(
            "flapping {}: down {} in every {}",
            self.window(),
            Time(down_ps),
            Time(period_ps)
        );
        Ok((steps, what))
    }

    /// A lossy fault: packets lost or corrupted on network links, in the
    /// packet model.
    fn lossy(
        &self,
        spanned: &Spanned<RawLinkFault>,
        level: ModelLevel,
        t: &Topology,
        links: &[LinkId],
    ) -> Result<Steps, ScenarioError> {
        let (src, f) = (self.src, self.raw);
        self.reject("bandwidth_factor", &f.bandwidth_factor)?;
        self.reject("period_us", &f.period_us)?;
        self.reject("down_us", &f.down_us)?;
        if level == ModelLevel::Flow {
            return Err(src.at(
                &f.kind,
                "packet loss needs model = \"packet\": the flow model has no packets",
            ));
        }
        let rate = |v: &Option<Spanned<f64>>, what: &str| -> Result<f64, ScenarioError> {
            let Some(v) = v else { return Ok(0.0) };
            let x = *v.get_ref();
            if !(0.0..=1.0).contains(&x) {
                return Err(src.at(
                    v,
                    format!("{what} must be between 0 and 1 (a probability per packet), got {x}"),
                ));
            }
            Ok(x)
        };
        let loss = rate(&f.loss_rate, "loss_rate")?;
        let corruption = rate(&f.corruption_rate, "corruption_rate")?;
        // A rate of 0 is allowed (a sweep's healthy point; it changes
        // nothing), but one of the two must be written.
        if f.loss_rate.is_none() && f.corruption_rate.is_none() {
            return Err(src.error(
                Some(spanned.span()),
                "a lossy link needs loss_rate or corruption_rate (e.g. loss_rate = 1e-3)",
            ));
        }
        if let Some(&link) = links.iter().find(|&&l| !t.link(l).kind.is_network()) {
            return Err(src.at(
                &f.to,
                format!(
                    "loss can only be set on network links (InfiniBand, RoCE, Ethernet); `{}`-`{}` is {}: link-level retry makes its losses invisible",
                    f.from.get_ref(),
                    f.to.get_ref(),
                    t.link(link).kind
                ),
            ));
        }
        let state = State {
            bandwidth_factor: 1.0,
            loss_rate: loss,
            corruption_rate: corruption,
        };
        let what = format!(
            "lossy: loss {}, corruption {} {}",
            percent(loss),
            percent(corruption),
            self.window()
        );
        Ok((self.held(state), what))
    }
}

/// `rate` as a percentage with up to six significant digits and no
/// trailing zeros: 0.001 is "0.1%", 1e-6 is "0.0001%".
fn percent(rate: f64) -> String {
    let p = rate * 100.0;
    if p == 0.0 {
        return "0%".to_string();
    }
    let decimals = (5 - p.log10().floor() as i32).clamp(0, 15) as usize;
    let text = format!("{p:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    format!("{text}%")
}

#[cfg(test)]
mod tests {
    use super::percent;

    #[test]
    fn percentages_read_as_written() {
        assert_eq!(percent(0.001), "0.1%");
        assert_eq!(percent(1e-6), "0.0001%");
        assert_eq!(percent(0.0), "0%");
        assert_eq!(percent(1.0), "100%");
        assert_eq!(percent(0.125), "12.5%");
        assert_eq!(percent(1.0 / 3.0), "33.3333%");
    }
}
