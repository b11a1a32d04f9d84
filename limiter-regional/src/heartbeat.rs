//! The heartbeats behind the liveness view ([`liveness`](super::liveness)):
//! every instance beats each other region, records in its own region's
//! Redis which beats came back, and reads its records back; a check passes
//! what the view says to the script.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use super::inner::{Inner, Peer};
use super::link::{BEAT, CONTACTS};
use super::liveness::{Records, split_records};
use super::shares::portion;
use limiter_core::Error;

/// The heartbeats' hashes, in one slot.
const HEARD: &str = "{limiter:regions}:heard";
const CONTACTS_KEY: &str = "{limiter:regions}:contacts";

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
