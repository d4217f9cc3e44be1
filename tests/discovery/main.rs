//! Discovery's test binary: the file index and the search over it, in process and through the
//! real binary.

#[path = "../support/mod.rs"]
mod support;

mod index;
mod search;
