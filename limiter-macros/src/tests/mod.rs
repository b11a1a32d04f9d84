mod args;
mod business;
mod expand;
mod policy;
