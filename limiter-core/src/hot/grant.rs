//! What an instance asks a store for when it takes a lease, and what it gets.

use std::time::Duration;

use crate::Decision;

/// A request for a lease of a key's permits (see
/// [`Leases::lease`](crate::Leases::lease)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRequest {
    pub(crate) need: u64,
    pub(crate) want: u64,
    pub(crate) length_us: u64,
    pub(crate) id: u64,
    pub(crate) at: Option<u64>,
}

impl LeaseRequest {
    /// The permits the request that asks needs: fewer are no lease.
    pub const fn need(&self) -> u64 {
        self.need
    }

    /// The most permits to take.
    pub const fn want(&self) -> u64 {
        self.want
    }

    /// How long the lease lasts (zero: the permits are used at once, a
    /// plain check).
    pub const fn length(&self) -> Duration {
        Duration::from_micros(self.length_us)
    }

    /// [`length`](Self::length) in µs.
    pub const fn length_us(&self) -> u64 {
        self.length_us
    }

    /// The lease's id: what the store records the lease's permits under,
    /// unique per instance.
    pub const fn id(&self) -> u64 {
        self.id
    }

    /// The time the store decides at (µs since the Unix epoch) when the
    /// caller gives it (tests); `None`: the store's own clock.
    pub const fn at(&self) -> Option<u64> {
        self.at
    }
}

/// Permits a store leased: how many, for how long, and the decision of the
/// request that asked (denied when fewer than it needed were free).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseGrant {
    pub(crate) granted: u64,
    /// How long from the store's now the permits may be used: at most the
    /// length asked for (a fixed window's lease ends with its window).
    pub(crate) length_us: u64,
    pub(crate) decision: Decision,
    /// What giving permits back needs: the lease's end (a sliding log's
    /// entries are scored with it) or the window's start (a fixed window).
    pub(crate) ticket: u64,
    pub(crate) id: u64,
}

impl LeaseGrant {
    /// Permits `granted` for `length_us` from the store's now, as asked
    /// by the request with id `id`; `ticket` is what giving them back
    /// needs (the store's own reading: a sliding log's lease end, a fixed
    /// window's start).
    pub const fn new(
        granted: u64,
        length_us: u64,
        decision: Decision,
        ticket: u64,
        id: u64,
    ) -> Self {
        Self {
            granted,
            length_us,
            decision,
            ticket,
            id,
        }
    }

    /// What giving the permits back needs, as the store gave it.
    pub const fn ticket(&self) -> u64 {
        self.ticket
    }

    /// The id of the lease that asked.
    pub const fn id(&self) -> u64 {
        self.id
    }

    /// The permits taken (zero when denied).
    pub const fn granted(&self) -> u64 {
        self.granted
    }

    /// How long the permits may be used, from when the store took them.
    pub const fn length(&self) -> Duration {
        Duration::from_micros(self.length_us)
    }

    /// The decision of the request that asked for the lease.
    pub const fn decision(&self) -> &Decision {
        &self.decision
    }
}
