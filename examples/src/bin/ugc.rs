//! The UGC community server. Environment:
//! - `LIMITER_ADDR`: where to listen (default `127.0.0.1:3000`);
//! - `REDIS_URL`: share limits through this Redis (default: in-memory store);
//! - `LIMITER_TRUSTED_PROXIES`: comma-separated CIDRs whose `Forwarded` /
//!   `X-Forwarded-For` are believed (default none);
//! - `LIMITER_STORE_DEADLINE_MS`: the deadline of one Redis call (default 50).

use std::net::SocketAddr;
use std::process::ExitCode;

use limiter_examples::{Options, app, parse_trusted_proxies};
use metrics_exporter_prometheus::PrometheusBuilder;
use std::time::Duration;

use limiter_tower::{DEFAULT_DEADLINE, GuardConfig, Limiter, MemoryStore, RedisConfig, RedisStore};
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;

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
    let metrics = PrometheusBuilder::new()
        .install_recorder()
        .map_err(|e| format!("metrics: {e}"))?;
    let metrics = Some(metrics);
    let router = match std::env::var("REDIS_URL") {
        Ok(url) if !url.is_empty() => {
            // Connects on first use: the server starts even while Redis is
            // down, and the failure policy decides until Redis answers.
            let deadline = match std::env::var("LIMITER_STORE_DEADLINE_MS") {
                Ok(ms) => Duration::from_millis(
                    ms.parse()
                        .map_err(|e| format!("LIMITER_STORE_DEADLINE_MS {ms:?}: {e}"))?,
                ),
                Err(_) => DEFAULT_DEADLINE,
            };
            let config = RedisConfig::new().response_timeout(deadline);
            let store =
                RedisStore::open_with(&url, config).map_err(|e| format!("REDIS_URL {url}: {e}"))?;
            tracing::info!(%url, ?deadline, "limits shared through Redis");
            let guard = GuardConfig {
                deadline,
                ..GuardConfig::default()
            };
            app(
                Limiter::new(store),
                Options {
                    trusted_proxies: proxies,
                    guard,
                    metrics,
                },
            )
        }
        _ => {
            tracing::info!("limits kept in memory (set REDIS_URL to share them)");
            let options = Options {
                trusted_proxies: proxies,
                metrics,
                ..Options::default()
            };
            app(Limiter::new(MemoryStore::new()), options)
        }
    };
    let listener = TcpListener::bind(&addr)
        .await
        .map_err(|e| format!("LIMITER_ADDR {addr}: {e}"))?;
    tracing::info!("listening on http://{}", listener.local_addr()?);
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown())
    .await?;
    tracing::info!("stopped");
    Ok(())
}

/// Ctrl-C or SIGTERM.
async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
