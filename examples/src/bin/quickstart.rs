//! Hello, world, three times a minute per client IP.

use std::net::SocketAddr;

use axum::{Router, routing::get};
use limiter_tower::{Limiter, LimiterLayer, MemoryStore, rate_limit};

// At most 3 requests in any 60 s per client IP; the 4th gets 429.
#[rate_limit(rules = [(3, 60s)], by = ip)]
async fn hello() -> &'static str {
    "Hello, world!\n"
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let app = Router::new()
        .route("/", get(hello))
        .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())));

    let addr = std::env::var("LIMITER_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    // by = ip needs the peer address: serve with ConnectInfo.
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await
}
