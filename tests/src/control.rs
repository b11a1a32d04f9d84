//! The shared control state's calls as the tests write them: each change
//! of [`SharedControl`] as a call of its own, each read of its tables.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use limiter_core::{ActiveOverride, BlockOrigin, Change, Error, Override, SharedControl};

/// A change under way.
type Changing<'a> = Pin<Box<dyn Future<Output = Result<(), Error>> + Send + 'a>>;

/// [`SharedControl`]'s changes and reads, one call each.
pub trait ControlCalls: SharedControl {
    /// Blocks `key` for `duration`.
    fn block<'a>(&'a self, key: &'a str, duration: Duration, origin: BlockOrigin) -> Changing<'a> {
        self.change(Change::Block {
            key,
            duration,
            origin,
        })
    }

    /// Blocks `key` for `duration`, as an operator does.
    fn operator_block<'a>(&'a self, key: &'a str, duration: Duration) -> Changing<'a> {
        self.block(key, duration, BlockOrigin::Operator)
    }

    /// Blocks `key` for `duration`, as a penalty does.
    fn penalty_block<'a>(&'a self, key: &'a str, duration: Duration) -> Changing<'a> {
        self.block(key, duration, BlockOrigin::Penalty)
    }

    /// Lifts `key`'s blocks.
    fn unblock<'a>(&'a self, key: &'a str) -> Changing<'a> {
        self.change(Change::Unblock { key })
    }

    /// Gives `key` the plan `plan`.
    fn assign_plan<'a>(&'a self, key: &'a str, plan: Option<&'a str>) -> Changing<'a> {
        self.change(Change::AssignPlan { key, plan })
    }

    /// Puts `value` on `limit` for `duration`.
    fn set_override<'a>(
        &'a self,
        limit: &'a str,
        value: &'a Override,
        duration: Duration,
    ) -> Changing<'a> {
        self.change(Change::SetOverride {
            limit,
            value,
            duration,
        })
    }

    /// Ends `limit`'s override.
    fn clear_override<'a>(&'a self, limit: &'a str) -> Changing<'a> {
        self.change(Change::ClearOverride { limit })
    }

    /// How long `key` stays blocked here.
    fn blocked(&self, key: &str) -> Option<Duration> {
        self.tables().blocked(key)
    }

    /// The plan `key` has here.
    fn assigned_plan(&self, key: &str) -> Option<Arc<str>> {
        self.tables().assigned_plan(key)
    }

    /// `limit`'s override here, and how long it still holds.
    fn override_of(&self, limit: &str) -> Option<(Arc<Override>, Duration)> {
        self.tables().override_of(limit)
    }

    /// Every override in force here.
    fn overrides(&self) -> Vec<ActiveOverride> {
        self.tables().active_overrides()
    }
}

impl<T: SharedControl + ?Sized> ControlCalls for T {}
