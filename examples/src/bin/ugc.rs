//! The UGC community server (being built).
fn main() {}
