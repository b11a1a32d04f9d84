//! The routes whose limits follow the business: search by API key plan,
//! exports limited in flight, and the plan table an admin changes while
//! the server runs.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::Json;
use axum::extract::{ConnectInfo, Path};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::IntoResponse;
use limiter_tower::{Plan, Plans, Policy, Rule, rate_limit};
use serde_json::json;

/// The header that carries an API key.
pub const API_KEY_HEADER: &str = "x-api-key";

/// How long an export takes.
pub const EXPORT_TIME: Duration = Duration::from_millis(500);

/// The longest API key the plan table keeps.
const MAX_KEY_LEN: usize = 256;

/// The plans of `GET /search` and which plan each API key has. Clones
/// share the table; a key not in it has the plan `free`.
#[derive(Debug, Clone)]
pub struct PlanTable {
    plans: Plans,
    keys: Arc<RwLock<HashMap<String, String>>>,
}

impl PlanTable {
    /// `free`, 10 searches a minute, and `pro`, 100 a minute; no key has
    /// `pro` yet.
    pub fn new() -> Self {
        let per_minute = |limit| {
            let rule = Rule::new(limit, Duration::from_secs(60)).expect("a valid rule");
            Policy::sliding_log([rule]).expect("a valid policy")
        };
        let plans = Plans::new([
            Plan::new("free", per_minute(10)).expect("a valid plan"),
            Plan::new("pro", per_minute(100)).expect("a valid plan"),
        ])
        .expect("valid plans");
        Self {
            plans,
            keys: Arc::default(),
        }
    }

    /// The plan of `key`.
    pub fn plan_of_key(&self, key: &str) -> Option<Plan> {
        let keys = self.keys.read().unwrap_or_else(|p| p.into_inner());
        self.plans.get(keys.get(key).map_or("free", String::as_str))
    }

    /// Gives `key` the plan named `plan`; `false` for an unknown plan.
    pub fn set(&self, key: &str, plan: &str) -> bool {
        if self.plans.get(plan).is_none() {
            return false;
        }
        let mut keys = self.keys.write().unwrap_or_else(|p| p.into_inner());
        keys.insert(key.to_owned(), plan.to_owned());
        true
    }
}

impl Default for PlanTable {
    fn default() -> Self {
        Self::new()
    }
}

/// The plan of a request to `GET /search`: its API key's, from the table
/// the router puts in the request's extensions.
pub fn plan_of(parts: &Parts) -> Option<Plan> {
    let table = parts.extensions.get::<PlanTable>()?;
    let key = parts.headers.get(API_KEY_HEADER)?.to_str().ok()?;
    table.plan_of_key(key)
}

/// Whether a request asks to wait for its retry time: `?wait=1`.
pub fn wants_to_wait(parts: &Parts) -> bool {
    parts
        .uri
        .query()
        .is_some_and(|query| query.split('&').any(|pair| pair == "wait=1"))
}

/// Search (keys end in `business-search`): by the API key's plan (`free`
/// unless the table says otherwise): free 10 a minute, pro 100 a minute.
#[rate_limit(rules = [(10, 60s)], by = header("x-api-key"), plans = plan_of)]
pub(crate) async fn search() -> impl IntoResponse {
    Json(json!({ "results": [] }))
}

/// Exports (keys end in `business-export`): at most 2 in flight per user;
/// each takes half a second.
#[rate_limit(concurrency = 2, by = user)]
pub(crate) async fn export() -> impl IntoResponse {
    tokio::time::sleep(EXPORT_TIME).await;
    (StatusCode::CREATED, Json(json!({ "export": "done" })))
}

/// `PUT /admin/plans/{key}` with the body `free` or `pro`: changes the
/// key's plan at once. Only from the server's own host (loopback), since
/// it stands in for an authenticated admin interface.
pub(crate) async fn set_plan(
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    axum::Extension(table): axum::Extension<PlanTable>,
    Path(key): Path<String>,
    body: String,
) -> impl IntoResponse {
    if !peer.ip().to_canonical().is_loopback() {
        return (
            StatusCode::FORBIDDEN,
            Json(json!({ "error": "admin only" })),
        );
    }
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        let error = format!("an API key is 1 to {MAX_KEY_LEN} bytes");
        return (StatusCode::BAD_REQUEST, Json(json!({ "error": error })));
    }
    let plan = body.trim();
    if !table.set(&key, plan) {
        let error = "the plan is `free` or `pro`";
        return (StatusCode::BAD_REQUEST, Json(json!({ "error": error })));
    }
    (StatusCode::OK, Json(json!({ "key": key, "plan": plan })))
}
