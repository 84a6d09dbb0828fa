//! The sampling searches: seeded uniform random walks and PCT
//! (probabilistic concurrency testing: random rank priorities lowered at
//! random change points).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Control, SearchStats, Target};
use crate::exec::Execution;
use crate::spec::Search;

/// Runs `schedules` random schedules (uniform walks, or PCT), calling
/// `visit` on each.
pub fn random(
    target: &Target<'_>,
    search: Search,
    mut visit: impl FnMut(&Execution) -> Control,
) -> SearchStats {
    let (schedules, seed, depth) = match search {
        Search::Random { schedules, seed } => (schedules, seed, None),
        Search::Pct {
            schedules,
            seed,
            depth,
        } => (schedules, seed, Some(depth)),
        Search::Exhaustive => (0, 0, None),
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut stats = SearchStats::default();
    let mut expected_len = 64usize;
    let n = target.point.world_size;
    for _ in 0..schedules.min(target.bounds.max_schedules) {
        let mut exec = target.start();
        // PCT: a random priority per rank, lowered at depth - 1 random
        // change points.
        let mut priority: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            priority.swap(i, rng.random_range(0..=i));
        }
        let change_points: Vec<usize> = match depth {
            Some(d) => (1..d)
                .map(|_| rng.random_range(0..expected_len.max(1)))
                .collect(),
            None => Vec::new(),
        };
        let mut lowered = 0usize;
        loop {
            let at = exec.steps.len();
            if at >= target.bounds.max_depth {
                stats.depth_cut += 1;
                break;
            }
            let enabled = exec.enabled();
            if enabled.is_empty() {
                break;
            }
            let choice = match depth {
                None => enabled[rng.random_range(0..enabled.len())],
                Some(_) => {
                    let best = *enabled
                        .iter()
                        .max_by_key(|c| priority[c.affected(target.buffering()).0])
                        .expect("enabled is not empty");
                    if change_points.contains(&at) {
                        // Lower the running rank below every other.
                        let r = best.affected(target.buffering()).0;
                        priority[r] = lowered;
                        lowered += 1;
                        for (q, p) in priority.iter_mut().enumerate() {
                            if q != r {
                                *p += n;
                            }
                        }
                    }
                    best
                }
            };
            exec.apply(choice);
            stats.steps += 1;
        }
        expected_len = expected_len.max(exec.steps.len());
        stats.schedules += 1;
        if visit(&exec) == Control::Stop {
            stats.stopped = true;
            return stats;
        }
    }
    stats.schedule_cap_hit = schedules > target.bounds.max_schedules;
    stats
}
