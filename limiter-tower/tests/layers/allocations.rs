//! What a check allocates: nothing for an allowed request of a key the
//! memory store knows, through a `LimitLayer` on a route with the fields
//! off; with the fields on, three: the `RateLimit` value and the response's
//! header table. Counted per thread
//! (`allocation_counter`, the binary's allocator), around the call and the
//! poll alone (the request is built and the response dropped outside the
//! count), beside the same service without the layer.

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::net::SocketAddr;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use axum::response::Response;
use limiter_tower::{
    KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Policy, Rate, Rule,
};
use tower::{Layer, Service, service_fn};

fn request() -> Request<Body> {
    let mut request = Request::get("/").body(Body::empty()).unwrap();
    let peer = SocketAddr::from(([203, 0, 113, 7], 50_000));
    request.extensions_mut().insert(ConnectInfo(peer));
    request
}

/// The allocations of one call of `service` and the poll of its future
/// (which answers at once), and its response, dropped after the count.
fn allocations<S>(service: &mut S) -> (u64, Response)
where
    S: Service<Request<Body>, Response = Response, Error = Infallible>,
{
    let request = request();
    let mut response = None;
    let counted = allocation_counter::measure(|| {
        let mut future = pin!(service.call(request));
        let mut context = Context::from_waker(Waker::noop());
        response = match future.as_mut().poll(&mut context) {
            Poll::Ready(Ok(response)) => Some(response),
            Poll::Ready(Err(never)) => match never {},
            Poll::Pending => None,
        };
    });
    let response = response.expect("a service that answers at once");
    (counted.count_total, response)
}

fn bare() -> impl Service<
    Request<Body>,
    Response = Response,
    Error = Infallible,
    Future = Ready<Result<Response, Infallible>>,
> + Clone {
    service_fn(|_: Request<Body>| ready(Ok(Response::new(Body::empty()))))
}

/// A limit on the route as the benchmarks' plain path has it (GCRA by
/// address), or a two-rule sliding log, with or without the fields.
fn limit(policy: Policy, fields: bool) -> LimitLayer {
    let settings = LimiterLayer::new(Limiter::new(MemoryStore::new())).rate_limit_headers(fields);
    LimitLayer::new("allocations", policy, KeySource::ip())
        .decision_extension(false)
        .router_layer(&settings)
}

fn gcra() -> Policy {
    Policy::gcra(Rate::per_second(1_000).unwrap(), 1_000).unwrap()
}

fn two_rule_log() -> Policy {
    Policy::sliding_log([
        Rule::new(1_000, Duration::from_secs(60)).unwrap(),
        Rule::new(2_000, Duration::from_secs(120)).unwrap(),
    ])
    .unwrap()
}

/// The allocations the layer adds to an allowed request of a key already
/// known (its first request, which stores the key, is not counted).
fn added_by(limit: LimitLayer) -> u64 {
    let (without, _) = allocations(&mut bare());
    let mut limited = limit.layer(bare());
    let (stored, first) = allocations(&mut limited);
    assert_eq!(first.status(), StatusCode::OK);
    // The count sees the layer's work: the first request stores its key.
    assert!(stored > without, "{stored} allocations storing a key");
    let (with, response) = allocations(&mut limited);
    assert_eq!(response.status(), StatusCode::OK);
    with - without
}

#[test]
fn an_allowed_check_of_a_known_key_allocates_nothing_with_the_fields_off() {
    assert_eq!(added_by(limit(gcra(), false)), 0);
    assert_eq!(added_by(limit(two_rule_log(), false)), 0);
}

#[test]
fn the_fields_allocate_the_state_and_the_response_header_table() {
    // The RateLimit value (RateLimit-Policy's is made once and shared),
    // and the empty response's header table, two buffers, on its first
    // header.
    assert_eq!(added_by(limit(gcra(), true)), 3);
    assert_eq!(added_by(limit(two_rule_log(), true)), 3);
}
