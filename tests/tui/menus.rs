//! Issue 38 item 2, menus that fit: every row of the `/` menu and of the `@` popup shows its
//! whole name at any width from 60 columns; only a description (argument hint aside) is cut,
//! with `…`. Snapshots at 60, 80 and 120 columns and a loop over every width 60..=200.

use crate::app::{options, screen_at};
use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use dsh_session_references::agent::config::ModelChoice;
use dsh_session_references::reference::Candidate;
use dsh_session_references::tui::app::{build, App, AppEvent, Wiring};
use dsh_session_references::tui::popup::PopupState;
use dsh_session_references::tui::slash::{Command, ALIASES, COMMANDS};
use dsh_session_references::tui::snapshot::render_snapshot;
use dsh_session_references::tui::Renderable;

const NOW: i64 = 1_700_000_000_000;
const MIN: i64 = 60_000;

fn app(home: &std::path::Path) -> App {
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let options = options(home);
    build(
        &options,
        Wiring::for_choice(&options, &ModelChoice::Offline).unwrap(),
        tx,
    )
    .unwrap()
    .0
}

/// The app with `/` typed: the menu lists every command.
fn with_slash_menu(home: &std::path::Path) -> App {
    let mut app = app(home);
    app.handle(AppEvent::Input(TermEvent::Key(KeyEvent::new(
        KeyCode::Char('/'),
        KeyModifiers::NONE,
    ))));
    assert!(app.slash.is_open());
    app
}

/// The menu's rows (between its borders) on a `width`-column screen.
fn menu_rows(app: &App, width: u16) -> Vec<String> {
    let screen = screen_at(app, width);
    let lines: Vec<&str> = screen.lines().collect();
    let top = lines
        .iter()
        .position(|l| l.contains("╭ commands "))
        .unwrap_or_else(|| panic!("no menu at {width}:\n{screen}"));
    lines[top + 1..]
        .iter()
        .take_while(|l| !l.contains('╰'))
        .map(|l| l.trim_matches(|c| c == '│' || c == ' ').to_string())
        .collect()
}

/// What every row must show whole: `/name`, its aliases and its argument hint.
fn head_of(command: Command) -> String {
    let (_, name, arg, _) = COMMANDS.iter().find(|(c, ..)| *c == command).unwrap();
    let aliases: Vec<String> = ALIASES
        .iter()
        .filter(|(_, c)| *c == command)
        .map(|(a, _)| format!("/{a}"))
        .collect();
    let mut head = format!("/{name}");
    if !aliases.is_empty() {
        head.push_str(&format!(" ({})", aliases.join(", ")));
    }
    if !arg.is_empty() {
        head.push_str(&format!(" {arg}"));
    }
    head
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_slash_menu_shows_every_name_whole_at_every_width_from_60() {
    let home = tempfile::tempdir().unwrap();
    let app = with_slash_menu(home.path());
    for width in 60..=200u16 {
        let rows = menu_rows(&app, width);
        assert_eq!(rows.len(), COMMANDS.len(), "{width}: {rows:?}");
        for ((command, _, _, what), row) in COMMANDS.iter().zip(&rows) {
            let head = head_of(*command);
            let row = row.trim_start_matches("› ");
            assert!(row.starts_with(&head), "{width}: {head:?} cut in {row:?}");
            // The description follows, whole or cut with `…`, never dropped at these widths.
            let desc = row[head.len()..].trim();
            if desc.ends_with('…') {
                assert!(
                    what.starts_with(desc.trim_end_matches('…')),
                    "{width}: {desc:?}"
                );
            } else {
                assert_eq!(desc, *what, "{width}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_slash_menu_at_60_80_and_120_columns() {
    let home = tempfile::tempdir().unwrap();
    let app = with_slash_menu(home.path());
    for width in [60u16, 80, 120] {
        let screen = screen_at(&app, width);
        let menu: Vec<&str> = screen
            .lines()
            .skip_while(|l| !l.contains("╭ commands "))
            .take(COMMANDS.len() + 2)
            .collect();
        insta::assert_snapshot!(format!("slash_menu_{width}"), menu.join("\n"));
    }
}

/// `/cle` finds `/new`, whose row says why: `/new (/clear)`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alias_typed_is_read_on_its_row() {
    let home = tempfile::tempdir().unwrap();
    let mut app = app(home.path());
    for c in "/cle".chars() {
        app.handle(AppEvent::Input(TermEvent::Key(KeyEvent::new(
            KeyCode::Char(c),
            KeyModifiers::NONE,
        ))));
    }
    let rows = menu_rows(&app, 60);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let words: Vec<&str> = rows[0].split_whitespace().collect();
    assert_eq!(
        words,
        ["›", "/new", "(/clear)", "start", "a", "new", "session"],
        "{rows:?}"
    );
}

fn candidate(id: &str, label: &str, cwd: Option<&str>, age_ms: i64) -> Candidate {
    Candidate {
        session_id: id.into(),
        label: label.into(),
        cwd: cwd.map(Into::into),
        created_at: NOW - age_ms,
    }
}

/// Long titles (one of 54 cells, all a 60-column popup has beside the short tag, and one of
/// 61), a long id as its own name, another agent's session, a long cwd.
fn long_sessions() -> Vec<Candidate> {
    vec![
        candidate(
            "f382e8f5-9f34-4706-bea8-95f943fbcb40",
            "Investigate the parser benchmark regression on aarch64",
            Some("/home/dev/projects/parser"),
            2 * MIN,
        ),
        candidate(
            "0b1c2d3e-0000-4000-8000-000000000001",
            "Investigate the parser benchmark regression after the refill.",
            Some("/home/dev/projects/parser/worktrees/benchmark-regression"),
            5 * MIN,
        ),
        candidate(
            "7a712ba3-b648-4c24-90a9-8184f793c5cc",
            "7a712ba3-b648-4c24-90a9-8184f793c5cc",
            Some("/home/dev/projects/a-rather-long-directory-name/src"),
            3 * 60 * MIN,
        ),
        candidate(
            "claude:4d5611e5-241a-462a-8d15-5122611a9569",
            "Why does the date parser reject 2024-02-29?",
            None,
            9 * 24 * 60 * MIN,
        ),
        candidate("short-1", "Dark mode toggle", Some("/srv"), 40 * 1000),
    ]
}

/// A file deep in the tree: its name is the part after the last `/`.
const DEEP_FILE: &str =
    "src/some/rather/deeply/nested/directory/tree/for/the/width/test/parser_refill_lookahead.rs";

fn popup(width: u16) -> String {
    let mut state = PopupState::new();
    let request = state.open("", false).unwrap();
    assert!(state.apply_results(request.id, Ok(long_sessions())));
    state.set_file_rows(
        "",
        vec![dsh_session_references::tui::FileRow {
            path: DEEP_FILE.into(),
            indices: Vec::new(),
            score: 0,
        }],
    );
    let view = state.view(NOW);
    let height = view.desired_height(width);
    render_snapshot(width, height, |area, buf| view.render(area, buf))
}

/// The drawn rows of the popup (the snapshot's first lines, between the borders).
fn popup_rows(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.contains('╭'))
        .skip(1)
        .take_while(|l| !l.contains('╰'))
        .map(|l| {
            l.trim_matches(|c| c == '|' || c == '│' || c == ' ')
                .to_string()
        })
        .collect()
}

#[test]
fn the_popup_shows_every_session_name_whole_at_every_width_from_60() {
    for width in 60..=200u16 {
        let text = popup(width);
        let rows = popup_rows(&text);
        assert_eq!(rows.len(), long_sessions().len() + 1, "{width}:\n{text}");
        // A file's name is the end of its path, kept whole (the path is cut from the left).
        let file = rows.last().expect("the file row, after the sessions");
        let name = DEEP_FILE.rsplit('/').next().unwrap();
        assert!(file.ends_with(name), "{width}: {file}");
        for (c, row) in long_sessions().iter().zip(&rows) {
            // Whole whenever it fits the row beside the short tag (`› s `, 4 cells, and the
            // agent's badge); every name here but the 61-cell one fits from 60 columns.
            let badge = if c.session_id.starts_with("claude:") {
                7
            } else {
                0
            };
            let room = usize::from(width) - 2 - 4 - badge;
            if c.label.chars().count() <= room {
                assert!(
                    row.contains(&c.label),
                    "{width}: {:?} cut:\n{text}",
                    c.label
                );
            } else {
                assert!(width < 67, "{width}: {:?}", c.label);
                assert!(row.ends_with('…'), "{width}: {row}");
            }
        }
        // At 120 columns there is room for every description too (cwd cut from the left).
        if width >= 120 {
            for row in &rows {
                assert!(!row.ends_with('…'), "{width}: {row}");
            }
        }
    }
}

#[test]
fn the_popup_with_long_names_at_60_80_and_120_columns() {
    for width in [60u16, 80, 120] {
        insta::assert_snapshot!(format!("popup_long_names_{width}"), popup(width));
    }
}
