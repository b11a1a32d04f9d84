//! The notices and the shared state they announce, as Redis keeps them:
//! the channel, the keys in its slot, and the notices' text. Pure: what
//! sends a notice is `announce.rs`, what applies one is `replica.rs`, what
//! receives them is `subscription.rs`.

use std::time::Duration;

use limiter_core::{BlockOrigin, Error};

/// The channel of the notices: `r {id} {key}` (reset), `b {id} {µs} {key}`
/// (blocked by an operator), `e {id} {µs} {key}` (a block earned by a
/// penalty), `u {id} {key}` (unblocked), `p {id} ={plan} {key}` (a plan,
/// empty for the default), `o {id} {µs} {limit} {override}` (an override;
/// `o {id} 0 {limit}` ends it), and `a {id}` (acknowledged).
pub(crate) const CHANNEL: &str = "limiter:resets";
/// The hash of keys and the plan each has, in the channel's slot.
pub(crate) const PLANS: &str = "{limiter:resets}:plans";
/// The hash counting changes that every instance polls (`changes`: blocks,
/// unblocks, plans; `resets`: failed resets), in the same slot: see
/// `reconcile.rs`.
pub(crate) const VERSION: &str = "{limiter:resets}:version";
/// The hash of keys blocked by an operator and when each block ends (µs,
/// Redis's clock), in the channel's slot (its hash tag), so the subscriber
/// reads it where it subscribes.
pub(crate) const BLOCKS: &str = "{limiter:resets}:blocks";
/// The sorted set of keys blocked by a penalty, scored by when each block
/// ends (µs, Redis's clock), in the same slot.
pub(crate) const PENALTY_BLOCKS: &str = "{limiter:resets}:penalty_blocks";
/// The hash of the live overrides (limit -> `end_µs text`), in the same
/// slot.
pub(crate) const OVERRIDES: &str = "{limiter:resets}:overrides";

/// A notice, read from the channel's text.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Notice<'a> {
    /// `key` was reset: forget what is remembered of it.
    Reset {
        id: &'a str,
        key: &'a str,
    },
    /// `key` is blocked for `left`.
    Block {
        id: &'a str,
        left: Duration,
        origin: BlockOrigin,
        key: &'a str,
    },
    Unblock {
        id: &'a str,
        key: &'a str,
    },
    /// `key` has the plan `plan` (`None`: the default).
    Plan {
        id: &'a str,
        plan: Option<&'a str>,
        key: &'a str,
    },
    /// An override's `{µs left} {limit} {text}` (`0 {limit}`: ended).
    Override {
        id: &'a str,
        change: &'a str,
    },
    /// An instance applied the notice `id`.
    Ack {
        id: u64,
    },
}

impl<'a> Notice<'a> {
    /// The notice `payload` writes; `None` for text no notice has.
    pub(crate) fn parse(payload: &'a str) -> Option<Self> {
        let mut parts = payload.splitn(3, ' ');
        Some(match (parts.next()?, parts.next()?, parts.next()) {
            ("r", id, Some(key)) => Self::Reset { id, key },
            (kind @ ("b" | "e"), id, Some(rest)) => {
                let (left, key) = rest.split_once(' ')?;
                let origin = match kind {
                    "b" => BlockOrigin::Operator,
                    _ => BlockOrigin::Penalty,
                };
                let left = Duration::from_micros(left.parse().ok()?);
                Self::Block {
                    id,
                    left,
                    origin,
                    key,
                }
            }
            ("u", id, Some(key)) => Self::Unblock { id, key },
            ("p", id, Some(rest)) => {
                let (plan, key) = rest.split_once(' ')?;
                let plan = plan.strip_prefix('=').filter(|p| !p.is_empty());
                Self::Plan { id, plan, key }
            }
            ("o", id, Some(change)) => Self::Override { id, change },
            ("a", id, None) => Self::Ack {
                id: id.parse().ok()?,
            },
            _ => return None,
        })
    }

    /// The id to acknowledge once the notice is applied (none for an
    /// acknowledgement).
    pub(crate) fn id(&self) -> Option<&'a str> {
        match self {
            Self::Reset { id, .. }
            | Self::Block { id, .. }
            | Self::Unblock { id, .. }
            | Self::Plan { id, .. }
            | Self::Override { id, .. } => Some(id),
            Self::Ack { .. } => None,
        }
    }
}

/// The error a failed admin change answers: [`Error::Unconfirmed`] when
/// the call may have run (no answer in time, a connection that failed),
/// else `error` itself (an `oom` answer: Redis ran nothing).
pub(crate) fn unconfirmed(error: Error) -> Error {
    match &error {
        Error::Timeout(_) => Error::Unconfirmed(Box::new(error)),
        Error::Backend(backend) if backend.kind() == "redis" => Error::Unconfirmed(Box::new(error)),
        _ => error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_read_as_written_and_garbage_is_refused() {
        let block = Notice::parse("b 7 60000000 user=mallory").unwrap();
        assert_eq!(
            block,
            Notice::Block {
                id: "7",
                left: Duration::from_secs(60),
                origin: BlockOrigin::Operator,
                key: "user=mallory"
            }
        );
        assert_eq!(block.id(), Some("7"));
        assert_eq!(
            Notice::parse("p 8 = k"),
            Some(Notice::Plan {
                id: "8",
                plan: None,
                key: "k"
            })
        );
        assert_eq!(Notice::parse("a 9"), Some(Notice::Ack { id: 9 }));
        for garbage in ["", "b 7 x k", "b 7 60", "a x", "a 9 more", "z 1 k", "r 1"] {
            assert_eq!(Notice::parse(garbage), None, "{garbage:?}");
        }
    }
}
