//! The hot-key arguments of `#[rate_limit]`: a lease, shards, sampling.
#![deny(warnings, missing_docs, unreachable_pub, missing_debug_implementations)]

use axum::Router;
use axum::routing::get;

/// The handlers, one per hot-key form.
pub mod handlers {
    use limiter_tower::rate_limit;

    /// A global cap, leased: up to 50 permits per instance for 100 ms.
    #[rate_limit(rules = [(1000, 1s)], by = global, lease = 50)]
    pub async fn trending() -> &'static str {
        "trending"
    }

    /// A lease of 20 permits for 250 ms on a fixed window.
    #[rate_limit(algorithm = fixed_window, rules = [(500, 1s)], by = global, lease(max = 20, ttl = 250ms))]
    pub async fn search() -> &'static str {
        "search"
    }

    /// Three shards of a token bucket.
    #[rate_limit(algorithm = token_bucket(rate = 300/s, burst = 300), by = global, shards = 3)]
    pub async fn feed() -> &'static str {
        "feed"
    }

    /// One request in ten checked, weighing ten.
    #[rate_limit(algorithm = sliding_window, rules = [(10000, 1s)], by = ip, sample = 10)]
    pub async fn views() -> &'static str {
        "views"
    }
}

fn main() {
    let _app: Router = Router::new()
        .route("/trending", get(handlers::trending))
        .route("/search", get(handlers::search))
        .route("/feed", get(handlers::feed))
        .route("/views", get(handlers::views));
}
