//! Sessions written by the real Claude Code and Codex CLIs (`tests/data/fixtures/real-agents*`,
//! made by `tests/data/gen/real-agents/gen.sh`; versions in each folder's PROVENANCE.md): they
//! list with the right titles and cwd, project to exactly the prompts and replies (compactions
//! honoured once, no tool output, no thinking, no synthetic replies), the Codex state database
//! is read without a byte under the home changing, and every record kind the fixtures hold is
//! one the readers use or deliberately ignore (the drift guard).

use crate::support::{agent_fixtures, copy_tree};
use dsh_session_references::reference::{project, Role};
use dsh_session_references::session::external::{claude, codex, ExternalAgent, ExternalSessions};
use dsh_session_references::session::SessionQuery;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The fixture folders written by the real CLIs (one per generator run).
fn real_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(agent_fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("real-agents"))
        })
        .collect();
    dirs.sort();
    assert!(!dirs.is_empty(), "no real-agents fixtures");
    dirs
}

/// Every file under `root` with its bytes and modification time.
fn stamped_tree(root: &Path) -> BTreeMap<PathBuf, (Vec<u8>, SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path);
            } else {
                out.insert(
                    path.clone(),
                    (fs::read(&path).unwrap(), meta.modified().unwrap()),
                );
            }
        }
    }
    out
}

/// One session as listed and projected: cwd, title and `role: text` lines.
struct Seen {
    id: String,
    cwd: Option<String>,
    title: Option<String>,
    items: Vec<String>,
}

impl Seen {
    fn text(&self) -> String {
        self.items.join("\n")
    }
}

fn read_all(source: &ExternalSessions) -> Vec<Seen> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let list = source.list_sessions().await.unwrap();
        let mut out = Vec::new();
        for summary in list.iter() {
            let id = summary.id().to_string();
            let title = source.read_title(&id).await.unwrap();
            let snapshot = source.read_conversation_surface(&id).await.unwrap();
            let items = project(&snapshot)
                .into_iter()
                .map(|item| {
                    let role = match (item.role, item.checkpoint) {
                        (_, true) => "summary",
                        (Role::User, _) => "user",
                        (Role::Assistant, _) => "assistant",
                    };
                    let text: String = item.text.chars().take(4000).collect();
                    format!("{role}: {}", text.replace('\n', "⏎"))
                })
                .collect();
            out.push(Seen {
                id,
                cwd: summary.cwd().map(str::to_string),
                title,
                items,
            });
        }
        out
    })
}

fn find<'a>(seen: &'a [Seen], needle: &str) -> &'a Seen {
    seen.iter()
        .find(|s| s.text().contains(needle))
        .unwrap_or_else(|| panic!("no session holds {needle:?}"))
}

/// Nothing the model thought, no tool output, no synthetic reply, never a summary twice.
fn assert_clean(s: &Seen) {
    let text = s.text();
    for banned in [
        "thinking-",
        "tool-ran",
        "No response requested",
        "<synthetic>",
    ] {
        assert!(!text.contains(banned), "{}: {banned:?} in\n{text}", s.id);
    }
    assert!(
        s.items.iter().filter(|i| i.starts_with("summary:")).count() <= 1,
        "{}: a summary twice\n{text}",
        s.id
    );
}

#[test]
fn claude_sessions_of_the_real_cli_list_title_and_project_exactly() {
    for dir in real_dirs() {
        let seen = read_all(&ExternalSessions::new(
            ExternalAgent::Claude,
            dir.join("claude"),
        ));
        assert_eq!(seen.len(), 4, "{}", dir.display());
        for s in &seen {
            assert_clean(s);
            let cwd = s.cwd.as_deref().unwrap_or_default();
            assert!(cwd.starts_with("/tmp/ra-fixture/project-"), "{cwd}");
        }
        let print = find(&seen, "claude alpha first");
        assert_eq!(
            print.items,
            [
                "user: claude alpha first TOOL THINK",
                "assistant: reply to claude alpha first TOOL THINK (tool result seen, done)",
                "user: claude alpha second THINK",
                "assistant: reply to claude alpha second THINK (done)",
                "user: claude alpha third TOOL",
                "assistant: reply to claude alpha third TOOL (tool result seen, done)",
            ],
            "{}",
            dir.display()
        );
        assert_eq!(print.cwd.as_deref(), Some("/tmp/ra-fixture/project-one"));

        let named = find(&seen, "claude beta named prompt");
        assert_eq!(named.title.as_deref(), Some("named by flag"));
        assert_eq!(named.cwd.as_deref(), Some("/tmp/ra-fixture/project-two"));

        // Interactive `/rename` and `/compact`: the summary stands for what came before.
        let renamed = find(&seen, "claude gamma after compact");
        assert_eq!(renamed.title.as_deref(), Some("renamed interactively"));
        assert!(renamed.items[0].starts_with("summary: This session is being continued"));
        assert!(
            !renamed.text().contains("words-gone-after-compact"),
            "{}",
            renamed.text()
        );
        assert_eq!(
            renamed.items.last().map(String::as_str),
            Some("assistant: reply to claude gamma after compact (done)")
        );

        // `-p /compact --resume` after an interactive session: a preserved segment.
        let preserved = find(&seen, "claude delta after print compact");
        let text = preserved.text();
        assert!(
            preserved.items[0].starts_with("summary: This session is being continued"),
            "{text}"
        );
        assert!(
            text.contains("assistant: reply to claude delta three kept (done)"),
            "the preserved segment follows the summary:\n{text}"
        );
        for gone in ["words-removed-by-preserved-compaction", "claude delta two"] {
            assert!(!text.contains(gone), "{gone:?} was compacted away:\n{text}");
        }
        assert_eq!(
            preserved.items.last().map(String::as_str),
            Some("assistant: reply to claude delta after print compact (done)")
        );
        // No title of its own: the session's first prompt, even though the compaction took it
        // out of the conversation (SPEC §9; it was titled by the first prompt after the
        // compaction before).
        assert_eq!(
            preserved.title.as_deref(),
            Some("claude delta one words-removed-by-preserved-compaction"),
            "{}",
            dir.display()
        );
    }
}

#[test]
fn codex_sessions_of_the_real_cli_list_title_and_project_exactly() {
    for dir in real_dirs() {
        let seen = read_all(&ExternalSessions::new(
            ExternalAgent::Codex,
            dir.join("codex"),
        ));
        assert_eq!(seen.len(), 2, "{}", dir.display());
        for s in &seen {
            assert_clean(s);
        }
        let exec = find(&seen, "codex epsilon first");
        assert_eq!(
            exec.items,
            [
                "user: codex epsilon first TOOL THINK",
                "assistant: reply to codex epsilon first TOOL THINK (tool result seen, done)",
                "user: codex epsilon second",
                "assistant: reply to codex epsilon second (done)",
            ]
        );
        assert_eq!(exec.cwd.as_deref(), Some("/tmp/ra-fixture/project-one"));
        // `codex exec` writes no session index: the title is the state database's.
        assert_eq!(
            exec.title.as_deref(),
            Some("codex epsilon first TOOL THINK")
        );

        let tui = find(&seen, "codex zeta after compact");
        assert_eq!(tui.cwd.as_deref(), Some("/tmp/ra-fixture/project-two"));
        assert_eq!(tui.title.as_deref(), Some("zeta renamed"));
        let text = tui.text();
        assert_eq!(
            text.matches("SUMMARY-OF-EARLIER").count(),
            1,
            "the summary once:\n{text}"
        );
        assert_eq!(
            tui.items.last().map(String::as_str),
            Some("assistant: reply to codex zeta after compact (done)")
        );
    }
}

/// Sets thread `id`'s `name` in the copied state database `db` and folds its log in.
fn rename_in_copy(db: &Path, id: &str, name: &str) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute("UPDATE threads SET name = ?1 WHERE id = ?2", (name, id))
        .unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    conn.pragma_update(None, "journal_mode", "DELETE").unwrap();
    drop(conn);
}

#[test]
fn the_codex_state_database_is_read_without_a_byte_changing() {
    let dir = real_dirs().pop().unwrap();
    for checkpointed in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("codex");
        copy_tree(&dir.join("codex"), &home);
        let db = home.join("state_5.sqlite");
        let exec_id = {
            let seen = read_all(&ExternalSessions::new(ExternalAgent::Codex, &home));
            find(&seen, "codex epsilon first").id.clone()
        };
        let own = exec_id.strip_prefix("codex:").unwrap();
        let wal = home.join("state_5.sqlite-wal");
        if checkpointed {
            // The other way Codex can leave it: no log; the name is only in the main file.
            rename_in_copy(&db, own, "named in the state db");
            assert!(!wal.exists());
        } else {
            assert!(wal.exists() && fs::metadata(&wal).unwrap().len() > 0);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        let before = stamped_tree(&home);
        let seen = read_all(&ExternalSessions::new(ExternalAgent::Codex, &home));
        let after = stamped_tree(&home);
        assert_eq!(
            before.keys().collect::<Vec<_>>(),
            after.keys().collect::<Vec<_>>(),
            "no file appeared or went (checkpointed: {checkpointed})"
        );
        assert!(
            before == after,
            "a byte or an mtime changed (checkpointed: {checkpointed})"
        );
        for suffix in ["-shm", "-journal"] {
            assert!(!home.join(format!("state_5.sqlite{suffix}")).exists());
        }
        let exec = seen.iter().find(|s| s.id == exec_id).unwrap();
        let expected = if checkpointed {
            "named in the state db"
        } else {
            "codex epsilon first TOOL THINK"
        };
        assert_eq!(exec.title.as_deref(), Some(expected));
    }
}

/// `(file, kind)` for every record kind under `roots` (paths shown from `base`) the readers
/// neither use nor ignore. A file is Codex's when a folder on its path is named `codex`.
fn unknown_kinds(roots: Vec<PathBuf>, base: &Path) -> BTreeSet<(String, String)> {
    let mut unknown = BTreeSet::new();
    let known = |used: &[&str], ignored: &[&str], kind: &str| {
        used.contains(&kind) || ignored.contains(&kind)
    };
    let mut stack = roots;
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                // Hand-written edge cases are not evidence of a format.
                if name != "synthetic" {
                    stack.push(path);
                }
                continue;
            }
            if !name.ends_with(".jsonl") || name == "session_index.jsonl" {
                continue;
            }
            let is_codex = path.components().any(|c| c.as_os_str() == "codex");
            let text = String::from_utf8_lossy(&fs::read(&path).unwrap()).into_owned();
            let short = path.strip_prefix(base).unwrap().display().to_string();
            for line in text.lines() {
                let Ok(Value::Object(record)) = serde_json::from_str::<Value>(line) else {
                    continue;
                };
                let kind = record.get("type").and_then(Value::as_str).unwrap_or("");
                let mut flag = |what: String| {
                    unknown.insert((short.clone(), what));
                };
                if !is_codex {
                    if !known(
                        claude::USED_RECORD_TYPES,
                        claude::IGNORED_RECORD_TYPES,
                        kind,
                    ) {
                        flag(format!("claude record {kind:?}"));
                    }
                    continue;
                }
                // Pre-envelope lines have no payload; the head scan names that format.
                let Some(payload) = record.get("payload") else {
                    continue;
                };
                if !known(codex::USED_RECORD_TYPES, codex::IGNORED_RECORD_TYPES, kind) {
                    flag(format!("codex record {kind:?}"));
                }
                let inner = payload.get("type").and_then(Value::as_str).unwrap_or("");
                match kind {
                    "event_msg" => {
                        if !known(codex::USED_EVENTS, codex::IGNORED_EVENTS, inner) {
                            flag(format!("codex event_msg {inner:?}"));
                        }
                        if inner == "item_completed" {
                            let item = payload
                                .pointer("/item/type")
                                .and_then(Value::as_str)
                                .unwrap_or("");
                            if !codex::IGNORED_COMPLETED_ITEMS.contains(&item) {
                                flag(format!("codex item_completed {item:?}"));
                            }
                        }
                    }
                    "response_item" if !known(codex::USED_ITEMS, codex::IGNORED_ITEMS, inner) => {
                        flag(format!("codex response_item {inner:?}"));
                    }
                    _ => {}
                }
            }
        }
    }
    unknown
}

#[test]
fn drift_guard_every_record_kind_in_the_fixtures_is_used_or_ignored_on_purpose() {
    let mut roots = vec![
        agent_fixtures().join("claude-code"),
        agent_fixtures().join("codex"),
    ];
    roots.extend(real_dirs());
    let unknown = unknown_kinds(roots, &agent_fixtures());
    assert!(
        unknown.is_empty(),
        "record kinds no reader uses or lists as ignored (a format changed: decide, then list \
         them in src/session/external/claude/mod.rs or codex/mod.rs):\n{}",
        unknown
            .iter()
            .map(|(file, kind)| format!("  {kind} in {file}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn drift_guard_reports_a_kind_it_does_not_know() {
    let tmp = tempfile::tempdir().unwrap();
    let claude_dir = tmp.path().join("claude/projects/-p");
    let codex_dir = tmp.path().join("codex/sessions");
    fs::create_dir_all(&claude_dir).unwrap();
    fs::create_dir_all(&codex_dir).unwrap();
    fs::write(
        claude_dir.join("s.jsonl"),
        "{\"type\":\"user\"}\n{\"type\":\"brand-new-record\"}\n",
    )
    .unwrap();
    fs::write(
        codex_dir.join("rollout-x.jsonl"),
        concat!(
            "{\"type\":\"session_meta\",\"payload\":{}}\n",
            "{\"type\":\"event_msg\",\"payload\":{\"type\":\"item_completed\",\"item\":{\"type\":\"BrandNewItem\"}}}\n",
            "{\"type\":\"event_msg\",\"payload\":{\"type\":\"brand_new_event\"}}\n",
            "{\"type\":\"response_item\",\"payload\":{\"type\":\"brand_new_item\"}}\n",
        ),
    )
    .unwrap();
    let found: Vec<String> = unknown_kinds(vec![tmp.path().to_path_buf()], tmp.path())
        .into_iter()
        .map(|(_, kind)| kind)
        .collect();
    assert_eq!(
        found,
        [
            "claude record \"brand-new-record\"",
            "codex event_msg \"brand_new_event\"",
            "codex item_completed \"BrandNewItem\"",
            "codex response_item \"brand_new_item\"",
        ]
    );
}

#[test]
fn the_cli_lists_the_real_clis_sessions_with_their_titles_and_cwd() {
    for dir in real_dirs() {
        let before = stamped_tree(&dir);
        let dsh_home = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_dsh-refs"))
            .arg("--home")
            .arg(dsh_home.path())
            .arg("--claude-home")
            .arg(dir.join("claude"))
            .arg("--codex-home")
            .arg(dir.join("codex"))
            .args(["--sources", "claude,codex", "sessions", "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        let mut seen: Vec<(String, String)> = rows
            .iter()
            .map(|r| {
                (
                    r["title"].as_str().unwrap_or("<none>").to_string(),
                    r["cwd"].as_str().unwrap_or("<none>").to_string(),
                )
            })
            .collect();
        seen.sort();
        let expected = [
            (
                "claude alpha first TOOL THINK",
                "/tmp/ra-fixture/project-one",
            ),
            (
                "claude delta one words-removed-by-preserved-compaction",
                "/tmp/ra-fixture/project-one",
            ),
            (
                "codex epsilon first TOOL THINK",
                "/tmp/ra-fixture/project-one",
            ),
            ("named by flag", "/tmp/ra-fixture/project-two"),
            ("renamed interactively", "/tmp/ra-fixture/project-three"),
            ("zeta renamed", "/tmp/ra-fixture/project-two"),
        ]
        .map(|(t, c)| (t.to_string(), c.to_string()));
        assert_eq!(seen, expected, "{}", dir.display());
        assert!(
            before == stamped_tree(&dir),
            "{}: a file changed",
            dir.display()
        );
    }
}
