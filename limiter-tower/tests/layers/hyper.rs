//! The layers around a plain hyper service (no axum router), served by
//! hyper over loopback: hyper's request body in, `Full<Bytes>` out; the
//! allowed response passes through with the RateLimit fields added, the one
//! over the limit is the limiter's 429.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::ConnectInfo;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use limiter_tower::{
    KeySource, LimitLayer, Limiter, LimiterLayer, ManualClock, MemoryStore, Policy, Rule,
};
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceBuilder;

async fn hello(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = request.into_body().collect().await.unwrap().to_bytes();
    let mut response = Response::new(Full::new(Bytes::from(format!("read {}", body.len()))));
    response
        .headers_mut()
        .insert("x-service", "hello".parse().unwrap());
    Ok(response)
}

/// Serves `hello` behind 2 requests a minute per client address.
async fn serve(clock: &ManualClock) -> SocketAddr {
    let policy = Policy::sliding_log([Rule::new(2, Duration::from_secs(60)).unwrap()]).unwrap();
    let router_layer = LimiterLayer::new(Limiter::new(MemoryStore::with_clock(clock.clone())));
    let limit = LimitLayer::new("hello", policy, KeySource::ip());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, peer) = listener.accept().await.unwrap();
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
    address
}

async fn post(address: SocketAddr, body: &'static str) -> (StatusCode, HeaderMap, String) {
    let stream = TcpStream::connect(address).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = Request::post("/")
        .header("host", address.to_string())
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

#[tokio::test]
async fn a_hyper_service_keeps_its_responses_and_gets_429s() {
    let clock = ManualClock::new(Duration::from_secs(1_750_000_000));
    let address = serve(&clock).await;
    for remaining in [1, 0] {
        let (status, headers, body) = post(address, "hello").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, "read 5");
        assert_eq!(headers["x-service"], "hello");
        assert_eq!(
            headers["ratelimit"],
            format!("\"2-per-60s\";r={remaining};t=60").as_str()
        );
    }
    clock.advance(Duration::from_secs(30));
    let (status, headers, body) = post(address, "hello").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["retry-after"], "30");
    assert!(headers.get("x-service").is_none());
    assert_eq!(
        body,
        r#"{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Too Many Requests","status":429,"detail":"Rate limit exceeded (2-per-60s); retry after 30 s.","violated-policies":["2-per-60s"]}"#
    );
}
