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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use super::link::{BEAT, CONTACTS};
use super::shares::portion;
use super::store::{Inner, Peer};
use limiter_core::Error;

/// The heartbeats' hashes, in one slot.
const HEARD: &str = "{limiter:regions}:heard";
const CONTACTS_KEY: &str = "{limiter:regions}:contacts";

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
    started: AtomicBool,
}

impl Liveness {
    /// The view, read in place: a check reads it on every request, so it
    /// is borrowed, not cloned (its tables hold maps).
    pub(crate) fn view(&self) -> std::sync::RwLockReadGuard<'_, View> {
        self.view
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn update(&self, change: impl FnOnce(&mut View)) {
        change(
            &mut self
                .view
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
    }
}

/// The lapse: a run of heartbeats with a gap longer than this is broken,
/// and a region whose last heartbeat to another is older is out of touch
/// with it. A quarter of `reclaim_after`: the proof needs `reclaim_after`
/// above twice the lapse plus the clocks' disagreement.
pub(crate) fn lapse(inner: &Inner) -> Duration {
    inner.config.reclaim_after / 4
}

/// How often each instance beats: five times a lapse.
pub(crate) fn interval(inner: &Inner) -> Duration {
    lapse(inner) / 5
}

/// How long what this instance read of `heard` may be used: past it, the
/// instance takes nothing from anyone until it reads again.
pub(crate) fn freshness(inner: &Inner) -> Duration {
    interval(inner) * 2
}

/// The margin after contact comes back before a region counts the other
/// as in touch: longer than the lapse, the oldest records of another
/// region a quorum may be counted on.
pub(crate) fn margin(inner: &Inner) -> Duration {
    lapse(inner) + Duration::from_millis(100)
}

/// Starts the heartbeats (once per store), and reads this region's records
/// the first time (a check waits for that once, so that it never decides
/// on records it has not read).
pub(crate) async fn ensure_started(inner: &Arc<Inner>) {
    let started = &inner.liveness.started;
    if inner.peers.is_empty()
        || started.load(Ordering::Acquire)
        || started.swap(true, Ordering::AcqRel)
    {
        return;
    }
    record(inner, &[]).await;
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(beat_forever(Arc::downgrade(inner)));
    }
}

async fn beat_forever(inner: Weak<Inner>) {
    loop {
        let Some(strong) = inner.upgrade() else {
            return;
        };
        let pause = interval(&strong);
        beat_all(&strong).await;
        drop(strong);
        tokio::time::sleep(pause).await;
    }
}

/// One heartbeat to every other region at once, then this region's records.
pub(crate) async fn beat_all(inner: &Inner) {
    let beats = join_all(
        inner
            .peers
            .iter()
            .enumerate()
            .map(|(i, peer)| beat(inner, i, peer)),
    )
    .await;
    let came_back: Vec<(usize, Duration)> = beats.into_iter().flatten().collect();
    record(inner, &came_back).await;
}

/// A heartbeat to `peer` (index `i`): when it came back, how long ago it
/// was sent; the peer's table is kept.
pub(crate) async fn beat(inner: &Inner, i: usize, peer: &Peer) -> Option<(usize, Duration)> {
    let sent = Instant::now();
    let mut call = BEAT.call_keys(&[HEARD, CONTACTS_KEY]);
    call.arg("").arg("").arg(&*inner.local.name);
    let reply: Result<Vec<String>, Error> = peer.link.eval_as(&BEAT, &call).await;
    match reply.map(|reply| split_records(&reply)) {
        Ok(Some((contacts, heard))) => {
            let table = Records {
                contacts: contacts.into_iter().collect(),
                heard: heard.into_iter().collect(),
            };
            inner.liveness.update(|view| {
                view.tables.resize(inner.peers.len(), None);
                view.tables[i] = Some(table);
            });
            Some((i, sent.elapsed()))
        }
        Ok(None) => None,
        Err(error) => {
            tracing::debug!(region = &*peer.name, %error, "regional heartbeat failed");
            None
        }
    }
}

/// Records the heartbeats that came back in this region's Redis and reads
/// its records back into the view.
async fn record(inner: &Inner, came_back: &[(usize, Duration)]) {
    let mut call = CONTACTS.call_keys(&[CONTACTS_KEY, HEARD]);
    call.arg("").arg("").arg(lapse(inner).as_micros() as u64);
    for &(i, ago) in came_back {
        call.arg(&*inner.peers[i].name).arg(ago.as_micros() as u64);
    }
    let read_at = Instant::now();
    let reply: Vec<String> = match inner.local.link.eval_as(&CONTACTS, &call).await {
        Ok(reply) => reply,
        Err(error) => {
            tracing::debug!(%error, "regional contacts could not be recorded");
            return;
        }
    };
    let Some((contacts, heard)) = split_records(&reply) else {
        return;
    };
    let by_peer = |name: &str| inner.peers.iter().position(|p| &*p.name == name);
    let mut view_contacts = vec![None; inner.peers.len()];
    for (name, contact) in contacts {
        if let Some(i) = by_peer(&name) {
            view_contacts[i] = Some(contact);
        }
    }
    let mut view_heard = vec![None; inner.peers.len()];
    for (name, at) in heard {
        if let Some(i) = by_peer(&name) {
            view_heard[i] = Some(at);
        }
    }
    inner.liveness.update(|view| {
        view.contacts = view_contacts;
        view.heard = view_heard;
        view.read_at = Some(read_at);
    });
}

/// `contacts.lua`'s reply: the contacts and the heard times, by name.
#[allow(clippy::type_complexity)]
fn split_records(reply: &[String]) -> Option<(Vec<(Box<str>, Contact)>, Vec<(Box<str>, u64)>)> {
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

/// The check's contacts arguments (see `check.lua`), from this instance's
/// view: nothing taken from anyone once the view is stale.
pub(crate) fn check_args(inner: &Inner, call: &mut redis::Cmd, quota: u64) {
    let view = inner.liveness.view();
    let micros = |d: Duration| d.as_micros() as u64;
    call.arg(micros(inner.config.reclaim_after))
        .arg(micros(lapse(inner)))
        .arg(micros(margin(inner)))
        .arg(inner.peers.len());
    let fresh = view
        .read_at
        .is_some_and(|at| at.elapsed() < freshness(inner));
    let regions = inner.regions();
    for (i, peer) in inner.peers.iter().enumerate() {
        call.arg(portion(quota, regions, peer.rank, inner.local.rank));
        match view.heard.get(i).copied().flatten().filter(|_| fresh) {
            Some(heard) => call.arg(heard),
            None => call.arg(""),
        };
        match view.contacts.get(i).copied().flatten() {
            Some(contact) => call.arg(contact.last).arg(contact.since),
            None => call.arg("").arg(""),
        };
        // When each other region last heard from this one.
        for (k, _) in inner.peers.iter().enumerate().filter(|&(k, _)| k != i) {
            let report = view.tables.get(k).and_then(Option::as_ref);
            match report.and_then(|records| records.heard.get(&peer.name)) {
                Some(&heard) => call.arg(heard),
                None => call.arg(""),
            };
        }
    }
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
