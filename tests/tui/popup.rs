//! Snapshots of the `@` popup in every state a user can see.

use dsh_session_references::reference::Candidate;
use dsh_session_references::tui::popup::PopupState;
use dsh_session_references::tui::snapshot::render_snapshot;
use dsh_session_references::tui::FileIndex;
use dsh_session_references::tui::Renderable;
use insta::assert_snapshot;
use std::sync::Arc;

const NOW: i64 = 1_700_000_000_000;
const MIN: i64 = 60_000;

fn candidate(id: &str, label: &str, cwd: Option<&str>, age_ms: i64) -> Candidate {
    Candidate {
        session_id: id.into(),
        label: label.into(),
        cwd: cwd.map(Into::into),
        created_at: NOW - age_ms,
    }
}

fn sessions() -> Vec<Candidate> {
    vec![
        candidate(
            "session-7f3a",
            "Fix webapp login loop",
            Some("/home/dev/webapp"),
            5 * MIN,
        ),
        candidate("session-91bc", "session-91bc", None, 3 * 60 * MIN),
        candidate(
            "session-c02e",
            "Refactor the session store",
            Some("/home/dev/dsh"),
            2 * 24 * 60 * MIN,
        ),
    ]
}

/// Filters like `list_candidates` does (id or cwd contains the query, case-insensitively).
fn lookup(all: &[Candidate], query: &str) -> Vec<Candidate> {
    let q = query.to_lowercase();
    all.iter()
        .filter(|c| {
            c.session_id.to_lowercase().contains(&q)
                || c.cwd
                    .as_deref()
                    .is_some_and(|d| d.to_lowercase().contains(&q))
        })
        .cloned()
        .collect()
}

fn draw(state: &PopupState, width: u16) -> String {
    let view = state.view(NOW);
    let height = view.desired_height(width);
    render_snapshot(width, height, |area, buf| view.render(area, buf))
}

fn answered(query: &str, all: &[Candidate]) -> PopupState {
    let mut state = PopupState::new();
    let request = state.open(query, false).expect("a lookup");
    assert!(state.apply_results(request.id, Ok(lookup(all, query))));
    state
}

#[test]
fn loading() {
    let mut state = PopupState::new();
    state.open("", false).expect("a lookup");
    assert!(state.is_loading());
    assert_snapshot!(draw(&state, 60));
}

#[test]
fn empty_query_with_results() {
    assert_snapshot!(draw(&answered("", &sessions()), 80));
}

#[test]
fn empty_query_without_sessions() {
    assert_snapshot!(draw(&answered("", &[]), 60));
}

#[test]
fn results_with_highlights() {
    assert_snapshot!(draw(&answered("WebApp", &sessions()), 80));
}

#[test]
fn no_matches() {
    assert_snapshot!(draw(&answered("zzz", &sessions()), 60));
}

#[test]
fn error_state() {
    let mut state = PopupState::new();
    let request = state.open("dev", false).unwrap();
    state.apply_results(
        request.id,
        Err("session store unreadable: permission denied".into()),
    );
    assert_snapshot!(draw(&state, 60));
}

#[test]
fn stale_rows_stay_while_loading() {
    let mut state = answered("", &sessions());
    state.open("dev", false).expect("a new lookup");
    assert!(state.is_loading());
    assert_snapshot!(draw(&state, 80));
}

fn many() -> Vec<Candidate> {
    (0..20)
        .map(|i| {
            candidate(
                &format!("session-{i:02}"),
                &format!("Task number {i}"),
                Some(&format!("/work/project-{}", i % 3)),
                i64::from(i) * 37 * MIN,
            )
        })
        .collect()
}

#[test]
fn scrolled() {
    let mut state = answered("", &many());
    state.set_page_rows(5);
    for _ in 0..7 {
        state.move_down();
    }
    assert_eq!(state.selected_index(), Some(7));
    assert_snapshot!(draw(&state, 70));
}

#[test]
fn width_40() {
    assert_snapshot!(draw(&answered("dev", &sessions()), 40));
}

#[test]
fn width_120() {
    assert_snapshot!(draw(&answered("dev", &sessions()), 120));
}

fn files() -> Arc<FileIndex> {
    Arc::new(FileIndex::new([
        "src/main.rs",
        "src/tui/popup.rs",
        "src/web/app.rs",
        "web/app/index.html",
        "docs/webapp-notes.md",
        "Cargo.toml",
    ]))
}

#[test]
fn files_mixed_with_sessions() {
    let mut state = PopupState::new();
    state.set_file_index(files());
    let request = state.open("webapp", false).unwrap();
    state.apply_results(request.id, Ok(lookup(&sessions(), "webapp")));
    assert_snapshot!(draw(&state, 80));
}

#[test]
fn quoted_token_is_files_only() {
    let mut state = PopupState::new();
    state.set_file_index(files());
    assert!(state.open("app", true).is_none(), "no session lookup");
    assert_snapshot!(draw(&state, 60));
}

#[test]
fn quoted_token_without_query() {
    let mut state = PopupState::new();
    state.set_file_index(files());
    state.open("", true);
    assert_snapshot!(draw(&state, 60));
}

#[test]
fn hostile_label_is_escaped() {
    let hostile = vec![candidate(
        "session-\u{1b}[31mred",
        "evil\u{1b}]0;pwned\u{7}\nsecond line\u{202e}",
        Some("/tmp/\u{7}bell"),
        MIN,
    )];
    let out = draw(&answered("", &hostile), 90);
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}') && !out.contains('\u{202e}'));
    assert_snapshot!(out);
}

#[test]
fn narrow_and_tiny_sizes_do_not_panic() {
    let state = answered("dev", &sessions());
    for (w, h) in [(0, 0), (1, 1), (2, 2), (3, 3), (10, 4), (20, 3), (25, 6)] {
        render_snapshot(w, h, |area, buf| state.view(NOW).render(area, buf));
    }
    assert_snapshot!(draw(&state, 22));
}

#[test]
fn other_agents_sessions_wear_a_source_badge() {
    let all = vec![
        candidate(
            "claude:4c2ddfdc",
            "create hello.py",
            Some("/tmp/private"),
            5 * MIN,
        ),
        candidate("codex:019e1625", "show tools", Some("/repo"), 9 * MIN),
        candidate("session-7f3a", "Fix webapp login loop", Some("/w"), MIN),
    ];
    assert_snapshot!(draw(&answered("", &all), 70));
}

/// Discovery's merged rows (SPEC §8): last activity instead of creation, message count and size,
/// the first prompt of an untitled session, a live badge, and a truncated list that says so.
#[test]
fn discovery_rows_and_a_truncated_list() {
    use dsh_session_references::discovery::Field;
    use dsh_session_references::discovery::{Hit, SessionMeta};
    use dsh_session_references::tui::merge;
    let hit = |id: &str, title: Option<&str>, prompt: &str, active_ago: i64, msgs: u64| Hit {
        meta: SessionMeta {
            id: id.into(),
            title: title.map(Into::into),
            first_prompt: Some(prompt.into()),
            cwd: Some("/home/dev/projects/parser".into()),
            created_at: NOW - 30 * 24 * 60 * MIN,
            last_activity: NOW - active_ago,
            messages: msgs,
            conversation_bytes: msgs * 2000,
            source: None,
        },
        score: 1.0,
        matched: vec![Field::Title],
        snippet: None,
    };
    let hits = vec![
        hit(
            "f382e8f5",
            Some("Fix the flaky tokenizer test"),
            "the tokenizer test fails",
            5 * MIN,
            12,
        ),
        hit(
            "be266e1a",
            None,
            "why does the tokenizer\nskip BOMs?",
            3 * 60 * MIN,
            1,
        ),
    ];
    // The contract found one of them (by cwd) and one the index has not seen yet.
    let contract = vec![
        candidate(
            "be266e1a",
            "be266e1a",
            Some("/home/dev/projects/parser"),
            MIN,
        ),
        candidate(
            "session-new",
            "session-new",
            Some("/home/dev/projects/parser"),
            MIN,
        ),
    ];
    let mut merged = merge(contract, &hits, 310, 50);
    merged.details.rows.get_mut("be266e1a").unwrap().live = true;
    let ids: Vec<&str> = merged
        .candidates
        .iter()
        .map(|c| c.session_id.as_str())
        .collect();
    assert_eq!(ids, ["f382e8f5", "be266e1a", "session-new"]);

    let mut state = PopupState::new();
    let request = state.open("tok", false).expect("a lookup");
    assert!(state.set_details(request.id, Some(std::sync::Arc::new(merged.details))));
    assert!(state.apply_results(request.id, Ok(merged.candidates)));
    assert_snapshot!(draw(&state, 110));

    // A stale answer's details are dropped like its rows.
    let newer = state.open("toke", false).expect("a lookup");
    assert!(!state.set_details(request.id, None));
    assert!(state.set_details(newer.id, None));
}

#[test]
fn bare_at_shows_recent_sessions_and_a_few_files() {
    use dsh_session_references::tui::FileRow;
    let mut state = PopupState::new();
    let request = state.open("", false).unwrap();
    state.apply_results(request.id, Ok(sessions()[..2].to_vec()));
    let rows = ["README.md", "src/main.rs", "src/tui/app.rs"]
        .into_iter()
        .map(|path| FileRow {
            path: path.into(),
            indices: Vec::new(),
            score: 0,
        })
        .collect();
    // Rows matched elsewhere for another query are not taken.
    state.set_file_rows("x", Vec::new());
    state.set_file_rows("", rows);
    assert_eq!(state.len(), 5);
    assert_snapshot!(draw(&state, 80));
}

/// Every registered agent's session (opencode's and GitHub Copilot CLI's among them, issue 34) wears its agent's name as
/// the badge, taken from the registry.
#[test]
fn every_registered_agent_wears_its_name_as_the_badge() {
    use dsh_session_references::session::external::registry::AGENTS;
    let all: Vec<Candidate> = AGENTS
        .iter()
        .enumerate()
        .map(|(n, agent)| {
            let id = format!("{}:id{n}", agent.name());
            candidate(&id, &format!("title {n}"), None, (n as i64 + 1) * MIN)
        })
        .collect();
    let drawn = draw(&answered("", &all), 70);
    for (n, agent) in AGENTS.iter().enumerate() {
        let badge = format!("session {} title {n}", agent.name());
        assert!(drawn.contains(&badge), "no {badge:?} in\n{drawn}");
    }
    assert!(drawn.contains("session opencode title"), "{drawn}");
    assert!(drawn.contains("session copilot title"), "{drawn}");
}
