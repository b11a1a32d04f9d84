//! Parse: the attribute's arguments and the annotated function, read into
//! typed structs that keep the tokens they were written as, so that an
//! error found later points at them. Only the syntax is judged here.

mod algorithm;
mod args;
mod business;
mod handler;
mod hot;
mod penalty;
mod syntax;
mod values;

pub(crate) use algorithm::{Algorithm, AlgorithmKind, Bucket};
pub(crate) use args::{Args, By, OnStoreError};
pub(crate) use business::BusinessArgs;
pub(crate) use handler::Handler;
pub(crate) use hot::{HotArgs, LeaseLit};
pub(crate) use penalty::PenaltyLit;
pub(crate) use syntax::{Arg, combine};
pub(crate) use values::{DurationLit, Int, RateLit, RuleLit};
