//! Deterministic pseudo-random policies and traces: the same seed gives the
//! same case on every machine, so a failure names a case that replays.

use super::Params;
use limiter_core::Algorithm;

/// SplitMix64: tiny, fast and good enough to spread test cases; not for
/// anything secret.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `low..=high`.
    pub(crate) fn range(&mut self, low: u64, high: u64) -> u64 {
        let span = high - low;
        if span == u64::MAX {
            return self.next_u64();
        }
        low + self.next_u64() % (span + 1)
    }

    /// `true` once in `n`.
    pub(crate) fn one_in(&mut self, n: u64) -> bool {
        self.range(1, n) == 1
    }

    /// An index chosen with the given weights.
    fn weighted(&mut self, weights: &[u64]) -> usize {
        let mut pick = self.range(0, weights.iter().sum::<u64>() - 1);
        for (i, &w) in weights.iter().enumerate() {
            if pick < w {
                return i;
            }
            pick -= w;
        }
        weights.len() - 1
    }
}

/// The seed of case `case` of `algorithm` in check `check`.
pub(crate) fn seed(check: &str, algorithm: Algorithm, case: u64) -> u64 {
    // FNV-1a over the names: stable across builds and platforms.
    let mut hash: u64 = 0xCBF2_9CE4_8422_2325;
    for byte in check.bytes().chain([0]).chain(algorithm.name().bytes()) {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01B3);
    }
    hash ^ case.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Windows and periods in µs: short and long ones, and a few shared values
/// so that rules tie (and tie-breaking is compared too).
fn window(rng: &mut Rng) -> u64 {
    match rng.weighted(&[2, 2, 2]) {
        0 => rng.range(1, 1_999),
        1 => rng.range(1_000, 2_999_999),
        _ => [500, 1_000, 2_000, 60_000][rng.range(0, 3) as usize],
    }
}

/// Random parameters of `algorithm`: small limits (so traces reach them),
/// and for the sliding log also larger ones (longer logs).
pub(crate) fn params(rng: &mut Rng, algorithm: Algorithm) -> Params {
    let bucket = |rng: &mut Rng, pacing| {
        let (amount, period) = (rng.range(1, 10), window(rng));
        Params::Bucket(amount, period, rng.range(1, 6), pacing)
    };
    match algorithm {
        Algorithm::SlidingLog => {
            let (limits, most) = if rng.one_in(6) {
                ((65, 79), 2)
            } else {
                ((1, 6), 3)
            };
            let rules = rng.range(1, most);
            let rules = (0..rules).map(|_| (rng.range(limits.0, limits.1), window(rng)));
            Params::SlidingLog(rules.collect())
        }
        Algorithm::FixedWindow => Params::FixedWindow(rng.range(1, 6), window(rng)),
        Algorithm::SlidingWindow => Params::SlidingWindow(rng.range(1, 8), window(rng)),
        Algorithm::TokenBucket => bucket(rng, false),
        Algorithm::LeakyBucket => bucket(rng, true),
        Algorithm::Gcra => Params::Gcra(rng.range(1, 10), window(rng), rng.range(1, 6)),
    }
}

/// For the sliding window counter, a limit too large for a double to weigh
/// one request's share of a microsecond (2^40 to 2^50), over a long window
/// (a minute to an hour): the wait until a request passes is then searched
/// over most of the window. `None` for the other algorithms.
pub(crate) fn huge_limit(rng: &mut Rng, algorithm: Algorithm) -> Option<Params> {
    (algorithm == Algorithm::SlidingWindow).then(|| {
        Params::SlidingWindow(
            rng.range(1 << 40, 1 << 50),
            rng.range(60_000_000, 3_600_000_000),
        )
    })
}

/// Parameters of `algorithm` that hold `quota` requests over a long time
/// (a day's windows, an hour per token), for the checks that run on the
/// store's own clock: nothing frees up while they run.
pub(crate) fn lasting(algorithm: Algorithm, quota: u64) -> Params {
    const HOUR: u64 = 3_600_000_000;
    const DAY: u64 = 24 * HOUR;
    match algorithm {
        Algorithm::SlidingLog => Params::SlidingLog(vec![(quota, DAY), (quota + 2, 2 * DAY)]),
        Algorithm::FixedWindow => Params::FixedWindow(quota, DAY),
        Algorithm::SlidingWindow => Params::SlidingWindow(quota, DAY),
        Algorithm::TokenBucket => Params::Bucket(1, HOUR, quota, false),
        Algorithm::LeakyBucket => Params::Bucket(1, HOUR, quota, true),
        Algorithm::Gcra => Params::Gcra(1, HOUR, quota),
    }
}

/// One request of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Step {
    /// µs since the previous request.
    pub(crate) advance_us: u64,
    pub(crate) key: usize,
    pub(crate) cost: u64,
}

/// A trace for `params` over `keys` keys: mostly small steps (many
/// decisions inside one window), some long gaps (windows passing, buckets
/// refilling), costs mostly 1.
pub(crate) fn trace(rng: &mut Rng, params: &Params, keys: usize) -> Vec<Step> {
    let span = params.span_us();
    let steps = rng.range(1, 59);
    (0..steps)
        .map(|_| Step {
            advance_us: match rng.weighted(&[3, 4, 2]) {
                0 => 0,
                1 => rng.range(0, span / 4),
                _ => rng.range(0, span * 2),
            },
            key: rng.range(0, keys as u64 - 1) as usize,
            cost: if rng.one_in(4) {
                rng.range(1, params.max_cost())
            } else {
                1
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_case_every_time() {
        let case = |seed| {
            let mut rng = Rng::new(seed);
            let params = params(&mut rng, Algorithm::SlidingLog);
            (params.clone(), trace(&mut rng, &params, 3))
        };
        let seed = seed("traces", Algorithm::SlidingLog, 7);
        assert_eq!(case(seed), case(seed));
        assert_ne!(case(seed), case(seed + 1));
    }

    #[test]
    fn every_generated_policy_is_valid_and_in_range() {
        let mut rng = Rng::new(1);
        for algorithm in super::super::ALGORITHMS {
            for _ in 0..500 {
                let params = params(&mut rng, algorithm);
                assert_eq!(params.policy().algorithm(), algorithm);
                for step in trace(&mut rng, &params, 3) {
                    assert!((1..=params.max_cost()).contains(&step.cost));
                    assert!(step.key < 3);
                }
            }
            assert_eq!(lasting(algorithm, 20).policy().algorithm(), algorithm);
        }
    }
}
