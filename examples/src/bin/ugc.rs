//! The UGC community server. Environment:
//! - `LIMITER_ADDR`: where to listen (default `127.0.0.1:3000`);
//! - `REDIS_URL`: share limits through this Redis (default: in-memory store);
//! - `REDIS_SENTINELS`: instead, share them through the primary these
//!   comma-separated Sentinels (`redis://host:port`) name, followed through
//!   failovers; `REDIS_SENTINEL_SERVICE` names it (default `mymaster`);
//! - `LIMITER_TRUSTED_PROXIES`: comma-separated proxies (CIDRs or single
//!   addresses) whose forwarding header is believed (default none: the client
//!   is the peer address);
//! - `LIMITER_CLIENT_IP_HEADER`: the header those proxies write the client
//!   into: `x-forwarded-for` (default), `forwarded` or `x-real-ip`. Only that
//!   one is read;
//! - `LIMITER_STORE_DEADLINE_MS`: the deadline of one Redis call (default 50);
//! - `LIMITER_REGION`: this region's name; with it, `GET /api/search`
//!   counts one quota across regions, `REDIS_URL` being this region's Redis;
//! - `LIMITER_PEER_REGIONS`: the other regions, comma-separated
//!   `name=redis://...` (with `LIMITER_REGION` only);
//! - `LIMITER_HEADER_READ_TIMEOUT_MS`: how long a client may take to send a
//!   request's head, idle keep-alive included, before its connection is
//!   closed (default 10,000);
//! - `LIMITER_BODY_READ_TIMEOUT_MS`: how long a client may take to send a
//!   request's body once its head arrived, before the request is answered
//!   408 and its connection closed (default 5,000);
//! - `LIMITER_MAX_CONNECTIONS`: connections served at once; more wait in the
//!   listen backlog (default 768);
//! - `LIMITER_ALLOW`: comma-separated networks (CIDRs or single addresses)
//!   whose clients bypass every limit (found as for `by = ip`: through the
//!   trusted proxies only);
//! - `LIMITER_SHADOW`: `1` puts every limit in shadow mode (checked and
//!   counted, never denying; what would have been denied is counted in
//!   `limiter_shadow_denied_total` and logged), `0` or unset enforces them;
//! - `LIMITER_MAX_BLOCKS`: how many blocks earned by penalties are kept at
//!   most, in memory or in Redis (default 100,000); past it the one that
//!   ends soonest gives way to the new one. Blocks set through the admin
//!   routes are bounded apart (1,000,000) and never give way;
//! - `LIMITER_INSTANCE`: this instance's name among those sharing the
//!   store, under which it publishes its top offenders (default the
//!   host's name and the process id); visible ASCII;
//! - `LIMITER_OFFENDERS_EVERY_MS`: how often it publishes them (default
//!   5,000; 0: never, each instance answers its own);
//! - `LIMITER_ADMIN_TOKEN`: the secret of the admin routes
//!   (`PUT /admin/plans/{key}`): each request needs
//!   `Authorization: Bearer <token>` (401 otherwise). Unset, the admin routes
//!   are not mounted (404); set, it must be 1 or more visible ASCII
//!   characters without spaces (an empty value is an error). 10 failed
//!   authentications within 60 s from one client address get that address
//!   429 on the admin routes until the window frees.
//!
//! A malformed value stops the server at start-up, saying which and why.

use std::process::ExitCode;
use std::str::FromStr;
use std::time::Duration;

use limiter_examples::admin::AdminToken;
use limiter_examples::serve::{
    DEFAULT_BODY_READ_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_CONNECTIONS, ServeOptions,
    serve,
};
use limiter_examples::{
    Options, app, parse_client_ip_header, parse_peer_regions, parse_trusted_proxies,
};
use metrics_exporter_prometheus::PrometheusBuilder;

use limiter_tower::{
    DEFAULT_DEADLINE, DEFAULT_MAX_PENALTY_BLOCKS, GuardConfig, Limiter, MemoryStore, RedisConfig,
    RedisStore, Region, RegionalConfig, RegionalStore,
};
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;

/// How long a starting server waits for Redis's blocks, plans and live
/// overrides before it serves (Redis down: the failure policy decides).
const STARTUP_SYNC: Duration = Duration::from_secs(2);

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .init();
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::var("LIMITER_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let proxies =
        parse_trusted_proxies(&std::env::var("LIMITER_TRUSTED_PROXIES").unwrap_or_default())
            .map_err(|e| format!("LIMITER_TRUSTED_PROXIES: {e}"))?;
    let client_ip_source = match std::env::var("LIMITER_CLIENT_IP_HEADER") {
        Ok(header) => {
            if proxies.is_empty() {
                tracing::warn!(
                    "LIMITER_CLIENT_IP_HEADER is read only from trusted proxies, \
                     and LIMITER_TRUSTED_PROXIES names none"
                );
            }
            parse_client_ip_header(&header).map_err(|e| format!("LIMITER_CLIENT_IP_HEADER: {e}"))?
        }
        Err(_) => Default::default(),
    };
    let allow = parse_trusted_proxies(&std::env::var("LIMITER_ALLOW").unwrap_or_default())
        .map_err(|e| format!("LIMITER_ALLOW: {e}"))?;
    let shadow = match std::env::var("LIMITER_SHADOW").as_deref().map(str::trim) {
        Err(_) | Ok("" | "0") => false,
        Ok("1") => true,
        Ok(other) => return Err(format!("LIMITER_SHADOW {other:?}: expected 1 or 0").into()),
    };
    if shadow {
        tracing::warn!("shadow mode: every limit is checked and counted, none denies");
    }
    let admin_token = admin_token()?;
    let instance_id = std::env::var("LIMITER_INSTANCE").ok();
    // 0 is a setting here: never published.
    let publish_offenders_every = match std::env::var("LIMITER_OFFENDERS_EVERY_MS") {
        Err(_) => None,
        Ok(text) => match text.trim().parse::<u64>() {
            Ok(ms) => Some(Duration::from_millis(ms)),
            Err(e) => return Err(format!("LIMITER_OFFENDERS_EVERY_MS {text:?}: {e}").into()),
        },
    };
    let serve_options = ServeOptions {
        header_read_timeout: Duration::from_millis(env_number(
            "LIMITER_HEADER_READ_TIMEOUT_MS",
            DEFAULT_HEADER_READ_TIMEOUT.as_millis() as u64,
        )?),
        body_read_timeout: Duration::from_millis(env_number(
            "LIMITER_BODY_READ_TIMEOUT_MS",
            DEFAULT_BODY_READ_TIMEOUT.as_millis() as u64,
        )?),
        max_connections: env_number("LIMITER_MAX_CONNECTIONS", DEFAULT_MAX_CONNECTIONS)?,
    };
    let max_penalty_blocks = env_number("LIMITER_MAX_BLOCKS", DEFAULT_MAX_PENALTY_BLOCKS)?;
    let metrics = limiter_tower::prometheus_buckets(PrometheusBuilder::new())
        .and_then(PrometheusBuilder::install_recorder)
        .map_err(|e| format!("metrics: {e}"))?;
    let metrics = Some(metrics);
    let redis_url = non_empty("REDIS_URL");
    let sentinels = non_empty("REDIS_SENTINELS");
    let regional = regional_store(redis_url.as_deref())?;
    let redis = match (redis_url, sentinels) {
        (Some(_), Some(_)) => {
            return Err("set REDIS_URL or REDIS_SENTINELS, not both".into());
        }
        (Some(url), None) => Some(Redis::Url(url)),
        (None, Some(sentinels)) => Some(Redis::Sentinels(sentinels)),
        (None, None) => None,
    };
    let router = match redis {
        Some(redis) => {
            // Connects on first use: the server starts even while Redis is
            // down, and the failure policy decides until Redis answers.
            let deadline = Duration::from_millis(env_number(
                "LIMITER_STORE_DEADLINE_MS",
                DEFAULT_DEADLINE.as_millis() as u64,
            )?);
            let config = RedisConfig::new()
                .response_timeout(deadline)
                .max_penalty_blocks(max_penalty_blocks);
            let store = match &redis {
                Redis::Url(url) => RedisStore::open_with(url, config)
                    .map_err(|e| format!("REDIS_URL {url}: {e}"))?,
                Redis::Sentinels(sentinels) => {
                    let service = non_empty("REDIS_SENTINEL_SERVICE")
                        .unwrap_or_else(|| "mymaster".to_owned());
                    let urls = sentinels.split(',').map(str::trim);
                    RedisStore::open_sentinel_with(urls, &service, config)
                        .map_err(|e| format!("REDIS_SENTINELS {sentinels}: {e}"))?
                }
            };
            tracing::info!(?redis, ?deadline, "limits shared through Redis");
            // Blocks, plans and live overrides set before this instance
            // started decide its first requests.
            if !store.synced(STARTUP_SYNC).await {
                tracing::warn!(
                    "Redis's blocks, plans and overrides are not read yet: \
                     the compiled limits decide until they are"
                );
            }
            let guard = GuardConfig {
                deadline,
                ..GuardConfig::default()
            };
            app(
                Limiter::new(store),
                Options {
                    trusted_proxies: proxies,
                    client_ip_source,
                    guard,
                    metrics,
                    regional,
                    allow,
                    shadow,
                    admin_token,
                    instance_id,
                    publish_offenders_every,
                    ..Options::default()
                },
            )
        }
        None => {
            tracing::info!("limits kept in memory (set REDIS_URL to share them)");
            let options = Options {
                trusted_proxies: proxies,
                client_ip_source,
                metrics,
                allow,
                shadow,
                admin_token,
                instance_id,
                publish_offenders_every,
                ..Options::default()
            };
            let store = MemoryStore::new().with_max_penalty_blocks(max_penalty_blocks);
            app(Limiter::new(store), options)
        }
    };
    let listener = TcpListener::bind(&addr)
        .await
        .map_err(|e| format!("LIMITER_ADDR {addr}: {e}"))?;
    tracing::info!(
        header_read_timeout = ?serve_options.header_read_timeout,
        body_read_timeout = ?serve_options.body_read_timeout,
        max_connections = serve_options.max_connections,
        "listening on http://{}",
        listener.local_addr()?
    );
    serve(listener, router, serve_options, shutdown()).await;
    tracing::info!("stopped");
    Ok(())
}

/// Where the limits are shared.
#[derive(Debug)]
enum Redis {
    /// `REDIS_URL`.
    Url(String),
    /// `REDIS_SENTINELS`.
    Sentinels(String),
}

/// The variable `name`'s value, unless unset or empty.
fn non_empty(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .filter(|value| !value.trim().is_empty())
}

/// The admin routes' token, from `LIMITER_ADMIN_TOKEN`: none when unset
/// (the admin routes are then not mounted).
fn admin_token() -> Result<Option<AdminToken>, String> {
    match std::env::var("LIMITER_ADMIN_TOKEN") {
        Ok(token) => {
            let token = AdminToken::new(&token).map_err(|e| format!("LIMITER_ADMIN_TOKEN: {e}"))?;
            tracing::info!("admin routes mounted: each request needs LIMITER_ADMIN_TOKEN");
            Ok(Some(token))
        }
        Err(std::env::VarError::NotPresent) => {
            tracing::info!("no admin routes (set LIMITER_ADMIN_TOKEN to mount them)");
            Ok(None)
        }
        Err(std::env::VarError::NotUnicode(_)) => Err(
            "LIMITER_ADMIN_TOKEN: the admin token must be visible ASCII characters without spaces"
                .into(),
        ),
    }
}

/// The store of `GET /api/search` when `LIMITER_REGION` names this region:
/// one quota across it (its Redis at `REDIS_URL`) and `LIMITER_PEER_REGIONS`.
fn regional_store(redis_url: Option<&str>) -> Result<Option<RegionalStore>, String> {
    let peers = std::env::var("LIMITER_PEER_REGIONS").unwrap_or_default();
    let Some(name) = std::env::var("LIMITER_REGION")
        .ok()
        .filter(|n| !n.is_empty())
    else {
        if !peers.trim().is_empty() {
            return Err("LIMITER_PEER_REGIONS needs LIMITER_REGION, this region's name".into());
        }
        return Ok(None);
    };
    let url = redis_url.ok_or("LIMITER_REGION needs REDIS_URL, this region's Redis")?;
    let local = Region::open(&name, url).map_err(|e| format!("LIMITER_REGION: {e}"))?;
    let peers = parse_peer_regions(&peers).map_err(|e| format!("LIMITER_PEER_REGIONS: {e}"))?;
    let deadline = Duration::from_millis(env_number(
        "LIMITER_STORE_DEADLINE_MS",
        DEFAULT_DEADLINE.as_millis() as u64,
    )?);
    let config = RegionalConfig::new().local_deadline(deadline);
    let store = RegionalStore::with_config(local, peers, config).map_err(|e| e.to_string())?;
    tracing::info!(
        region = store.region(),
        peers = ?store.peers().collect::<Vec<_>>(),
        "GET /api/search counts one quota across regions"
    );
    Ok(Some(store))
}

/// The number in the environment variable `name`, or `default` when unset;
/// it must be above zero.
fn env_number<T: FromStr + PartialOrd + Default>(name: &str, default: T) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    let Ok(text) = std::env::var(name) else {
        return Ok(default);
    };
    match text.trim().parse::<T>() {
        Ok(number) if number > T::default() => Ok(number),
        Ok(_) => Err(format!("{name} {text:?}: must be above zero")),
        Err(e) => Err(format!("{name} {text:?}: {e}")),
    }
}

/// Ctrl-C or SIGTERM. The handlers are installed now, before the server
/// accepts its first connection: a signal that arrives before the future is
/// first polled still stops the server gracefully instead of killing it.
fn shutdown() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let interrupt = signal(SignalKind::interrupt());
        let terminate = signal(SignalKind::terminate());
        async move {
            match (interrupt, terminate) {
                (Ok(mut interrupt), Ok(mut terminate)) => {
                    tokio::select! {
                        _ = interrupt.recv() => {}
                        _ = terminate.recv() => {}
                    }
                }
                _ => std::future::pending().await,
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}
