//! Discovery's test binary: the file index and the search over it, in process and through the
//! real binary, and the background indexer's file watcher.

#[path = "../support/mod.rs"]
mod support;

mod cache;
mod deferred;
mod index;
mod remembered;
mod search;
mod watch;
