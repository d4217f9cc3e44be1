//! Session references: `dsh-session:` URIs, `@`-mentions, and the service that turns a mentioned
//! session into a bounded, read-only, untrusted snapshot for the model (SPEC §2–§3).

pub mod candidate;
pub mod commands;

pub use candidate::Candidate;
