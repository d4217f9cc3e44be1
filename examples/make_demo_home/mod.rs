//! The demo home generator: scripts in `assets/demo-script/` in, dsh logs out.
//!
//! Purpose: `assets/demo-home/sessions/` (what `dsh-refs --demo` opens) is written by this
//! crate's own [`SessionWriter`](dsh_session_references::session::SessionWriter) from readable
//! scripts ([`script`]), so the demo can never drift from what the crate writes.
//! Invariant: the same scripts give byte-identical logs on every run (fixed times from the
//! scripts, everything else from a PRNG seeded by the session id, see [`emit`]).
//! Proof: `tests/cli/demo_home.rs` generates twice and compares the bytes, compares with the files
//! on disk (what `--check` does), and reads every log back through [`verify`].

pub mod emit;
pub mod script;
pub mod verify;

use dsh_session_references::reference::parse_session_reference_text;
use script::{Item, Script};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The script directory and the demo home, relative to the crate root.
pub const SCRIPT_DIR: &str = "assets/demo-script";
pub const DEMO_HOME: &str = "assets/demo-home";

/// Reads every `*.txt` script of `dir`, in file-name order.
pub fn load_scripts(dir: &Path) -> Result<Vec<(PathBuf, Script)>, String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "txt"))
        .collect();
    paths.sort();
    let mut scripts = Vec::new();
    for path in paths {
        let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let script = script::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        scripts.push((path, script));
    }
    if scripts.is_empty() {
        return Err(format!("{}: no scripts (*.txt)", dir.display()));
    }
    Ok(scripts)
}

/// Whether a script mentions another session (it must be written after the ones it reads).
fn mentions(script: &Script) -> bool {
    script.items.iter().any(|item| match item {
        Item::Turn(turn) => parse_session_reference_text(&turn.prompt)
            .map(|parsed| !parsed.references.is_empty())
            .unwrap_or(true),
        _ => false,
    })
}

/// Writes every script of `script_dir` as a session under `home` (which must not hold
/// sessions yet): sessions that mention none first, then the ones whose references read them.
pub fn generate(script_dir: &Path, home: &Path) -> Result<(), String> {
    let mut scripts = load_scripts(script_dir)?;
    scripts.sort_by_key(|(_, script)| mentions(script));
    fs::create_dir_all(home).map_err(|e| format!("{}: {e}", home.display()))?;
    let prepare = emit::HomePrepare { home };
    for (path, script) in &scripts {
        emit::Emitter::create(home, script, &prepare)
            .and_then(|emitter| emitter.run(script))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// Every log under `home/sessions`, checked (see [`verify`]). Anything but a
/// `session.jsonl` two levels down is an error.
pub fn check_home(home: &Path) -> Result<Vec<verify::Checked>, String> {
    let files = tree(&home.join("sessions"))?;
    let mut checked = Vec::new();
    for relative in files.keys() {
        let parts: Vec<&str> = relative.split('/').collect();
        if parts.len() != 3 || parts[2] != "session.jsonl" {
            return Err(format!(
                "unexpected file in the demo home: sessions/{relative}"
            ));
        }
        checked.push(verify::check_log(
            home,
            &home.join("sessions").join(relative),
        )?);
    }
    if checked.is_empty() {
        return Err(format!("{}: no sessions", home.display()));
    }
    Ok(checked)
}

/// Every file under `root`: relative path (with `/`) to its bytes.
pub fn tree(root: &Path) -> Result<BTreeMap<String, Vec<u8>>, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) -> Result<(), String> {
        let entries = fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
            if path.is_dir() {
                walk(root, &path, out)?;
            } else {
                let bytes = fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                let relative = path.strip_prefix(root).unwrap_or(&path);
                out.insert(relative.to_string_lossy().replace('\\', "/"), bytes);
            }
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    if root.exists() {
        walk(root, root, &mut out)?;
    }
    Ok(out)
}

/// How the files under `actual` differ from those under `expected` (empty: identical).
pub fn differences(expected: &Path, actual: &Path) -> Result<Vec<String>, String> {
    let (want, have) = (tree(expected)?, tree(actual)?);
    let mut out = Vec::new();
    for (path, bytes) in &want {
        match have.get(path) {
            None => out.push(format!("missing: {path}")),
            Some(found) if found != bytes => {
                let line = first_different_line(bytes, found);
                out.push(format!("differs: {path} (from line {line})"));
            }
            Some(_) => {}
        }
    }
    for path in have.keys().filter(|path| !want.contains_key(*path)) {
        out.push(format!("not generated: {path}"));
    }
    Ok(out)
}

fn first_different_line(a: &[u8], b: &[u8]) -> usize {
    let same = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    a[..same].iter().filter(|c| **c == b'\n').count() + 1
}
