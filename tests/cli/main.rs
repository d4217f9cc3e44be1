//! The command line's test binary: `dsh-refs` subcommands run as a child process (compression,
//! diagnostics, `reference`), a hostile home, and the bundled demo home checked byte for byte
//! against its generator.

#[path = "../support/mod.rs"]
mod support;

mod compression;
mod demo_home;
mod diagnostics;
mod fixed_address;
mod mcp_setup;
mod reference;
mod reliability_hostile_home;
mod serve_only_configured;
mod shared_resolution;
mod trust_round_two;
