//! The rate-limit header fields.
//!
//! `RateLimit-Policy` and `RateLimit` follow draft-ietf-httpapi-ratelimit-headers-10:
//! Structured Field lists with one item per rule, named after what was
//! configured ([`Policy::names`]). `t` is the time until the rule makes more
//! quota available
//! ([`RuleStatus::available_after`](limiter_core::RuleStatus::available_after)):
//! for a rule that denied the request, its retry time.
//!
//! ```text
//! RateLimit-Policy: "10-per-60s";q=10;w=60, "20-per-120s";q=20;w=120
//! RateLimit: "10-per-60s";r=0;t=12, "20-per-120s";r=7;t=95
//! ```

use std::fmt::Write;
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use limiter_core::{ConcurrencyLimit, Decision, Policy};

/// Which headers responses carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeaderOptions {
    /// `RateLimit-Policy` and `RateLimit` on allowed responses (always on 429s).
    pub(crate) on_allowed: bool,
    /// `X-RateLimit-Limit`, `-Remaining` and `-Reset` as well.
    pub(crate) legacy: bool,
}

/// `RateLimit-Policy`.
pub static RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`.
pub static RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
static X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
static X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
static X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// Whole seconds, rounded up from whole microseconds (without the
/// 128-bit division of `as_micros`: this runs on every response).
pub(crate) fn seconds(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_micros() > 0)
}

/// What a route's fields hold whatever the decision: built once per route.
#[derive(Debug, Clone)]
pub(crate) struct RouteFields {
    /// The `RateLimit-Policy` value.
    policy: HeaderValue,
    /// The start of each rule's `RateLimit` item, `"10-per-60s";r=`.
    item_prefixes: Box<[Box<str>]>,
}

impl RouteFields {
    pub(crate) fn new(policy: &Policy) -> Self {
        Self::named(policy, &policy.names())
    }

    /// The fields of `policy`, its items named `names` (a plan's).
    pub(crate) fn named(policy: &Policy, names: &[String]) -> Self {
        let mut value = String::with_capacity(64);
        for (i, (name, rule)) in names.iter().zip(policy.rules()).enumerate() {
            if i > 0 {
                value.push_str(", ");
            }
            let window = seconds(rule.window()).max(1);
            let _ = write!(value, "\"{name}\";q={};w={window}", rule.limit());
        }
        Self::from_parts(value, names)
    }

    /// The fields of a concurrency limit: one item, whose quota unit is
    /// `concurrent-requests` and which has no window.
    pub(crate) fn concurrency(limit: &ConcurrencyLimit) -> Self {
        let name = limit.name();
        let value = format!("\"{name}\";q={};qu=\"concurrent-requests\"", limit.max());
        Self::from_parts(value, &[name])
    }

    fn from_parts(value: String, names: &[String]) -> Self {
        Self {
            policy: HeaderValue::try_from(value).expect("rule names are visible ASCII"),
            item_prefixes: names
                .iter()
                .map(|name| format!("\"{name}\";r=").into_boxed_str())
                .collect(),
        }
    }

    /// The fields of one decision.
    pub(crate) fn of(&self, decision: &Decision, options: HeaderOptions) -> RateLimitHeaders {
        let legacy = options.legacy.then(|| {
            let deciding = decision.rules()[decision.rule_index()];
            Box::new([
                decision.limit().into(),
                deciding.remaining().into(),
                seconds(deciding.available_after()).into(),
            ])
        });
        RateLimitHeaders {
            policy: self.policy.clone(),
            state: self.state(decision),
            legacy,
        }
    }

    /// The `RateLimit` value of a decision.
    fn state(&self, decision: &Decision) -> HeaderValue {
        /// Values up to this long are written on the stack, then copied once
        /// into the header (a `Vec` would be allocated, then reallocated to fit).
        const ON_STACK: usize = 256;
        // Per item: its prefix, `;t=`, `, ` and two numbers of at most 20 digits.
        let capacity = self.item_prefixes.iter().map(|p| p.len() + 45).sum();
        let value = if capacity <= ON_STACK {
            let mut buffer = [0; ON_STACK];
            let mut rest = &mut buffer[..];
            self.write_items(&mut rest, decision);
            let written = ON_STACK - rest.len();
            HeaderValue::from_bytes(&buffer[..written])
        } else {
            let mut buffer = Vec::with_capacity(capacity);
            self.write_items(&mut buffer, decision);
            HeaderValue::try_from(buffer)
        };
        value.expect("rule names are visible ASCII")
    }

    /// Writes the `RateLimit` items into `out`, which has room for them.
    fn write_items(&self, out: &mut impl std::io::Write, decision: &Decision) {
        // Numbers by itoa's digit pairs: this runs on every response.
        let mut digits = itoa::Buffer::new();
        for (i, (prefix, status)) in self.item_prefixes.iter().zip(decision.rules()).enumerate() {
            if i > 0 {
                put(out, b", ");
            }
            put(out, prefix.as_bytes());
            put(out, digits.format(status.remaining()).as_bytes());
            put(out, b";t=");
            put(
                out,
                digits.format(seconds(status.available_after())).as_bytes(),
            );
        }
    }
}

#[inline(always)]
fn put(out: &mut impl std::io::Write, bytes: &[u8]) {
    out.write_all(bytes).expect("sized for every item");
}

impl RateLimitHeaders {
    /// These fields followed by `other`'s items (the legacy fields stay
    /// this decision's).
    pub(crate) fn join(self, other: Self) -> Self {
        let join = |a: HeaderValue, b: HeaderValue| {
            let mut bytes = Vec::with_capacity(a.len() + b.len() + 2);
            bytes.extend_from_slice(a.as_bytes());
            bytes.extend_from_slice(b", ");
            bytes.extend_from_slice(b.as_bytes());
            HeaderValue::from_bytes(&bytes).expect("joined field values")
        };
        Self {
            policy: join(self.policy, other.policy),
            state: join(self.state, other.state),
            legacy: self.legacy.or(other.legacy),
        }
    }
}

/// The rate-limit fields of one decision, ready to add to a response:
/// computed when the decision arrives, so the decision itself is not carried
/// along while the handler runs.
#[derive(Debug)]
pub(crate) struct RateLimitHeaders {
    policy: HeaderValue,
    state: HeaderValue,
    /// `X-RateLimit-Limit`, `-Remaining`, `-Reset`, when switched on.
    legacy: Option<Box<[HeaderValue; 3]>>,
}

impl RateLimitHeaders {
    /// Adds the fields to `headers`, after any already there: both are
    /// lists, so a second limit on the route adds its items to the first's.
    pub(crate) fn add_to(self, headers: &mut HeaderMap) {
        headers.append(RATELIMIT_POLICY.clone(), self.policy);
        headers.append(RATELIMIT.clone(), self.state);
        if let Some(legacy) = self.legacy {
            let [limit, remaining, reset] = *legacy;
            headers.insert(X_LIMIT.clone(), limit);
            headers.insert(X_REMAINING.clone(), remaining);
            headers.insert(X_RESET.clone(), reset);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use limiter_core::{MemoryStore, Rule};

    #[test]
    fn fields_name_each_rule() {
        let policy = Policy::sliding_log([
            Rule::new(10, Duration::from_secs(60)).unwrap(),
            Rule::new(20, Duration::from_secs(120)).unwrap(),
        ])
        .unwrap();
        let fields = RouteFields::new(&policy);
        assert_eq!(
            fields.policy,
            "\"10-per-60s\";q=10;w=60, \"20-per-120s\";q=20;w=120"
        );
        let clock = limiter_core::ManualClock::new(Duration::from_secs(1));
        let store = MemoryStore::with_clock(clock);
        let d = store
            .check_now(&limiter_core::Key::from("k"), &policy, 3)
            .unwrap();
        assert_eq!(
            fields.state(&d),
            "\"10-per-60s\";r=7;t=60, \"20-per-120s\";r=17;t=120"
        );
    }

    #[test]
    fn seconds_round_whole_microseconds_up() {
        let cases = [
            (Duration::ZERO, 0),
            (Duration::from_micros(1), 1),
            (Duration::from_secs(1), 1),
            (Duration::from_micros(1_000_001), 2),
            // Below a microsecond is not a decision's unit: not counted.
            (Duration::new(1, 999), 1),
            (Duration::from_secs(u64::MAX), u64::MAX),
        ];
        for (duration, expected) in cases {
            assert_eq!(seconds(duration), expected, "{duration:?}");
        }
    }

    #[test]
    fn numbers_are_written_whole() {
        let policy =
            Policy::sliding_log([Rule::new(1 << 50, Duration::from_secs(60)).unwrap()]).unwrap();
        let fields = RouteFields::new(&policy);
        let store = MemoryStore::with_clock(limiter_core::ManualClock::new(Duration::from_secs(1)));
        let d = store
            .check_now(&limiter_core::Key::from("k"), &policy, 1)
            .unwrap();
        let expected = format!("\"{}\";r={};t=60", policy.names()[0], (1u64 << 50) - 1);
        assert_eq!(fields.state(&d), expected.as_str());
    }
}
