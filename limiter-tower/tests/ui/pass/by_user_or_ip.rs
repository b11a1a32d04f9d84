//! `by = user_or_ip`: per user when signed in, per address otherwise.
use limiter_tower::rate_limit;

#[rate_limit(rules = [(20, 60s)], by = user_or_ip)]
async fn comment() -> &'static str {
    "commented"
}

fn main() {
    let _ = comment::limit();
}
