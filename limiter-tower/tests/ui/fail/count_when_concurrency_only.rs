use limiter_tower::rate_limit;

fn counts(status: axum::http::StatusCode, _: &axum::http::HeaderMap) -> bool {
    status.is_server_error()
}

#[rate_limit(concurrency = 2, by = user, count_when = counts)]
async fn export() -> &'static str {
    "exported"
}

fn main() {}
