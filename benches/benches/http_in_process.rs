//! Nanoseconds of server work per request, in process: a request goes
//! through the router's `Service::call` and its response future is polled to
//! completion, without sockets or HTTP parsing. The same handler and client
//! address as `http_load`; every request is allowed. The difference to the
//! bare router is what the limiter costs each request on one core.
//!
//! `cargo bench -p limiter-benches --bench http_in_process`
//!
//! Timings on a shared VM move by ±20% from run to run; instruction counts
//! do not. `-- --requests N VARIANT` serves N requests of one variant
//! (`bare_axum`, `bare_axum_identity_layer`, `limiter_memory`,
//! `limiter_memory_no_fields`, `limiter_memory_no_fields_global`,
//! `tower_governor`, `tower_governor_headers`, `limiter_layer_on_route`,
//! `tower_governor_on_route`)
//! without criterion, to run under `valgrind --tool=callgrind` (see
//! BENCHMARKS.md). The variants with and without headers on allowed
//! responses compare like with like:
//! limiter sends its RateLimit fields by default, tower_governor sends none
//! unless `use_headers` is set. `bare_axum_identity_layer` is bare axum
//! with a router layer that does nothing (`tower::layer::util::Identity`):
//! what axum's wrapping of each route costs any router-level layer.
//! `limiter_memory_no_fields_global` counts everyone in one quota (`by =
//! global`): beside `limiter_memory_no_fields`, what counting by client IP
//! costs (the address, its text in the key). `limiter_layer_on_route` and
//! `tower_governor_on_route` put one layer on the route itself, without
//! the macro and without a router layer: a `LimitLayer` carrying its router
//! layer's settings, with the same policy as `limited` and the fields off,
//! beside a `GovernorLayer`.

use std::future::Future;
use std::hint::black_box;
use std::net::SocketAddr;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::routing::{MethodRouter, get};
use criterion::{Criterion, criterion_group};
use limiter_tower::{
    KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Policy, Rate, rate_limit,
};
use tower::Service;

/// The same limit as `http_load`'s: GCRA with room for everything.
#[rate_limit(algorithm = gcra(rate = 1000000000/s, burst = 1000000000), by = ip)]
async fn limited() -> &'static str {
    "ok"
}

/// The same limit for everyone (`by = global`): no client address, no
/// identity in the key. Beside `limited`, what counting by IP costs.
#[rate_limit(algorithm = gcra(rate = 1000000000/s, burst = 1000000000), by = global)]
async fn limited_globally() -> &'static str {
    "ok"
}

async fn bare() -> &'static str {
    "ok"
}

fn request() -> Request {
    let mut request = Request::get("/").body(Body::empty()).expect("a request");
    let peer = SocketAddr::from(([203, 0, 113, 7], 50_000));
    request.extensions_mut().insert(ConnectInfo(peer));
    request
}

/// Calls the router and polls the response to completion: every variant
/// answers without waiting.
fn serve(router: &mut Router) {
    let mut waker = Context::from_waker(Waker::noop());
    let mut response = pin!(router.call(request()));
    match response.as_mut().poll(&mut waker) {
        Poll::Ready(Ok(response)) => {
            assert!(response.status().is_success(), "{}", response.status());
            black_box(response);
        }
        Poll::Ready(Err(e)) => match e {},
        Poll::Pending => panic!("a response that waits"),
    }
}

/// `limited`'s limit as a `LimitLayer` of its own on `bare`'s route: the
/// same policy, key and store, the fields off, no `Decision` in the request
/// (`limited` does not take it).
fn limited_route() -> MethodRouter {
    let settings = LimiterLayer::new(Limiter::new(MemoryStore::new())).rate_limit_headers(false);
    let rate = Rate::per_second(1_000_000_000).expect("a rate");
    let policy = Policy::gcra(rate, 1_000_000_000).expect("a policy");
    let limit = LimitLayer::new("http_in_process-limited", policy, KeySource::ip())
        .decision_extension(false)
        .router_layer(&settings);
    get(bare).layer(limit)
}

/// The variants, each a router ready to serve.
fn variants() -> [(&'static str, Router); 9] {
    let [governor, governor_with_headers] = limiter_benches::governed(get(bare));
    let variants: [(&str, Router); 9] = [
        ("bare_axum", Router::new().route("/", get(bare))),
        (
            "bare_axum_identity_layer",
            Router::new()
                .route("/", get(bare))
                .layer(tower::layer::util::Identity::new()),
        ),
        (
            "limiter_memory",
            Router::new()
                .route("/", get(limited))
                .layer(LimiterLayer::new(Limiter::new(MemoryStore::new()))),
        ),
        (
            "limiter_memory_no_fields",
            Router::new().route("/", get(limited)).layer(
                LimiterLayer::new(Limiter::new(MemoryStore::new())).rate_limit_headers(false),
            ),
        ),
        (
            "limiter_memory_no_fields_global",
            Router::new().route("/", get(limited_globally)).layer(
                LimiterLayer::new(Limiter::new(MemoryStore::new())).rate_limit_headers(false),
            ),
        ),
        ("tower_governor", governor),
        ("tower_governor_headers", governor_with_headers),
        (
            "limiter_layer_on_route",
            Router::new().route("/", limited_route()),
        ),
        (
            "tower_governor_on_route",
            Router::new().route("/", limiter_benches::governed_route(get(bare))),
        ),
    ];
    // What `into_make_service` serves: handlers turned into routes once.
    variants.map(|(name, router)| (name, router.with_state(())))
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("http_in_process");
    for (name, mut router) in variants() {
        group.bench_function(name, |b| b.iter(|| serve(&mut router)));
    }
    group.finish();
}

criterion_group!(benches, bench);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--requests") {
        let count: u64 = args[at + 1].parse().expect("--requests N VARIANT");
        let variant = &args[at + 2];
        let (_, mut router) = variants()
            .into_iter()
            .find(|(name, _)| name == variant)
            .unwrap_or_else(|| panic!("no variant {variant}"));
        for _ in 0..count {
            serve(&mut router);
        }
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
