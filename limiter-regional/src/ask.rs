//! An ask: what a key short of its demand sets off, in the background.
//!
//! It asks every other region for its spare share of the window (one call
//! each, at once, each with a deadline and behind that region's breaker);
//! each gives what it will not need, taking it off its own lease in the
//! same step (`give.lua`). Then it adds what was given to this region's
//! lease (`credit.lua`). What a lost answer gave is lost, never counted
//! twice: the leases never add up to more than the quota.

use futures_util::future::join_all;

use super::link::{CREDIT, GIVE};
use super::registry::AskRequest;
use super::stats::{add, bump};
use super::store::{Inner, Peer};
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
    let answers = join_all(inner.peers.iter().map(|peer| give(inner, peer, request))).await;
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

/// Asks `peer` for its spare share of the window.
async fn give(inner: &Inner, peer: &Peer, request: &AskRequest) -> Option<Given> {
    let mut call = GIVE.call(&request.key);
    script_time(&mut call, request);
    call.arg(request.rule.window_us())
        .arg(request.start)
        .arg(u8::from(request.sliding))
        .arg(peer.share(request.rule.limit(), inner.regions()))
        .arg(request.want)
        .arg(&*inner.local.name)
        .arg(request.count);
    let reply = call_peer(inner, peer, peer.link.eval(&GIVE, &call)).await?;
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
/// while its breaker is open, counted.
pub(crate) async fn call_peer<T>(
    inner: &Inner,
    peer: &Peer,
    call: impl Future<Output = Result<T, Error>>,
) -> Option<T> {
    if !peer.breaker.allow() {
        remote_error(inner, peer, "breaker_open");
        return None;
    }
    bump(&inner.stats.cross_region_calls);
    metrics::counter!("limiter_region_calls_total", "region" => peer.name.to_string()).increment(1);
    match call.await {
        Ok(value) => {
            peer.breaker.succeeded();
            Some(value)
        }
        Err(error) => {
            peer.breaker.failed();
            tracing::debug!(region = &*peer.name, %error, "call to another region failed");
            remote_error(inner, peer, error.kind());
            None
        }
    }
}

fn remote_error(inner: &Inner, peer: &Peer, kind: &'static str) {
    bump(&inner.stats.remote_errors);
    metrics::counter!("limiter_region_errors_total", "region" => peer.name.to_string(), "kind" => kind)
        .increment(1);
}
