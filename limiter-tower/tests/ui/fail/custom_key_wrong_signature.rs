use axum::http::HeaderMap;
use limiter_tower::rate_limit;

fn tenant(headers: &HeaderMap) -> Option<String> {
    headers.get("x-tenant")?.to_str().ok().map(str::to_owned)
}

#[rate_limit(rules = [(10, 60s)], by = custom(tenant))]
async fn export() {}

fn main() {}
