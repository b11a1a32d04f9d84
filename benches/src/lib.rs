//! Shared pieces of the benchmarks.

use axum::Router;
use axum::routing::MethodRouter;
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;

/// `route` at `/` behind tower_governor with room for everything (one
/// request a nanosecond, a burst of `u32::MAX`): first with its default of
/// no headers on allowed responses, then with its `x-ratelimit-*` headers
/// (`use_headers`).
pub fn governed(route: MethodRouter) -> [Router; 2] {
    let mut config = GovernorConfigBuilder::default();
    config.per_nanosecond(1).burst_size(u32::MAX);
    let plain = config.finish().expect("a governor config");
    let with_headers = config.use_headers().finish().expect("a governor config");
    [
        Router::new()
            .route("/", route.clone())
            .layer(GovernorLayer::new(plain)),
        Router::new()
            .route("/", route)
            .layer(GovernorLayer::new(with_headers)),
    ]
}
