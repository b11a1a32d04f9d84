mod args;
mod expand;
mod policy;
