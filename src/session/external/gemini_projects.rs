//! Gemini CLI's project registry (`~/.gemini/projects.json`): the project root of a `tmp/<dir>/`
//! folder whose `.project_root` marker is missing.
//!
//! Purpose: Gemini CLI 0.61 names a project's folder by a slug and records the root twice: in
//! the folder's `.project_root` and in `projects.json` (`{"projects": {"/abs/root": "slug"}}`).
//! Older versions named the folder by the hex SHA-256 of the root (the same hash the session's
//! metadata carries as `projectHash`). When the marker is missing, the root is the registry key
//! whose slug is the folder's name, else the key whose SHA-256 is the folder's name or the
//! session's `projectHash`.
//!
//! Invariant: the registry is read bounded and read-only (a regular file only, opened without
//! blocking, at most [`MAX_REGISTRY_BYTES`]), a file that is not the registry's shape names no
//! root; a lookup is one pass over its entries (one hash a
//! key, only when no slug matched). Nothing is written.
//! Proof: the unit tests below and `tests/session/gemini_sessions.rs` (the real CLI's home with
//! its markers removed and a folder renamed to its hash).

use crate::session::files;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

/// The most bytes of `projects.json` read (a registry of a few hundred projects is kilobytes).
pub const MAX_REGISTRY_BYTES: u64 = 16 << 20;

/// The root `projects.json` gives the project folder holding `session` (a file in
/// `<home>/tmp/<dir>/chats/`), by folder name or by `project_hash`.
pub fn registered_root(session: &Path, project_hash: Option<&str>) -> Option<String> {
    let project = session.parent()?.parent()?;
    let dir = project.file_name()?.to_str()?;
    let home = project.parent()?.parent()?;
    let file = files::open_read(&home.join("projects.json")).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_REGISTRY_BYTES).read_to_end(&mut bytes).ok()?;
    let registry: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let projects: Vec<(&str, &str)> = registry
        .get("projects")?
        .as_object()?
        .iter()
        .filter_map(|(root, slug)| Some((root.as_str(), slug.as_str()?)))
        .collect();
    lookup(&projects, dir, project_hash)
}

/// The root among `projects` (root → slug) of the folder named `dir`.
pub fn lookup(projects: &[(&str, &str)], dir: &str, project_hash: Option<&str>) -> Option<String> {
    let usable = |root: &&str| !root.is_empty() && root.len() < 4096;
    if let Some((root, _)) = projects
        .iter()
        .find(|(root, slug)| *slug == dir && usable(root))
    {
        return Some(root.to_string());
    }
    let hashes: Vec<String> = [Some(dir), project_hash]
        .into_iter()
        .flatten()
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_ascii_lowercase)
        .collect();
    if hashes.is_empty() {
        return None;
    }
    projects
        .iter()
        .map(|(root, _)| *root)
        .filter(usable)
        .find(|root| hashes.contains(&hex_sha256(root)))
        .map(str::to_string)
}

fn hex_sha256(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BETA_HASH: &str = "2d6ac24e96b02dd851b31ef7083c217eccb68fde1e3e69b86d4bbeb7651ada86";

    #[test]
    fn a_slug_then_a_hash_named_folder_then_the_sessions_project_hash() {
        let projects = [
            ("/tmp/gcap2/work/alpha", "alpha"),
            ("/tmp/gcap2/work/beta", "beta"),
        ];
        assert_eq!(hex_sha256("/tmp/gcap2/work/beta"), BETA_HASH);
        assert_eq!(
            lookup(&projects, "alpha", None).as_deref(),
            Some("/tmp/gcap2/work/alpha")
        );
        assert_eq!(
            lookup(&projects, BETA_HASH, None).as_deref(),
            Some("/tmp/gcap2/work/beta")
        );
        assert_eq!(
            lookup(&projects, &BETA_HASH.to_uppercase(), None).as_deref(),
            Some("/tmp/gcap2/work/beta")
        );
        assert_eq!(
            lookup(&projects, "renamed", Some(BETA_HASH)).as_deref(),
            Some("/tmp/gcap2/work/beta")
        );
        assert_eq!(lookup(&projects, "renamed", None), None);
        assert_eq!(lookup(&projects, "renamed", Some("not-a-hash")), None);
        assert_eq!(lookup(&[("", "alpha")], "alpha", None), None);
    }

    #[test]
    fn a_registry_that_is_not_one_names_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("tmp/alpha/chats/session-1.jsonl");
        std::fs::create_dir_all(session.parent().unwrap()).unwrap();
        assert_eq!(registered_root(&session, None), None);
        for bad in [
            "not json",
            "[]",
            r#"{"projects": []}"#,
            r#"{"projects": {"/w": 7}}"#,
        ] {
            std::fs::write(dir.path().join("projects.json"), bad).unwrap();
            assert_eq!(registered_root(&session, None), None, "{bad}");
        }
        std::fs::write(
            dir.path().join("projects.json"),
            r#"{"projects": {"/w": 7, "/work/alpha": "alpha"}}"#,
        )
        .unwrap();
        assert_eq!(
            registered_root(&session, None).as_deref(),
            Some("/work/alpha")
        );
    }
}
