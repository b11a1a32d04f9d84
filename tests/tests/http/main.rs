//! The HTTP layers end to end, over real HTTP on both stores: the limits
//! that follow the business, deny lists, hostile input, penalties, the
//! admin routes (blocks, overrides, top offenders, counting by outcome),
//! one decision path for every kind of check, metrics and the dashboard.

mod business_concurrency;
mod business_layer;
mod business_plans;
mod business_wait;
mod control;
mod control_blocks;
mod count_by_outcome;
mod dashboard;
mod deny_lists;
mod http_input;
mod metrics;
mod one_path;
mod overrides;
mod penalties;
mod top_offenders;
