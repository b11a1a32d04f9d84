//! Who is in touch with whom: heartbeats between regions, so that the
//! share of a region cut off can go to the others, and never to both.
//!
//! Every instance sends each other region a heartbeat every tenth of
//! [`reclaim_after`](crate::RegionalConfig::reclaim_after): the other
//! region's Redis records when it heard from this region, and answers its
//! own contacts table. This region's Redis records each heartbeat that came
//! back (when it was sent) and when the current run of them began, the run
//! broken by a gap of half `reclaim_after` (the lapse).
//!
//! - A region out of touch with more than half of the regions (its last
//!   heartbeat to each older than the lapse, or its run of them begun less
//!   than a margin before the window) stops spending its share: the others
//!   may be a majority taking it.
//! - A region takes its part of another's share in the windows that start
//!   `reclaim_after` after it last heard from it, when more than half of
//!   the regions agree: itself and those it is in touch with whose records
//!   (read with its last heartbeat to each) have not heard from it either.
//!   Any two majorities share a region, which cannot both have heard from
//!   the region lately and not: so a share is never spent by its region and
//!   taken by another in one window. With two regions there is no majority
//!   without both: nothing is taken, nothing given up.
//! - A region asked to give uses its contacts as the asker last read them:
//!   records older than the truth are more out of touch, never less.
//!
//! Each time (`last`, `since`, `heard`) is read by the Redis that keeps it
//! and compared with that Redis's clock only. Records older than the
//! truth make a region give up sooner and take later, never the reverse;
//! a region's view of what it heard is used only while fresh. The proof is
//! in docs/regions.md.

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// A region's contact with another, as its Redis recorded it (µs, its
/// clock): the last heartbeat that came back (when it was sent), and when
/// the run it belongs to began (0: never broken).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Contact {
    pub(crate) last: u64,
    pub(crate) since: u64,
}

/// What this instance knows, by peer (in the store's order).
#[derive(Debug, Default, Clone)]
pub(crate) struct View {
    /// This region's contact with each other region.
    pub(crate) contacts: Vec<Option<Contact>>,
    /// When each other region was last heard from (this Redis's clock).
    pub(crate) heard: Vec<Option<u64>>,
    /// When `contacts` and `heard` were read.
    pub(crate) read_at: Option<Instant>,
    /// Each other region's records, as its Redis answered this instance's
    /// last heartbeat.
    pub(crate) tables: Vec<Option<Records>>,
}

/// A region's records, by region name: its contacts, and when it heard
/// from each.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Records {
    pub(crate) contacts: HashMap<Box<str>, Contact>,
    pub(crate) heard: HashMap<Box<str>, u64>,
}

#[derive(Default)]
pub(crate) struct Liveness {
    view: RwLock<View>,
    /// Whether the heartbeats were started (`heartbeat.rs`).
    pub(crate) started: AtomicBool,
}

impl Liveness {
    /// The view, read in place: a check reads it on every request, so it
    /// is borrowed, not cloned (its tables hold maps).
    pub(crate) fn view(&self) -> std::sync::RwLockReadGuard<'_, View> {
        self.view
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn update(&self, change: impl FnOnce(&mut View)) {
        change(
            &mut self
                .view
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
    }
}

/// `contacts.lua`'s reply: the contacts and the heard times, by name.
#[allow(clippy::type_complexity)]
pub(crate) fn split_records(
    reply: &[String],
) -> Option<(Vec<(Box<str>, Contact)>, Vec<(Box<str>, u64)>)> {
    let (count, rest) = reply.split_first()?;
    let count: usize = count.parse().ok()?;
    let (contacts, heard) = rest.split_at_checked(count)?;
    let contacts = parse_contacts(contacts)?.into_iter().collect();
    let heard = heard
        .chunks_exact(2)
        .map(|pair| Some((pair[0].as_str().into(), pair[1].parse().ok()?)))
        .collect::<Option<_>>()?;
    Some((contacts, heard))
}

/// A contacts hash as HGETALL answers it: name, "last,since", ...
fn parse_contacts(pairs: &[String]) -> Option<HashMap<Box<str>, Contact>> {
    if !pairs.len().is_multiple_of(2) {
        return None;
    }
    pairs
        .chunks_exact(2)
        .map(|pair| {
            let (last, since) = pair[1].split_once(',')?;
            Some((
                pair[0].as_str().into(),
                Contact {
                    last: last.parse().ok()?,
                    since: since.parse().ok()?,
                },
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| (*v).to_owned()).collect()
    }

    #[test]
    fn records_are_read_by_name_and_garbage_is_refused() {
        let reply = text(&["2", "south", "900,0", "south", "950"]);
        let (contacts, heard) = split_records(&reply).unwrap();
        assert_eq!(
            contacts,
            [(
                "south".into(),
                Contact {
                    last: 900,
                    since: 0
                }
            )]
        );
        assert_eq!(heard, [("south".into(), 950)]);
        assert!(split_records(&text(&["4", "south", "900,0"])).is_none());
        assert!(split_records(&text(&["2", "south", "900"])).is_none());
        assert!(split_records(&text(&["0", "south", "x"])).is_none());
    }
}
