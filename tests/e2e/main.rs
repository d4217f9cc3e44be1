//! The end-to-end test binary: the real `dsh-refs` in tmux panes (`support::tmux`), typed at
//! and read as a person would — the reference flow, external sessions, the loopback model,
//! write safety with two TUIs, the session lifecycle (`--resume`, `--continue`, `--demo`) and
//! inline mode (the conversation read back from the pane's scrollback).
//! CI installs tmux (`.ci/run`); each pane's tmux session is named after its test and this
//! process, so the tests run in parallel.

#[path = "../support/mod.rs"]
mod support;

mod cli_lifecycle;
mod own_files;
mod tmux;
mod tmux_attach;
mod tmux_external;
mod tmux_inline;
mod tmux_model;
mod tmux_paste;
mod tmux_picker_preview;
mod tmux_popup_listed;
mod tmux_terminal;
mod write_safety;
