//! The routes whose limits follow the business: search by API key plan,
//! exports limited in flight, and the plan table an admin changes while
//! the server runs.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use axum::Json;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::IntoResponse;
use limiter_tower::{Control, Identity, Plan, Plans, Policy, Rule, rate_limit};
use serde_json::json;

/// The header that carries an API key.
pub const API_KEY_HEADER: &str = "x-api-key";

/// How long an export takes.
pub const EXPORT_TIME: Duration = Duration::from_millis(500);

/// The longest API key the plan table keeps.
const MAX_KEY_LEN: usize = 256;

/// The plan of every API key the table does not hold.
pub const DEFAULT_PLAN: &str = "free";

/// How many API keys [`PlanTable::new`] holds with a plan other than
/// [`DEFAULT_PLAN`]: with keys of at most 256 bytes, a few tens of MB at
/// most, however many distinct keys an admin client sends.
pub const MAX_ASSIGNED_KEYS: usize = 100_000;

/// The plans of `GET /search` and which plan each API key has. Clones
/// share the table; a key not in it has the plan `free`.
///
/// The table is bounded: it holds only keys whose plan is not `free`
/// (setting a key to `free` removes it), at most [`MAX_ASSIGNED_KEYS`] of
/// them ([`PlanTable::with_max_keys`] sets another bound). Once full, giving
/// a plan to a key it does not hold is refused ([`SetPlanError::Full`]) and
/// leaves the table as it was; changing the plan of a key it holds, or
/// setting one to `free`, still works.
#[derive(Debug, Clone)]
pub struct PlanTable {
    plans: Plans,
    keys: Arc<RwLock<HashMap<String, String>>>,
    max_keys: usize,
    /// Where the assignments live once shared through the store (see
    /// [`PlanTable::share_through`]; clones share it); the table above is
    /// unused then.
    shared: Arc<OnceLock<Control>>,
}

/// Why [`PlanTable::set`] refused a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetPlanError {
    /// No plan has that name.
    UnknownPlan,
    /// The table already holds its bound of keys, and the key is not one
    /// of them.
    Full {
        /// How many keys the table holds (its bound).
        held: usize,
    },
    /// The store that shares the table could not keep the plan.
    Store(String),
}

impl PlanTable {
    /// `free`, 10 searches a minute, and `pro`, 100 a minute; no key has
    /// `pro` yet. At most [`MAX_ASSIGNED_KEYS`] keys can be given `pro`.
    pub fn new() -> Self {
        Self::with_max_keys(MAX_ASSIGNED_KEYS)
    }

    /// [`PlanTable::new`], holding at most `max_keys` keys with a plan
    /// other than `free`.
    pub fn with_max_keys(max_keys: usize) -> Self {
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
            max_keys,
            shared: Arc::default(),
        }
    }

    /// Keeps each key's plan in `control`'s store instead of this process,
    /// for this table and its clones: every instance sharing the store
    /// answers a key's new plan once [`assign`](Self::assign) returns. The
    /// first store given stays.
    pub fn share_through(&self, control: Control) -> &Self {
        let _ = self.shared.set(control);
        self
    }

    /// The plan of `key`.
    pub fn plan_of_key(&self, key: &str) -> Option<Plan> {
        if let Some(control) = self.shared.get() {
            let plan = control.assigned_plan(&api_key(key));
            return self.plans.get(plan.as_deref().unwrap_or(DEFAULT_PLAN));
        }
        let keys = self.keys.read().unwrap_or_else(|p| p.into_inner());
        self.plans
            .get(keys.get(key).map_or(DEFAULT_PLAN, String::as_str))
    }

    /// Gives `key` the plan named `plan`, as [`set`](Self::set) does, or
    /// through the store when the table is
    /// [shared](Self::share_through).
    pub async fn assign(&self, key: &str, plan: &str) -> Result<(), SetPlanError> {
        let Some(control) = self.shared.get() else {
            return self.set(key, plan);
        };
        if self.plans.get(plan).is_none() {
            return Err(SetPlanError::UnknownPlan);
        }
        let plan = (plan != DEFAULT_PLAN).then_some(plan);
        let held = control.assigned_plans();
        let identity = api_key(key);
        if plan.is_some() && control.assigned_plan(&identity).is_none() && held >= self.max_keys {
            return Err(SetPlanError::Full { held });
        }
        control
            .assign_plan(&identity, plan)
            .await
            .map_err(|error| SetPlanError::Store(error.to_string()))
    }

    /// Gives `key` the plan named `plan`. `free` removes the key from the
    /// table. A key the table does not hold is refused when the table is
    /// full ([`SetPlanError::Full`]); an unknown plan is refused
    /// ([`SetPlanError::UnknownPlan`]). A refusal changes nothing.
    pub fn set(&self, key: &str, plan: &str) -> Result<(), SetPlanError> {
        if self.plans.get(plan).is_none() {
            return Err(SetPlanError::UnknownPlan);
        }
        let mut keys = self.keys.write().unwrap_or_else(|p| p.into_inner());
        if plan == DEFAULT_PLAN {
            keys.remove(key);
        } else if let Some(current) = keys.get_mut(key) {
            plan.clone_into(current);
        } else if keys.len() >= self.max_keys {
            return Err(SetPlanError::Full { held: keys.len() });
        } else {
            keys.insert(key.to_owned(), plan.to_owned());
        }
        Ok(())
    }

    /// How many keys the table holds: those with a plan other than `free`.
    pub fn len(&self) -> usize {
        match self.shared.get() {
            Some(control) => control.assigned_plans(),
            None => self.keys.read().unwrap_or_else(|p| p.into_inner()).len(),
        }
    }

    /// Whether every key has the plan `free`.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most keys the table holds.
    pub fn max_keys(&self) -> usize {
        self.max_keys
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
/// key's plan at once (200, `{"key", "plan"}`). It is mounted behind the
/// admin token ([`crate::admin::protect`]), and only when the server has
/// one: the token is checked before this handler runs.
///
/// A key of 0 or more than 256 bytes, or another plan, is answered 400.
/// When the plan table is full ([`MAX_ASSIGNED_KEYS`] keys not on `free`),
/// a plan other than `free` for a key it does not hold is answered 507
/// Insufficient Storage and not applied; keys it holds can still be
/// changed, and set to `free` to make room.
pub(crate) async fn set_plan(
    axum::Extension(table): axum::Extension<PlanTable>,
    Path(key): Path<String>,
    body: String,
) -> impl IntoResponse {
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        let error = format!("an API key is 1 to {MAX_KEY_LEN} bytes");
        return (StatusCode::BAD_REQUEST, Json(json!({ "error": error })));
    }
    let plan = body.trim();
    match table.assign(&key, plan).await {
        Ok(()) => (StatusCode::OK, Json(json!({ "key": key, "plan": plan }))),
        Err(SetPlanError::UnknownPlan) => {
            let error = "the plan is `free` or `pro`";
            (StatusCode::BAD_REQUEST, Json(json!({ "error": error })))
        }
        Err(SetPlanError::Store(error)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "error": error })),
        ),
        Err(SetPlanError::Full { held }) => {
            let error = format!(
                "the plan table is full: it holds {held} keys with a plan other than \
                 `{DEFAULT_PLAN}`; set one to `{DEFAULT_PLAN}` to make room"
            );
            (
                StatusCode::INSUFFICIENT_STORAGE,
                Json(json!({ "error": error, "held": held })),
            )
        }
    }
}

/// The identity of an API key: the value of the `x-api-key` header, the
/// admin router's kind `key`.
fn api_key(key: &str) -> Identity {
    Identity::header(limiter_tower::DEFAULT_API_KEY_HEADER, key)
}
