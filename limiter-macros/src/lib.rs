//! The `#[rate_limit]` attribute for `limiter-tower` (being built).
