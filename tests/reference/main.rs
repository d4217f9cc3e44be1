//! The reference service's test binary: the conformance vectors, the service against an
//! in-memory `SessionQuery`, snapshots of prepared references, and property tests of mentions
//! and bounds.

#[path = "../support/mod.rs"]
mod support;

mod conformance;
mod props;
mod service;
mod snapshot;
