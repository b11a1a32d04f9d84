//! A tonic gRPC server (the standard health service) behind the layers,
//! called by its generated client over loopback: the call over the limit
//! fails with `RESOURCE_EXHAUSTED` and its exact retry time, allowed calls
//! carry the RateLimit fields as metadata, a call without the identity is
//! `UNAUTHENTICATED`.

use std::net::SocketAddr;
use std::time::Duration;

use axum::http::HeaderName;
use limiter_tower::{
    KeySource, LimitLayer, Limiter, LimiterLayer, ManualClock, MemoryStore, Policy, Rule,
};
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Code, Request};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_types::StatusExt;
use tower::ServiceBuilder;

/// Serves the health service behind a limit of 2 calls a minute per
/// `x-api-key`, on `clock`; answers the client.
async fn serve(clock: &ManualClock) -> HealthClient<Channel> {
    let policy = Policy::sliding_log([Rule::new(2, Duration::from_secs(60)).unwrap()]).unwrap();
    let store = MemoryStore::with_clock(clock.clone());
    let layers = ServiceBuilder::new()
        .layer(LimiterLayer::new(Limiter::new(store)))
        .layer(LimitLayer::new(
            "health",
            policy,
            KeySource::header(HeaderName::from_static("x-api-key")),
        ));
    let (_reporter, health) = tonic_health::server::health_reporter();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(
        Server::builder()
            .layer(layers)
            .add_service(health)
            .serve_with_incoming(TcpIncoming::from(listener)),
    );
    let channel = Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    HealthClient::new(channel)
}

fn check(api_key: Option<&str>) -> Request<HealthCheckRequest> {
    let mut request = Request::new(HealthCheckRequest {
        service: String::new(),
    });
    if let Some(key) = api_key {
        request
            .metadata_mut()
            .insert("x-api-key", key.parse().unwrap());
    }
    request
}

#[tokio::test]
async fn the_call_over_the_limit_gets_resource_exhausted_with_its_retry_time() {
    let clock = ManualClock::new(Duration::from_secs(1_750_000_000));
    let mut client = serve(&clock).await;
    for remaining in [1, 0] {
        let response = client.check(check(Some("key-a"))).await.unwrap();
        assert_eq!(response.get_ref().status, ServingStatus::Serving as i32);
        assert_eq!(
            response.metadata().get("ratelimit").unwrap(),
            format!("\"2-per-60s\";r={remaining};t=60").as_str()
        );
        assert_eq!(
            response.metadata().get("ratelimit-policy").unwrap(),
            "\"2-per-60s\";q=2;w=60"
        );
    }
    clock.advance(Duration::from_millis(59_500));
    let status = client.check(check(Some("key-a"))).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(
        status.message(),
        "Rate limit exceeded (2-per-60s); retry after 1 s."
    );
    // The exact retry time: 0.5 s, as gRPC retry pushback and as RetryInfo.
    assert_eq!(
        status.metadata().get("grpc-retry-pushback-ms").unwrap(),
        "500"
    );
    let retry_info = status.get_details_retry_info().unwrap();
    assert_eq!(retry_info.retry_delay, Some(Duration::from_millis(500)));
    let quota_failure = status.get_details_quota_failure().unwrap();
    assert_eq!(quota_failure.violations.len(), 1);
    assert_eq!(quota_failure.violations[0].subject, "2-per-60s");
    assert_eq!(
        status.metadata().get("ratelimit").unwrap(),
        "\"2-per-60s\";r=0;t=1"
    );
    // Another key has its own quota; after the retry time the first passes.
    client.check(check(Some("key-b"))).await.unwrap();
    clock.advance(Duration::from_millis(500));
    client.check(check(Some("key-a"))).await.unwrap();
}

#[tokio::test]
async fn a_call_without_the_identity_is_unauthenticated() {
    let clock = ManualClock::new(Duration::from_secs(1_750_000_000));
    let mut client = serve(&clock).await;
    let status = client.check(check(None)).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    assert_eq!(
        status.message(),
        "This route is rate limited per `x-api-key` header, and the request carries none."
    );
}
