//! Where logs live (SPEC §1.1): home resolution and the lossy directory naming of dsh.
//!
//! Directory names are only a filing scheme: identity always comes from the header.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The directory under the home holding every project directory: `<home>/sessions`.
pub const SESSIONS_DIR: &str = "sessions";
/// The project directory of sessions without a cwd: `<home>/sessions/_no-cwd`.
pub const NO_CWD_DIR: &str = "_no-cwd";
/// File name of an uncompressed log.
pub const PLAIN_LOG: &str = "session.jsonl";
/// File name of a zstd log (a concatenation of independent frames; the upstream default).
pub const ZSTD_LOG: &str = "session.jsonl.zstd";

/// `--home`, else `$DSH_HOME` (blank counts as unset), else `~/.dsh`.
pub fn resolve_home(flag: Option<&Path>) -> PathBuf {
    if let Some(home) = flag {
        return home.to_path_buf();
    }
    if let Some(home) = std::env::var_os("DSH_HOME") {
        if !home.to_string_lossy().trim().is_empty() {
            return PathBuf::from(home);
        }
    }
    let user_home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    user_home.join(".dsh")
}

/// `projectKey(cwd)`: separators (`/`, `\`, `:`) collapse to one `-`, `[A-Za-z0-9._-]` stay,
/// every other UTF-16 code unit becomes `~XXXX`; leading `-` stripped; empty → `root`;
/// at most 251 characters.
pub fn project_key(cwd: &str) -> String {
    let mut key = String::with_capacity(cwd.len());
    let mut last_was_separator = false;
    for ch in cwd.chars() {
        if matches!(ch, '/' | '\\' | ':') {
            if !last_was_separator {
                key.push('-');
            }
            last_was_separator = true;
            continue;
        }
        last_was_separator = false;
        if ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | '-') {
            key.push(ch);
        } else {
            push_utf16_escapes(&mut key, ch);
        }
    }
    let trimmed = key.trim_start_matches('-');
    let key = if trimmed.is_empty() { "root" } else { trimmed };
    key.chars().take(251).collect()
}

/// `encodeSegment(id)`: `[A-Za-z0-9_-]` stay, every other UTF-16 code unit becomes `~XXXX`.
/// Injective; `None` for the empty id, which cannot be stored.
pub fn encode_segment(id: &str) -> Option<String> {
    if id.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(id.len());
    for ch in id.chars() {
        if ch.is_ascii_alphanumeric() || matches!(ch, '_' | '-') {
            out.push(ch);
        } else {
            push_utf16_escapes(&mut out, ch);
        }
    }
    Some(out)
}

/// The inverse of [`encode_segment`]: the id a session directory's name stands for. `None` when
/// the name is not one `encode_segment` makes (a stray character, a malformed or unpaired
/// `~XXXX` escape), since no id is filed under it.
pub fn decode_segment(segment: &str) -> Option<String> {
    if segment.is_empty() {
        return None;
    }
    let mut units = Vec::with_capacity(segment.len());
    let mut rest = segment.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'~' {
            let hex = tail.get(..4)?;
            if !hex
                .iter()
                .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(b))
            {
                return None;
            }
            let unit = u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
            let plain = char::from_u32(u32::from(unit))
                .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
            if plain {
                // `encode_segment` never escapes these: another name would collide.
                return None;
            }
            units.push(unit);
            rest = &tail[4..];
        } else if byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-') {
            units.push(u16::from(byte));
            rest = tail;
        } else {
            return None;
        }
    }
    String::from_utf16(&units).ok()
}

fn push_utf16_escapes(out: &mut String, ch: char) {
    let mut units = [0u16; 2];
    for unit in ch.encode_utf16(&mut units) {
        let _ = write!(out, "~{unit:04X}");
    }
}

/// The directory of session `id` with `cwd` under `home`.
pub fn session_dir(home: &Path, id: &str, cwd: Option<&str>) -> Option<PathBuf> {
    let segment = encode_segment(id)?;
    let project = match cwd {
        Some(cwd) => format!("--{}--", project_key(cwd)),
        None => NO_CWD_DIR.to_string(),
    };
    Some(home.join(SESSIONS_DIR).join(project).join(segment))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_key_collapses_separators_and_escapes() {
        assert_eq!(project_key("/home/me/proj"), "home-me-proj");
        assert_eq!(project_key("C:\\Users\\me"), "C-Users-me");
        assert_eq!(project_key("//a::b"), "a-b");
        assert_eq!(project_key("/"), "root");
        assert_eq!(project_key(""), "root");
        assert_eq!(project_key("/a b"), "a~0020b");
        assert_eq!(project_key("/x/😀"), "x-~D83D~DE00");
        assert_eq!(project_key(&"a".repeat(300)).len(), 251);
    }

    #[test]
    fn encode_segment_escapes_dot_and_tilde() {
        assert_eq!(encode_segment("session-1_a").unwrap(), "session-1_a");
        assert_eq!(encode_segment("a.b~c").unwrap(), "a~002Eb~007Ec");
        assert_eq!(
            encode_segment("{{sessionId}}").unwrap(),
            "~007B~007BsessionId~007D~007D"
        );
        assert_eq!(encode_segment(""), None);
    }

    #[test]
    fn decode_segment_inverts_encode_segment() {
        for id in [
            "session-1_a",
            "a.b~c",
            "{{sessionId}}",
            "x/😀 y",
            "claude:1234",
            "~",
        ] {
            let segment = encode_segment(id).unwrap();
            assert_eq!(decode_segment(&segment).as_deref(), Some(id), "{segment}");
        }
        // Names no id is filed under.
        for bad in [
            "", "a.b", "~00", "~zz00", "~0041", "~d83d", "~D83D", "a b", "~002e",
        ] {
            assert_eq!(decode_segment(bad), None, "{bad}");
        }
    }

    #[test]
    fn session_dir_layout() {
        let home = Path::new("/h");
        assert_eq!(
            session_dir(home, "s1", Some("/w/p")).unwrap(),
            Path::new("/h/sessions/--w-p--/s1")
        );
        assert_eq!(
            session_dir(home, "s1", None).unwrap(),
            Path::new("/h/sessions/_no-cwd/s1")
        );
    }
}
