//! The in-process app of the business tests: `/r` behind a route limit,
//! under a router layer on the memory store with a manual clock, counting
//! how often the handler runs.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::response::Response;
use axum::routing::get;
use limiter_tower::{
    Control, LimitLayer, Limiter, LimiterLayer, ManualClock, MemoryStore, Waiters,
};
use tower::ServiceExt;

pub(crate) struct App {
    pub(crate) router: Router,
    pub(crate) clock: ManualClock,
    pub(crate) runs: Arc<AtomicUsize>,
    /// The router layer's handle.
    pub(crate) control: Control,
}

/// `/r` behind `limit`, under a router layer set up by `layer`.
pub(crate) fn app(limit: LimitLayer, layer: impl FnOnce(LimiterLayer) -> LimiterLayer) -> App {
    let clock = ManualClock::new(Duration::from_secs(1_750_000_000));
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&runs);
    let handler = get(move || {
        counter.fetch_add(1, Ordering::SeqCst);
        async { "ok" }
    })
    .layer(limit);
    let limiter = Limiter::new(MemoryStore::with_clock(clock.clone()));
    let layer = layer(
        LimiterLayer::new(limiter)
            .waiters(Waiters::with_clock(clock.clone()))
            .trusted_proxies(["10.0.0.0/8".parse().unwrap()]),
    );
    let control = layer.control();
    let router = Router::new().route("/r", handler).layer(layer);
    App {
        router,
        clock,
        runs,
        control,
    }
}

/// The user a request names in its `x-user-id` header: the tests' user
/// resolver.
pub(crate) fn user_of(parts: &axum::http::request::Parts) -> Option<String> {
    Some(parts.headers.get("x-user-id")?.to_str().ok()?.to_owned())
}

pub(crate) fn request(from: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut request = Request::get("/r");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut request = request.body(Body::empty()).unwrap();
    let peer: SocketAddr = format!("{from}:5000").parse().unwrap();
    request.extensions_mut().insert(ConnectInfo(peer));
    request
}

impl App {
    pub(crate) async fn send(&self, from: &str, headers: &[(&str, &str)]) -> Response {
        self.router
            .clone()
            .oneshot(request(from, headers))
            .await
            .unwrap()
    }
}
