//! The shared control state ([`SharedControl`](super::SharedControl)) as
//! rows: what a change writes ([`Change`]), and the tables each instance
//! reads without a call ([`ControlTables`]). A new operator handle is a new
//! kind of change and a new table here, not a new trait.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use super::{AssignedPlans, BlockList, BlockOrigin};
use crate::{ActiveOverride, Override, OverrideTable};

/// One change of the shared control state: a row written or removed.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Change<'a> {
    /// Blocks `key` for `duration`, replacing its block of the same
    /// `origin` (a block of the other origin stays: the key is blocked
    /// until the later one ends). Operator blocks and penalty-earned ones
    /// are bounded apart (see [`BlockList`]): past its bound a new
    /// operator block is refused, and a new penalty block takes the place
    /// of the penalty block that ends soonest.
    Block {
        /// The blocked key (an identity's, under a prefix).
        key: &'a str,
        /// How long it stays blocked.
        duration: Duration,
        /// Who blocks it.
        origin: BlockOrigin,
    },
    /// Lifts `key`'s blocks, of both origins.
    Unblock {
        /// The key to unblock.
        key: &'a str,
    },
    /// Gives `key` the plan named `plan` (`None`: the default).
    AssignPlan {
        /// The key (an identity's, under a prefix).
        key: &'a str,
        /// The plan's name; `None` for the default.
        plan: Option<&'a str>,
    },
    /// Puts `value` on the limit named `limit` for `duration` (1 s to
    /// [`MAX_OVERRIDE`](crate::MAX_OVERRIDE)), replacing its override.
    SetOverride {
        /// The limit's name.
        limit: &'a str,
        /// What holds instead of the compiled limit.
        value: &'a Override,
        /// How long it holds.
        duration: Duration,
    },
    /// Ends `limit`'s override: the compiled limit holds again.
    ClearOverride {
        /// The limit's name.
        limit: &'a str,
    },
}

/// The key whose part of the store holds the shared control state: the
/// blocks, plan assignments and overrides, their notices, and the
/// instances' reports. A store that keeps that state in one part of
/// itself answers that part's failure domain for this key (the Redis
/// store keeps it all in this key's slot, so on a Cluster one node holds
/// it); a guard sends every change and report through that part's breaker,
/// whatever key the change names.
pub const CONTROL_STATE_KEY: &str = "{limiter:resets}";

impl Change<'_> {
    /// The key the change writes, for a store whose parts each serve some
    /// keys (an override names no key: `""`).
    pub fn key(&self) -> &str {
        match self {
            Self::Block { key, .. } | Self::Unblock { key } | Self::AssignPlan { key, .. } => key,
            Self::SetOverride { .. } | Self::ClearOverride { .. } => "",
        }
    }

    /// What the change is a row of, as a store that keeps no such rows
    /// names it in [`Error::Unsupported`](crate::Error::Unsupported).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Block { .. } | Self::Unblock { .. } => "blocks",
            Self::AssignPlan { .. } => "plan assignments",
            Self::SetOverride { .. } | Self::ClearOverride { .. } => "overrides",
        }
    }
}

/// Reads the time (µs since the Unix epoch) on the store's clock.
type Now = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The shared control state as this instance knows it: the blocks, the
/// plan assignments and the live overrides, each a table every request
/// reads without a call, on the store's clock. An empty table costs a
/// reader one atomic load, and the clock is read only for a table that
/// holds rows. Clones share the tables.
#[derive(Clone)]
pub struct ControlTables {
    blocks: Arc<BlockList>,
    plans: Arc<AssignedPlans>,
    overrides: Arc<OverrideTable>,
    now: Now,
}

impl std::fmt::Debug for ControlTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlTables")
            .field("blocks", &!self.blocks.is_empty())
            .field("plans", &!self.plans.is_empty())
            .field("overrides", &!self.overrides.is_empty())
            .finish_non_exhaustive()
    }
}

impl ControlTables {
    /// Empty tables, keeping at most `max_penalty_blocks` penalty blocks
    /// (see [`BlockList::with_max_penalty_blocks`]), read at the time
    /// `now` answers (µs since the Unix epoch).
    pub fn new(max_penalty_blocks: usize, now: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        Self {
            blocks: Arc::new(BlockList::with_max_penalty_blocks(max_penalty_blocks)),
            plans: Arc::default(),
            overrides: Arc::default(),
            now: Arc::new(now),
        }
    }

    /// Empty tables, shared by every wrapper of a store that keeps no
    /// shared control state (nothing writes to them).
    pub fn none() -> &'static Self {
        static NONE: LazyLock<ControlTables> = LazyLock::new(|| {
            ControlTables::new(1, || {
                use crate::Clock;
                crate::SystemClock.now_micros()
            })
        });
        &NONE
    }

    /// The time on the store's clock, µs since the Unix epoch.
    pub fn now(&self) -> u64 {
        (self.now)()
    }

    /// The blocks.
    pub fn blocks(&self) -> &Arc<BlockList> {
        &self.blocks
    }

    /// The plan assignments.
    pub fn plans(&self) -> &AssignedPlans {
        &self.plans
    }

    /// The live overrides.
    pub fn overrides(&self) -> &Arc<OverrideTable> {
        &self.overrides
    }

    /// How long `key` stays blocked; `None` when it is not.
    #[inline]
    pub fn blocked(&self, key: &str) -> Option<Duration> {
        self.blocks.blocked(key, || (self.now)())
    }

    /// The plan `key` has; `None` for the default.
    pub fn assigned_plan(&self, key: &str) -> Option<Arc<str>> {
        self.plans.get(key)
    }

    /// `limit`'s override and how long it still holds.
    pub fn override_of(&self, limit: &str) -> Option<(Arc<Override>, Duration)> {
        if self.overrides.is_empty() {
            return None;
        }
        self.overrides.get(limit, (self.now)())
    }

    /// Every override in force, by limit name.
    pub fn active_overrides(&self) -> Vec<ActiveOverride> {
        self.overrides.list((self.now)())
    }
}
