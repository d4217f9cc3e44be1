//! End to end (issue 35 item 4): over agent homes a previous process already listed, the first
//! frame of the TUI's `@` popup in a new process names every session by its title, never by
//! its bare id, and no agent home changes by a byte.
//!
//! The first process is `dsh-refs sessions` (it writes the persistent listing under the dsh
//! home); the popup is opened as soon as the composer shows, and the first screen that holds
//! any session row is the one checked. (How fast that frame comes is measured in
//! BENCHMARKS.md, not here.)

use crate::support::tmux::Tmux;
use crate::support::{copied_agent_homes, tree_with_stamps};
use std::collections::BTreeMap;
use std::fs;
use std::process::Command;

#[test]
fn the_first_popup_frame_over_listed_homes_shows_titles_not_ids() {
    let scratch = tempfile::tempdir().unwrap();
    let (claude, codex) = copied_agent_homes(scratch.path());
    let home = scratch.path().join("home");
    let work = scratch.path().join("work");
    fs::create_dir_all(&home).unwrap();
    fs::create_dir_all(&work).unwrap();
    let before = (tree_with_stamps(&claude), tree_with_stamps(&codex));
    let flags = [
        "--home".to_string(),
        home.display().to_string(),
        "--claude-home".into(),
        claude.display().to_string(),
        "--codex-home".into(),
        codex.display().to_string(),
    ];

    // The previous process: lists both homes (and keeps what it read under the dsh home).
    let listed = Command::new(env!("CARGO_BIN_EXE_dsh-refs"))
        .args(&flags)
        .args(["sessions", "--json"])
        .env("HOME", scratch.path())
        .output()
        .unwrap();
    assert!(listed.status.success(), "{listed:?}");
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&listed.stdout).unwrap();
    let titles: BTreeMap<String, String> = rows
        .iter()
        .filter_map(|r| {
            let (id, title) = (r["sessionId"].as_str()?, r["title"].as_str()?);
            (id.starts_with("claude:") || id.starts_with("codex:"))
                .then(|| (id.to_string(), title.to_string()))
        })
        .collect();
    assert!(
        titles.len() >= 2,
        "the fixtures' sessions have titles: {rows:?}"
    );
    let caches: Vec<_> = fs::read_dir(home.join("index").join("agents"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(caches.len(), 2, "one persistent listing per agent");

    // A new process: the popup opened at once, answered by the checked listing (no index
    // was made yet, so there is nothing to answer from before it).
    first_frame(scratch.path(), &work, &flags, &titles, "popup-listed");

    // A process that also made the discovery index: the next one's first rows may now come
    // from what those two kept, before any file is checked; they are titled the same.
    let searched = Command::new(env!("CARGO_BIN_EXE_dsh-refs"))
        .args(&flags)
        .args(["search", "x"])
        .env("HOME", scratch.path())
        .output()
        .unwrap();
    assert!(searched.status.success(), "{searched:?}");
    first_frame(scratch.path(), &work, &flags, &titles, "popup-kept");
    assert!(
        before == (tree_with_stamps(&claude), tree_with_stamps(&codex)),
        "another agent's home changed"
    );
}

/// Starts the TUI in tmux over `flags`, types `@` as soon as the composer shows, and checks the
/// first frame that holds session rows: each row is labelled by its session's listed title.
fn first_frame(
    scratch: &std::path::Path,
    work: &std::path::Path,
    flags: &[String],
    titles: &BTreeMap<String, String>,
    name: &str,
) {
    let command = format!(
        "cd {} && HOME={} {} {} --compression none",
        work.display(),
        scratch.display(),
        env!("CARGO_BIN_EXE_dsh-refs"),
        flags.join(" "),
    );
    let tmux = Tmux::start(name, &command, 160, 40);
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));
    tmux.type_text("@");
    let frame = tmux.wait_for_screen("the first session rows", |s| {
        s.contains("session claude ") || s.contains("session codex ")
    });
    let mut checked = 0;
    for line in frame.lines() {
        let Some((agent, label)) = ["claude", "codex"].iter().find_map(|agent| {
            let at = line.find(&format!("session {agent} "))?;
            Some((agent, &line[at + "session  ".len() + agent.len()..]))
        }) else {
            continue;
        };
        // The row's label is a title of that agent's sessions, never an id.
        assert!(
            !label.starts_with(&format!("{agent}:")),
            "a row labelled by its id:\n{frame}"
        );
        assert!(
            titles.iter().any(|(id, title)| id.starts_with(agent)
                && label.starts_with(&title.chars().take(12).collect::<String>())),
            "a row whose label is no listed title: {label}\n{frame}"
        );
        // Where the row's id shows, it is the id of the session that title names.
        if let Some((id, title)) = titles
            .iter()
            .find(|(id, _)| line.contains(&id[..id.len().min(14)]))
        {
            let start: String = title.chars().take(12).collect();
            assert!(
                label.starts_with(&start),
                "{id} shows another title:\n{frame}"
            );
        }
        checked += 1;
    }
    assert!(checked >= 2, "{frame}");

    tmux.keys(&["Escape"]);
    tmux.keys(&["C-c"]);
    tmux.keys(&["C-c"]);
    drop(tmux);
}
