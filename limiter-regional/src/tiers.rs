//! The pure part of tiered counting: where a region's tiers lie, how a
//! region's stored counts map onto a window, and what a sync concludes from
//! every region's counts. Nothing here reads a clock or talks to Redis; the
//! check script (`scripts/check.lua`) computes the same tiers and mappings.

use super::config::TierSize;

/// The local counts at which a region syncs: `first`, then every `step`.
/// Once tightened (another region found the quota near), every count
/// `first + k × step` is a tier, below `first` too, so a region never
/// admits more than a step before it syncs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tiers {
    pub(crate) first: u64,
    pub(crate) step: u64,
}

impl Tiers {
    /// The tiers of a quota shared by `regions` regions.
    pub(crate) fn new(quota: u64, regions: usize, first: TierSize, step: TierSize) -> Self {
        Self {
            first: first.resolve(quota, regions),
            step: step.resolve(quota, regions),
        }
    }

    /// Makes every tier a multiple of `step` after the shift, so the tier
    /// index of a count is one division.
    fn offset(&self) -> u64 {
        (self.step - self.first % self.step) % self.step
    }

    /// How many tiers of the grid lie at or below `count`, give or take a
    /// constant: only differences matter.
    fn index(&self, count: u64) -> u64 {
        (count + self.offset()) / self.step
    }

    /// Whether raising the local count from `before` to `after` reaches a
    /// tier: the check script's test, stated here for the tests.
    #[cfg(test)]
    pub(crate) fn crossed(&self, before: u64, after: u64, tightened: bool) -> bool {
        (tightened || after >= self.first) && self.index(after) > self.index(before)
    }

    /// The smallest tier above `count`: the count at which the region syncs next.
    pub(crate) fn next(&self, count: u64, tightened: bool) -> u64 {
        if !tightened && count < self.first {
            return self.first;
        }
        (self.index(count) + 1) * self.step - self.offset()
    }
}

/// One region's counts in a window and in the window before.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) current: u64,
    pub(crate) previous: u64,
}

/// A region's counts as that region stores them: its own window start
/// (`None` before its first request) and its counts in that window and the
/// one before.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Stored {
    pub(crate) start: Option<u64>,
    pub(crate) current: u64,
    pub(crate) previous: u64,
}

impl Stored {
    /// The counts for the window starting at `start`, whichever window the
    /// region last counted in: a region that has not counted in this window
    /// yet counted its `current` in the window before; a region whose clock
    /// is ahead (it moved on to the next window) counted its `previous` in
    /// this one. Counts further away belong to no window that matters.
    pub(crate) fn counts_at(&self, start: u64, window: u64) -> Counts {
        match self.start {
            Some(s) if s == start => Counts {
                current: self.current,
                previous: self.previous,
            },
            Some(s) if s.checked_add(window) == Some(start) => Counts {
                current: 0,
                previous: self.current,
            },
            Some(s) if start.checked_add(window) == Some(s) => Counts {
                current: self.previous,
                previous: 0,
            },
            _ => Counts::default(),
        }
    }
}

/// One region as a sync sees it, for the window being synced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct View {
    pub(crate) counts: Counts,
    /// Its tiers are tightened for this window (false when unknown).
    pub(crate) tightened: bool,
    /// The quota is announced exhausted there for this window (false when unknown).
    pub(crate) exhausted: bool,
}

/// The quota's algorithm and parameters, for the estimate of a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Quota {
    pub(crate) limit: u64,
    pub(crate) window: u64,
    pub(crate) sliding: bool,
}

impl Quota {
    /// The requests counted `elapsed` µs into the window: the window's
    /// count, plus for the sliding window counter the previous window's
    /// count weighted by its overlap (the same doubles, in the same order,
    /// as the single-region algorithm and the check script).
    pub(crate) fn estimate(&self, total: Counts, elapsed: u64) -> f64 {
        let current = total.current as f64;
        if !self.sliding {
            return current;
        }
        let elapsed = elapsed.min(self.window);
        total.previous as f64 * ((self.window - elapsed) as f64 / self.window as f64) + current
    }

    /// Whether no request of cost 1 passes with these totals.
    pub(crate) fn full(&self, total: Counts, elapsed: u64) -> bool {
        self.estimate(total, elapsed) + 1.0 > self.limit as f64
    }
}

/// What a sync concludes from every region's counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// No request of cost 1 passes any more this window: announce it.
    pub(crate) exhausted: bool,
    /// The regions together could pass the quota before each syncs again:
    /// every region's tiers go down to one step.
    pub(crate) tighten: bool,
    /// The regions to write to (by the index of `views`): those that do not
    /// know yet what this plan announces.
    pub(crate) targets: Vec<bool>,
}

impl Plan {
    /// The plan for `views` (every region, this one included), `elapsed`
    /// µs into the window.
    ///
    /// The regions can admit, without any of them syncing, up to the sum of
    /// their next tiers. While that sum stays within the quota, no sync
    /// needs to tell anyone anything; once it exceeds it, the regions whose
    /// next tier is more than a step away are tightened, so that from then
    /// on every region syncs within a step of its count, and the first sync
    /// after the quota is reached finds it reached and announces it.
    pub(crate) fn new(views: &[View], quota: Quota, tiers: Tiers, elapsed: u64) -> Self {
        let total = views.iter().fold(Counts::default(), |sum, v| Counts {
            current: sum.current + v.counts.current,
            previous: sum.previous + v.counts.previous,
        });
        let exhausted = quota.full(total, elapsed);
        let carried = quota.estimate(
            Counts {
                current: 0,
                ..total
            },
            elapsed,
        );
        let reachable: u64 = views
            .iter()
            .map(|v| tiers.next(v.counts.current, v.tightened))
            .sum();
        let tighten = !exhausted && carried + reachable as f64 > quota.limit as f64;
        let targets = views
            .iter()
            .map(|v| {
                if exhausted {
                    !v.exhausted
                } else if tighten {
                    let headroom = tiers.next(v.counts.current, v.tightened) - v.counts.current;
                    !v.tightened && headroom > tiers.step
                } else {
                    false
                }
            })
            .collect();
        Self {
            exhausted,
            tighten,
            targets,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiers(first: u64, step: u64) -> Tiers {
        Tiers { first, step }
    }

    fn crossings(t: Tiers, tightened: bool, upto: u64) -> Vec<u64> {
        (1..=upto)
            .filter(|&n| t.crossed(n - 1, n, tightened))
            .collect()
    }

    #[test]
    fn tiers_start_at_the_share_then_come_every_step() {
        let t = Tiers::new(30, 3, TierSize::Share, TierSize::Percent(10));
        assert_eq!(t, tiers(10, 3));
        assert_eq!(crossings(t, false, 30), [10, 13, 16, 19, 22, 25, 28]);
        // Tightened: the same grid, continued below the first tier.
        assert_eq!(
            crossings(t, true, 30),
            [1, 4, 7, 10, 13, 16, 19, 22, 25, 28]
        );
        assert_eq!(t.next(0, false), 10);
        assert_eq!(t.next(0, true), 1);
        assert_eq!(t.next(9, false), 10);
        assert_eq!(t.next(10, false), 13);
        assert_eq!(t.next(12, true), 13);
        // A request of cost 4 jumps over a tier and still crosses it.
        assert!(t.crossed(8, 12, false));
        assert!(!t.crossed(10, 12, false));
    }

    #[test]
    fn tier_sizes_round_down_but_never_below_one_request() {
        assert_eq!(
            Tiers::new(30, 3, TierSize::Share, TierSize::Percent(1)),
            tiers(10, 1)
        );
        assert_eq!(
            Tiers::new(2, 3, TierSize::Share, TierSize::Percent(5)),
            tiers(1, 1)
        );
        assert_eq!(
            Tiers::new(1_000, 2, TierSize::Requests(100), TierSize::Requests(0)),
            tiers(100, 1)
        );
        assert_eq!(
            Tiers::new(1_000, 3, TierSize::Percent(20), TierSize::Share),
            tiers(200, 333)
        );
    }

    #[test]
    fn stored_counts_map_onto_the_window_they_belong_to() {
        let w = 1_000;
        let stored = Stored {
            start: Some(5_000),
            current: 7,
            previous: 3,
        };
        let at = |start| stored.counts_at(start, w);
        assert_eq!(
            at(5_000),
            Counts {
                current: 7,
                previous: 3
            }
        );
        // Not counted in 6_000 yet: its 7 are the window before.
        assert_eq!(
            at(6_000),
            Counts {
                current: 0,
                previous: 7
            }
        );
        // Its clock is ahead: its previous window is 4_000.
        assert_eq!(
            at(4_000),
            Counts {
                current: 3,
                previous: 0
            }
        );
        assert_eq!(at(7_000), Counts::default());
        assert_eq!(Stored::default().counts_at(5_000, w), Counts::default());
    }

    fn fixed(limit: u64) -> Quota {
        Quota {
            limit,
            window: 1_000_000,
            sliding: false,
        }
    }

    fn view(current: u64) -> View {
        View {
            counts: Counts {
                current,
                previous: 0,
            },
            ..View::default()
        }
    }

    #[test]
    fn a_sync_tightens_once_the_regions_could_pass_the_quota_unseen() {
        let t = tiers(10, 1);
        // 9 + 5 + 5 counted, next tiers 10 + 10 + 10 = 30: nothing to say.
        let calm = Plan::new(&[view(9), view(5), view(5)], fixed(30), t, 0);
        assert_eq!(
            calm,
            Plan {
                exhausted: false,
                tighten: false,
                targets: vec![false; 3]
            }
        );
        // The first region crossed its tier: 11 + 10 + 10 > 30. The two
        // regions far below their first tier are told; the first is within a step.
        let crossed = Plan::new(&[view(10), view(5), view(9)], fixed(30), t, 0);
        assert!(crossed.tighten && !crossed.exhausted);
        assert_eq!(crossed.targets, [false, true, false]);
        // Already tightened regions are not told again.
        let mut told = [view(18), view(5), view(5)];
        told[1].tightened = true;
        told[2].tightened = true;
        let again = Plan::new(&told, fixed(30), t, 0);
        assert!(again.tighten);
        assert_eq!(again.targets, [false, false, false]);
    }

    #[test]
    fn a_sync_announces_a_full_quota_to_every_region_that_does_not_know() {
        let t = tiers(10, 1);
        let mut views = [view(20), view(6), view(4)];
        views[2].exhausted = true;
        let plan = Plan::new(&views, fixed(30), t, 0);
        assert!(plan.exhausted && !plan.tighten);
        assert_eq!(plan.targets, [true, true, false]);
        // One short of the quota: not exhausted.
        assert!(!Plan::new(&[view(20), view(6), view(3)], fixed(30), t, 0).exhausted);
    }

    #[test]
    fn the_sliding_window_counts_the_previous_window_by_its_overlap() {
        let quota = Quota {
            limit: 30,
            window: 1_000,
            sliding: true,
        };
        let total = Counts {
            current: 10,
            previous: 30,
        };
        assert_eq!(quota.estimate(total, 250), 32.5);
        assert!(quota.full(total, 250));
        // 30 × 0.3 + 10 = 19.
        assert!(!quota.full(total, 700));
        let views = [
            View {
                counts: Counts {
                    current: 4,
                    previous: 30,
                },
                ..View::default()
            },
            view(0),
        ];
        // At 500 µs: 15 carried + next tiers 15 + 15 = 45 > 30.
        let plan = Plan::new(&views, quota, tiers(15, 1), 500);
        assert!(plan.tighten);
        assert_eq!(plan.targets, [true, true]);
    }
}
