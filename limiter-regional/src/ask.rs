//! An ask: what a key short of its demand sets off, in the background.
//!
//! It asks every other region for its spare share of the window (one call
//! each, at once, each with a deadline and behind that region's breaker);
//! each gives what it will not need, taking it off its own lease in the
//! same step (`give.lua`). Then it adds what was given to this region's
//! lease (`credit.lua`). What a lost answer gave is lost, never counted
//! twice: the leases never add up to more than the quota.

use futures_util::future::join_all;

use std::sync::Arc;

use super::heartbeat;
use super::inner::{Inner, Peer};
use super::link::{CREDIT, GIVE};
use super::liveness::Records;
use super::registry::AskRequest;
use super::stats::{add, bump};
use limiter_core::Error;

/// What another region answered: what it gave, and its count in the window.
#[derive(Debug, Clone, Copy)]
struct Given {
    given: u64,
    count: u64,
}

pub(crate) async fn ask(inner: &Inner, request: &AskRequest) {
    bump(&inner.stats.asks);
    metrics::counter!("limiter_region_asks_total").increment(1);
    let started = std::time::Instant::now();
    let answers = join_all(
        inner
            .peers
            .iter()
            .enumerate()
            .map(|(i, peer)| give(inner, i, peer, request)),
    )
    .await;
    let received: u64 = answers.iter().flatten().map(|a| a.given).sum();

    let mut credit = CREDIT.call(&request.key);
    script_time(&mut credit, request);
    credit
        .arg(request.rule.window_us())
        .arg(request.start)
        .arg(u8::from(request.sliding))
        .arg(received);
    for (peer, answer) in inner.peers.iter().zip(&answers) {
        if let Some(answer) = answer {
            credit.arg(&*peer.name).arg(answer.count);
        }
    }
    let credited = inner.local.link.eval(&CREDIT, &credit).await;
    if answers.iter().any(Option::is_some) {
        let took = started.elapsed().as_micros() as u64;
        inner
            .ask_took_us
            .store(took, std::sync::atomic::Ordering::Relaxed);
    }
    match credited {
        Ok(reply) if reply.first() == Some(&1) => {
            add(&inner.stats.received, received);
            metrics::counter!("limiter_region_received_total").increment(received);
        }
        // The window ended here first: what was given is dropped.
        Ok(_) => {}
        Err(error) => {
            tracing::debug!(%error, key = &*request.key, "a regional ask could not credit this region's Redis; what was given is lost");
        }
    }
}

/// Asks `peer` (index `i`) for its spare share of the window.
async fn give(inner: &Inner, i: usize, peer: &Peer, request: &AskRequest) -> Option<Given> {
    if !request.injected_time && liveness_table(inner, i).is_none() {
        // Its contacts never read: a heartbeat first, which reads them.
        heartbeat::beat(inner, i, peer).await;
    }
    let mut call = GIVE.call(&request.key);
    script_time(&mut call, request);
    call.arg(request.rule.window_us())
        .arg(request.start)
        .arg(u8::from(request.sliding))
        .arg(peer.share(request.rule.limit(), inner.regions()))
        .arg(request.want)
        .arg(&*inner.local.name)
        .arg(request.count);
    if request.injected_time {
        // A test's time: the heartbeats' records (real time) do not apply.
        call.arg("").arg("").arg("");
    } else {
        giver_contacts(inner, i, peer, &mut call);
    }
    let reply = call_peer_or_skip(inner, peer, peer.link.eval(&GIVE, &call)).await?;
    match reply[..] {
        [given, count] if given >= 0 && count >= 0 => Some(Given {
            given: given as u64,
            count: count as u64,
        }),
        _ => {
            remote_error(inner, peer, "protocol");
            None
        }
    }
}

fn liveness_table(inner: &Inner, i: usize) -> Option<Records> {
    inner.liveness.view().tables.get(i).cloned().flatten()
}

/// The giver's contacts, as this instance last read them (see `give.lua`):
/// with every region but itself.
fn giver_contacts(inner: &Inner, i: usize, giver: &Peer, call: &mut redis::Cmd) {
    let micros = |d: std::time::Duration| d.as_micros() as u64;
    call.arg(micros(heartbeat::lapse(inner)))
        .arg(micros(heartbeat::margin(inner)));
    let table = liveness_table(inner, i);
    call.arg(if table.is_some() { "known" } else { "unknown" })
        .arg(inner.regions());
    let others = std::iter::once(&*inner.local.name).chain(
        inner
            .peers
            .iter()
            .filter(|p| p.name != giver.name)
            .map(|p| &*p.name),
    );
    for name in others {
        match table.as_ref().and_then(|t| t.contacts.get(name)) {
            Some(contact) => call.arg(contact.last).arg(contact.since),
            None => call.arg("").arg(""),
        };
    }
}

/// The time argument: empty (the server's clock) unless a test gave one.
fn script_time(call: &mut redis::Cmd, request: &AskRequest) {
    if request.injected_time {
        call.arg(request.now);
    } else {
        call.arg("");
    }
    // The prelude's cost, which these scripts do not use.
    call.arg("");
}

/// One call to another region (bounded by its link's deadline): skipped
/// while its breaker is open, counted; `None` when it failed.
async fn call_peer_or_skip<T>(
    inner: &Inner,
    peer: &Peer,
    call: impl Future<Output = Result<T, Error>>,
) -> Option<T> {
    call_peer(inner, peer, call).await.ok()
}

/// One call to another region (bounded by its link's deadline): skipped
/// while its breaker is open (answered [`Error::Unavailable`]), counted.
pub(crate) async fn call_peer<T>(
    inner: &Inner,
    peer: &Peer,
    call: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    if !peer.breaker.allow() {
        remote_error(inner, peer, "breaker_open");
        return Err(Error::Unavailable(inner.config.peer_breaker.probe_interval));
    }
    bump(&inner.stats.cross_region_calls);
    metrics::counter!("limiter_region_calls_total", "region" => peer.name.to_string()).increment(1);
    match call.await {
        Ok(value) => {
            peer.breaker.succeeded();
            Ok(value)
        }
        Err(error) => {
            peer.breaker.failed();
            tracing::debug!(region = &*peer.name, %error, "call to another region failed");
            remote_error(inner, peer, error.kind());
            Err(error)
        }
    }
}

fn remote_error(inner: &Inner, peer: &Peer, kind: &'static str) {
    bump(&inner.stats.remote_errors);
    metrics::counter!("limiter_region_errors_total", "region" => peer.name.to_string(), "kind" => kind)
        .increment(1);
}

/// Starts an ask for `request`'s key and window, or has the running one
/// run once more.
pub(crate) fn request(inner: &Arc<Inner>, request: AskRequest) {
    let registry = &inner.registry;
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        dropped(inner, "no Tokio runtime to ask on");
        return;
    };
    let id = (request.key.clone(), request.start);
    let mut pending = registry.lock();
    if let Some(again) = pending.get_mut(&id) {
        *again = Some(request);
        return;
    }
    if pending.len() >= registry.max_pending {
        drop(pending);
        dropped(inner, "too many keys wait to ask");
        return;
    }
    pending.insert(id.clone(), None);
    registry.waiting.send_replace(pending.len());
    drop(pending);
    let entry = Entry {
        inner: Arc::clone(inner),
        id,
        armed: true,
    };
    runtime.spawn(entry.run(request));
}

fn dropped(inner: &Inner, why: &str) {
    bump(&inner.stats.asks_dropped);
    metrics::counter!("limiter_region_asks_dropped_total").increment(1);
    tracing::warn!(
        why,
        "regional ask dropped; the key asks again at a later check"
    );
}

/// One key and window's place in the registry, given back when its task
/// ends or is dropped.
struct Entry {
    inner: Arc<Inner>,
    id: (Box<str>, u64),
    armed: bool,
}

impl Entry {
    async fn run(mut self, mut request: AskRequest) {
        loop {
            {
                // The semaphore is never closed.
                let _permit = self.inner.registry.permits.acquire().await;
                if request.is_over() {
                    // Behind a backlog: running it would only delay the
                    // asks of windows that still count.
                    bump(&self.inner.stats.asks_expired);
                    metrics::counter!("limiter_region_asks_expired_total").increment(1);
                } else {
                    ask(&self.inner, &request).await;
                }
            }
            // Whether to run again and leaving the registry are one step,
            // so a crossing in between is never lost.
            let mut pending = self.inner.registry.lock();
            match pending.get_mut(&self.id).and_then(Option::take) {
                Some(next) => request = next,
                None => {
                    pending.remove(&self.id);
                    self.inner.registry.waiting.send_replace(pending.len());
                    self.armed = false;
                    return;
                }
            }
        }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        if self.armed {
            self.inner.registry.remove(&self.id);
        }
    }
}
