//! What `#[rate_limit]` expands to calls. Not a public API: it may change in
//! any release. The macro validates every value at compile time.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::Duration;

pub use axum;
pub use http;
pub use limiter_core::OnStoreError;
use limiter_core::{ConfigError, Policy, Rate, Rule};

use axum::body::Body;
use axum::extract::Request;
use axum::handler::{Handler, HandlerService};
use axum::response::Response;
use pin_project_lite::pin_project;
use tower_service::Service;

use crate::key::KeySource;
use crate::limit::{Limit, LimitLayer, ResponseFuture};

/// One annotated handler, as the macro read it.
#[derive(Debug)]
pub struct HandlerSpec {
    /// `module_path!()` at the handler.
    pub module_path: &'static str,
    /// The handler's name.
    pub handler: &'static str,
    /// The algorithm and its numbers.
    pub algorithm: AlgorithmSpec,
    /// The cost of one request.
    pub cost: u64,
    /// What the limit counts by.
    pub by: KeySpec,
    /// `key = "..."`: the key prefix instead of the layer's.
    pub key_prefix: Option<&'static str>,
    /// `message = "..."`: the 429 body.
    pub message: Option<&'static str>,
    /// `on_store_error = ...`: the failure policy instead of the layer's.
    pub on_store_error: Option<OnStoreError>,
    /// Whether the handler takes the [`Decision`](limiter_core::Decision)
    /// (an argument's type names it), so the limit puts it into the request.
    pub decision: bool,
}

/// The algorithm and its numbers; times in microseconds.
#[derive(Debug)]
pub enum AlgorithmSpec {
    /// `rules = [...]`, optionally `prevent_duplicate`.
    SlidingLog {
        /// (limit, window µs) per rule.
        rules: &'static [(u64, u64)],
        /// The prevent-duplicate window, if any.
        prevent_duplicate_us: Option<u64>,
    },
    /// `algorithm = fixed_window`.
    FixedWindow {
        /// The limit.
        limit: u64,
        /// The window.
        window_us: u64,
    },
    /// `algorithm = sliding_window`.
    SlidingWindow {
        /// The limit.
        limit: u64,
        /// The window.
        window_us: u64,
    },
    /// `algorithm = token_bucket(...)`.
    TokenBucket {
        /// Tokens per period.
        amount: u64,
        /// The period.
        period_us: u64,
        /// The bucket's capacity (the burst).
        capacity: u64,
    },
    /// `algorithm = leaky_bucket(...)`.
    LeakyBucket {
        /// Requests leaked per period.
        amount: u64,
        /// The period.
        period_us: u64,
        /// The bucket's capacity.
        capacity: u64,
    },
    /// `algorithm = gcra(...)`.
    Gcra {
        /// Requests per period.
        amount: u64,
        /// The period.
        period_us: u64,
        /// How many may pass at once.
        burst: u64,
    },
}

/// `by = ...`.
pub enum KeySpec {
    /// `by = ip`.
    Ip,
    /// `by = user`.
    User,
    /// `by = global`.
    Global,
    /// `by = header("name")`.
    Header(&'static str),
    /// `by = custom(path)`.
    Custom(fn(&http::request::Parts) -> Option<String>),
}

impl fmt::Debug for KeySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ip => f.write_str("Ip"),
            Self::User => f.write_str("User"),
            Self::Global => f.write_str("Global"),
            Self::Header(name) => write!(f, "Header({name:?})"),
            Self::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// A handler's limit, built on first use.
#[derive(Debug)]
pub struct LazyLimit {
    spec: HandlerSpec,
    built: OnceLock<LimitLayer>,
}

impl LazyLimit {
    /// Holds `spec` until the first request.
    pub const fn new(spec: HandlerSpec) -> Self {
        Self {
            spec,
            built: OnceLock::new(),
        }
    }

    /// Runs `handler` with `state` behind this limit.
    pub fn call<H, T, S>(
        &'static self,
        handler: H,
        request: Request,
        state: S,
    ) -> HandlerFuture<H, T, S>
    where
        H: Handler<T, S>,
        S: Clone + Send + Sync + 'static,
    {
        let limit = Arc::clone(&self.built.get_or_init(|| self.spec.build()).limit);
        let mut service = Limit::new(handler.with_state(state), limit);
        // A handler service is always ready: `poll_ready` has nothing to wait for.
        HandlerFuture {
            inner: service.call(request),
        }
    }
}

pin_project! {
    /// The future of a `#[rate_limit]` handler: its limit's future over the
    /// handler, named so that it needs no box of its own.
    pub struct HandlerFuture<H, T, S>
    where
        H: Handler<T, S>,
        S: Clone,
        S: Send,
        S: Sync,
        S: 'static,
    {
        #[pin]
        inner: ResponseFuture<HandlerService<H, T, S>, Body>,
    }
}

impl<H, T, S> Future for HandlerFuture<H, T, S>
where
    H: Handler<T, S>,
    S: Clone + Send + Sync + 'static,
{
    type Output = Response;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        match ready!(self.project().inner.poll(cx)) {
            Ok(response) => Poll::Ready(response),
            Err(never) => match never {},
        }
    }
}

impl<H, T, S> fmt::Debug for HandlerFuture<H, T, S>
where
    H: Handler<T, S>,
    S: Clone + Send + Sync + 'static,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerFuture").finish_non_exhaustive()
    }
}

impl HandlerSpec {
    /// `{module}-{handler}`: the last segment of the module path names the
    /// handler's group, as a class name would.
    fn name(&self) -> String {
        let module = self
            .module_path
            .rsplit("::")
            .next()
            .unwrap_or(self.module_path);
        format!("{module}-{}", self.handler)
    }

    fn policy(&self) -> Result<Policy, ConfigError> {
        let us = Duration::from_micros;
        let policy = match self.algorithm {
            AlgorithmSpec::SlidingLog {
                rules,
                prevent_duplicate_us,
            } => {
                let rules: Result<Vec<Rule>, _> = rules
                    .iter()
                    .map(|&(limit, w)| Rule::new(limit, us(w)))
                    .collect();
                let policy = Policy::sliding_log(rules?)?;
                match prevent_duplicate_us {
                    Some(w) => policy.with_prevent_duplicate(us(w))?,
                    None => policy,
                }
            }
            AlgorithmSpec::FixedWindow { limit, window_us } => {
                Policy::fixed_window(Rule::new(limit, us(window_us))?)
            }
            AlgorithmSpec::SlidingWindow { limit, window_us } => {
                Policy::sliding_window(Rule::new(limit, us(window_us))?)
            }
            AlgorithmSpec::TokenBucket {
                amount,
                period_us,
                capacity,
            } => Policy::token_bucket(Rate::new(amount, us(period_us))?, capacity)?,
            AlgorithmSpec::LeakyBucket {
                amount,
                period_us,
                capacity,
            } => Policy::leaky_bucket(Rate::new(amount, us(period_us))?, capacity)?,
            AlgorithmSpec::Gcra {
                amount,
                period_us,
                burst,
            } => Policy::gcra(Rate::new(amount, us(period_us))?, burst)?,
        };
        policy.with_cost(self.cost)
    }

    fn build(&self) -> LimitLayer {
        let source = match self.by {
            KeySpec::Ip => KeySource::ip(),
            KeySpec::User => KeySource::user(),
            KeySpec::Global => KeySource::global(),
            KeySpec::Header(name) => KeySource::header(http::HeaderName::from_static(name)),
            KeySpec::Custom(resolve) => KeySource::custom(resolve),
        };
        let policy = self.policy().unwrap_or_else(|error| {
            // The macro checks every value with these same constructors, so
            // this is unreachable from `#[rate_limit]`.
            panic!("#[rate_limit] on {}: {error}", self.handler)
        });
        let mut layer =
            LimitLayer::new(self.name(), policy, source).decision_extension(self.decision);
        if let Some(prefix) = self.key_prefix {
            layer = layer.key_prefix(prefix);
        }
        if let Some(message) = self.message {
            layer = layer.message(message);
        }
        if let Some(policy) = self.on_store_error {
            layer = layer.on_store_error(policy);
        }
        layer
    }
}
