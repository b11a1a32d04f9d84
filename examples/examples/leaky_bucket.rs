//! The leaky bucket paces instead of failing: behind `#[rate_limit]` each
//! allowed request waits its turn before the handler runs, so requests leave
//! at the leak rate, and only what overflows the bucket is refused; through
//! the programmatic API an allowed request says how long to wait
//! (`Decision::delay`).
//!
//! Run with `cargo run -p limiter-examples --example leaky_bucket`.
//!
//! The router runs in process (no socket) on the in-memory store, leaking 20
//! requests a second so the example ends in under a second. Every outcome is
//! asserted: the example panics if the behaviour changes.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{Method, StatusCode};
use axum::routing::post;
use limiter_examples::demo::{from_peer, send};
use limiter_tower::{Limiter, LimiterLayer, MemoryStore, Policy, Rate, rate_limit};
use tokio::task::JoinSet;

/// The leak rate of both examples: one request every 50 ms.
const INTERVAL: Duration = Duration::from_millis(50);

/// Uploads: a bucket of 5 per client IP, leaking 20 a second.
#[rate_limit(algorithm = leaky_bucket(rate = 20/s, capacity = 5), by = ip)]
async fn upload() -> &'static str {
    "stored"
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let limiter = Limiter::new(MemoryStore::new());
    let app = Router::new()
        .route("/uploads", post(upload))
        .layer(LimiterLayer::new(limiter.clone()));
    let client: SocketAddr = ([203, 0, 113, 7], 50_000).into();

    println!(
        "6 uploads at once over HTTP: 5 fit the bucket and leave 50 ms apart, the 6th overflows"
    );
    let start = Instant::now();
    let mut uploads = JoinSet::new();
    for _ in 0..6 {
        let app = app.clone();
        uploads.spawn(async move {
            let answer = send(&app, from_peer(Method::POST, "/uploads", client)).await;
            (answer, start.elapsed())
        });
    }
    let (mut answered, denied): (Vec<_>, Vec<_>) = uploads
        .join_all()
        .await
        .into_iter()
        .partition(|(answer, _)| answer.status == StatusCode::OK);
    // The overflow is answered at once; the others after their turn.
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0].0.retry_after.as_deref(), Some("1"));
    answered.sort_by_key(|(_, at)| *at);
    for (turn, (answer, at)) in answered.iter().enumerate() {
        assert_eq!(answer.status, StatusCode::OK);
        // Named by its rate and capacity.
        assert!(answer.rate_limit.contains("\"20-per-1s-capacity-5\""));
        let slot = INTERVAL * turn as u32;
        println!(
            "  upload {} answered at {at:.1?} (its turn: {slot:?})",
            turn + 1
        );
        assert!(*at + Duration::from_millis(1) >= slot);
    }

    println!("pacing with the programmatic API: 6 jobs arrive at once, each waits its delay()");
    let policy = Policy::leaky_bucket(Rate::per_second(20)?, 5)?;
    let start = Instant::now();
    let mut running = JoinSet::new();
    let mut refused = 0;
    for job in 1..=6u32 {
        let decision = limiter.check("outbox", &policy).await?;
        if !decision.allowed() {
            let retry_after = decision.retry_after().expect("a denied decision waits");
            println!("  job {job}: refused, the bucket is full; retry after {retry_after:?}");
            assert!(retry_after <= INTERVAL);
            refused += 1;
            continue;
        }
        let delay = decision.delay();
        println!("  job {job}: allowed, delay {delay:?}");
        // Job k waits for the k-1 ahead of it to leak out: (k-1) × 50 ms.
        let slot = INTERVAL * (job - 1);
        assert!(delay <= slot && delay + Duration::from_millis(20) > slot);
        running.spawn(async move {
            tokio::time::sleep(delay).await;
            let ran_at = start.elapsed();
            println!("  job {job}: runs at {ran_at:.1?}");
            (slot, ran_at)
        });
    }
    assert_eq!(refused, 1);
    while let Some(ran) = running.join_next().await {
        let (slot, ran_at) = ran?;
        // Never before its slot: the jobs leave 50 ms apart.
        assert!(ran_at + Duration::from_millis(1) >= slot);
    }

    println!("ok");
    Ok(())
}
