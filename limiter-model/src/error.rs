//! What can go wrong: invalid configuration, refused when a policy is built,
//! and store failures, reported when a check runs.

use std::sync::Arc;
use std::time::Duration;

use crate::span::Span;

/// A policy parameter that cannot work, refused when the policy is built.
///
/// Every variant names the offending value so the message alone says what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A rule allows zero requests: it would deny everything.
    #[error("the limit of a rule must be at least 1, got 0 (window {})", Span(*window))]
    ZeroLimit {
        /// The window of the rule whose limit is zero.
        window: Duration,
    },
    /// A rule's window is zero (or shorter than a microsecond, the store's resolution).
    #[error("the window of a rule must be at least 1 µs, got {} (limit {limit})", Span(*window))]
    ZeroWindow {
        /// The limit of the rule whose window is zero.
        limit: u64,
        /// The window that was given.
        window: Duration,
    },
    /// A window longer than [`MAX_WINDOW`](crate::MAX_WINDOW).
    #[error("the window of a rule must be at most 366 days, got {}", Span(*window))]
    WindowTooLong {
        /// The window that was given.
        window: Duration,
    },
    /// A rate of zero requests, or over a zero period.
    #[error(
        "a rate must allow at least 1 request over a period of at least 1 µs, got {amount} per {}",
        Span(*period)
    )]
    ZeroRate {
        /// The number of requests per period.
        amount: u64,
        /// The period.
        period: Duration,
    },
    /// A rate's period is longer than [`MAX_WINDOW`](crate::MAX_WINDOW).
    #[error("the period of a rate must be at most 366 days, got {}", Span(*period))]
    PeriodTooLong {
        /// The period that was given.
        period: Duration,
    },
    /// A bucket or burst of zero: no request could ever pass.
    #[error("the {what} must be at least 1, got 0")]
    ZeroCapacity {
        /// `"capacity"` (leaky bucket), `"burst capacity"` (token bucket) or
        /// `"burst"` (GCRA).
        what: &'static str,
    },
    /// A request cost of zero.
    #[error("the cost of a request must be at least 1, got 0")]
    ZeroCost,
    /// A cost that can never pass because it exceeds what the policy holds.
    #[error("a cost of {cost} can never pass: it exceeds the {what} of {capacity}")]
    CostExceedsCapacity {
        /// The cost that was given.
        cost: u64,
        /// The capacity, burst or rule limit it exceeds.
        capacity: u64,
        /// What the capacity is: `"capacity"`, `"burst"` or `"limit of rule 10-per-60s"`.
        what: String,
    },
    /// A sliding log policy without any rule.
    #[error("a sliding log policy needs at least one rule")]
    NoRules,
    /// More rules than one policy can hold.
    #[error("a policy holds at most {max} rules, got {count}")]
    TooManyRules {
        /// The number of rules given.
        count: usize,
        /// [`MAX_RULES`](crate::MAX_RULES).
        max: usize,
    },
    /// Parameters whose exact integer arithmetic would leave the range both
    /// stores compute in exactly (2^50 units).
    #[error("{what} is too large to compute exactly: {detail}")]
    TooLarge {
        /// Which parameter.
        what: &'static str,
        /// The values involved.
        detail: String,
    },
    /// `prevent_duplicate` is a sliding log rule and cannot join another algorithm.
    #[error("prevent_duplicate works with the sliding log only, not with {algorithm}")]
    PreventDuplicateNeedsSlidingLog {
        /// The algorithm of the policy.
        algorithm: &'static str,
    },
    /// Counting by outcome asks for refunds the algorithm cannot make
    /// exactly (see `limiter_core::KeyState`).
    #[error(
        "requests counted by outcome need an algorithm that gives a request back exactly \
         (sliding_log, fixed_window or sliding_window), not {algorithm}"
    )]
    NotRefundable {
        /// The algorithm of the policy.
        algorithm: &'static str,
    },
    /// A limit asked for an identity it does not apply to: a global limit
    /// has none; a limit by client address applies to addresses only.
    #[error("the limit {limit:?} does not apply to this identity (global, or by address)")]
    NoIdentity {
        /// The limit's name.
        limit: String,
    },
    /// A plan name that is empty, too long, or holds a character other than
    /// ASCII letters, digits, `-`, `_` and `.` (it names `RateLimit` items).
    #[error("a plan name is 1 to 64 ASCII letters, digits, '-', '_' or '.', got {name:?}")]
    PlanName {
        /// The name that was given.
        name: String,
    },
    /// Two plans of one set share a name.
    #[error("the plan {name:?} is given twice")]
    DuplicatePlan {
        /// The name given twice.
        name: String,
    },
    /// A set of plans without any plan.
    #[error("a set of plans needs at least one plan")]
    NoPlans,
    /// Plans whose state a key could not carry from one to the other: they
    /// run different algorithms, or sliding windows of different lengths.
    #[error(
        "the plan {plan:?} runs {found}, but its key's state is kept for {expected}: \
         every plan a key can have (and the default policy) runs one algorithm, \
         sliding windows of one length"
    )]
    PlansDiffer {
        /// The plan that differs.
        plan: String,
        /// What it runs: an algorithm, with the window of a sliding window.
        found: String,
        /// What the other plans (or the default policy) run.
        expected: String,
    },
    /// A concurrency limit of zero requests in flight.
    #[error("a concurrency limit must allow at least 1 request in flight, got 0")]
    ZeroConcurrency,
    /// A concurrency lease shorter than
    /// [`MIN_LEASE`](crate::ConcurrencyLimit::MIN_LEASE) or longer than
    /// [`MAX_WINDOW`](crate::MAX_WINDOW).
    #[error("a concurrency lease lasts 100ms to 366 days, got {}", Span(*lease))]
    LeaseOutOfRange {
        /// The lease that was given.
        lease: Duration,
    },
    /// A hot-key mode (lease, shard, sample) that cannot work with these
    /// parameters or this policy.
    #[error("invalid {mode}: {reason}")]
    InvalidHotKey {
        /// `"lease"`, `"shard"` or `"sample"`.
        mode: &'static str,
        /// What is wrong, with the values involved.
        reason: String,
    },
    /// A bound on waiting for the retry time shorter than
    /// [`MaxWait::MIN`](crate::MaxWait::MIN) or longer than
    /// [`MAX_WINDOW`](crate::MAX_WINDOW).
    #[error("a request waits 1ms to 366 days for its retry time, got {}", Span(*wait))]
    WaitOutOfRange {
        /// The bound that was given.
        wait: Duration,
    },
    /// A penalty that cannot work with these parameters.
    #[error("invalid penalty: {reason}")]
    InvalidPenalty {
        /// What is wrong, with the values involved.
        reason: String,
    },
    /// A duration written without its unit (`60`).
    #[error("{what} needs a unit (ms, s, m, h or d), like `{written}s`")]
    MissingUnit {
        /// What the duration is (`"the window of a rule"`).
        what: String,
        /// The text that was given.
        written: String,
    },
    /// A duration whose unit is none of `ms`, `s`, `m`, `h` and `d`.
    #[error("unknown unit `{unit}` in `{written}`: expected ms, s, m, h or d")]
    UnknownUnit {
        /// The unit that was given.
        unit: String,
        /// The text that was given.
        written: String,
    },
    /// A duration too long to count in milliseconds.
    #[error("`{written}` is too long for a duration")]
    DurationTooLong {
        /// The text that was given.
        written: String,
    },
    /// Text that is not an integer with a unit.
    #[error(
        "{what} must be an integer with a unit (ms, s, m, h or d), like `60s`, got {written:?}"
    )]
    NotADuration {
        /// What the duration is.
        what: String,
        /// The text that was given.
        written: String,
    },
    /// An algorithm of one rule (a fixed or sliding window) given another number.
    #[error("{algorithm} takes exactly one rule, got {count}")]
    RuleCount {
        /// The algorithm.
        algorithm: String,
        /// The number of rules given.
        count: usize,
    },
    /// Rules given to an algorithm that takes a rate and a size, or a rate
    /// to one that takes rules.
    #[error("{algorithm} takes {takes}, not {given}")]
    WrongParameters {
        /// The algorithm.
        algorithm: String,
        /// What it takes: `"rules"` or `"a rate and a size"`.
        takes: &'static str,
        /// What was given.
        given: &'static str,
    },
    /// A live override whose rules a limit's keys could not carry their
    /// state to: another algorithm, or a sliding window of another length.
    #[error(
        "an override of {limit:?} must run {expected}, as the limit does (its keys' state is \
         kept for it), not {found}"
    )]
    OverrideDiffers {
        /// The limit's name.
        limit: String,
        /// What the override runs.
        found: String,
        /// What the limit runs.
        expected: String,
    },
    /// A live override that cannot be kept.
    #[error("invalid override: {reason}")]
    InvalidOverride {
        /// What is wrong, with the values involved.
        reason: String,
    },
    /// A store that runs only some algorithms was given a policy of another.
    #[error("the {store} runs {supported} only, not {algorithm}")]
    AlgorithmNotSupported {
        /// The store, for example `"regional store"`.
        store: &'static str,
        /// The algorithms it runs.
        supported: &'static str,
        /// The algorithm of the policy.
        algorithm: &'static str,
    },
}

/// Why a check could not be decided.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The policy or the cost is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store's backend answered with an error, or the connection
    /// failed: for the Redis store, a Redis error (kind `redis`), or an
    /// `OOM` answer (kind `oom`: Redis is over `maxmemory` and refused the
    /// script before it ran, so nothing was recorded).
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The store did not answer within its deadline. The call may still have
    /// executed on the server, so it is never replayed.
    #[error("the store did not answer within {0:?}")]
    Timeout(Duration),
    /// The store answered something this version does not understand.
    #[error("unexpected reply from the store: {0}")]
    Protocol(String),
    /// The store failed and the failure policy is to refuse (fail closed);
    /// it will be tried again after the given time.
    #[error("the rate-limit store is unavailable; retry after {0:?}")]
    Unavailable(Duration),
    /// The store does not offer this operation (a store of the caller's
    /// own that keeps no concurrency permits).
    #[error("this store does not support {0}")]
    Unsupported(&'static str),
    /// An admin change (a block, an unblock, a plan assignment, a reset)
    /// sent but not confirmed: the store did not answer in time, or the
    /// connection failed after the call was written (the cause is kept), so
    /// the change may have been made, or may still be made when the store
    /// answers again. The store makes it hold on every instance or on none
    /// once it answers again (the Redis store: within 2 s); repeat the
    /// call to be sure of the outcome: every admin change is idempotent.
    #[error(
        "the change was not confirmed ({0}): it may have been made, and holds on every \
         instance or on none once the store answers again; repeat it (it is idempotent)"
    )]
    Unconfirmed(Box<Error>),
    /// The store refused to hold more of something bounded (an operator's
    /// blocks past `limiter_core::MAX_BLOCKS`): nothing changed, and
    /// the store is well (a guard's breaker does not count it as a failure).
    #[error("refused: {0}")]
    Full(String),
}

impl Error {
    /// A short name of the kind of error, for metrics: `config`, `redis`,
    /// `oom` (Redis refused the call for want of memory: `maxmemory` is
    /// reached), `timeout`, `protocol`, `unavailable`, `unsupported`,
    /// `unconfirmed` or `full`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Config(_) => "config",
            Self::Backend(error) => error.kind(),
            Self::Timeout(_) => "timeout",
            Self::Protocol(_) => "protocol",
            Self::Unavailable(_) => "unavailable",
            Self::Unsupported(_) => "unsupported",
            Self::Unconfirmed(_) => "unconfirmed",
            Self::Full(_) => "full",
        }
    }
}

/// What a store's backend reported when it failed, kept whole: a short
/// kind for metrics and logs (`redis`, `oom`, ...) and the backend's own
/// error, which [`source`](std::error::Error::source) and
/// [`downcast_ref`](Self::downcast_ref) reach. Clones share the error, so
/// one failure can answer every caller that waited on it.
#[derive(Debug, Clone)]
pub struct BackendError {
    kind: &'static str,
    error: Arc<dyn std::error::Error + Send + Sync>,
}

impl BackendError {
    /// A failure of kind `kind` (a short label such as `redis`), caused by
    /// `error`.
    pub fn new(kind: &'static str, error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self {
            kind,
            error: Arc::new(error),
        }
    }

    /// The kind given when the error was made.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The backend's own error, if it is a `T`.
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.error.downcast_ref()
    }
}

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.error)
    }
}

impl std::error::Error for BackendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.error)
    }
}
