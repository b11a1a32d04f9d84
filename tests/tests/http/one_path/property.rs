//! One limit, two ways in: for any sequence of operator changes (live
//! overrides, blocks, resets, a penalty earning blocks) and checks on a
//! manual clock, the same limit checked through its route and through
//! `Control::attempt_on` gives the same answers, the same admin view, the
//! same decision counters and the same top offenders.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::post;
use limiter_tower::{
    AttemptResponse, Control, Identity, KeySource, LimitLayer, Limiter, LimiterLayer, ManualClock,
    MemoryStore, Override, Penalty, Policy, Rule, Store,
};
use metrics_util::debugging::{DebugValue, Snapshotter};
use proptest::prelude::*;
use serde_json::Value;
use tower::ServiceExt;

const T0: Duration = Duration::from_secs(1_750_000_000);
const USERS: [&str; 3] = ["ann", "bob", "cy"];

fn snapshotter() -> &'static Snapshotter {
    limiter_tests::metrics_snapshotter()
}

#[derive(Debug, Clone)]
enum Op {
    Check(usize),
    Advance(u64),
    OverrideRules(u64),
    OverrideShadow,
    OverrideOff,
    ClearOverride,
    Block(usize, u64),
    Unblock(usize),
    Reset(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..USERS.len()).prop_map(Op::Check),
        2 => (1..40u64).prop_map(Op::Advance),
        1 => (1..4u64).prop_map(Op::OverrideRules),
        1 => Just(Op::OverrideShadow),
        1 => Just(Op::OverrideOff),
        1 => Just(Op::ClearOverride),
        1 => (0..USERS.len(), 1..90u64).prop_map(|(u, s)| Op::Block(u, s)),
        1 => (0..USERS.len()).prop_map(Op::Unblock),
        1 => (0..USERS.len()).prop_map(Op::Reset),
    ]
}

/// One limit by user (3 per 60 s; 2 denials within 60 s block for 30 s),
/// its control handle, and the route it guards when checked that way.
struct World {
    name: String,
    limit: LimitLayer,
    control: Control,
    clock: ManualClock,
    app: Option<Router>,
}

impl World {
    fn new(name: String, through_route: bool) -> Self {
        let clock = ManualClock::new(T0);
        let policy = Policy::sliding_log([Rule::new(3, Duration::from_secs(60)).unwrap()]).unwrap();
        let penalty = Penalty::new(2, Duration::from_secs(60), [Duration::from_secs(30)]).unwrap();
        let limit = LimitLayer::new(&name, policy, KeySource::user()).penalty(penalty);
        let (app, control) = on_route(Limiter::new(MemoryStore::with_clock(clock.clone())), &limit);
        let app = through_route.then_some(app);
        Self {
            name,
            limit,
            control,
            clock,
            app,
        }
    }

    /// A check of `user`'s: the status its request gets.
    async fn check(&self, user: &str) -> u16 {
        match &self.app {
            Some(app) => route_status(app, user).await,
            None => handler_status(&self.control, &self.limit, user).await,
        }
    }

    /// Applies `op`; answers a check's status.
    async fn apply(&self, op: &Op) -> Option<u16> {
        let minute = Duration::from_secs(60);
        let user = |u: &usize| Identity::user(USERS[*u]);
        match op {
            Op::Check(u) => return Some(self.check(USERS[*u]).await),
            Op::Advance(seconds) => self.clock.advance(Duration::from_secs(*seconds)),
            Op::OverrideRules(_) | Op::OverrideShadow | Op::OverrideOff => {
                let value = match op {
                    Op::OverrideRules(n) => {
                        let rules = Policy::sliding_log([Rule::new(*n, minute).unwrap()]);
                        Override::rules(rules.unwrap())
                    }
                    Op::OverrideShadow => Override::shadow(),
                    _ => Override::off(),
                };
                let set = self.control.set_override(&self.name, value, minute);
                set.await.unwrap();
            }
            Op::ClearOverride => self.control.clear_override(&self.name).await.unwrap(),
            Op::Block(u, seconds) => {
                let left = Duration::from_secs(*seconds);
                self.control.block(&user(u), left).await.unwrap();
            }
            Op::Unblock(u) => self.control.unblock(&user(u)).await.unwrap(),
            Op::Reset(u) => {
                self.control.reset(&user(u)).await.unwrap();
            }
        }
        None
    }

    /// What the admin view shows of every user, the limit's own name left
    /// out (each world's limit has its own).
    async fn view(&self) -> Vec<Value> {
        let mut view = Vec::new();
        for user in USERS {
            for state in self.control.limits(&Identity::user(user)).await.unwrap() {
                let mut state = serde_json::to_value(state).unwrap();
                state["name"] = Value::Null;
                view.push(state);
            }
        }
        view
    }

    async fn top(&self) -> Value {
        let top = self.control.top_denied(&self.name, 10).await.unwrap();
        serde_json::to_value(top.offenders).unwrap()
    }
}

/// The decision counters of each limit, by limit name, then by their
/// other labels.
type Counters = BTreeMap<String, BTreeMap<String, u64>>;

fn counters() -> Counters {
    let mut counters = Counters::new();
    for (key, _, _, value) in snapshotter().snapshot().into_vec() {
        let (DebugValue::Counter(n), "limiter_decisions_total" | "limiter_shadow_denied_total") =
            (value, key.key().name())
        else {
            continue;
        };
        let mut limit = String::new();
        let mut labels = vec![key.key().name().to_owned()];
        for label in key.key().labels() {
            match label.key() {
                "limit" => limit = label.value().to_owned(),
                _ => labels.push(format!("{}={}", label.key(), label.value())),
            }
        }
        *counters
            .entry(limit)
            .or_default()
            .entry(labels.join(","))
            .or_default() += n;
    }
    counters
}

/// `limit` alone on `POST /r`, under a router layer on `limiter` that
/// names users by `x-user-id`; and the layer's control handle answering
/// for `limit`.
pub(super) fn on_route<S: Store + Clone>(
    limiter: Limiter<S>,
    limit: &LimitLayer,
) -> (Router, Control) {
    let layer = LimiterLayer::new(limiter)
        .user(|parts| Some(parts.headers.get("x-user-id")?.to_str().ok()?.to_owned()));
    let control = layer.control().limit("POST /r", limit);
    let app = Router::new()
        .route("/r", post(|| async { "ok" }).layer(limit.clone()))
        .layer(layer);
    (app, control)
}

/// The status of `user`'s `POST /r`.
pub(super) async fn route_status(app: &Router, user: &str) -> u16 {
    let request = axum::http::Request::post("/r")
        .header("x-user-id", user)
        .body(Body::empty())
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    response.status().as_u16()
}

/// The status a handler answers for `user`'s attempt on `limit`: 200 when
/// allowed, else the attempt's own refusal.
pub(super) async fn handler_status(control: &Control, limit: &LimitLayer, user: &str) -> u16 {
    let attempt = control
        .attempt_on(limit, &Identity::user(user))
        .await
        .unwrap();
    if attempt.decision().allowed() {
        200
    } else {
        attempt.too_many_requests().status().as_u16()
    }
}

static CASE: AtomicUsize = AtomicUsize::new(0);

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn a_limit_decides_alike_through_its_route_and_through_control(
        ops in proptest::collection::vec(op(), 1..40)
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        snapshotter();
        let case = CASE.fetch_add(1, Ordering::Relaxed);
        let route = World::new(format!("route-{case}"), true);
        let control = World::new(format!("control-{case}"), false);
        runtime.block_on(async {
            for (i, op) in ops.iter().enumerate() {
                let by_route = route.apply(op).await;
                let by_control = control.apply(op).await;
                prop_assert_eq!(by_route, by_control, "step {} {:?}", i, op);
                prop_assert_eq!(route.view().await, control.view().await, "step {} {:?}", i, op);
            }
            prop_assert_eq!(route.top().await, control.top().await);
            Ok(())
        })?;
        let mut counted = counters();
        let by_route = counted.remove(&route.name).unwrap_or_default();
        let by_control = counted.remove(&control.name).unwrap_or_default();
        prop_assert_eq!(by_route, by_control);
    }
}
