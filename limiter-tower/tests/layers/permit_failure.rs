//! A request whose concurrency permit could not be asked for, let through
//! (shadow mode), still has its rate count given back by its outcome.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::post;
use limiter_core::{
    Acquired, Capabilities, ConcurrencyLimit, Decision, Error, Identity, Key, KeyState, Permits,
    Policy, Receipt, Rule, Store, async_trait,
};
use limiter_tower::{Control, KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore};
use tower::ServiceExt;

use crate::common::user_of;

/// The memory store, whose permits fail.
#[derive(Debug, Clone, Default)]
struct PermitsFail(MemoryStore);

impl Capabilities for PermitsFail {
    fn is_remote(&self) -> bool {
        false
    }

    fn as_permits(&self) -> Option<&dyn Permits> {
        Some(self)
    }

    fn as_key_state(&self) -> Option<&dyn KeyState> {
        Some(self)
    }
}

impl Store for PermitsFail {
    async fn check(&self, key: &Key, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        self.0.check(key, policy, cost).await
    }
}

#[async_trait]
impl Permits for PermitsFail {
    async fn acquire_permit(&self, _: &str, _: &ConcurrencyLimit) -> Result<Acquired, Error> {
        Err(Error::Timeout(Duration::from_millis(50)))
    }
}

#[async_trait]
impl KeyState for PermitsFail {
    async fn peek(&self, key: &Key, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        self.0.peek(key, policy, cost).await
    }

    async fn reset(&self, key: &Key, policy: &Policy) -> Result<(), Error> {
        self.0.reset(key, policy).await
    }

    async fn check_refundable(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u64,
    ) -> Result<(Decision, Option<Receipt>), Error> {
        self.0.check_refundable(key, policy, cost).await
    }

    async fn refund(&self, key: &Key, policy: &Policy, receipt: &Receipt) -> Result<(), Error> {
        self.0.refund(key, policy, receipt).await
    }
}

#[tokio::test]
async fn a_failed_permit_in_shadow_mode_keeps_the_rate_counts_refund() {
    let policy = Policy::sliding_log([Rule::new(3, Duration::from_secs(60)).unwrap()]).unwrap();
    let exports = LimitLayer::new("exports", policy, KeySource::user())
        .concurrency(ConcurrencyLimit::new(1).unwrap())
        .count_failures()
        .unwrap()
        .shadow(true);
    let layer = LimiterLayer::new(Limiter::new(PermitsFail::default())).user(user_of);
    let control: Control = layer.control().limit("POST /exports", &exports);
    let router = Router::new()
        .route("/exports", post(|| async { "started" }).layer(exports))
        .layer(layer);
    for _ in 0..5 {
        let request = Request::post("/exports")
            .header("x-user-id", "alice")
            .body(Body::empty())
            .unwrap();
        let response = router.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        // The response body is read: the refund runs when it ends.
        let _ = axum::body::to_bytes(response.into_body(), usize::MAX).await;
    }
    // Every success was given back: the whole quota remains.
    let states = control.limits(&Identity::user("alice")).await.unwrap();
    assert_eq!(states[0].remaining, 3, "{states:?}");
}
