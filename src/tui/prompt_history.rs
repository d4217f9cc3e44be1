//! Prompt history that survives a restart and a resume (SPEC §5.5): every sent message is
//! appended to `<home>/history.jsonl`, and a starting TUI loads the newest entries for Up.
//!
//! One JSON object per line, keys in this order: `sessionId`, `time` (epoch ms), `parts` (an
//! array of `{"text":…}`, `{"mention":{"sessionId":…,"label":…}}` or `{"paste":…}`), so a
//! recalled message gets its mentions back as mentions. Each line is written with one append
//! (several TUIs on one home interleave whole lines). Reading is bounded: only the last
//! [`TAIL_BYTES`] of the file are read and the newest [`MAX_LOADED`] entries kept; a line that
//! does not parse is skipped, never fatal; an entry larger than [`MAX_ENTRY_BYTES`] is not
//! stored. The file is opened regular-only and without blocking ([`files::open_read`]), so a
//! FIFO or a device there is an empty history, never a start-up that waits; nothing is appended
//! through a symlink (the append is refused and logged); an append after a
//! last line torn by a crash starts a new line first, so the entry is never glued to the
//! fragment. This is I/O at the edge: call it off the UI loop (`spawn_blocking`) or at start-up.
//! Proof: the unit tests below and `history_survives_a_restart_and_a_resume` in
//! `tests/tui/app.rs`.

use super::composer::{ComposerSnapshot, Part};
use crate::session::files;
use serde_json::{json, Map, Value};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The history file's name in the home: `<home>/history.jsonl`.
pub const FILE_NAME: &str = "history.jsonl";
/// Entries loaded at start.
pub const MAX_LOADED: usize = 500;
/// Bytes read from the end of the file at start.
pub const TAIL_BYTES: u64 = 4 << 20;
/// A message larger than this (a huge paste) is not kept in the file.
pub const MAX_ENTRY_BYTES: usize = 256 << 10;

/// The history file of `home`.
pub fn path(home: &Path) -> PathBuf {
    home.join(FILE_NAME)
}

/// One line for `snapshot`, or `None` when it is blank or too large to keep.
pub fn encode(session_id: &str, time_ms: i64, snapshot: &ComposerSnapshot) -> Option<String> {
    if snapshot.is_blank() {
        return None;
    }
    let parts: Vec<Value> = snapshot
        .parts()
        .into_iter()
        .map(|part| match part {
            Part::Text(text) => json!({ "text": text }),
            Part::Mention { session_id, label } => {
                json!({ "mention": { "sessionId": session_id, "label": label } })
            }
            Part::Paste(text) => json!({ "paste": text }),
        })
        .collect();
    let mut line = Map::new();
    line.insert("sessionId".into(), Value::String(session_id.to_string()));
    line.insert("time".into(), Value::from(time_ms));
    line.insert("parts".into(), Value::Array(parts));
    let mut text = serde_json::to_string(&Value::Object(line)).ok()?;
    if text.len() > MAX_ENTRY_BYTES {
        return None;
    }
    text.push('\n');
    Some(text)
}

/// The message of one line, or `None` when it is not one of ours.
pub fn decode(line: &str) -> Option<ComposerSnapshot> {
    let value: Value = serde_json::from_str(line).ok()?;
    let parts = value.get("parts")?.as_array()?;
    let mut out = Vec::with_capacity(parts.len());
    for part in parts {
        if let Some(text) = part.get("text").and_then(Value::as_str) {
            out.push(Part::Text(text.to_string()));
        } else if let Some(text) = part.get("paste").and_then(Value::as_str) {
            out.push(Part::Paste(text.to_string()));
        } else if let Some(m) = part.get("mention") {
            out.push(Part::Mention {
                session_id: m.get("sessionId")?.as_str()?.to_string(),
                label: m.get("label")?.as_str()?.to_string(),
            });
        } else {
            return None;
        }
    }
    let snapshot = ComposerSnapshot::from_parts(out);
    (!snapshot.is_blank()).then_some(snapshot)
}

/// Appends one sent message. Errors are returned for the caller to log; history is a
/// convenience, never a reason to fail a send.
pub fn append(
    home: &Path,
    session_id: &str,
    time_ms: i64,
    snapshot: &ComposerSnapshot,
) -> std::io::Result<()> {
    let Some(line) = encode(session_id, time_ms, snapshot) else {
        return Ok(());
    };
    std::fs::create_dir_all(home)?;
    // Never written through a symlink: a link planted here would make every sent message an
    // append to the file it names.
    let mut file = files::open_regular(
        &path(home),
        std::fs::OpenOptions::new()
            .read(true)
            .create(true)
            .append(true),
        files::Symlinks::Refuse,
    )?;
    // A crash mid-append leaves a last line without its newline: this entry starts a line of
    // its own, or it would be glued to that fragment and never parse again. (Another TUI
    // appending between the check and the write at worst leaves a blank line, which is skipped.)
    let len = file.metadata()?.len();
    let mut last = [0u8; 1];
    let torn = len > 0 && {
        file.seek(SeekFrom::Start(len - 1))?;
        file.read_exact(&mut last)?;
        last[0] != b'\n'
    };
    let bytes = if torn { format!("\n{line}") } else { line };
    file.write_all(bytes.as_bytes())
}

/// The newest entries of the home's history, oldest first. A missing or unreadable file is an
/// empty history.
pub fn load(home: &Path) -> Vec<ComposerSnapshot> {
    // Regular files only, opened without blocking: a FIFO here never holds up start-up.
    let mut file = match files::open_read(&path(home)) {
        Ok(file) => file,
        Err(e) => {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(error = %e, "prompt history not loaded");
            }
            return Vec::new();
        }
    };
    let Ok(len) = file.metadata().map(|m| m.len()) else {
        return Vec::new();
    };
    let start = len.saturating_sub(TAIL_BYTES);
    if file.seek(SeekFrom::Start(start)).is_err() {
        return Vec::new();
    }
    let mut bytes = Vec::new();
    if file.take(TAIL_BYTES).read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<&str> = text.lines().collect();
    if start > 0 && !lines.is_empty() {
        // The first line read from the middle of the file is a fragment.
        lines.remove(0);
    }
    let mut entries: Vec<ComposerSnapshot> = lines.into_iter().filter_map(decode).collect();
    if entries.len() > MAX_LOADED {
        entries.drain(..entries.len() - MAX_LOADED);
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::composer::Composer;

    #[test]
    fn entries_round_trip_with_mentions_and_pastes() {
        let mut c = Composer::new();
        c.insert_str("see ");
        c.insert_mention(&crate::reference::Candidate {
            session_id: "s\"1".into(),
            label: "Leap\u{1b} day".into(),
            cwd: None,
            created_at: 0,
        });
        c.handle_paste(&"x\n".repeat(50));
        let snapshot = c.snapshot();
        let line = encode("me", 7, &snapshot).unwrap();
        assert!(line.starts_with("{\"sessionId\":\"me\",\"time\":7,\"parts\":["));
        assert_eq!(
            decode(line.trim_end()).unwrap().submission_text(),
            snapshot.submission_text()
        );
        assert!(encode("me", 7, &ComposerSnapshot::default()).is_none());
    }

    fn sent(text: &str) -> ComposerSnapshot {
        let mut c = Composer::new();
        c.insert_str(text);
        c.snapshot()
    }

    #[test]
    fn an_entry_after_a_torn_last_line_starts_a_line_of_its_own() {
        let home = tempfile::tempdir().unwrap();
        let whole = encode("s", 1, &sent("before the crash")).unwrap();
        let torn = &encode("s", 2, &sent("cut by the crash")).unwrap()[..20];
        std::fs::write(path(home.path()), format!("{whole}{torn}")).unwrap();
        append(home.path(), "s", 3, &sent("after the restart")).unwrap();
        append(home.path(), "s", 4, &sent("and one more")).unwrap();
        let texts: Vec<String> = load(home.path())
            .iter()
            .map(|e| e.submission_text())
            .collect();
        assert_eq!(
            texts,
            ["before the crash", "after the restart", "and one more"]
        );
        // The fragment is left as it was (a line of its own now), never rewritten.
        let bytes = std::fs::read_to_string(path(home.path())).unwrap();
        assert!(bytes.starts_with(&format!("{whole}{torn}\n{{")), "{bytes}");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_history_neither_blocks_loading_nor_takes_an_entry() {
        let home = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(path(home.path()))
            .status()
            .unwrap();
        assert!(status.success());
        let dir = home.path().to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let loaded = load(&dir).len();
            let appended = append(&dir, "s", 1, &sent("hello")).map_err(|e| e.to_string());
            let _ = tx.send((loaded, appended));
        });
        let (loaded, appended) = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("a FIFO history.jsonl blocked the TUI's start-up");
        assert_eq!(loaded, 0);
        assert!(appended.unwrap_err().contains("FIFO"));
    }

    #[cfg(unix)]
    #[test]
    fn an_entry_is_never_appended_through_a_symlink() {
        let home = tempfile::tempdir().unwrap();
        let outside = home.path().join("outside");
        std::fs::write(&outside, b"someone's file\n").unwrap();
        std::os::unix::fs::symlink(&outside, path(home.path())).unwrap();
        let err = append(home.path(), "s", 1, &sent("hello")).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(std::fs::read(&outside).unwrap(), b"someone's file\n");
    }

    #[test]
    fn loading_keeps_the_newest_and_skips_what_is_not_ours() {
        let home = tempfile::tempdir().unwrap();
        let mut text = String::from("not json\n{\"parts\":[{\"what\":1}]}\n");
        for n in 0..MAX_LOADED + 5 {
            let mut c = Composer::new();
            c.insert_str(&format!("message {n}"));
            text.push_str(&encode("s", 0, &c.snapshot()).unwrap());
        }
        std::fs::write(path(home.path()), text).unwrap();
        let loaded = load(home.path());
        assert_eq!(loaded.len(), MAX_LOADED);
        assert_eq!(loaded[0].submission_text(), "message 5");
        assert_eq!(
            loaded.last().unwrap().submission_text(),
            format!("message {}", MAX_LOADED + 4)
        );
        assert!(load(&home.path().join("missing")).is_empty());
    }
}
