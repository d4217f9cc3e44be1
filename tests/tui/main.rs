//! The TUI's test binary: every widget and the app drawn on ratatui's `TestBackend` with insta
//! snapshots (`snapshots/tui__<file>__<name>.snap`), the mount, the model switch, write safety,
//! and the host example driven headless.

#[path = "../support/mod.rs"]
mod support;

mod app;
mod attach;
mod composer;
mod daily;
mod host_example;
mod inline;
mod keys;
mod model;
mod mount;
mod picker;
mod popup;
mod resume_start;
mod status;
mod transcript;
mod write_safety;
