//! Live overrides through the [`Control`]: a limit's rules replaced, its
//! denials shadowed, or the limit switched off, on every instance sharing
//! the limit's store, for a while (see [`Override`]).

use std::time::Duration;

use limiter_core::{
    ActiveOverride, Algorithm, Change, ConfigError, Error, Override, OverrideMode, Policy, Rate,
    Rule, parse_duration, required, validate_override_duration,
};

use super::{Control, Named};

/// The capability overrides need, as its absence is named.
const OVERRIDES: &str = "live overrides";

/// An override of one limit, as [`Control::overrides`] lists it and the
/// admin router answers it (`GET /overrides`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OverrideState {
    /// The limit's name, as its keys end (`posts-create_post`).
    pub limit: String,
    /// `enforce`, `shadow` or `off`.
    pub mode: &'static str,
    /// The algorithm of the override's rules; `None` when the limit's own
    /// rules hold (shadow mode), or none (off).
    pub algorithm: Option<&'static str>,
    /// The `RateLimit` names of the override's rules (`2-per-60s`): what
    /// its 429s and fields name.
    pub rules: Vec<String>,
    /// Seconds until the compiled limit is back, rounded up.
    pub seconds: u64,
}

impl From<&ActiveOverride> for OverrideState {
    fn from(active: &ActiveOverride) -> Self {
        let policy = active.value.policy();
        Self {
            limit: active.limit.clone(),
            mode: active.value.mode().name(),
            algorithm: policy.map(|p| p.algorithm().name()),
            rules: policy.map(Policy::names).unwrap_or_default(),
            seconds: u64::try_from(active.left.as_micros().div_ceil(1_000_000)).unwrap_or(u64::MAX),
        }
    }
}

/// Rules as the attribute writes them, read at run time (the admin
/// router's JSON): each value goes through the function the attribute's
/// compiler calls, so a value it refuses is refused with its message.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WrittenRules {
    /// The algorithm; the limit's own when left out (another is refused:
    /// the keys' state is kept for the limit's).
    #[serde(default)]
    pub algorithm: Option<String>,
    /// `[[limit, "window"]...]`, as `rules = [(10, 60s)]`: the sliding log
    /// and the windows.
    #[serde(default)]
    pub rules: Option<Vec<(u64, String)>>,
    /// `[amount, "period"]`, as `rate = 10/1s`: the buckets and GCRA.
    #[serde(default)]
    pub rate: Option<(u64, String)>,
    /// The token bucket's and GCRA's size.
    #[serde(default)]
    pub burst: Option<u64>,
    /// The leaky bucket's size.
    #[serde(default)]
    pub capacity: Option<u64>,
}

impl WrittenRules {
    /// The policy these rules make for a limit running `algorithm` (unless
    /// they name another); `None` when they give no rules (the limit's own
    /// hold).
    pub fn policy(&self, algorithm: Algorithm) -> Result<Option<Policy>, ConfigError> {
        let algorithm = match &self.algorithm {
            None => algorithm,
            Some(name) => Algorithm::ALL
                .into_iter()
                .find(|a| a.name() == name)
                .ok_or_else(|| ConfigError::InvalidOverride {
                    reason: format!(
                        "unknown algorithm {name:?}: expected sliding_log, fixed_window, \
                         sliding_window, token_bucket, leaky_bucket or gcra"
                    ),
                })?,
        };
        let size = self.burst.or(self.capacity);
        match (&self.rules, &self.rate) {
            (None, None) if self.algorithm.is_none() && size.is_none() => Ok(None),
            (Some(rules), None) if size.is_none() => {
                let rules = rules
                    .iter()
                    .map(|(limit, window)| {
                        Rule::new(*limit, parse_duration(window, "the window of a rule")?)
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Policy::of_rules(algorithm, rules).map(Some)
            }
            (None, Some((amount, period))) => {
                let period = parse_duration(period, "the period of a rate")?;
                let rate = Rate::new(*amount, period)?;
                let size = size.ok_or_else(|| ConfigError::InvalidOverride {
                    reason: format!("{algorithm} needs a size: `burst` or `capacity`"),
                })?;
                Policy::of_rate(algorithm, rate, size).map(Some)
            }
            _ => Err(ConfigError::InvalidOverride {
                reason: "give `rules` (sliding_log, fixed_window, sliding_window), or `rate` \
                         with `burst` or `capacity` (token_bucket, leaky_bucket, gcra)"
                    .into(),
            }),
        }
    }
}

pub(super) async fn set_override(
    control: &Control,
    limit: &str,
    value: Override,
    duration: Duration,
) -> Result<(), Error> {
    let (part, named) = named(control, limit)?;
    validate_override_duration(duration)?;
    let value = value.for_limit(limit, named.limit.policy())?;
    let shared = required(
        part.context.shared.store.capabilities().as_shared_control(),
        OVERRIDES,
    )?;
    let change = Change::SetOverride {
        limit,
        value: &value,
        duration,
    };
    shared.change(change).await
}

pub(super) async fn set_written_override(
    control: &Control,
    limit: &str,
    written: &WrittenRules,
    mode: OverrideMode,
    duration: Duration,
) -> Result<(), Error> {
    let (_, named) = named(control, limit)?;
    let value = match (written.policy(named.limit.policy().algorithm())?, mode) {
        (None, OverrideMode::Off) => Override::off(),
        (Some(_), OverrideMode::Off) => {
            return Err(ConfigError::InvalidOverride {
                reason: "a limit switched off takes no rules".into(),
            }
            .into());
        }
        (None, OverrideMode::Shadow) => Override::shadow(),
        (Some(policy), OverrideMode::Shadow) => Override::rules(policy).in_shadow(),
        (Some(policy), OverrideMode::Enforce) => Override::rules(policy),
        (None, OverrideMode::Enforce) => {
            return Err(ConfigError::InvalidOverride {
                reason: "an enforced override gives the rules that replace the limit's".into(),
            }
            .into());
        }
    };
    control.set_override(limit, value, duration).await
}

pub(super) async fn clear_override(control: &Control, limit: &str) -> Result<(), Error> {
    let (part, _) = named(control, limit)?;
    let shared = required(
        part.context.shared.store.capabilities().as_shared_control(),
        OVERRIDES,
    )?;
    shared.change(Change::ClearOverride { limit }).await
}

pub(super) fn overrides(control: &Control) -> Vec<OverrideState> {
    let mut states: Vec<OverrideState> = control
        .parts()
        .flat_map(|part| {
            let tables = part.context.shared.tables.as_ref();
            let listed = tables.map(|t| t.active_overrides()).unwrap_or_default();
            listed
                .into_iter()
                .filter(|active| part.limits.iter().any(|n| n.limit.name() == active.limit))
                .map(|active| OverrideState::from(&active))
                .collect::<Vec<_>>()
        })
        .collect();
    states.sort_by(|a, b| a.limit.cmp(&b.limit));
    states.dedup_by(|a, b| a.limit == b.limit);
    states
}

pub(super) fn limit_names(control: &Control) -> Vec<String> {
    let mut names: Vec<String> = control
        .parts()
        .flat_map(|part| part.limits.iter().map(|n| n.limit.name().to_string()))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The limit named `limit` and the handle whose store keeps it.
fn named<'a>(control: &'a Control, limit: &str) -> Result<(&'a Control, &'a Named), Error> {
    control
        .parts()
        .find_map(|part| {
            let named = part.limits.iter().find(|n| n.limit.name() == limit)?;
            Some((part, named))
        })
        .ok_or(Error::Unsupported(
            "overriding a limit this handle does not answer for",
        ))
}
