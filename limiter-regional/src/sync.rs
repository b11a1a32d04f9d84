//! A sync: what a crossed tier sets off, in the background.
//!
//! It reads every other region's counts (one call each, at once, each
//! with a deadline and behind that region's breaker), writes what it learned
//! into this region's Redis (where every instance of this region reads it),
//! and, when the [`Plan`] says so, writes the tightened tiers or the
//! exhausted quota into the regions that do not know yet.

use futures_util::future::join_all;

use super::link::MERGE;
use super::registry::SyncRequest;
use super::stats::bump;
use super::store::{Inner, Peer};
use super::tiers::{Counts, Plan, Quota, Stored, View};
use limiter_core::Error;

/// The tags of the regional hashes (see `scripts/shared.lua`).
fn tag(sliding: bool) -> &'static str {
    if sliding {
        "regional_sliding_window"
    } else {
        "regional_fixed_window"
    }
}

/// Another region as read: its stored counts and verdicts.
#[derive(Debug, Clone, Copy, Default)]
struct Read {
    stored: Stored,
    tightened: bool,
    exhausted: bool,
}

pub(crate) async fn sync(inner: &Inner, request: &SyncRequest) {
    bump(&inner.stats.syncs);
    let window = request.rule.window_us();
    let reads = join_all(inner.peers.iter().map(|peer| read(inner, peer, request))).await;

    // What this region learns, merged with what it knew.
    let mut learn = MERGE.call(&request.key);
    script_time(&mut learn, request);
    learn
        .arg(window)
        .arg(request.start)
        .arg(tag(request.sliding))
        // Learned: this region's hold for the window ends.
        .arg("l");
    for (peer, read) in inner.peers.iter().zip(&reads) {
        learn.arg(&*peer.name);
        match read {
            Some(read) => {
                let counts = read.stored.counts_at(request.start, window);
                learn.arg(counts.current).arg(counts.previous)
            }
            None => learn.arg("").arg(""),
        };
    }
    let known = match inner
        .local
        .link
        .eval(&MERGE, &learn)
        .await
        .and_then(|reply| MergeReply::parse(&reply, inner.peers.len()))
    {
        Ok(known) => known,
        Err(error) => {
            tracing::debug!(%error, key = &*request.key, "regional sync could not reach this region's Redis");
            return;
        }
    };

    let mut views = Vec::with_capacity(inner.peers.len() + 1);
    views.push(View {
        counts: known.own,
        tightened: known.tightened,
        exhausted: known.exhausted,
    });
    for (counts, read) in known.peers.iter().zip(&reads) {
        let read = read.unwrap_or_default();
        views.push(View {
            counts: *counts,
            tightened: read.tightened,
            exhausted: read.exhausted,
        });
    }
    let quota = Quota {
        limit: request.rule.limit(),
        window,
        sliding: request.sliding,
    };
    let elapsed = request.now.saturating_sub(request.start);
    let plan = Plan::new(&views, quota, inner.tiers(quota.limit), elapsed.min(window));
    if !plan.targets.contains(&true) {
        return;
    }
    if plan.exhausted {
        bump(&inner.stats.exhausted_announced);
        metrics::counter!("limiter_region_exhausted_total", "direction" => "announced")
            .increment(1);
        tracing::debug!(key = &*request.key, "regional quota exhausted: announced");
    }
    let mut flags = String::new();
    if plan.tighten {
        flags.push('t');
    }
    if plan.exhausted {
        flags.push('x');
    }
    let writes = (0..views.len())
        .filter(|&i| plan.targets[i])
        .map(|i| tell(inner, request, &views, &flags, i));
    join_all(writes).await;
}

/// Writes the plan into region `index` of `views` (0: this region): the
/// flags, and every other region's counts.
async fn tell(inner: &Inner, request: &SyncRequest, views: &[View], flags: &str, index: usize) {
    let window = request.rule.window_us();
    let mut write = MERGE.call(&request.key);
    script_time(&mut write, request);
    write
        .arg(window)
        .arg(request.start)
        .arg(tag(request.sliding));
    if index == 0 {
        write.arg(format!("{flags}o"));
        if let Err(error) = inner.local.link.eval(&MERGE, &write).await {
            tracing::debug!(%error, "regional sync could not write into this region's Redis");
        }
        return;
    }
    write.arg(flags);
    let names = std::iter::once(&*inner.local.name).chain(inner.peers.iter().map(|p| &*p.name));
    for (i, (name, view)) in names.zip(views).enumerate() {
        if i != index {
            write
                .arg(name)
                .arg(view.counts.current)
                .arg(view.counts.previous);
        }
    }
    let peer = &inner.peers[index - 1];
    call_peer(inner, peer, Call::Write, peer.link.eval(&MERGE, &write)).await;
}

/// The time argument: empty (the server's clock) unless a test gave one.
fn script_time(call: &mut redis::Cmd, request: &SyncRequest) {
    if request.injected_time {
        call.arg(request.now);
    } else {
        call.arg("");
    }
    // The prelude's cost, which these scripts do not use.
    call.arg("");
}

async fn read(inner: &Inner, peer: &Peer, request: &SyncRequest) -> Option<Read> {
    const FIELDS: [&str; 6] = ["a", "s", "c", "p", "t", "x"];
    let values = call_peer(
        inner,
        peer,
        Call::Read,
        peer.link.hmget(&request.key, &FIELDS),
    )
    .await?;
    let parsed = parse_read(&values, tag(request.sliding), request.start);
    if parsed.is_none() {
        remote_error(inner, peer, "protocol");
    }
    parsed
}

/// An `HMGET a s c p t x` reply; a hash of another tag (or none) counts nothing.
fn parse_read(values: &[Option<String>], tag: &str, start: u64) -> Option<Read> {
    let [a, s, c, p, t, x] = values else {
        return None;
    };
    if a.as_deref() != Some(tag) {
        return Some(Read::default());
    }
    let number = |v: &Option<String>| -> Option<Option<u64>> {
        v.as_deref().map(str::parse).transpose().ok()
    };
    let is_start = |v| Some(number(v)?.is_some_and(|w| w == start));
    Some(Read {
        stored: Stored {
            start: number(s)?,
            current: number(c)?.unwrap_or(0),
            previous: number(p)?.unwrap_or(0),
        },
        tightened: is_start(t)?,
        exhausted: is_start(x)?,
    })
}

#[derive(Debug, Clone, Copy)]
enum Call {
    Read,
    Write,
}

/// One call to another region (bounded by its link's deadline): skipped
/// while its breaker is open, counted.
async fn call_peer<T>(
    inner: &Inner,
    peer: &Peer,
    kind: Call,
    call: impl Future<Output = Result<T, Error>>,
) -> Option<T> {
    if !peer.breaker.allow() {
        remote_error(inner, peer, "breaker_open");
        return None;
    }
    let name = match kind {
        Call::Read => {
            bump(&inner.stats.cross_region_reads);
            "read"
        }
        Call::Write => {
            bump(&inner.stats.cross_region_writes);
            "write"
        }
    };
    metrics::counter!("limiter_region_calls_total", "region" => peer.name.to_string(), "call" => name)
        .increment(1);
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

/// The merge script's reply (see `merge.lua`).
struct MergeReply {
    own: Counts,
    tightened: bool,
    exhausted: bool,
    peers: Vec<Counts>,
}

impl MergeReply {
    fn parse(reply: &[i64], peers: usize) -> Result<Self, Error> {
        let malformed = || Error::Protocol(format!("regional merge reply {reply:?}"));
        let count = |n: &i64| u64::try_from(*n).map_err(|_| malformed());
        let counts = |pair: &[i64]| -> Result<Counts, Error> {
            Ok(Counts {
                current: count(&pair[0])?,
                previous: count(&pair[1])?,
            })
        };
        let [own_current, own_previous, tightened, exhausted, rest @ ..] = reply else {
            return Err(malformed());
        };
        if rest.len() != 2 * peers {
            return Err(malformed());
        }
        Ok(Self {
            own: counts(&[*own_current, *own_previous])?,
            tightened: *tightened == 1,
            exhausted: *exhausted == 1,
            peers: rest.chunks_exact(2).map(counts).collect::<Result<_, _>>()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(values: &[Option<&str>]) -> Vec<Option<String>> {
        values.iter().map(|v| v.map(str::to_owned)).collect()
    }

    #[test]
    fn a_read_counts_only_its_own_algorithm_and_refuses_garbage() {
        let tag = "regional_fixed_window";
        let read = parse_read(
            &text(&[
                Some(tag),
                Some("5000"),
                Some("7"),
                Some("3"),
                Some("5000"),
                None,
            ]),
            tag,
            5_000,
        )
        .unwrap();
        assert_eq!(
            read.stored,
            Stored {
                start: Some(5_000),
                current: 7,
                previous: 3
            }
        );
        assert!(read.tightened && !read.exhausted);
        let other = parse_read(
            &text(&[Some("gcra"), Some("1"), None, None, None, None]),
            tag,
            5_000,
        );
        assert_eq!(other.unwrap().stored, Stored::default());
        let absent = parse_read(&text(&[None; 6]), tag, 5_000).unwrap();
        assert_eq!(absent.stored, Stored::default());
        let garbage = text(&[Some(tag), Some("5000"), Some("-1"), None, None, None]);
        assert!(parse_read(&garbage, tag, 5_000).is_none());
        assert!(parse_read(&text(&[Some(tag)]), tag, 5_000).is_none());
    }
}
