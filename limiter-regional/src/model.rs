//! A model of tiered counting in plain Rust, for property tests of the
//! tiers and the sync's plan: regions deciding as the check script does,
//! syncs taking effect at once (no request arrives while one is in flight,
//! so the bound's in-flight term is zero).

use proptest::prelude::*;

use super::tiers::{Counts, Plan, Quota, Tiers, View};

#[derive(Debug, Clone, Default)]
struct Region {
    count: u64,
    /// What it knows of each region's count (its own entry unused).
    known: Vec<u64>,
    tightened: bool,
    exhausted: bool,
}

struct World {
    regions: Vec<Region>,
    tiers: Tiers,
    quota: Quota,
}

impl World {
    fn new(regions: usize, limit: u64, tiers: Tiers) -> Self {
        let region = Region {
            known: vec![0; regions],
            ..Region::default()
        };
        Self {
            regions: vec![region; regions],
            tiers,
            quota: Quota {
                limit,
                window: 1_000_000,
                sliding: false,
            },
        }
    }

    fn total(&self) -> u64 {
        self.regions.iter().map(|r| r.count).sum()
    }

    /// A request in region `r`, as `check.lua` decides it; then its sync,
    /// if it asked for one.
    fn check(&mut self, r: usize) -> bool {
        let region = &mut self.regions[r];
        let others: u64 = (0..region.known.len())
            .filter(|&j| j != r)
            .map(|j| region.known[j])
            .sum();
        let known_total = region.count + others;
        let allowed = !region.exhausted && known_total < self.quota.limit;
        let mut sync = !allowed && !region.exhausted;
        if allowed {
            let before = region.count;
            region.count += 1;
            sync = self.tiers.crossed(before, region.count, region.tightened);
        }
        if sync {
            self.sync(r);
        }
        allowed
    }

    /// `sync.rs` at once: reads every count, learns it, and writes the
    /// plan's verdicts and counts into its targets.
    fn sync(&mut self, r: usize) {
        let counts: Vec<u64> = self.regions.iter().map(|x| x.count).collect();
        self.regions[r].known.clone_from(&counts);
        let views: Vec<View> = self
            .regions
            .iter()
            .map(|x| View {
                counts: Counts {
                    current: x.count,
                    previous: 0,
                },
                tightened: x.tightened,
                exhausted: x.exhausted,
            })
            .collect();
        let plan = Plan::new(&views, self.quota, self.tiers, 0);
        for (target, region) in self.regions.iter_mut().enumerate() {
            if plan.targets[target] {
                region.known.clone_from(&counts);
                region.tightened |= plan.tighten;
                region.exhausted |= plan.exhausted;
            }
        }
    }
}

proptest! {
    #[test]
    fn at_most_a_step_per_region_over_and_no_denial_before_the_quota(
        regions in 2usize..=4,
        limit in 1u64..120,
        first_percent in 1u64..=100,
        step_percent in 1u64..=30,
        // Runs of requests from one region: traffic that moves about.
        runs in proptest::collection::vec((0usize..4, 1usize..80), 0..12),
    ) {
        let share = (limit / regions as u64).max(1);
        let tiers = Tiers {
            // At most the share, as the bound requires.
            first: (share * first_percent / 100).max(1),
            step: (limit * step_percent / 100).max(1),
        };
        let mut world = World::new(regions, limit, tiers);
        let arrivals = runs.into_iter().flat_map(|(r, n)| std::iter::repeat_n(r % regions, n));
        for r in arrivals {
            let before = world.total();
            if !world.check(r) {
                prop_assert!(before >= limit, "denied at {before} of {limit}");
            }
        }
        let bound = limit + regions as u64 * tiers.step;
        prop_assert!(world.total() <= bound, "{} > {bound}", world.total());
    }

    #[test]
    fn one_region_alone_gets_exactly_the_quota(
        regions in 2usize..=4,
        limit in 1u64..120,
        step_percent in 1u64..=30,
        offered in 0u64..300,
    ) {
        let tiers = Tiers::new(
            limit,
            regions,
            super::TierSize::Share,
            super::TierSize::Percent(step_percent as u8),
        );
        let mut world = World::new(regions, limit, tiers);
        let admitted = (0..offered).filter(|_| world.check(0)).count() as u64;
        prop_assert_eq!(admitted, offered.min(limit));
    }
}
