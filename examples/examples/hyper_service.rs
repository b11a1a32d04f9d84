//! The layers around a plain hyper service, no axum router: any request
//! body, any response body (here `Full<Bytes>`). hyper does not put the peer
//! address into requests, so the server adds it (`ConnectInfo<SocketAddr>`)
//! for the limit that counts by client IP.
//!
//! Run with `cargo run -p limiter-examples --example hyper_service`.
//!
//! The server listens on a free port of 127.0.0.1 and the example is its
//! client, over HTTP/1.1; it ends at once. Every outcome is asserted: the
//! example panics if the behaviour changes.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::ConnectInfo;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use limiter_tower::{KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Policy, Rule};
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceBuilder;

/// The service: hyper's request body in, `Full<Bytes>` out.
async fn hello(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"hello"))))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 2 requests a minute per client address, keyed `rate_limit:{ip}:hello`.
    let policy = Policy::sliding_log([Rule::new(2, Duration::from_secs(60))?])?;
    let router_layer = LimiterLayer::new(Limiter::new(MemoryStore::new()));
    let limit = LimitLayer::new("hello", policy, KeySource::ip());

    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, peer)) = listener.accept().await else {
                continue;
            };
            // One service per connection, which knows its peer.
            let service = ServiceBuilder::new()
                .map_request(move |mut request: Request<Incoming>| {
                    request.extensions_mut().insert(ConnectInfo(peer));
                    request
                })
                .layer(router_layer.clone())
                .layer(limit.clone())
                .service_fn(hello);
            tokio::spawn(
                http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service)),
            );
        }
    });

    println!("one client asks 3 times: 2 pass, the 3rd gets 429");
    for remaining in [1, 0] {
        let (status, headers, body) = get(address).await?;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, "hello");
        assert_eq!(
            headers["ratelimit"],
            format!("\"2-per-60s\";r={remaining};t=60").as_str()
        );
    }
    let (status, headers, body) = get(address).await?;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["retry-after"], "60");
    assert_eq!(headers["content-type"], "application/problem+json");
    assert!(
        body.contains("\"violated-policies\":[\"2-per-60s\"]"),
        "{body}"
    );

    println!("ok");
    Ok(())
}

/// `GET /` on a connection of its own, answered as status, headers and body text.
async fn get(
    address: SocketAddr,
) -> Result<(StatusCode, http::HeaderMap, String), Box<dyn std::error::Error>> {
    let stream = TcpStream::connect(address).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let request = Request::get("/")
        .header("host", address.to_string())
        .body(Empty::<Bytes>::new())?;
    let response = sender.send_request(request).await?;
    let (parts, body) = response.into_parts();
    let body = body.collect().await?.to_bytes();
    let body = String::from_utf8(body.to_vec())?;
    println!("GET / -> {} {body}", parts.status);
    Ok((parts.status, parts.headers, body))
}
