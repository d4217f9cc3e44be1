//! File attachments (SPEC §5.5): a file the person chose goes to the model as one bounded
//! context message, logged before the prompt like any context (`{"kind":"plugin","plugin":
//! "file",…}`, so a session-reference snapshot of this session never copies it, SPEC §3.5).
//!
//! Purpose: nothing leaves the machine that the person did not choose. A file is read only
//! from an explicit list: the TUI's file chips (picked in the `@` popup, or an `@path` the
//! person typed and turned into a chip with Space or Tab, each drawn with its size before the
//! send), or `exec`'s `@path` tokens of the prompt argument under the cwd plus its `--attach`
//! paths. Text is never searched for paths at send time: a mention's label (a session title,
//! which a model may have written), a collapsed paste, a snapshot or a recalled line attach
//! nothing.
//!
//! Invariants: at most [`MAX_FILES`] files and [`MAX_FILE_BYTES`] of each are attached; a file
//! that is cut says so and how much was kept; a binary file (a NUL byte, or not UTF-8) is not
//! attached as text, its context says so instead; only a regular file is opened, never
//! blocking (a FIFO is refused, `session::files`); a path that resolves outside the session's
//! cwd (absolute, `..`, or a symlink) is read only when the person allowed it, and it is
//! resolved again when read, so a symlink swapped after the chip was made is caught.
//! Token finding and formatting are pure; [`inspect`] and [`read_chosen`] do the I/O, off the
//! async workers ([`read_chosen`] inside the mount's submit transaction,
//! `SessionReferenceMount::submit_files`). Proof: the unit tests below,
//! `tests/tui/attach.rs` (a planted key never reaches a loopback model server through a title, a Claude `ai-title`, a paste or a snapshot; a
//! picked, a typed and a confirmed outside file do), `tests/agent/exec_attach.rs` and the tmux
//! run `a_pasted_key_path_attaches_nothing` (`tests/e2e/tmux_attach.rs`).

use crate::session::{ContentBlock, Message, MessageSource};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Files attached to one message at most.
pub const MAX_FILES: usize = 8;
/// Bytes of one file attached at most.
pub const MAX_FILE_BYTES: usize = 64 << 10;
/// The plugin name of a file attachment's source.
pub const FILE_PLUGIN: &str = "file";

/// The `@path` tokens of `text` outside its session mentions, in order, without duplicates:
/// `@` at a token boundary, then a quoted path or a run of non-whitespace. A session mention
/// (`@[…](dsh-session:…)`) and everything inside it (its label) is skipped.
pub fn file_tokens(text: &str) -> Vec<String> {
    let spans = crate::reference::session_reference_spans(text);
    let inside = |at: usize| spans.iter().any(|s| s.contains(&at));
    let mut out: Vec<String> = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        let boundary = i == 0 || chars[i - 1].1.is_whitespace();
        if c != '@' || !boundary || inside(at) {
            i += 1;
            continue;
        }
        let rest = &text[at + 1..];
        let token = if let Some(quoted) = rest.strip_prefix('"') {
            quoted.find('"').map(|end| &quoted[..end])
        } else if rest.starts_with('[') {
            None
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            Some(&rest[..end])
        };
        if let Some(token) = token.filter(|t| !t.is_empty()) {
            // A token running into a mention (`@x@[…`) stops where the mention starts.
            let token = match spans
                .iter()
                .find(|s| s.start > at && s.start < at + 1 + token.len())
            {
                Some(s) => &token[..s.start - at - 1],
                None => token,
            };
            if !token.is_empty() && !out.iter().any(|seen| seen == token) {
                out.push(token.to_string());
            }
        }
        i += 1;
    }
    out
}

/// The ways a written path may be meant: as written, then without trailing punctuation (`.`,
/// `,`, `)`…), so `see @notes.md.` names `notes.md`.
pub fn path_candidates(written: &str) -> Vec<&str> {
    let trimmed = written.trim_end_matches(|c: char| ",.;:!?)]}'\"".contains(c));
    let mut out = vec![written];
    if trimmed != written && !trimmed.is_empty() {
        out.push(trimmed);
    }
    out
}

/// A path that names a regular file, and where it resolves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspected {
    /// The path as written (relative to the cwd, or absolute).
    pub path: String,
    /// Where it resolves, symlinks followed.
    pub resolved: PathBuf,
    /// The file's size.
    pub bytes: u64,
    /// It resolves outside the session's cwd (or there is no cwd to be inside of).
    pub outside: bool,
}

/// Why a written `@path` names no file that can be attached; the text is what the user sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InspectError {
    /// Nothing was written after `@`.
    #[error("no path")]
    NoPath,
    /// Nothing is there.
    #[error("no such file")]
    NotFound,
    /// A directory is there.
    #[error("a directory, not a file")]
    Directory,
    /// Something other than a regular file or a directory (a FIFO, a device, a socket).
    #[error("not a regular file")]
    NotRegular,
    /// The path could not be resolved or its metadata read; the system's reason.
    #[error("{0}")]
    Io(String),
}

/// Where `written` leads from `cwd`: the regular file it names, its size, and whether it lies
/// outside `cwd` (an absolute path, `..`, or a symlink that resolves elsewhere). Blocking
/// (metadata only, the file is not opened): call it from `spawn_blocking`.
pub fn inspect(cwd: Option<&Path>, written: &str) -> Result<Inspected, InspectError> {
    if written.is_empty() {
        return Err(InspectError::NoPath);
    }
    let joined = match cwd {
        Some(cwd) => cwd.join(written),
        None => PathBuf::from(written),
    };
    let resolved = std::fs::canonicalize(&joined).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => InspectError::NotFound,
        _ => InspectError::Io(e.to_string()),
    })?;
    let meta = std::fs::metadata(&resolved).map_err(|e| InspectError::Io(e.to_string()))?;
    if !meta.is_file() {
        return Err(if meta.is_dir() {
            InspectError::Directory
        } else {
            InspectError::NotRegular
        });
    }
    let outside = match cwd.map(std::fs::canonicalize) {
        Some(Ok(root)) => !resolved.starts_with(root),
        _ => true,
    };
    Ok(Inspected {
        path: written.to_string(),
        resolved,
        bytes: meta.len(),
        outside,
    })
}

/// [`inspect`] over [`path_candidates`]: the first way of reading `written` that names a file.
pub fn inspect_token(cwd: Option<&Path>, written: &str) -> Result<Inspected, InspectError> {
    let mut first = None;
    for candidate in path_candidates(written) {
        match inspect(cwd, candidate) {
            Ok(found) => return Ok(found),
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    Err(first.unwrap_or(InspectError::NoPath))
}

/// One file the person chose, as the send carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChosenFile {
    /// The path as written (relative to the cwd, or absolute).
    pub path: String,
    /// The person allowed a path outside the cwd (confirmed in the TUI, `--attach` in `exec`).
    pub allow_outside: bool,
}

/// Reads exactly the files of `chosen` (nothing else), resolving each again from `cwd`: one
/// that no longer names a regular file, or that now resolves outside the cwd without having
/// been allowed to, fails the whole send with a message naming it (the caller keeps the draft).
/// Blocking I/O: call it from `spawn_blocking`.
pub fn read_chosen(cwd: Option<&Path>, chosen: &[ChosenFile]) -> Result<Vec<Message>, String> {
    if chosen.len() > MAX_FILES {
        return Err(format!(
            "{} files are attached; at most {MAX_FILES} go with one message",
            chosen.len()
        ));
    }
    let mut out = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    for file in chosen {
        let shown = crate::escape::escape_line(&file.path).into_owned();
        let found = inspect(cwd, &file.path).map_err(|e| format!("@{shown}: {e}"))?;
        if found.outside && !file.allow_outside {
            return Err(format!(
                "@{shown} resolves outside the session's directory (to {}) and was not confirmed",
                crate::escape::escape_line(&found.resolved.to_string_lossy())
            ));
        }
        if seen.contains(&found.resolved) {
            continue;
        }
        let read = read_head(&found.resolved, &file.path).map_err(|e| format!("@{shown}: {e}"))?;
        seen.push(found.resolved);
        out.push(attachment(&read));
    }
    Ok(out)
}

/// What `exec` attaches: each `--attach PATH` (any regular file: naming it is the choice), then
/// the prompt argument's `@path` tokens outside its mentions that name a regular file under
/// `cwd`. A token naming a file outside `cwd` attaches nothing and gets a note (for stderr)
/// saying how to send it; a token naming nothing stays text. An `--attach` that names no
/// regular file is an error. Blocking (metadata only).
pub fn exec_choice(
    cwd: &Path,
    prompt: Option<&str>,
    explicit: &[String],
) -> Result<(Vec<ChosenFile>, Vec<String>), String> {
    let mut chosen: Vec<(ChosenFile, PathBuf)> = Vec::new();
    let mut notes = Vec::new();
    for path in explicit {
        let found = inspect(Some(cwd), path)
            .map_err(|e| format!("--attach {}: {e}", crate::escape::escape_line(path)))?;
        if !chosen.iter().any(|(_, r)| *r == found.resolved) {
            chosen.push((
                ChosenFile {
                    path: path.clone(),
                    allow_outside: true,
                },
                found.resolved,
            ));
        }
    }
    for token in prompt.map(file_tokens).unwrap_or_default() {
        let Ok(found) = inspect_token(Some(cwd), &token) else {
            continue;
        };
        if found.outside {
            notes.push(format!(
                "@{} is outside the working directory: not attached (name it with --attach to send it)",
                crate::escape::escape_line(&found.path)
            ));
            continue;
        }
        if !chosen.iter().any(|(_, r)| *r == found.resolved) {
            chosen.push((
                ChosenFile {
                    path: found.path,
                    allow_outside: false,
                },
                found.resolved,
            ));
        }
    }
    if chosen.len() > MAX_FILES {
        return Err(format!(
            "{} files would be attached; at most {MAX_FILES} go with one message",
            chosen.len()
        ));
    }
    Ok((chosen.into_iter().map(|(c, _)| c).collect(), notes))
}

/// What was read of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRead {
    /// The path as the user wrote it.
    pub path: String,
    /// The whole file's size.
    pub total: u64,
    /// The first bytes (at most [`MAX_FILE_BYTES`] + 1, to know it was cut).
    pub head: Vec<u8>,
}

/// The context message for one file read.
pub fn attachment(read: &FileRead) -> Message {
    let binary = read.head.contains(&0)
        || std::str::from_utf8(&read.head).is_err_and(|e| {
            // A character cut by the byte limit is not a sign of binary data.
            e.error_len().is_some() || read.head.len() <= MAX_FILE_BYTES
        });
    let mut text = format!("## Attached file: {}\n\n", read.path);
    let mut kept = 0usize;
    let truncated;
    if binary {
        text.push_str(&format!(
            "[binary file, {} bytes: its content is not attached]",
            read.total
        ));
        truncated = true;
    } else {
        let limit = read.head.len().min(MAX_FILE_BYTES);
        let body = match std::str::from_utf8(&read.head[..limit]) {
            Ok(body) => body,
            // Cut inside a character: keep the whole characters before it.
            Err(e) => std::str::from_utf8(&read.head[..e.valid_up_to()]).unwrap_or(""),
        };
        kept = body.len();
        truncated = (kept as u64) < read.total;
        text.push_str(body);
        if truncated {
            if !body.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!(
                "[… cut: the first {kept} of {} bytes are attached]",
                read.total
            ));
        }
    }
    let mut extra = Map::new();
    extra.insert("path".into(), Value::String(read.path.clone()));
    extra.insert("bytes".into(), Value::from(read.total));
    extra.insert("attachedBytes".into(), Value::from(kept as u64));
    extra.insert("truncated".into(), Value::Bool(truncated));
    if binary {
        extra.insert("binary".into(), Value::Bool(true));
    }
    Message::new(
        "user",
        vec![ContentBlock::text(text)],
        MessageSource::Plugin {
            plugin: FILE_PLUGIN.to_string(),
            extra,
        },
        crate::agent::runtime::new_message_id(),
    )
}

fn read_head(path: &Path, shown: &str) -> std::io::Result<FileRead> {
    use std::io::Read;
    let file = crate::session::files::open_read(path)?;
    let total = file.metadata()?.len();
    let mut head = Vec::new();
    file.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut head)?;
    Ok(FileRead {
        path: shown.to_string(),
        total: total.max(head.len() as u64),
        head,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_paths_at_boundaries() {
        assert_eq!(
            file_tokens("see @src/main.rs and @\"my file.txt\", not a@b or @[x](dsh-session:IiI)"),
            ["src/main.rs", "my file.txt"]
        );
        assert_eq!(file_tokens("@a @a @"), ["a"]);
        assert!(file_tokens("plain").is_empty());
    }

    fn read(path: &str, bytes: &[u8], total: u64) -> FileRead {
        FileRead {
            path: path.into(),
            total,
            head: bytes.to_vec(),
        }
    }

    #[test]
    fn text_is_attached_whole_or_cut_with_a_note() {
        let m = attachment(&read("a.rs", b"fn main() {}\n", 13));
        assert_eq!(m.text(), "## Attached file: a.rs\n\nfn main() {}\n");
        let source = serde_json::to_value(&m.source).unwrap();
        assert_eq!(source["kind"], "plugin");
        assert_eq!(source["plugin"], "file");
        assert_eq!(source["truncated"], false);
        let big = "é".repeat(MAX_FILE_BYTES); // 2 bytes each: the limit falls mid-character
        let m = attachment(&read(
            "big.txt",
            &big.as_bytes()[..MAX_FILE_BYTES + 1],
            1 << 20,
        ));
        assert!(m.text().ends_with(&format!(
            "[… cut: the first {MAX_FILE_BYTES} of 1048576 bytes are attached]"
        )));
        assert!(!m.text().contains('\u{fffd}'));
    }

    #[test]
    fn binary_files_are_named_not_attached() {
        let m = attachment(&read("a.png", b"\x89PNG\r\n\x1a\n\0\0", 10));
        assert!(m
            .text()
            .contains("[binary file, 10 bytes: its content is not attached]"));
        let m = attachment(&read("latin.txt", b"caf\xe9", 4));
        assert!(m.text().contains("binary file"));
    }

    #[test]
    fn a_mention_label_is_not_a_path() {
        let mention =
            crate::reference::format_session_reference_mention("s", Some("notes @/etc/passwd"));
        assert_eq!(file_tokens(&format!("see {mention} and @a.md")), ["a.md"]);
        assert_eq!(file_tokens(&format!("@x{mention}")), ["x"]);
    }

    #[test]
    fn inspection_says_what_is_outside_the_cwd() {
        let root = tempfile::tempdir().unwrap();
        let cwd = root.path().join("proj");
        std::fs::create_dir_all(cwd.join("src")).unwrap();
        std::fs::write(cwd.join("notes.md"), "hello").unwrap();
        std::fs::write(root.path().join("secret"), "key").unwrap();
        let got = inspect(Some(&cwd), "notes.md").unwrap();
        assert_eq!((got.bytes, got.outside), (5, false));
        assert!(inspect(Some(&cwd), "../secret").unwrap().outside);
        let absolute = root.path().join("secret");
        assert!(
            inspect(Some(&cwd), absolute.to_str().unwrap())
                .unwrap()
                .outside
        );
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&absolute, cwd.join("link")).unwrap();
            assert!(
                inspect(Some(&cwd), "link").unwrap().outside,
                "a symlink out"
            );
            std::os::unix::fs::symlink(cwd.join("notes.md"), cwd.join("inner")).unwrap();
            assert!(!inspect(Some(&cwd), "inner").unwrap().outside);
        }
        assert_eq!(
            inspect(Some(&cwd), "src").unwrap_err().to_string(),
            "a directory, not a file"
        );
        assert_eq!(
            inspect(Some(&cwd), "missing").unwrap_err().to_string(),
            "no such file"
        );
        assert_eq!(
            inspect_token(Some(&cwd), "notes.md,").unwrap().path,
            "notes.md"
        );
    }

    #[test]
    fn only_chosen_files_are_read_and_outside_ones_only_when_allowed() {
        let root = tempfile::tempdir().unwrap();
        let cwd = root.path().join("proj");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::write(cwd.join("notes.md"), "hello").unwrap();
        std::fs::write(root.path().join("secret"), "key").unwrap();
        let chosen = |path: &str, allow_outside| ChosenFile {
            path: path.into(),
            allow_outside,
        };
        let got = read_chosen(Some(&cwd), &[chosen("notes.md", false)]).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].text(), "## Attached file: notes.md\n\nhello");
        let refused = read_chosen(Some(&cwd), &[chosen("../secret", false)]).unwrap_err();
        assert!(refused.contains("outside"), "{refused}");
        let got = read_chosen(Some(&cwd), &[chosen("../secret", true)]).unwrap();
        assert!(got[0].text().ends_with("key"));
        assert!(read_chosen(Some(&cwd), &[chosen("gone", false)]).is_err());
    }

    #[test]
    fn exec_takes_prompt_paths_under_the_cwd_and_attach_paths_anywhere() {
        let root = tempfile::tempdir().unwrap();
        let cwd = root.path().join("proj");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::write(cwd.join("notes.md"), "hello").unwrap();
        std::fs::write(root.path().join("secret"), "key").unwrap();
        let secret = root.path().join("secret").to_string_lossy().into_owned();
        let (chosen, notes) = exec_choice(
            &cwd,
            Some(&format!(
                "read @notes.md and @{secret} and @../secret and @nobody"
            )),
            &[],
        )
        .unwrap();
        assert_eq!(chosen.len(), 1);
        assert_eq!(chosen[0].path, "notes.md");
        assert_eq!(notes.len(), 2, "{notes:?}");
        let (chosen, _) = exec_choice(&cwd, None, std::slice::from_ref(&secret)).unwrap();
        assert_eq!(chosen[0].path, secret);
        assert!(chosen[0].allow_outside);
        let missing = exec_choice(&cwd, None, &["nope".into()]).unwrap_err();
        assert_eq!(missing, "--attach nope: no such file");
    }
}
