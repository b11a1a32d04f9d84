//! The layers around a tonic gRPC server: the standard health service
//! (`grpc.health.v1.Health`, from tonic-health), limited per API key sent
//! as request metadata. The call over the limit fails with
//! `RESOURCE_EXHAUSTED`, and says when to retry twice over: in
//! `grpc-retry-pushback-ms` (which gRPC retry policies honour) and in a
//! `google.rpc.RetryInfo` detail (read here with tonic-types).
//!
//! Run with `cargo run -p limiter-examples --example grpc_health`.
//!
//! The server listens on a free port of 127.0.0.1 and the example is its
//! client; it ends at once. Every outcome is asserted: the example panics if
//! the behaviour changes.

use std::time::Duration;

use axum::http::HeaderName;
use limiter_tower::{
    KeySource, LimitLayer, Limiter, LimiterLayer, ManualClock, MemoryStore, Policy, Rule,
};
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Endpoint, Server};
use tonic::{Code, Request};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_types::StatusExt;
use tower::ServiceBuilder;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 2 health checks a minute per API key, keyed `rate_limit:{key}:health`,
    // on a clock that moves only when told, so the retry times are exact.
    let policy = Policy::sliding_log([Rule::new(2, Duration::from_secs(60))?])?;
    let clock = ManualClock::new(Duration::from_secs(1_750_000_000));
    let store = MemoryStore::with_clock(clock.clone());
    let layers = ServiceBuilder::new()
        .layer(LimiterLayer::new(Limiter::new(store)))
        .layer(LimitLayer::new(
            "health",
            policy,
            KeySource::header(HeaderName::from_static("x-api-key")),
        ));
    let (_reporter, health) = tonic_health::server::health_reporter();
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(
        Server::builder()
            .layer(layers)
            .add_service(health)
            .serve_with_incoming(TcpIncoming::from(listener)),
    );

    let channel = Endpoint::from_shared(format!("http://{address}"))?
        .connect()
        .await?;
    let mut client = HealthClient::new(channel);
    let check = |api_key: &str| {
        let mut request = Request::new(HealthCheckRequest {
            service: String::new(),
        });
        request
            .metadata_mut()
            .insert("x-api-key", api_key.parse().expect("ASCII"));
        request
    };

    println!("key-a checks 3 times: 2 pass, the 3rd gets RESOURCE_EXHAUSTED");
    for remaining in [1, 0] {
        let response = client.check(check("key-a")).await?;
        assert_eq!(response.get_ref().status, ServingStatus::Serving as i32);
        let rate_limit = response.metadata().get("ratelimit").expect("the field");
        assert_eq!(
            rate_limit,
            format!("\"2-per-60s\";r={remaining};t=60").as_str()
        );
        println!("  allowed, ratelimit: {rate_limit:?}");
    }
    let status = client
        .check(check("key-a"))
        .await
        .expect_err("over the limit");
    println!("  {:?}: {}", status.code(), status.message());
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(
        status.message(),
        "Rate limit exceeded (2-per-60s); retry after 60 s."
    );
    // gRPC's retry pushback, in milliseconds.
    assert_eq!(
        status.metadata().get("grpc-retry-pushback-ms").unwrap(),
        "60000"
    );
    // The rich error model: the exact retry delay, and the violated rule.
    let retry_info = status.get_details_retry_info().expect("a RetryInfo");
    assert_eq!(retry_info.retry_delay, Some(Duration::from_secs(60)));
    let quota_failure = status.get_details_quota_failure().expect("a QuotaFailure");
    assert_eq!(quota_failure.violations[0].subject, "2-per-60s");

    println!("60 s later key-a may check again");
    clock.advance(Duration::from_secs(60));
    client.check(check("key-a")).await?;

    println!("key-b has its own quota");
    client.check(check("key-b")).await?;

    println!("a call without an API key is refused: UNAUTHENTICATED");
    let anonymous = Request::new(HealthCheckRequest {
        service: String::new(),
    });
    let status = client.check(anonymous).await.expect_err("no API key");
    assert_eq!(status.code(), Code::Unauthenticated);

    println!("ok");
    Ok(())
}
