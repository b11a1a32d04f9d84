//! The layers in process: exact 429s and headers, blocks, overrides, the
//! limits that follow the business, waiting and permits, a route's limit
//! finding its router layer, mistakes in putting an application together,
//! and the layers around hyper and tonic services. (A process with no
//! router layer at all is `no_router_layer`'s, alone in its binary.)

mod allocations;
mod blocks;
mod business;
mod business_waiting;
mod common;
mod fallback_keys;
mod grpc;
mod hyper;
mod layer;
mod misconfigured;
mod overrides;
mod own_router_layer;
mod permit_failure;
mod scope;
