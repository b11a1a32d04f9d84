//! One view of a limit's top offenders across instances: each instance's
//! sketch read as a [`DeniedReport`], published through the store, and the
//! reports merged with Space-Saving's bounds kept.

use super::{Denied, TopDenied, Windows};
use crate::clock::Clock;

/// What one instance counted of a limit's most denied identities, as it
/// publishes it for the others ([`TopDenied::report`]) and they merge it
/// ([`merge`](Self::merge)).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeniedReport {
    /// Its most denied identities, highest count first.
    pub denied: Vec<Denied>,
    /// The most an identity it does not list may have been denied there:
    /// a merge adds it to such an identity's count and error.
    pub floor: u64,
    /// The denials it counted (the `N` of its bound `N / k`).
    pub counted: u64,
}

/// The first line's word and version: a reader meeting another skips the
/// report rather than guess.
const FORMAT: &str = "limiter-top-denied 1";

impl<C: Clock> TopDenied<C> {
    /// The `n` identities counted highest, as [`top`](Self::top) answers
    /// them, with the floor of those left out: what this instance
    /// publishes for a view across instances.
    pub fn report(&self, n: usize) -> DeniedReport {
        let now = self.clock.now_micros() / self.period_micros;
        let (mut denied, floor, counted) = {
            let mut windows = self.windows.lock();
            windows.rotate(now);
            let Windows {
                current, previous, ..
            } = &*windows;
            let floor = current.floor(self.counters) + previous.floor(self.counters);
            (
                windows.merged(self.counters),
                floor,
                current.total + previous.total,
            )
        };
        super::sort(&mut denied);
        // One left out was counted no higher than the first dropped.
        let floor = denied
            .get(n)
            .map_or(floor, |first_dropped| floor.max(first_dropped.count));
        denied.truncate(n);
        DeniedReport {
            denied,
            floor,
            counted,
        }
    }
}

impl DeniedReport {
    /// The report as text: a first line naming the format and its version,
    /// the floor, the count and the number of entries; then one line per
    /// entry, `{count} {error} {bytes} {identity}`, the identity's length
    /// given so that any text reads back whole.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut text = String::with_capacity(64 + 32 * self.denied.len());
        let _ = writeln!(
            text,
            "{FORMAT} {} {} {}",
            self.floor,
            self.counted,
            self.denied.len()
        );
        for entry in &self.denied {
            let _ = writeln!(
                text,
                "{} {} {} {}",
                entry.count,
                entry.error,
                entry.identity.len(),
                entry.identity
            );
        }
        text
    }

    /// Reads [`to_text`](Self::to_text)'s text back; `None` for any other
    /// text, another format's version included.
    pub fn from_text(text: &str) -> Option<Self> {
        let (first, mut rest) = text.split_once('\n')?;
        let head = first.strip_prefix(FORMAT)?.strip_prefix(' ')?;
        let mut numbers = head.split(' ').map(str::parse::<u64>);
        let (floor, counted, entries) = match (numbers.next(), numbers.next(), numbers.next()) {
            (Some(Ok(floor)), Some(Ok(counted)), Some(Ok(entries))) => (floor, counted, entries),
            _ => return None,
        };
        if numbers.next().is_some() {
            return None;
        }
        let mut denied = Vec::with_capacity(usize::try_from(entries).ok()?.min(1024));
        for _ in 0..entries {
            let mut field = || -> Option<u64> {
                let (number, after) = rest.split_once(' ')?;
                rest = after;
                number.parse().ok()
            };
            let (count, error, len) = (field()?, field()?, field()?);
            let len = usize::try_from(len).ok()?;
            let identity = rest.get(..len)?;
            rest = rest.get(len..)?.strip_prefix('\n')?;
            denied.push(Denied {
                identity: identity.to_owned(),
                count,
                error,
            });
        }
        rest.is_empty().then_some(Self {
            denied,
            floor,
            counted,
        })
    }

    /// The `n` identities counted highest across `reports`, highest first
    /// (as [`TopDenied::top`] orders them): each identity's counts and
    /// errors added over the reports, a report that does not list it
    /// adding its floor to both. Every count stays at least the identity's
    /// true count across the instances, and over it by at most its error.
    pub fn merge<'a>(reports: impl IntoIterator<Item = &'a DeniedReport>, n: usize) -> Vec<Denied> {
        let reports: Vec<&DeniedReport> = reports.into_iter().collect();
        let floors = (reports.iter()).fold(0u64, |sum, report| sum.saturating_add(report.floor));
        // Per identity: the counts and errors of the reports listing it,
        // and those reports' floors, which the others' floors complete.
        let mut merged: std::collections::HashMap<&str, [u64; 3]> = Default::default();
        for report in &reports {
            for entry in &report.denied {
                let [count, error, floors_listing] = merged.entry(&entry.identity).or_default();
                *count = count.saturating_add(entry.count);
                *error = error.saturating_add(entry.error);
                *floors_listing = floors_listing.saturating_add(report.floor);
            }
        }
        let unlisted = |floors_listing: u64| floors.saturating_sub(floors_listing);
        let mut denied: Vec<Denied> = merged
            .into_iter()
            .map(|(identity, [count, error, floors_listing])| Denied {
                identity: identity.to_owned(),
                count: count.saturating_add(unlisted(floors_listing)),
                error: error.saturating_add(unlisted(floors_listing)),
            })
            .collect();
        super::sort(&mut denied);
        denied.truncate(n);
        denied
    }
}
