//! `@path` attachments (SPEC §5.5): a sent message that names a file of the session's cwd with
//! `@path` (or `@"path with spaces"`) carries that file's text to the model as one bounded
//! context message, logged before the prompt like any context (`{"kind":"plugin","plugin":
//! "file",…}`, so a session-reference snapshot of this session never copies it, SPEC §3.5).
//!
//! Invariants: at most [`MAX_FILES`] files and [`MAX_FILE_BYTES`] of each are attached; a file
//! that is cut says so and how much was kept; a binary file (a NUL byte, or not UTF-8) is not
//! attached as text, its context says so instead; a token that names no regular file stays
//! plain text and attaches nothing. Token finding and formatting are pure; reading is the one
//! I/O function, run off the UI loop. Proof: the unit tests below and the tmux end-to-end run
//! `an_at_file_reaches_the_log` (`tests/e2e_tmux.rs`).

use crate::session::{ContentBlock, Message, MessageSource};
use serde_json::{Map, Value};
use std::path::Path;

/// Files attached to one message at most.
pub const MAX_FILES: usize = 8;
/// Bytes of one file attached at most.
pub const MAX_FILE_BYTES: usize = 64 << 10;
/// The plugin name of a file attachment's source.
pub const FILE_PLUGIN: &str = "file";

/// The `@path` tokens of a submitted text, in order, without duplicates: `@` at a token
/// boundary, then a quoted path or a run of non-whitespace. A session mention (`@[…`) is not
/// a path.
pub fn file_tokens(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        let boundary = i == 0 || chars[i - 1].1.is_whitespace();
        if c != '@' || !boundary {
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
            if !out.iter().any(|seen| seen == token) {
                out.push(token.to_string());
            }
        }
        i += 1;
    }
    out
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

/// Reads the files `text` names under `cwd` (blocking I/O: call it from `spawn_blocking`).
/// Tokens that name no regular file are left alone; trailing punctuation (`.`, `,`, `)`…) is
/// tried off when the token as written names nothing.
pub fn read_attachments(cwd: Option<&Path>, text: &str) -> Vec<Message> {
    let mut out = Vec::new();
    for token in file_tokens(text) {
        if out.len() >= MAX_FILES {
            break;
        }
        let candidates = [
            token.as_str(),
            token.trim_end_matches(|c: char| ",.;:!?)]}'\"".contains(c)),
        ];
        for candidate in candidates {
            if candidate.is_empty() {
                continue;
            }
            let path = match cwd {
                Some(cwd) => cwd.join(candidate),
                None => Path::new(candidate).to_path_buf(),
            };
            if let Some(read) = read_head(&path, candidate) {
                out.push(attachment(&read));
                break;
            }
        }
    }
    out
}

fn read_head(path: &Path, shown: &str) -> Option<FileRead> {
    use std::io::Read;
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let file = std::fs::File::open(path).ok()?;
    let mut head = Vec::new();
    file.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut head)
        .ok()?;
    Some(FileRead {
        path: shown.to_string(),
        total: meta.len().max(head.len() as u64),
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
    fn only_regular_files_under_the_cwd_are_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.md"), "hello").unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        let got = read_attachments(Some(dir.path()), "see @notes.md, @src and @missing.txt");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].text(), "## Attached file: notes.md\n\nhello");
    }
}
