//! A policy: one algorithm with its parameters and the cost of a request.

use std::fmt;
use std::time::Duration;

use crate::error::ConfigError;
use crate::hot::{HotKey, Lease, MAX_SAMPLING, MAX_SHARDS, invalid};
use crate::on_store_error::OnStoreError;
use crate::rule::{EXACT_LIMIT, Rate, Rule};

/// The most rules one policy may hold (a sliding log's rules plus its
/// prevent-duplicate rule). Kept small so a [`Decision`](crate::Decision)
/// needs no allocation and fits in 128 bytes, which the compiler moves
/// without a `memcpy` call.
pub const MAX_RULES: usize = 6;

/// The window `prevent_duplicate` uses unless told otherwise: one request per 5 s.
pub const DEFAULT_DUPLICATE_WINDOW: Duration = Duration::from_secs(5);

/// Which algorithm a policy runs. See [`Policy`] for what each one means.
///
/// Exhaustive: every store runs every algorithm, so a new one is a change
/// of the store contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Exact log of allowed requests; several rules at once.
    SlidingLog,
    /// A counter per window that starts at the key's first request.
    FixedWindow,
    /// Two counters, the previous window weighted by its overlap.
    SlidingWindow,
    /// Tokens refilled at a rate, up to a capacity.
    TokenBucket,
    /// A bucket leaking at a rate; answers how long to wait.
    LeakyBucket,
    /// The generic cell rate algorithm (redis-cell's `CL.THROTTLE`).
    Gcra,
}

impl Algorithm {
    /// Every algorithm, in the order of this enum.
    pub const ALL: [Self; 6] = [
        Self::SlidingLog,
        Self::FixedWindow,
        Self::SlidingWindow,
        Self::TokenBucket,
        Self::LeakyBucket,
        Self::Gcra,
    ];

    /// The snake_case name used in logs, metrics and the macro.
    pub const fn name(self) -> &'static str {
        match self {
            Self::SlidingLog => "sliding_log",
            Self::FixedWindow => "fixed_window",
            Self::SlidingWindow => "sliding_window",
            Self::TokenBucket => "token_bucket",
            Self::LeakyBucket => "leaky_bucket",
            Self::Gcra => "gcra",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A bucket's parameters in exact integer units.
///
/// One token is `unit` sub-units and the bucket drains (or refills) `drain`
/// sub-units per microsecond, so any rate is exact: `unit / drain` is the
/// rate's period per token, reduced by their greatest common divisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketParams {
    /// The capacity (GCRA: the burst), in tokens.
    pub capacity: u64,
    /// One token, in sub-units.
    pub unit: u64,
    /// Sub-units drained (or refilled) per microsecond.
    pub drain: u64,
    /// The rate as configured, for the policy's name.
    pub rate: Rate,
}

impl BucketParams {
    /// A bucket of `capacity` (called `what`: a capacity, or GCRA's burst)
    /// draining at `rate`.
    fn new(rate: Rate, capacity: u64, what: &'static str) -> Result<Self, ConfigError> {
        if capacity == 0 {
            return Err(ConfigError::ZeroCapacity { what });
        }
        let divisor = gcd(rate.amount(), rate.period_us());
        let params = Self {
            capacity,
            unit: rate.period_us() / divisor,
            drain: rate.amount() / divisor,
            rate,
        };
        match capacity.checked_mul(params.unit) {
            Some(full) if full <= EXACT_LIMIT => Ok(params),
            _ => Err(ConfigError::TooLarge {
                what: if what == "burst" {
                    "the burst"
                } else {
                    "the bucket"
                },
                detail: format!("{what} {capacity} at {rate} needs more than 2^50 sub-units"),
            }),
        }
    }

    /// The full bucket in sub-units.
    #[inline]
    pub const fn full(&self) -> u64 {
        self.capacity * self.unit
    }

    /// Microseconds for `sub_units` of water to drain, rounded up.
    #[inline(always)]
    pub const fn drain_us(&self, sub_units: u64) -> u64 {
        // A whole number of microseconds a token (a rate that divides its
        // period: 10 a minute, 100 a second) drains one sub-unit a
        // microsecond; skip the division there, the usual case.
        if self.drain == 1 {
            sub_units
        } else {
            sub_units.div_ceil(self.drain)
        }
    }
}

/// A policy's algorithm with its exact parameters: what a store needs to
/// run it ([`Policy::kind`]). Rules come from [`Policy::rules`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The sliding log over every rule.
    SlidingLog,
    /// A fixed window of the one rule.
    FixedWindow,
    /// The sliding window counter of the one rule.
    SlidingWindow,
    /// A token bucket.
    TokenBucket(BucketParams),
    /// A leaky bucket.
    LeakyBucket(BucketParams),
    /// GCRA is the token bucket seen from its arrival times: the bucket's
    /// water, in time, is how far the theoretical arrival time (TAT) lies
    /// ahead of now; the emission interval `T` is one token (`unit /
    /// drain` µs, exact), the tolerance `τ = T · burst` the full bucket.
    Gcra(BucketParams),
}

/// One algorithm with its parameters, and the cost of one request.
///
/// | constructor | algorithm | state per key |
/// |---|---|---|
/// | [`sliding_log`](Self::sliding_log) (the default) | a request at `t` passes iff, for every rule `(N, W)`, fewer than `N` allowed requests lie in `(t - W, t]`; denied requests are not recorded | O(limit) |
/// | [`fixed_window`](Self::fixed_window) | at most `N` per window; a window starts at the key's first request and lasts `W` | O(1) |
/// | [`sliding_window`](Self::sliding_window) | windows aligned to multiples of `W`; the previous window counts in proportion to its overlap with `(t - W, t]` (an approximation, for large limits) | O(1) |
/// | [`token_bucket`](Self::token_bucket) | `capacity` tokens, refilled at `rate`; a request takes `cost` tokens | O(1) |
/// | [`leaky_bucket`](Self::leaky_bucket) | a bucket of `capacity` leaking at `rate`; an allowed request says how long to wait ([`Decision::delay`](crate::Decision::delay)) | O(1) |
/// | [`gcra`](Self::gcra) | `rate` on average with up to `burst` at once; the answers of redis-cell's `CL.THROTTLE` | O(1) |
///
/// Invalid parameters are refused with a [`ConfigError`] naming the value.
///
/// ```
/// use std::time::Duration;
/// use limiter_core::{Policy, Rate, Rule};
///
/// let posts = Policy::sliding_log([
///     Rule::new(10, Duration::from_secs(60))?,
///     Rule::new(20, Duration::from_secs(120))?,
/// ])?
/// .with_prevent_duplicate(Duration::from_secs(5))?;
/// assert_eq!(posts.rules().len(), 3);
///
/// let likes = Policy::token_bucket(Rate::per_second(1)?, 10)?.with_cost(2)?;
/// assert_eq!(likes.cost(), 2);
///
/// let err = Policy::gcra(Rate::per_minute(100)?, 20)?.with_cost(21).unwrap_err();
/// assert_eq!(err.to_string(), "a cost of 21 can never pass: it exceeds the burst of 20");
/// # Ok::<(), limiter_core::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    kind: Kind,
    cost: u64,
    len: u8,
    /// The index of the first rule with the longest window, which the
    /// sliding log reads on every check.
    longest: u8,
    rules: [Rule; MAX_RULES],
    /// The hot-key mode (see [`HotKey`]), set in `hot/mode.rs`.
    pub(crate) hot: Option<HotKey>,
    /// What the guard decides when the store fails; `None`: its own.
    on_store_error: Option<OnStoreError>,
}

impl Policy {
    /// The sliding log over one or more rules, all checked (and recorded) in
    /// one atomic step.
    pub fn sliding_log(rules: impl IntoIterator<Item = Rule>) -> Result<Self, ConfigError> {
        let rules: Vec<Rule> = rules.into_iter().collect();
        if rules.is_empty() {
            return Err(ConfigError::NoRules);
        }
        if rules.len() > MAX_RULES {
            return Err(ConfigError::TooManyRules {
                count: rules.len(),
                max: MAX_RULES,
            });
        }
        Ok(Self::with_rules(Kind::SlidingLog, &rules))
    }

    /// A fixed window: at most `rule.limit()` per window, the window starting
    /// at the key's first request.
    pub fn fixed_window(rule: Rule) -> Self {
        Self::with_rules(Kind::FixedWindow, &[rule])
    }

    /// The sliding window counter: O(1) state for large limits, approximate
    /// (the previous window's requests are assumed evenly spread).
    pub fn sliding_window(rule: Rule) -> Self {
        Self::with_rules(Kind::SlidingWindow, &[rule])
    }

    /// A token bucket holding `capacity` tokens, refilled at `rate`. A request
    /// takes [`cost`](Self::with_cost) tokens (Spring Cloud Gateway's
    /// replenishRate, burstCapacity and requestedTokens).
    pub fn token_bucket(rate: Rate, capacity: u64) -> Result<Self, ConfigError> {
        let params = BucketParams::new(rate, capacity, "burst capacity")?;
        Ok(Self::with_rules(
            Kind::TokenBucket(params),
            &[bucket_quota(params)],
        ))
    }

    /// A leaky bucket of `capacity` leaking at `rate`. An allowed request's
    /// [`Decision::delay`](crate::Decision::delay) says how long to wait so
    /// requests leave at `rate` (pace instead of fail).
    pub fn leaky_bucket(rate: Rate, capacity: u64) -> Result<Self, ConfigError> {
        let params = BucketParams::new(rate, capacity, "capacity")?;
        Ok(Self::with_rules(
            Kind::LeakyBucket(params),
            &[bucket_quota(params)],
        ))
    }

    /// GCRA: `rate` on average, `burst` requests may pass at once.
    ///
    /// `burst` is redis-cell's `max_burst + 1` (the limit it reports):
    /// `Policy::gcra(Rate::new(30, 60 s)?, 16)` answers as
    /// `CL.THROTTLE key 15 30 60`.
    pub fn gcra(rate: Rate, burst: u64) -> Result<Self, ConfigError> {
        let params = BucketParams::new(rate, burst, "burst")?;
        Ok(Self::with_rules(
            Kind::Gcra(params),
            &[bucket_quota(params)],
        ))
    }

    /// A policy of `algorithm` over `rules`, as `#[rate_limit]` builds one
    /// from its `rules` (the sliding log, or a window of exactly one rule);
    /// the buckets and GCRA take a rate and a size instead
    /// ([`of_rate`](Self::of_rate)).
    pub fn of_rules(algorithm: Algorithm, rules: Vec<Rule>) -> Result<Self, ConfigError> {
        let one = |rules: &[Rule]| match rules {
            [only] => Ok(*only),
            _ => Err(ConfigError::RuleCount {
                algorithm: algorithm.name().into(),
                count: rules.len(),
            }),
        };
        match algorithm {
            Algorithm::SlidingLog => Self::sliding_log(rules),
            Algorithm::FixedWindow => Ok(Self::fixed_window(one(&rules)?)),
            Algorithm::SlidingWindow => Ok(Self::sliding_window(one(&rules)?)),
            bucket => Err(ConfigError::WrongParameters {
                algorithm: bucket.name().into(),
                takes: "a rate and a size",
                given: "rules",
            }),
        }
    }

    /// A bucket or GCRA policy of `algorithm` at `rate` holding `size` (its
    /// capacity or burst), as `#[rate_limit]` builds one; the other
    /// algorithms take rules ([`of_rules`](Self::of_rules)).
    pub fn of_rate(algorithm: Algorithm, rate: Rate, size: u64) -> Result<Self, ConfigError> {
        match algorithm {
            Algorithm::TokenBucket => Self::token_bucket(rate, size),
            Algorithm::LeakyBucket => Self::leaky_bucket(rate, size),
            Algorithm::Gcra => Self::gcra(rate, size),
            windowed => Err(ConfigError::WrongParameters {
                algorithm: windowed.name().into(),
                takes: "rules",
                given: "a rate and a size",
            }),
        }
    }

    fn with_rules(kind: Kind, rules: &[Rule]) -> Self {
        let mut inline = [Rule::from_parts(1, 1); MAX_RULES];
        inline[..rules.len()].copy_from_slice(rules);
        Self {
            kind,
            cost: 1,
            len: rules.len() as u8,
            longest: longest_index(rules),
            rules: inline,
            hot: None,
            on_store_error: None,
        }
    }

    /// The same policy where a request costs `cost` (tokens, or entries in the
    /// log). Refused when zero or when it exceeds what any rule, capacity or
    /// burst holds, since such a request could never pass.
    pub fn with_cost(mut self, cost: u64) -> Result<Self, ConfigError> {
        self.validate_cost(cost)?;
        self.cost = cost;
        Ok(self)
    }

    /// Adds the rule "1 request per `window`" so the same request cannot be
    /// repeated at once ([`DEFAULT_DUPLICATE_WINDOW`] is the usual window).
    /// Sliding log only.
    pub fn with_prevent_duplicate(mut self, window: Duration) -> Result<Self, ConfigError> {
        if self.kind != Kind::SlidingLog {
            return Err(ConfigError::PreventDuplicateNeedsSlidingLog {
                algorithm: self.algorithm().name(),
            });
        }
        let rule = Rule::new(1, window)?;
        let len = self.len as usize;
        if len == MAX_RULES {
            return Err(ConfigError::TooManyRules {
                count: len + 1,
                max: MAX_RULES,
            });
        }
        self.rules[len] = rule;
        self.len += 1;
        self.longest = longest_index(self.rules());
        self.validate_cost(self.cost)?;
        Ok(self)
    }

    /// Checks that a request of `cost` could ever pass this policy.
    #[inline]
    pub fn validate_cost(&self, cost: u64) -> Result<(), ConfigError> {
        // Every check runs this first: the comparison inline, the error cold.
        if cost == 0 || cost > self.largest_cost() {
            return Err(self.cost_error(cost));
        }
        Ok(())
    }

    #[cold]
    fn cost_error(&self, cost: u64) -> ConfigError {
        if cost == 0 {
            return ConfigError::ZeroCost;
        }
        let what = match self.kind {
            Kind::TokenBucket(_) => "burst capacity".to_owned(),
            Kind::LeakyBucket(_) => "capacity".to_owned(),
            Kind::Gcra(_) => "burst".to_owned(),
            _ => {
                let tightest = self.rules().iter().min_by_key(|r| r.limit());
                format!("limit of rule {}", tightest.expect("a policy has a rule"))
            }
        };
        ConfigError::CostExceedsCapacity {
            cost,
            capacity: self.largest_cost(),
            what,
        }
    }

    /// The algorithm.
    pub const fn algorithm(&self) -> Algorithm {
        match self.kind {
            Kind::SlidingLog => Algorithm::SlidingLog,
            Kind::FixedWindow => Algorithm::FixedWindow,
            Kind::SlidingWindow => Algorithm::SlidingWindow,
            Kind::TokenBucket(_) => Algorithm::TokenBucket,
            Kind::LeakyBucket(_) => Algorithm::LeakyBucket,
            Kind::Gcra(_) => Algorithm::Gcra,
        }
    }

    /// The cost of one request (1 unless set with [`with_cost`](Self::with_cost)).
    pub const fn cost(&self) -> u64 {
        self.cost
    }

    /// The longest of the rules' windows, in µs: how long a sliding log's
    /// entry counts at all.
    #[inline]
    pub fn longest_window_us(&self) -> u64 {
        self.rules[usize::from(self.longest) % MAX_RULES].window_us()
    }

    /// The quotas this policy enforces, one per `RateLimit` header item.
    ///
    /// For the windows and the sliding log these are the rules. A bucket is
    /// described as "capacity per time to refill it", GCRA as "burst per
    /// burst × emission interval".
    #[inline]
    pub fn rules(&self) -> &[Rule] {
        &self.rules[..self.len as usize]
    }

    /// The name of each rule's `RateLimit` item, in the order of
    /// [`rules`](Self::rules), showing what was configured: a window rule
    /// as `10-per-60s`; a bucket or GCRA by its rate and size, as
    /// `1-per-1s-burst-10` (token bucket), `2-per-1s-capacity-5` (leaky
    /// bucket) or `100-per-60s-burst-20` (GCRA).
    ///
    /// ```
    /// use limiter_core::{Policy, Rate};
    ///
    /// let feed = Policy::gcra(Rate::per_minute(100)?, 20)?;
    /// assert_eq!(feed.names(), ["100-per-60s-burst-20"]);
    /// # Ok::<(), limiter_core::ConfigError>(())
    /// ```
    pub fn names(&self) -> Vec<String> {
        let sized = |b: BucketParams, size: &str| {
            let rate = Rule::from_parts(b.rate.amount(), b.rate.period_us());
            vec![format!("{rate}-{size}-{}", b.capacity)]
        };
        match self.kind {
            Kind::TokenBucket(b) | Kind::Gcra(b) => sized(b, "burst"),
            Kind::LeakyBucket(b) => sized(b, "capacity"),
            _ => self.rules().iter().map(Rule::to_string).collect(),
        }
    }

    /// The hot-key mode, if the policy opted into one.
    pub const fn hot_key(&self) -> Option<HotKey> {
        self.hot
    }

    /// The same policy, decided by `on_error` when the store fails,
    /// whatever the failure policy of the guard in front of it
    /// (`limiter_core::Guarded`): how a limit of its own failure policy
    /// shares one guard with the others. The HTTP layers' setting (a
    /// route's `on_store_error`, else its router layer's) wins over it.
    pub const fn with_on_store_error(mut self, on_error: OnStoreError) -> Self {
        self.on_store_error = Some(on_error);
        self
    }

    /// What the guard decides for this policy when the store fails;
    /// `None`: the guard's own failure policy.
    pub const fn on_store_error(&self) -> Option<OnStoreError> {
        self.on_store_error
    }

    /// The algorithm with its exact parameters, for stores that run it.
    #[inline]
    pub const fn kind(&self) -> &Kind {
        &self.kind
    }

    /// This policy's share for one of `instances` instances, each limiting on
    /// its own (the fallback when the shared store is down): every limit,
    /// capacity and burst divided (rounded down, at least 1), every rate
    /// slowed by the same factor. The cost is capped at what the share holds.
    pub fn divided(&self, instances: u32) -> Self {
        if instances <= 1 {
            return self.clone();
        }
        let n = u64::from(instances);
        let share = |limit: u64| (limit / n).max(1);
        let slower = |rate_period: u64| {
            Duration::from_micros(rate_period.saturating_mul(n)).min(crate::MAX_WINDOW)
        };
        let mut divided = match self.kind {
            Kind::TokenBucket(b) | Kind::LeakyBucket(b) | Kind::Gcra(b) => {
                let rate = Rate::new(b.rate.amount(), slower(b.rate.period_us()))
                    .expect("a valid rate stays valid");
                let build = match self.kind {
                    Kind::TokenBucket(_) => Self::token_bucket,
                    Kind::LeakyBucket(_) => Self::leaky_bucket,
                    _ => Self::gcra,
                };
                build(rate, share(b.capacity)).expect("a smaller bucket stays valid")
            }
            kind => {
                let mut divided = self.clone();
                for rule in &mut divided.rules[..self.len as usize] {
                    *rule = Rule::from_parts(share(rule.limit()), rule.window_us());
                }
                divided.kind = kind;
                divided
            }
        };
        divided.cost = self.cost.min(divided.largest_cost());
        divided.on_store_error = self.on_store_error;
        divided
    }

    /// The largest cost a request can have under this policy.
    #[inline]
    pub fn largest_cost(&self) -> u64 {
        match self.kind {
            Kind::TokenBucket(b) | Kind::LeakyBucket(b) | Kind::Gcra(b) => b.capacity,
            _ => self.rules().iter().map(|r| r.limit()).min().unwrap_or(1),
        }
    }
}

fn bucket_quota(params: BucketParams) -> Rule {
    Rule::from_parts(params.capacity, params.full().div_ceil(params.drain))
}

/// The hot-key modes ([`HotKey`]).
impl Policy {
    /// The same policy, leased: each instance takes up to `lease.max()`
    /// permits of a hot key in one call and hands them out locally until
    /// they are spent or the lease ends, then gives back the rest. A key
    /// with fewer than two requests per lease length goes to the store
    /// directly. Exact: across all instances, never more admitted than the
    /// policy allows, in any window.
    ///
    /// For the sliding log and the fixed window only: a leased entry of
    /// the log counts as made at the lease's end, so it never leaves a
    /// window before the request it stands for; a fixed window's lease
    /// ends with its window. (A bucket's tokens taken early would refill
    /// the bucket early: up to `rate × ttl` more than it allows.)
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{Lease, Policy, Rate, Rule};
    ///
    /// let trending = Policy::sliding_log([Rule::new(1000, Duration::from_secs(1))?])?
    ///     .with_lease(Lease::new(50, Duration::from_millis(100))?)?;
    /// assert_eq!(trending.hot_key().unwrap().name(), "lease");
    ///
    /// let bucket = Policy::token_bucket(Rate::per_second(10)?, 10)?;
    /// assert_eq!(
    ///     bucket.with_lease(Lease::up_to(5)?).unwrap_err().to_string(),
    ///     "invalid lease: leases work with sliding_log and fixed_window, not token_bucket"
    /// );
    /// # Ok::<(), limiter_core::ConfigError>(())
    /// ```
    pub fn with_lease(self, lease: Lease) -> Result<Self, ConfigError> {
        use crate::Algorithm::{FixedWindow, SlidingLog};
        if !matches!(self.algorithm(), SlidingLog | FixedWindow) {
            return Err(invalid(
                "lease",
                format!(
                    "leases work with sliding_log and fixed_window, not {}",
                    self.algorithm()
                ),
            ));
        }
        self.with_hot(HotKey::Lease(lease))
    }

    /// The same policy over `shards` sub-keys of each key, each holding
    /// `1/shards` of every limit (rounded down: never more than the limit in
    /// total), which requests take in turn. On a Redis Cluster whose slots
    /// are split evenly (as `redis-cli --cluster create` splits them) with
    /// at least `shards` primaries, the sub-keys sit on different
    /// primaries. Refused when a limit, capacity or burst is below
    /// `shards`, or the cost above a shard's share.
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{Policy, Rule};
    ///
    /// let policy = Policy::fixed_window(Rule::new(1000, Duration::from_secs(1))?);
    /// assert!(policy.clone().with_shards(3).is_ok());
    /// let small = Policy::fixed_window(Rule::new(2, Duration::from_secs(1))?);
    /// assert_eq!(
    ///     small.with_shards(3).unwrap_err().to_string(),
    ///     "invalid shard: a limit of 2 cannot be split into 3 shards"
    /// );
    /// # Ok::<(), limiter_core::ConfigError>(())
    /// ```
    pub fn with_shards(self, shards: u32) -> Result<Self, ConfigError> {
        if !(2..=MAX_SHARDS).contains(&shards) {
            return Err(invalid(
                "shard",
                format!("a key splits into 2 to {MAX_SHARDS} shards, got {shards}"),
            ));
        }
        let smallest = self.smallest_limit();
        if smallest < u64::from(shards) {
            return Err(invalid(
                "shard",
                format!("a limit of {smallest} cannot be split into {shards} shards"),
            ));
        }
        let share = self.divided(shards);
        if self.cost() > share.largest_cost() {
            return Err(invalid(
                "shard",
                format!(
                    "a cost of {} exceeds a shard's share of {}",
                    self.cost(),
                    share.largest_cost()
                ),
            ));
        }
        self.with_hot(HotKey::Shard { shards })
    }

    /// The same policy, sampled: an instance checks one request of a key in
    /// `every` with `every` times its cost, and decides the next `every - 1`
    /// as that one was decided (a denial only until its retry time). An
    /// instance admits at most `every - 1` requests more per window than
    /// the policy allows. Refused when `every` times the cost could never
    /// pass.
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{Policy, Rule};
    ///
    /// let views = Policy::sliding_window(Rule::new(10_000, Duration::from_secs(1))?)
    ///     .with_sampling(10)?;
    /// assert_eq!(views.hot_key().unwrap().name(), "sample");
    /// # Ok::<(), limiter_core::ConfigError>(())
    /// ```
    pub fn with_sampling(self, every: u32) -> Result<Self, ConfigError> {
        if !(2..=MAX_SAMPLING).contains(&every) {
            return Err(invalid(
                "sample",
                format!("one request in 2 to {MAX_SAMPLING} is sampled, got {every}"),
            ));
        }
        let weight = self.cost().saturating_mul(u64::from(every));
        if weight > self.largest_cost() {
            return Err(invalid(
                "sample",
                format!(
                    "a sampled request weighs {weight}, more than the policy's {} can pass",
                    self.largest_cost()
                ),
            ));
        }
        self.with_hot(HotKey::Sample { every })
    }

    fn with_hot(mut self, mode: HotKey) -> Result<Self, ConfigError> {
        if let Some(set) = self.hot.filter(|set| set.name() != mode.name()) {
            return Err(invalid(
                mode.name(),
                format!(
                    "the policy is already in {} mode: one mode per policy",
                    set.name()
                ),
            ));
        }
        self.hot = Some(mode);
        Ok(self)
    }

    fn smallest_limit(&self) -> u64 {
        self.rules().iter().map(|r| r.limit()).min().unwrap_or(1)
    }
}

const fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The index of the first of `rules` with the longest window.
fn longest_index(rules: &[Rule]) -> u8 {
    let mut longest = 0;
    for (i, rule) in rules.iter().enumerate() {
        if rule.window_us() > rules[longest].window_us() {
            longest = i;
        }
    }
    longest as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(limit: u64, secs: u64) -> Rule {
        Rule::new(limit, Duration::from_secs(secs)).unwrap()
    }

    #[test]
    fn each_invalid_parameter_names_itself() {
        let message = |r: Result<Policy, ConfigError>| r.unwrap_err().to_string();
        assert_eq!(
            message(Policy::sliding_log([])),
            "a sliding log policy needs at least one rule"
        );
        assert_eq!(
            message(Policy::sliding_log(vec![rule(1, 1); 7])),
            "a policy holds at most 6 rules, got 7"
        );
        assert_eq!(
            message(Policy::token_bucket(Rate::per_second(1).unwrap(), 0)),
            "the burst capacity must be at least 1, got 0"
        );
        assert_eq!(
            message(Policy::gcra(Rate::per_second(1).unwrap(), 0)),
            "the burst must be at least 1, got 0"
        );
        assert_eq!(
            message(
                Policy::token_bucket(Rate::per_second(1).unwrap(), 10)
                    .and_then(|p| p.with_cost(11))
            ),
            "a cost of 11 can never pass: it exceeds the burst capacity of 10"
        );
        assert_eq!(
            message(Policy::sliding_log([rule(10, 60), rule(3, 1)]).and_then(|p| p.with_cost(4))),
            "a cost of 4 can never pass: it exceeds the limit of rule 3-per-1s of 3"
        );
        assert_eq!(
            message(Policy::sliding_log([rule(10, 60)]).and_then(|p| p.with_cost(0))),
            "the cost of a request must be at least 1, got 0"
        );
        assert_eq!(
            message(
                Policy::sliding_log([rule(10, 60)])
                    .and_then(|p| p.with_cost(2))
                    .and_then(|p| p.with_prevent_duplicate(DEFAULT_DUPLICATE_WINDOW))
            ),
            "a cost of 2 can never pass: it exceeds the limit of rule 1-per-5s of 1"
        );
        assert_eq!(
            message(
                Policy::gcra(Rate::per_second(1).unwrap(), 10)
                    .and_then(|p| p.with_prevent_duplicate(DEFAULT_DUPLICATE_WINDOW))
            ),
            "prevent_duplicate works with the sliding log only, not with gcra"
        );
        assert_eq!(
            message(Policy::token_bucket(
                Rate::new(1, Duration::from_secs(86400)).unwrap(),
                1 << 20
            )),
            "the bucket is too large to compute exactly: burst capacity 1048576 at 1/1d needs more than 2^50 sub-units"
        );
    }

    #[test]
    fn a_share_for_each_instance_never_exceeds_the_whole() {
        let log = Policy::sliding_log([rule(10, 60), rule(3, 1)])
            .unwrap()
            .with_cost(2)
            .unwrap();
        let share = log.divided(4);
        assert_eq!(share.rules(), [rule(2, 60), rule(1, 1)]);
        assert_eq!(share.cost(), 1);
        let bucket = Policy::token_bucket(Rate::per_second(1).unwrap(), 10)
            .unwrap()
            .divided(2);
        // Half the capacity, refilled half as fast.
        assert_eq!(bucket.rules(), [rule(5, 10)]);
        let gcra = Policy::gcra(Rate::per_minute(100).unwrap(), 20)
            .unwrap()
            .divided(4);
        assert_eq!(
            gcra.rules(),
            [Rule::new(5, Duration::from_millis(12_000)).unwrap()]
        );
        assert_eq!(log.divided(1), log);
    }

    #[test]
    fn bucket_units_are_exact_for_any_rate() {
        let p = BucketParams::new(
            Rate::new(100, Duration::from_secs(60)).unwrap(),
            20,
            "capacity",
        )
        .unwrap();
        // 100 per 60 s = 1 token per 600,000 µs.
        assert_eq!((p.unit, p.drain), (600_000, 1));
        let p = BucketParams::new(Rate::per_second(7).unwrap(), 3, "capacity").unwrap();
        assert_eq!((p.unit, p.drain), (1_000_000, 7));
    }

    #[test]
    fn names_show_what_was_configured() {
        let rate = Rate::new(100, Duration::from_secs(60)).unwrap();
        let name = |policy: Policy| policy.names();
        assert_eq!(
            name(Policy::gcra(rate, 20).unwrap()),
            ["100-per-60s-burst-20"]
        );
        assert_eq!(
            name(Policy::token_bucket(Rate::per_second(1).unwrap(), 3).unwrap()),
            ["1-per-1s-burst-3"]
        );
        assert_eq!(
            name(Policy::leaky_bucket(Rate::per_second(2).unwrap(), 5).unwrap()),
            ["2-per-1s-capacity-5"]
        );
        let log = Policy::sliding_log([rule(10, 60), rule(20, 120)])
            .unwrap()
            .with_prevent_duplicate(DEFAULT_DUPLICATE_WINDOW)
            .unwrap();
        assert_eq!(name(log), ["10-per-60s", "20-per-120s", "1-per-5s"]);
        assert_eq!(name(Policy::fixed_window(rule(3, 3600))), ["3-per-1h"]);
    }

    #[test]
    fn quotas_describe_buckets_and_gcra() {
        let bucket = Policy::token_bucket(Rate::per_second(1).unwrap(), 10).unwrap();
        assert_eq!(bucket.rules(), [rule(10, 10)]);
        let gcra = Policy::gcra(Rate::new(100, Duration::from_secs(60)).unwrap(), 20).unwrap();
        assert_eq!(gcra.rules(), [rule(20, 12)]);
    }

    #[test]
    fn the_longest_window_is_kept_as_rules_are_added() {
        let log = Policy::sliding_log([rule(10, 60), rule(20, 120), rule(5, 120)]).unwrap();
        assert_eq!(log.longest_window_us(), 120_000_000);
        let longer = log
            .clone()
            .with_prevent_duplicate(Duration::from_secs(300))
            .unwrap();
        assert_eq!(longer.longest_window_us(), 300_000_000);
        let shorter = log.with_prevent_duplicate(Duration::from_secs(1)).unwrap();
        assert_eq!(shorter.longest_window_us(), 120_000_000);
        assert_eq!(
            Policy::fixed_window(rule(3, 7)).longest_window_us(),
            7_000_000
        );
    }
}
