//! Live overrides: an operator replaces a limit's rules, puts it in shadow
//! mode or switches it off, for a while, on every instance sharing a store
//! ([`SharedControl`](crate::SharedControl)), without a deploy.
//!
//! An override names a limit by the name its keys end with
//! (`posts-create_post`), and always ends: at most [`MAX_OVERRIDE`] after
//! it was set, the compiled limit is back by itself, so an incident's
//! tightening cannot be forgotten.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::RwLock;

use crate::{Algorithm, ConfigError, Policy, Rate, Rule, backend::Kind};

/// The longest an override lasts: a week.
pub const MAX_OVERRIDE: Duration = Duration::from_secs(7 * 24 * 3600);

/// The most limits one store holds overrides for: past it, an override of
/// another limit is refused (an application has far fewer limits).
pub const MAX_OVERRIDES: usize = 1_000;

/// The longest limit name an override may name.
const MAX_LIMIT_NAME: usize = 256;

/// What an override does to its limit's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverrideMode {
    /// Checked and denied, by the override's rules (or the limit's own).
    Enforce,
    /// Checked and counted, but never denied: a denial is only counted
    /// (`limiter_shadow_denied_total`), as in a limit's shadow mode.
    Shadow,
    /// Not checked at all.
    Off,
}

impl OverrideMode {
    /// The name the admin router and the store use: `enforce`, `shadow`, `off`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Enforce => "enforce",
            Self::Shadow => "shadow",
            Self::Off => "off",
        }
    }

    /// The mode `name` names.
    pub fn from_name(name: &str) -> Result<Self, ConfigError> {
        match name {
            "enforce" => Ok(Self::Enforce),
            "shadow" => Ok(Self::Shadow),
            "off" => Ok(Self::Off),
            other => Err(invalid(format!(
                "the mode is enforce, shadow or off, got {other:?}"
            ))),
        }
    }
}

/// What replaces a limit for a while: other rules, shadow mode, or nothing.
///
/// The rules are a [`Policy`] of the limit's own algorithm (a key's state
/// carries over as it does between [plans](crate::Plans): never above the
/// new limit), checked against the limit with [`for_limit`](Self::for_limit).
///
/// ```
/// use std::time::Duration;
/// use limiter_core::{Override, OverrideMode, Policy, Rule};
///
/// let compiled = Policy::sliding_log([Rule::new(10, Duration::from_secs(60))?])?;
/// let tighter = Override::rules(Policy::sliding_log([Rule::new(2, Duration::from_secs(60))?])?);
/// let checked = tighter.for_limit("posts-create_post", &compiled)?;
/// assert_eq!(checked.policy().unwrap().names(), ["2-per-60s"]);
///
/// let other = Override::rules(Policy::fixed_window(Rule::new(2, Duration::from_secs(60))?));
/// assert!(other.for_limit("posts-create_post", &compiled).is_err());
/// assert_eq!(Override::off().mode(), OverrideMode::Off);
/// # Ok::<(), limiter_core::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    policy: Option<Arc<Policy>>,
    mode: OverrideMode,
}

impl Override {
    /// The limit checked by `policy` instead of its own rules.
    pub fn rules(policy: Policy) -> Self {
        Self {
            policy: Some(Arc::new(policy)),
            mode: OverrideMode::Enforce,
        }
    }

    /// The limit's own rules, in shadow mode: nothing is denied.
    pub fn shadow() -> Self {
        Self {
            policy: None,
            mode: OverrideMode::Shadow,
        }
    }

    /// The limit switched off: its requests are not checked.
    pub fn off() -> Self {
        Self {
            policy: None,
            mode: OverrideMode::Off,
        }
    }

    /// The same override in shadow mode (new rules tried without denying).
    pub fn in_shadow(mut self) -> Self {
        if self.mode == OverrideMode::Enforce {
            self.mode = OverrideMode::Shadow;
        }
        self
    }

    /// The rules that replace the limit's; `None`: the limit's own (or
    /// none, when it is off).
    pub fn policy(&self) -> Option<&Policy> {
        self.policy.as_deref()
    }

    /// [`policy`](Self::policy), shared: checks take it without a copy.
    pub fn shared_policy(&self) -> Option<&Arc<Policy>> {
        self.policy.as_ref()
    }

    /// What the override does to the limit's requests.
    pub fn mode(&self) -> OverrideMode {
        self.mode
    }

    /// This override, made to fit the limit `limit` whose compiled policy is
    /// `compiled`: its rules must run the limit's algorithm (a sliding
    /// window its window's length), so that the keys' state carries over,
    /// and a request keeps the limit's cost, which must fit the new rules.
    /// The override's policy has no hot-key mode: each request asks the
    /// store while it holds.
    pub fn for_limit(self, limit: &str, compiled: &Policy) -> Result<Self, ConfigError> {
        validate_limit_name(limit)?;
        let Some(policy) = self.policy else {
            return Ok(self);
        };
        crate::plans::same_shape(compiled, &policy).map_err(|(found, expected)| {
            ConfigError::OverrideDiffers {
                limit: limit.into(),
                found,
                expected,
            }
        })?;
        let policy = Arc::unwrap_or_clone(policy).with_cost(compiled.cost())?;
        Ok(Self {
            policy: Some(Arc::new(policy)),
            mode: self.mode,
        })
    }

    /// The override as one line of text, what a shared store keeps:
    /// `{mode}` alone, or `{mode} {algorithm} {cost} {parameters}` with
    /// the rules as `limit/window_µs,...` or a bucket as
    /// `amount/period_µs/size`. [`from_text`](Self::from_text) reads it.
    pub fn to_text(&self) -> String {
        let mut text = String::from(self.mode.name());
        let Some(policy) = &self.policy else {
            return text;
        };
        let _ = write!(text, " {} {} ", policy.algorithm(), policy.cost());
        match policy.kind() {
            Kind::TokenBucket(b) | Kind::LeakyBucket(b) | Kind::Gcra(b) => {
                let _ = write!(
                    text,
                    "{}/{}/{}",
                    b.rate.amount(),
                    b.rate.period().as_micros(),
                    b.capacity
                );
            }
            _ => {
                for (i, rule) in policy.rules().iter().enumerate() {
                    let comma = if i == 0 { "" } else { "," };
                    let _ = write!(text, "{comma}{}/{}", rule.limit(), rule.window_us());
                }
            }
        }
        text
    }

    /// Reads what [`to_text`](Self::to_text) wrote, validating it as the
    /// constructors do: text from a shared store is not trusted.
    pub fn from_text(text: &str) -> Result<Self, ConfigError> {
        let mut parts = text.split(' ');
        let mode = OverrideMode::from_name(parts.next().unwrap_or_default())?;
        let (algorithm, cost, parameters) = match (parts.next(), parts.next(), parts.next()) {
            (None, _, _) if mode != OverrideMode::Enforce => {
                return Ok(Self { policy: None, mode });
            }
            (Some(algorithm), Some(cost), Some(parameters)) if parts.next().is_none() => {
                (algorithm, cost, parameters)
            }
            _ => return Err(invalid(format!("unreadable override {text:?}"))),
        };
        let unreadable = || invalid(format!("unreadable override {text:?}"));
        let algorithm = Algorithm::ALL
            .into_iter()
            .find(|a| a.name() == algorithm)
            .ok_or_else(unreadable)?;
        let number = |n: &str| n.parse::<u64>().map_err(|_| unreadable());
        let policy = match algorithm {
            Algorithm::TokenBucket | Algorithm::LeakyBucket | Algorithm::Gcra => {
                let [amount, period, size] = parameters
                    .split('/')
                    .map(number)
                    .collect::<Result<Vec<_>, _>>()?
                    .try_into()
                    .map_err(|_| unreadable())?;
                let rate = Rate::new(amount, Duration::from_micros(period))?;
                Policy::of_rate(algorithm, rate, size)?
            }
            _ => {
                let rules = parameters
                    .split(',')
                    .map(|rule| {
                        let (limit, window) = rule.split_once('/').ok_or_else(unreadable)?;
                        let window = Duration::from_micros(number(window)?);
                        Rule::new(number(limit)?, window)
                    })
                    .collect::<Result<Vec<_>, ConfigError>>()?;
                Policy::of_rules(algorithm, rules)?
            }
        };
        let policy = policy.with_cost(number(cost)?)?;
        Ok(Self {
            policy: Some(Arc::new(policy)),
            mode,
        })
    }
}

/// How long an override lasts, checked: 1 s to [`MAX_OVERRIDE`].
pub fn validate_override_duration(duration: Duration) -> Result<(), ConfigError> {
    if duration < Duration::from_secs(1) || duration > MAX_OVERRIDE {
        return Err(invalid(format!(
            "an override lasts 1 s to a week (604800 s), got {} s",
            duration.as_secs()
        )));
    }
    Ok(())
}

/// A limit's name as an override names it: 1 to 256 bytes, no space.
pub fn validate_limit_name(limit: &str) -> Result<(), ConfigError> {
    if limit.is_empty() || limit.len() > MAX_LIMIT_NAME || limit.contains(char::is_whitespace) {
        return Err(invalid(format!(
            "a limit's name is 1 to {MAX_LIMIT_NAME} bytes without spaces, got {limit:?}"
        )));
    }
    Ok(())
}

fn invalid(reason: String) -> ConfigError {
    ConfigError::InvalidOverride { reason }
}

/// An override held, and when it ends (µs).
type InForce = (Arc<Override>, u64);

/// One override in force, as [`OverrideTable::list`] answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveOverride {
    /// The limit's name.
    pub limit: String,
    /// The override.
    pub value: Arc<Override>,
    /// How long it still holds.
    pub left: Duration,
}

/// The overrides in force and when each ends (µs, on the caller's clock):
/// what a store answers [`ControlTables::override_of`](crate::ControlTables::override_of)
/// from, without a call. A request asks it first, so an empty table costs
/// one atomic load; an ended override is never answered, and is swept by
/// the next change.
///
/// ```
/// use std::time::Duration;
/// use limiter_core::{Override, OverrideTable};
///
/// let table = OverrideTable::new();
/// let now = 1_000_000;
/// table.set("posts-create_post", Override::off(), Duration::from_secs(60), now)?;
/// assert!(table.get("posts-create_post", now).is_some());
/// assert!(table.get("posts-create_post", now + 60_000_000).is_none());
/// # Ok::<(), limiter_core::ConfigError>(())
/// ```
#[derive(Debug, Default)]
pub struct OverrideTable {
    /// How many limits hold an override (ended ones too, until swept).
    len: AtomicUsize,
    /// How many of them this table counts in the process's
    /// `limiter_overrides` gauge.
    gauged: AtomicUsize,
    /// Each limit's override, and when it ends (µs).
    entries: RwLock<HashMap<Box<str>, InForce>>,
}

impl OverrideTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether no override is held: one atomic load.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len.load(Ordering::Acquire) == 0
    }

    /// Puts `value` on `limit` for `duration` from `now` (µs), replacing
    /// its override; refused past [`MAX_OVERRIDES`] limits.
    pub fn set(
        &self,
        limit: &str,
        value: Override,
        duration: Duration,
        now: u64,
    ) -> Result<(), ConfigError> {
        validate_limit_name(limit)?;
        let ends = now.saturating_add(u64::try_from(duration.as_micros()).unwrap_or(u64::MAX));
        let mut entries = self.entries.write();
        entries.retain(|_, (_, end)| *end > now);
        if entries.len() >= MAX_OVERRIDES && !entries.contains_key(limit) {
            self.publish(entries.len());
            return Err(invalid(format!(
                "{MAX_OVERRIDES} limits hold an override already"
            )));
        }
        entries.insert(limit.into(), (Arc::new(value), ends));
        self.publish(entries.len());
        Ok(())
    }

    /// Ends `limit`'s override, if it has one.
    pub fn clear(&self, limit: &str) {
        let mut entries = self.entries.write();
        entries.remove(limit);
        self.publish(entries.len());
    }

    /// Replaces every override with `overrides` (limit, override, time
    /// left from `now`), at most [`MAX_OVERRIDES`].
    pub fn replace(
        &self,
        overrides: impl IntoIterator<Item = (String, Override, Duration)>,
        now: u64,
    ) {
        let mut entries = self.entries.write();
        entries.clear();
        for (limit, value, left) in overrides.into_iter().take(MAX_OVERRIDES) {
            let ends = now.saturating_add(u64::try_from(left.as_micros()).unwrap_or(u64::MAX));
            entries.insert(limit.into_boxed_str(), (Arc::new(value), ends));
        }
        self.publish(entries.len());
    }

    /// `limit`'s override at `now` (µs) and how long it still holds; an
    /// empty table answers without a lock.
    pub fn get(&self, limit: &str, now: u64) -> Option<(Arc<Override>, Duration)> {
        if self.is_empty() {
            return None;
        }
        let entries = self.entries.read();
        let (value, ends) = entries.get(limit)?;
        if *ends > now {
            return Some((Arc::clone(value), Duration::from_micros(ends - now)));
        }
        drop(entries);
        self.sweep(now);
        None
    }

    /// Drops the overrides ended at `now`: once, on the first check of an
    /// ended override's limit.
    #[cold]
    fn sweep(&self, now: u64) {
        let mut entries = self.entries.write();
        entries.retain(|_, (_, end)| *end > now);
        self.publish(entries.len());
    }

    /// Makes the count the lock-free readers load, and the process's
    /// `limiter_overrides` gauge, match `len` entries.
    fn publish(&self, len: usize) {
        self.len.store(len, Ordering::Release);
        let before = self.gauged.swap(len, Ordering::Relaxed);
        if before != len {
            metrics::gauge!("limiter_overrides").increment(len as f64 - before as f64);
        }
    }

    /// Every override in force at `now`, by limit name.
    pub fn list(&self, now: u64) -> Vec<ActiveOverride> {
        let entries = self.entries.read();
        let mut list: Vec<ActiveOverride> = entries
            .iter()
            .filter(|(_, (_, ends))| *ends > now)
            .map(|(limit, (value, ends))| ActiveOverride {
                limit: limit.to_string(),
                value: Arc::clone(value),
                left: Duration::from_micros(ends - now),
            })
            .collect();
        list.sort_by(|a, b| a.limit.cmp(&b.limit));
        list
    }
}

impl Drop for OverrideTable {
    fn drop(&mut self) {
        let gauged = *self.gauged.get_mut();
        if gauged > 0 {
            metrics::gauge!("limiter_overrides").decrement(gauged as f64);
        }
    }
}

#[cfg(test)]
mod tests;
