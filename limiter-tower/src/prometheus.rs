//! The Prometheus recorder the dashboard (`docs/grafana/limiter.json`)
//! reads: limiter's histograms exported as histograms, with buckets, so
//! that quantiles can be taken across instances. Without them,
//! `metrics-exporter-prometheus` exports summaries, and the latency panels
//! stay empty.

use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder};

/// `limiter_store_call_seconds`' buckets: from 100 µs to 2.5 s.
const CALL_SECONDS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// `limiter_redis_batch_size`'s buckets: from 1 request to 1,024.
const BATCH_SIZES: [f64; 11] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
];

/// `builder` with buckets for limiter's histograms: install it as the
/// process's recorder as usual.
///
/// ```
/// use metrics_exporter_prometheus::PrometheusBuilder;
///
/// let builder = limiter_tower::prometheus_buckets(PrometheusBuilder::new())?;
/// // Once in the process: `let handle = builder.install_recorder()?;`,
/// // and `handle.render()` on your `/metrics` route.
/// # Ok::<(), metrics_exporter_prometheus::BuildError>(())
/// ```
pub fn prometheus_buckets(builder: PrometheusBuilder) -> Result<PrometheusBuilder, BuildError> {
    builder
        .set_buckets_for_metric(
            Matcher::Full("limiter_store_call_seconds".into()),
            &CALL_SECONDS,
        )?
        .set_buckets_for_metric(
            Matcher::Full("limiter_redis_batch_size".into()),
            &BATCH_SIZES,
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_histograms_are_exported_with_their_buckets() {
        let recorder = prometheus_buckets(PrometheusBuilder::new())
            .unwrap()
            .build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            metrics::histogram!("limiter_store_call_seconds").record(0.0003);
            metrics::histogram!("limiter_redis_batch_size").record(3.0);
        });
        let text = handle.render();
        for line in [
            "limiter_store_call_seconds_bucket{le=\"0.00025\"} 0",
            "limiter_store_call_seconds_bucket{le=\"0.0005\"} 1",
            "limiter_redis_batch_size_bucket{le=\"2\"} 0",
            "limiter_redis_batch_size_bucket{le=\"4\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
    }
}
