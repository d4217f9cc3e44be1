//! The names GitHub Copilot CLI keeps beside a session's log: `session-state/<id>/workspace.yaml`.
//!
//! Purpose: a name given with `copilot -n NAME` (or `/rename`) lives only in the session's
//! `workspace.yaml` (`name:` with `user_named: true`); without one, `name:` is the name Copilot
//! derived itself (its first prompt, or a generated title); `cwd:` is where the session started
//! (the log's `session.start` says so too; this is the fallback). Only the top-level keys
//! `name`, `user_named` and `cwd` are read, by a small line parser of the YAML Copilot writes: a plain scalar, a
//! single- or double-quoted one, or a `|`/`>` block scalar (what the CLI writes for a name with
//! a newline).
//!
//! Invariant: the file is read through `files::read_small` (a regular file only, never a
//! symlink, opened without blocking, at most [`MAX_BYTES`]); a file that is larger, absent or
//! not UTF-8 names nothing; parsing is one pass over its lines. Each file is read again only
//! when its stamp changed. Nothing is written.
//! Proof: the unit tests below (the forms the CLI writes, and hostile input), and
//! `tests/session/copilot_sessions.rs` (a `-n` name and a derived name from the real CLI).

use super::agent::SideNames;
use super::scan::FileStamp;
use super::title_line;
use crate::session::files;
use crate::sync::LockExt;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// The largest `workspace.yaml` read (Copilot's are a few hundred bytes).
pub const MAX_BYTES: usize = 64 * 1024;

/// What a `workspace.yaml` says about the session's name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workspace {
    /// `name`, if it holds a title.
    pub name: Option<String>,
    /// `user_named: true`: the person gave the name.
    pub user_named: bool,
    /// `cwd`: where the session started.
    pub cwd: Option<String>,
}

/// The `workspace.yaml` files of one home's `session-state/`, read as asked.
pub struct Workspaces {
    sessions: PathBuf,
    cache: Mutex<HashMap<String, (FileStamp, Workspace)>>,
}

impl Workspaces {
    /// The side files under `sessions` (`<home>/session-state`); nothing is read until asked.
    pub fn new(sessions: PathBuf) -> Workspaces {
        Workspaces {
            sessions,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn workspace(&self, own_id: &str) -> Workspace {
        // The id is a directory name the listing found: never a path of its own.
        if own_id.is_empty() || own_id.starts_with('.') || own_id.contains(['/', '\\']) {
            return Workspace::default();
        }
        let path = self.sessions.join(own_id).join("workspace.yaml");
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            self.cache.locked().remove(own_id);
            return Workspace::default();
        };
        let stamp = FileStamp::of(&meta);
        if let Some((known, workspace)) = self.cache.locked().get(own_id) {
            if *known == stamp {
                return workspace.clone();
            }
        }
        let workspace = read(&path);
        self.cache
            .locked()
            .insert(own_id.to_string(), (stamp, workspace.clone()));
        workspace
    }
}

impl SideNames for Workspaces {
    fn given_name(&self, own_id: &str) -> Option<String> {
        let workspace = self.workspace(own_id);
        workspace.user_named.then_some(workspace.name).flatten()
    }

    fn generated_title(&self, own_id: &str) -> Option<String> {
        let workspace = self.workspace(own_id);
        (!workspace.user_named).then_some(workspace.name).flatten()
    }
}

/// The `workspace.yaml` at `path`, read bounded (nothing when it is absent, not a regular
/// file, too large or not UTF-8).
pub fn read(path: &std::path::Path) -> Workspace {
    files::read_small(path, MAX_BYTES)
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .map(|text| parse(&text))
        .unwrap_or_default()
}

/// The `name`, `user_named` and `cwd` of a `workspace.yaml`; keys not at the top level, repeated
/// keys after the first and anything unparsable are passed over.
pub fn parse(text: &str) -> Workspace {
    let mut workspace = Workspace::default();
    let (mut name_seen, mut named_seen, mut cwd_seen) = (false, false, false);
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        // Only top-level `key: value` lines: indented lines belong to another key's value.
        if line.starts_with([' ', '\t', '#']) {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key {
            "name" if !name_seen => {
                name_seen = true;
                let text = if value.starts_with(['|', '>']) {
                    let folded = value.starts_with('>');
                    let mut block = Vec::new();
                    while let Some(next) = lines.peek() {
                        if !next.is_empty() && !next.starts_with([' ', '\t']) {
                            break;
                        }
                        block.push(next.trim());
                        lines.next();
                    }
                    Some(block.join(if folded { " " } else { "\n" }))
                } else {
                    scalar(value)
                };
                workspace.name = text.as_deref().and_then(title_line);
            }
            "user_named" if !named_seen => {
                named_seen = true;
                workspace.user_named = scalar(value).as_deref() == Some("true");
            }
            "cwd" if !cwd_seen => {
                cwd_seen = true;
                workspace.cwd = scalar(value).filter(|c| c.len() < 4096);
            }
            _ => {}
        }
    }
    workspace
}

/// A one-line YAML scalar: quoted (`'it''s'`, `"a\"b"`) or plain (up to a ` #` comment);
/// `None` for an unterminated quote or an empty value.
fn scalar(value: &str) -> Option<String> {
    if let Some(rest) = value.strip_prefix('\'') {
        let mut out = String::new();
        let mut chars = rest.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\'' {
                if chars.peek() == Some(&'\'') {
                    chars.next();
                    out.push('\'');
                } else {
                    return Some(out);
                }
            } else {
                out.push(c);
            }
        }
        return None;
    }
    if let Some(rest) = value.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = rest.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => return Some(out),
                '\\' => match chars.next()? {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'u' => {
                        let hex: String = chars.by_ref().take(4).collect();
                        let code = u32::from_str_radix(&hex, 16).ok()?;
                        out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                    }
                    other => out.push(other),
                },
                c => out.push(c),
            }
        }
        return None;
    }
    let plain = value.find(" #").map_or(value, |at| &value[..at]).trim();
    (!plain.is_empty() && plain != "~" && plain != "null").then(|| plain.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(text: &str) -> (Option<String>, bool) {
        let w = parse(text);
        (w.name, w.user_named)
    }

    #[test]
    fn the_forms_copilot_writes() {
        let head =
            "id: 857280a6-88b7-4f70-8841-774da53469f8\ncwd: /tmp/w\nclient_name: github/cli\n";
        let tail = "summary_count: 0\nfork_count: 0\ncreated_at: 2026-12-04T08:03:21.544Z\n";
        let case =
            |name: &str, user: &str| format!("{head}name: {name}\nuser_named: {user}\n{tail}");
        assert_eq!(
            named(&case("CB Named Session ✓", "true")),
            (Some("CB Named Session ✓".into()), true)
        );
        assert_eq!(parse(&case("x", "true")).cwd.as_deref(), Some("/tmp/w"));
        assert_eq!(parse("cwd: '/a b: c'\n").cwd.as_deref(), Some("/a b: c"));
        assert_eq!(named(&case("'true'", "true")), (Some("true".into()), true));
        assert_eq!(
            named(&case("'''starts with quote'", "true")),
            (Some("'starts with quote".into()), true)
        );
        assert_eq!(
            named(&case("'#hash: start'", "true")),
            (Some("#hash: start".into()), true)
        );
        assert_eq!(
            named(&case(
                "|-\n  YC-T1 a long first prompt\n  and a second line",
                "false"
            )),
            (Some("YC-T1 a long first prompt".into()), false)
        );
        assert_eq!(
            named(&case(r#""tab\there \u00e9""#, "false")),
            (Some("tab\there é".into()), false)
        );
    }

    #[test]
    fn hostile_input_names_nothing_or_the_first_key() {
        assert_eq!(named(""), (None, false));
        assert_eq!(named("name:\nuser_named: yes"), (None, false));
        assert_eq!(named("name: 'unterminated\nuser_named: true"), (None, true));
        assert_eq!(named("name: \"bad \\u12\"\n"), (None, false));
        assert_eq!(named("  name: nested\nuser_named: true"), (None, true));
        assert_eq!(
            named("name: first\nname: second\nuser_named: true\nuser_named: false"),
            (Some("first".into()), true)
        );
        assert_eq!(
            named("name: plain # a comment"),
            (Some("plain".into()), false)
        );
        assert_eq!(named("name: ~"), (None, false));
        assert_eq!(named("\u{0}\u{ffff}: x\nname"), (None, false));
        // A long block is one pass: no line is read twice.
        let long = format!("name: |\n{}user_named: true\n", "  x\n".repeat(100_000));
        assert_eq!(named(&long), (Some("x".into()), true));
    }

    #[test]
    fn side_names_come_from_the_session_directory_and_follow_its_changes() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("abc");
        std::fs::create_dir_all(&session).unwrap();
        let side = Workspaces::new(dir.path().to_path_buf());
        assert_eq!(side.given_name("abc"), None);
        std::fs::write(
            session.join("workspace.yaml"),
            "name: Derived\nuser_named: false\n",
        )
        .unwrap();
        assert_eq!(side.given_name("abc"), None);
        assert_eq!(side.generated_title("abc").as_deref(), Some("Derived"));
        std::fs::write(
            session.join("workspace.yaml"),
            "name: Given by me\nuser_named: true\n",
        )
        .unwrap();
        assert_eq!(side.given_name("abc").as_deref(), Some("Given by me"));
        assert_eq!(side.generated_title("abc"), None);
        assert_eq!(side.given_name("../abc"), None);
        assert_eq!(side.given_name(".."), None);
        // Too large: nothing.
        std::fs::write(
            session.join("workspace.yaml"),
            format!("name: big\nuser_named: true\n#{}\n", "x".repeat(MAX_BYTES)),
        )
        .unwrap();
        assert_eq!(side.given_name("abc"), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_or_a_symlink_in_its_place_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("abc");
        std::fs::create_dir_all(&session).unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(session.join("workspace.yaml"))
            .status()
            .unwrap();
        assert!(status.success());
        let side = Workspaces::new(dir.path().to_path_buf());
        assert_eq!(side.given_name("abc"), None);
        let other = dir.path().join("elsewhere.yaml");
        std::fs::write(&other, "name: Elsewhere\nuser_named: true\n").unwrap();
        let linked = dir.path().join("def");
        std::fs::create_dir_all(&linked).unwrap();
        std::os::unix::fs::symlink(&other, linked.join("workspace.yaml")).unwrap();
        assert_eq!(side.given_name("def"), None);
    }
}
