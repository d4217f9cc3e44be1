//! The layers of the crate, kept by a test instead of by review.
//!
//! Bottom up: `session/` (the log, the store, `SessionQuery`) knows nothing above it;
//! `reference/` and `agent/` use only `session/`; `discovery/` (the search index) uses
//! `session/` and the reference projection; `host/` (the terminal-free mount and `@path`
//! attachments, the submit transaction every face shares) uses those four and names no terminal
//! crate; `tui/` and `mcp/` are faces on top of them and `host/`, the TUI never the command
//! line; `cli/` wires everything; nothing reaches the binary (`main.rs`). The neutral root modules
//! (`escape`, `sync`, `test_rng`) sit below every layer and anyone may use them; `demo` (the embedded
//! demo home) is for the front ends only.
//!
//! The checker reads every `src/**/*.rs`, drops comments and string literals, and resolves each
//! `crate::…` path (grouped `use crate::{a, b}` included) and each `super::…` chain that climbs
//! out of its layer to the top-level module it names. Invariant: a source tree passes only when
//! no file names a module its layer may not use. Proof: `the_crate_keeps_its_layers` on the real
//! tree, and `planted_violations_are_caught` on in-memory trees (one per forbidden edge, plus the
//! two the tree had before the command implementations moved to `cli/`).
//!
//! A second check keeps `unsafe` in its rooms: only `session/skim/simd.rs` (the skimmer's SIMD,
//! behind a safe API) and `main.rs` (`mallopt`) may use the keyword in code
//! (`unsafe_code_lives_in_its_rooms`, which also plants one of each kind).
//!
//! A third check keeps the engine's wiring in its composition root: no face (`cli/`, `tui/`,
//! `mcp/`, the binary) builds the sources from flags, opens a `DiskStore` or makes a `Discovery`
//! (`faces_receive_the_workspace`; `host/workspace.rs` does).
//!
//! `DSH_ARCH_ROOT=<dir>` checks `<dir>/src` instead of this crate's (to show an old tree fails).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level modules of the library that have a layer.
const LAYERS: &[&str] = &[
    "session",
    "reference",
    "agent",
    "discovery",
    "host",
    "tui",
    "mcp",
    "cli",
];
/// Root modules below every layer.
const NEUTRAL: &[&str] = &["escape", "sync", "test_rng"];

/// Which top-level modules a layer may name besides itself and the neutral ones.
fn allowed(layer: &str) -> &'static [&'static str] {
    match layer {
        "session" => &[],
        "reference" | "agent" => &["session"],
        // Discovery indexes what the store serves, projected as references project it.
        "discovery" => &["session", "reference"],
        // The submit transaction and the `@path` rules, for every face; no terminal.
        "host" => &["session", "reference", "agent", "discovery"],
        "tui" => &["session", "reference", "agent", "discovery", "host", "demo"],
        // The MCP server: the service, the sources, discovery and the host room, never the TUI.
        "mcp" => &["session", "reference", "discovery", "host"],
        "cli" => &[
            "session",
            "reference",
            "agent",
            "discovery",
            "host",
            "tui",
            "mcp",
            "demo",
        ],
        // `demo` and the other root modules: only the neutral ones.
        _ => &[],
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Violation {
    file: String,
    line: usize,
    from: String,
    to: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: the {} layer names `{}`, which it may not use",
            self.file, self.line, self.from, self.to
        )
    }
}

/// The module path of a file relative to `src/` (`session/external/mod.rs` → `session::external`).
/// `None` for the binary's root.
fn module_path(relative: &str) -> Option<Vec<String>> {
    let trimmed = relative.strip_suffix(".rs")?;
    let mut parts: Vec<String> = trimmed.split('/').map(str::to_string).collect();
    match parts.last().map(String::as_str) {
        Some("mod") => {
            parts.pop();
        }
        Some("lib") if parts.len() == 1 => parts.clear(),
        Some("main") if parts.len() == 1 => return None,
        _ => {}
    }
    Some(parts)
}

/// `source` with comments and the contents of string and char literals blanked (line breaks
/// kept, so line numbers still hold).
fn code_only(source: &str) -> String {
    let bytes = source.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let blank = |b: u8| if b == b'\n' { b'\n' } else { b' ' };
    while i < bytes.len() {
        let rest = &bytes[i..];
        if rest.starts_with(b"//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                out.push(b' ');
                i += 1;
            }
        } else if rest.starts_with(b"/*") {
            let mut depth = 0usize;
            while i < bytes.len() {
                if bytes[i..].starts_with(b"/*") {
                    depth += 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                } else if bytes[i..].starts_with(b"*/") {
                    depth -= 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(bytes[i]));
                    i += 1;
                }
            }
        } else if let Some(len) = raw_string_opening(rest) {
            // r"…", r#"…"#, br#"…"#: ends at a quote followed by as many hashes.
            let hashes = len - rest.iter().take(len).filter(|&&b| b != b'#').count();
            out.extend(std::iter::repeat_n(b' ', len));
            i += len;
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            while i < bytes.len() && !bytes[i..].starts_with(&close) {
                out.push(blank(bytes[i]));
                i += 1;
            }
            let end = close.len().min(bytes.len() - i);
            out.extend(std::iter::repeat_n(b' ', end));
            i += end;
        } else if bytes[i] == b'"' {
            out.push(b' ');
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                let step = if bytes[i] == b'\\' { 2 } else { 1 };
                for _ in 0..step.min(bytes.len() - i) {
                    out.push(blank(bytes[i]));
                    i += 1;
                }
            }
            if i < bytes.len() {
                out.push(b' ');
                i += 1;
            }
        } else if bytes[i] == b'\'' && char_literal_len(rest).is_some() {
            let len = char_literal_len(rest).unwrap_or(1);
            out.extend(std::iter::repeat_n(b' ', len));
            i += len;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The length of a raw string's opening (`r"`, `r##"`, `br#"`), if `rest` starts one that is
/// not the tail of an identifier.
fn raw_string_opening(rest: &[u8]) -> Option<usize> {
    let start = if rest.starts_with(b"br") {
        2
    } else if rest.starts_with(b"r") {
        1
    } else {
        return None;
    };
    let hashes = rest[start..].iter().take_while(|&&b| b == b'#').count();
    (rest.get(start + hashes) == Some(&b'"')).then_some(start + hashes + 1)
}

/// The length of a char literal (`'a'`, `'\n'`, `'\u{1F600}'`, `'"'`) at the start of `rest`;
/// `None` for a lifetime.
fn char_literal_len(rest: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(&rest[..rest.len().min(16)])
        .unwrap_or_else(|e| std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or_default());
    let mut chars = text.char_indices().skip(1);
    let (_, first) = chars.next()?;
    if first == '\\' {
        let close = text[2..].find('\'')?;
        return Some(close + 3);
    }
    let (at, next) = chars.next()?;
    (next == '\'').then_some(at + 1)
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The top-level modules named by `crate::` paths and by `super::` chains that climb to the
/// crate root, each with its line number.
fn named_modules(code: &str, module: &[String]) -> Vec<(usize, String)> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut i = 0;
    while i < bytes.len() {
        let starts_word = i == 0 || !is_ident(bytes[i - 1]) && bytes[i - 1] != b':';
        if starts_word && bytes[i..].starts_with(b"crate") && after_ident(bytes, i + 5) {
            let path_at = skip_space(bytes, i + 5);
            if bytes[path_at..].starts_with(b"::") {
                for name in path_heads(bytes, skip_space(bytes, path_at + 2)) {
                    found.push((line_of(i), name));
                }
            }
            i += 5;
        } else if starts_word && bytes[i..].starts_with(b"super") && after_ident(bytes, i + 5) {
            // Count the chain: super::super::x climbs two levels from this file's module.
            let mut depth = 0;
            let mut at = i;
            while bytes[at..].starts_with(b"super") && after_ident(bytes, at + 5) {
                let next = skip_space(bytes, at + 5);
                if !bytes[next..].starts_with(b"::") {
                    break;
                }
                depth += 1;
                at = skip_space(bytes, next + 2);
            }
            if depth > 0 {
                let remaining = module.len().saturating_sub(depth);
                if remaining == 0 {
                    for name in path_heads(bytes, at) {
                        found.push((line_of(i), name));
                    }
                }
            }
            i = at.max(i + 5);
        } else {
            i += 1;
        }
    }
    found
}

fn after_ident(bytes: &[u8], at: usize) -> bool {
    bytes.get(at).is_none_or(|&b| !is_ident(b))
}

fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len() && bytes[at].is_ascii_whitespace() {
        at += 1;
    }
    at
}

/// The first segment of the path at `at`, or every first segment of a `{a, b::c, d}` group.
fn path_heads(bytes: &[u8], at: usize) -> Vec<String> {
    if bytes.get(at) == Some(&b'{') {
        let mut heads = Vec::new();
        let mut depth = 0usize;
        let mut expect_head = true;
        let mut i = at;
        while i < bytes.len() {
            match bytes[i] {
                b'{' => {
                    depth += 1;
                    expect_head = depth == 1;
                    i += 1;
                }
                b'}' => {
                    depth -= 1;
                    i += 1;
                    if depth == 0 {
                        break;
                    }
                }
                b',' => {
                    expect_head = depth == 1;
                    i += 1;
                }
                b if is_ident(b) => {
                    let start = i;
                    while i < bytes.len() && is_ident(bytes[i]) {
                        i += 1;
                    }
                    if expect_head {
                        heads.push(String::from_utf8_lossy(&bytes[start..i]).into_owned());
                        expect_head = false;
                    }
                }
                _ => i += 1,
            }
        }
        return heads;
    }
    let start = at;
    let mut end = at;
    while end < bytes.len() && is_ident(bytes[end]) {
        end += 1;
    }
    if end == start {
        return Vec::new();
    }
    vec![String::from_utf8_lossy(&bytes[start..end]).into_owned()]
}

/// Every layer violation in `files` (paths relative to `src/`, with their sources).
fn check(files: &[(String, String)]) -> Vec<Violation> {
    let mut violations = BTreeSet::new();
    for (relative, source) in files {
        let code = code_only(source);
        let Some(module) = module_path(relative) else {
            continue; // The binary's root wires everything.
        };
        // Nothing pulls in the binary's root: no `mod main`, no `#[path]` or `include!` of it.
        for (index, (code_line, raw_line)) in code.lines().zip(source.lines()).enumerate() {
            let names_main = code_line
                .split_whitespace()
                .collect::<Vec<_>>()
                .windows(2)
                .any(|w| w[0] == "mod" && w[1].trim_end_matches([';', '{']) == "main")
                || ((code_line.contains("#[path") || code_line.contains("include!"))
                    && raw_line.contains("main.rs"));
            if names_main {
                violations.insert(Violation {
                    file: relative.clone(),
                    line: index + 1,
                    from: module.first().cloned().unwrap_or_else(|| "crate".into()),
                    to: "main".into(),
                });
            }
        }
        let Some(top) = module.first() else {
            continue; // lib.rs declares the modules.
        };
        let layer = top.as_str();
        for (line, name) in named_modules(&code, &module) {
            let ok = name == layer
                || NEUTRAL.contains(&name.as_str())
                || allowed(layer).contains(&name.as_str())
                || !(LAYERS.contains(&name.as_str()) || name == "demo");
            if !ok {
                violations.insert(Violation {
                    file: relative.clone(),
                    line,
                    from: layer.to_string(),
                    to: name,
                });
            }
        }
    }
    violations.into_iter().collect()
}

fn read_tree(src: &Path) -> Vec<(String, String)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|entry| entry.expect("directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path
                    .strip_prefix(root)
                    .expect("under src")
                    .to_string_lossy()
                    .replace('\\', "/");
                let source = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
                out.push((relative, source));
            }
        }
    }
    let mut files = Vec::new();
    walk(src, src, &mut files);
    files
}

#[test]
fn the_crate_keeps_its_layers() {
    let root = std::env::var_os("DSH_ARCH_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let files = read_tree(&root.join("src"));
    assert!(
        files.iter().any(|(p, _)| p == "session/store.rs"),
        "the checker must see the session layer"
    );
    let violations = check(&files);
    let report: Vec<String> = violations.iter().map(ToString::to_string).collect();
    assert!(
        report.is_empty(),
        "layer violations:\n{}",
        report.join("\n")
    );
}

/// The files that may hold `unsafe` code: the SIMD byte classes of the skimmer, behind a safe
/// API, the mapping of a heavy session file with its `SIGBUS` guard, and the binary's
/// `mallopt`.
const UNSAFE_ROOMS: &[&str] = &[
    "session/skim/simd.rs",
    "session/external/mapped.rs",
    "main.rs",
];

/// The files of `files` whose code (comments and strings blanked) uses the `unsafe` keyword.
fn unsafe_files(files: &[(String, String)]) -> Vec<String> {
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    files
        .iter()
        .filter(|(_, source)| {
            let code = code_only(source);
            let bytes = code.as_bytes();
            code.match_indices("unsafe").any(|(at, word)| {
                let before = at.checked_sub(1).map(|i| bytes[i]);
                let after = bytes.get(at + word.len()).copied();
                !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
            })
        })
        .map(|(path, _)| path.clone())
        .collect()
}

#[test]
fn unsafe_code_lives_in_its_rooms() {
    let files = read_tree(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    // The rooms issue 22 split the session and agent files into are where the tree says, and
    // so are those of the writer and the skimmer (the SIMD stays in `simd.rs` alone).
    for room in [
        "session/clock.rs",
        "session/skim/simd.rs",
        "session/store/lru.rs",
        "session/reader/source.rs",
        "agent/runtime/turn.rs",
        "session/skim/mod.rs",
        "session/skim/cursor.rs",
        "session/skim/packed.rs",
        "session/skim/string_body.rs",
        "session/writer/mod.rs",
        "session/writer/open.rs",
        "session/writer/lock.rs",
        "session/writer/tail.rs",
        "session/writer/recheck.rs",
        "session/writer/batch.rs",
        "session/writer/pending.rs",
        "session/writer/home.rs",
        "session/format/shared.rs",
        "tui/focus.rs",
    ] {
        assert!(files.iter().any(|(p, _)| p == room), "{room} is missing");
    }
    let found = unsafe_files(&files);
    let stray: Vec<&String> = found
        .iter()
        .filter(|p| !UNSAFE_ROOMS.contains(&p.as_str()))
        .collect();
    assert!(stray.is_empty(), "unsafe code outside its rooms: {stray:?}");
    // Planted: a keyword in code is found, one in a comment, a string or a longer name is not.
    let planted = tree(&[
        ("session/a.rs", "fn f() { unsafe { g() } }"),
        (
            "session/b.rs",
            "// unsafe\nconst S: &str = \"unsafe\"; fn not_unsafe_at_all() {}",
        ),
    ]);
    assert_eq!(unsafe_files(&planted), vec!["session/a.rs".to_string()]);
}

fn tree(files: &[(&str, &str)]) -> Vec<(String, String)> {
    files
        .iter()
        .map(|(p, s)| (p.to_string(), s.to_string()))
        .collect()
}

fn edges(files: &[(&str, &str)]) -> Vec<(String, String)> {
    check(&tree(files))
        .into_iter()
        .map(|v| (v.file, v.to))
        .collect()
}

#[test]
fn planted_violations_are_caught() {
    let pair = |f: &str, t: &str| (f.to_string(), t.to_string());
    // The two edges the tree had before the command implementations moved to `cli/`.
    assert_eq!(
        edges(&[("session/commands.rs", "use crate::tui::escape;\n")]),
        vec![pair("session/commands.rs", "tui")]
    );
    assert_eq!(
        edges(&[(
            "reference/commands.rs",
            "use super::json::stringify;\nuse crate::cli::{Command, MentionCommand};\n"
        )]),
        vec![pair("reference/commands.rs", "cli")]
    );
    // One per forbidden direction.
    let planted = [
        (
            "session/store.rs",
            "fn f() { crate::reference::uri::x(); }",
            "reference",
        ),
        ("session/writer.rs", "use crate::agent::Agent;", "agent"),
        ("mcp/server.rs", "use crate::tui::app::App;", "tui"),
        ("mcp/listing.rs", "use crate::cli::Cli;", "cli"),
        ("tui/app.rs", "use crate::mcp::Server;", "mcp"),
        (
            "reference/service.rs",
            "use crate::agent::AgentEvent;",
            "agent",
        ),
        (
            "agent/runtime.rs",
            "use crate::reference::Candidate;",
            "reference",
        ),
        ("agent/mod.rs", "pub use crate::tui::mount;", "tui"),
        // The host room sits below the faces and above the layers it serves.
        ("host/mount.rs", "use crate::tui::text::StyledText;", "tui"),
        ("host/attach.rs", "use crate::cli::ExecArgs;", "cli"),
        ("host/mod.rs", "use crate::mcp::server;", "mcp"),
        ("host/mount.rs", "use crate::demo::DEMO_HOME;", "demo"),
        (
            "agent/runtime.rs",
            "use crate::host::mount::Submitted;",
            "host",
        ),
        ("reference/service.rs", "use crate::host::attach;", "host"),
        ("session/files.rs", "use crate::host::ChosenFile;", "host"),
        (
            "discovery/index.rs",
            "use crate::host::SubmitError;",
            "host",
        ),
        ("tui/app.rs", "use crate::cli::TuiArgs;", "cli"),
        ("reference/render.rs", "use crate::demo::DEMO_HOME;", "demo"),
        ("escape.rs", "use crate::session::Record;", "session"),
    ];
    for (file, source, to) in planted {
        assert_eq!(edges(&[(file, source)]), vec![pair(file, to)], "{source}");
    }
    // Grouped imports, spaced paths and `super` chains that climb out of the layer.
    assert_eq!(
        edges(&[(
            "session/external/claude.rs",
            "use crate::{escape, session::format, tui::{app, popup}};\n"
        )]),
        vec![pair("session/external/claude.rs", "tui")]
    );
    assert_eq!(
        edges(&[("agent/hooks.rs", "use crate :: tui::text;")]),
        vec![pair("agent/hooks.rs", "tui")]
    );
    assert_eq!(
        edges(&[(
            "session/external/codex.rs",
            "use super::super::format::Record;\nuse super::super::super::tui::app;\n"
        )]),
        vec![pair("session/external/codex.rs", "tui")]
    );
    // Nothing reaches the binary.
    assert_eq!(
        edges(&[("tui/mod.rs", "#[path = \"../main.rs\"]\nmod entry;")]),
        vec![pair("tui/mod.rs", "main")]
    );
    assert_eq!(
        edges(&[("cli/mod.rs", "include!(\"../main.rs\");")]),
        vec![pair("cli/mod.rs", "main")]
    );
    assert_eq!(
        edges(&[("tui/mod.rs", "mod main;")]),
        vec![pair("tui/mod.rs", "main")]
    );
}

#[test]
fn allowed_edges_comments_and_strings_pass() {
    let clean = [
        (
            "session/commands.rs",
            "use crate::escape;\nuse crate::test_rng::TestRng;\n",
        ),
        (
            "reference/service.rs",
            "use crate::session::SessionQuery;\nuse super::uri;\n",
        ),
        (
            "agent/runtime.rs",
            "use crate::session::{DiskStore, SessionWriter};",
        ),
        (
            "tui/mount.rs",
            "use crate::{agent::Agent, reference::Candidate, session::Record};",
        ),
        (
            "cli/exec.rs",
            "use crate::tui::mount::SessionReferenceMount;\nuse crate::demo;",
        ),
        ("main.rs", "use dsh_session_references::cli::Cli;"),
        ("lib.rs", "pub mod cli;\npub mod tui;"),
        (
            "session/skim.rs",
            "//! Unlike [`crate::tui::text`], this is pure.\n/* crate::cli */\n\
             const S: &str = \"crate::tui::x\";\nconst R: &str = r#\"crate::agent\"#;\n\
             fn f<'a>(x: &'a str) -> char { let _ = x; '\"' }\nuse crate::session::format;\n",
        ),
    ];
    assert!(edges(&clean).is_empty(), "{:?}", edges(&clean));
    // A `super` chain inside the layer stays inside it.
    assert!(edges(&[(
        "session/external/scan.rs",
        "use super::super::store::DiskStore;"
    )])
    .is_empty());
}

#[test]
fn line_numbers_survive_blanking() {
    let source = "/* one\n two */\n// three\nconst S: &str = \"a\nb\";\nuse crate::tui::app;\n";
    let found = check(&tree(&[("session/x.rs", source)]));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].line, 6, "{}", found[0]);
}

/// Files of the TUI's app room (the TUI, `tui/app/`): none over this many lines.
const APP_ROOM_LINES: usize = 600;

/// The TUI's app has one terminal loop: only `tui/terminal.rs` (the modes and the guard) and
/// `tui/app/run.rs` (the loop) take the terminal (raw mode, the alternate screen, a
/// `Terminal` over stdout, `crossterm::event::read`), so no widget runs a second loop (the
/// picker once did, before the panic hook was installed). And the app's rooms stay small.
#[test]
fn the_tui_has_one_terminal_loop_and_small_app_rooms() {
    let root = std::env::var_os("DSH_ARCH_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let files = read_tree(&root.join("src"));
    assert!(
        files.iter().any(|(p, _)| p == "tui/app/run.rs"),
        "the checker must see the app's loop"
    );
    let takes_terminal = [
        "enable_raw_mode",
        "EnterAlternateScreen",
        "CrosstermBackend::new",
        "event::read()",
    ];
    let mut found = Vec::new();
    for (path, source) in files.iter().filter(|(p, _)| p.starts_with("tui/")) {
        let code = code_only(source);
        if path != "tui/terminal.rs" && path != "tui/app/run.rs" {
            for needle in takes_terminal.iter().filter(|n| code.contains(*n)) {
                found.push(format!("{path} takes the terminal ({needle})"));
            }
        }
        let lines = source.lines().count();
        if path.starts_with("tui/app/") && lines > APP_ROOM_LINES {
            found.push(format!(
                "{path} has {lines} lines (more than {APP_ROOM_LINES})"
            ));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The terminal crates: none of them may be named by the host room, which `exec` and the MCP
/// server use without a terminal (and which builds with no features).
const TERMINAL_CRATES: &[&str] = &["ratatui", "crossterm", "nucleo", "unicode_segmentation"];

/// Files of `files` under `host/` whose code names a terminal crate, with the crate.
fn terminal_names(files: &[(String, String)]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (relative, source) in files {
        if !relative.starts_with("host/") {
            continue;
        }
        let code = code_only(source);
        for name in TERMINAL_CRATES {
            let bytes = code.as_bytes();
            let named = code.match_indices(name).any(|(at, _)| {
                let before = at.checked_sub(1).map(|i| bytes[i]);
                let after = bytes.get(at + name.len()).copied();
                !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
            });
            if named {
                out.push((relative.clone(), name.to_string()));
            }
        }
    }
    out
}

#[test]
fn the_host_room_names_no_terminal_crate() {
    let root = std::env::var_os("DSH_ARCH_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let files = read_tree(&root.join("src"));
    assert!(
        files.iter().any(|(p, _)| p.starts_with("host/")),
        "the checker must see the host room"
    );
    assert_eq!(terminal_names(&files), Vec::<(String, String)>::new());
    // Planted: a widget import is caught, a comment or a string naming one is not.
    assert_eq!(
        terminal_names(&tree(&[(
            "host/mount.rs",
            "use ratatui::text::Line;\n// crossterm\nconst S: &str = \"nucleo\";\n"
        )])),
        vec![("host/mount.rs".to_string(), "ratatui".to_string())]
    );
}

/// Whether `code` names a key by its code outside the key table (`KeyCode::Enter`, a letter…).
fn raw_key_checks(code: &str) -> bool {
    [
        "KeyCode::Enter",
        "KeyCode::Tab",
        "KeyCode::Esc",
        "KeyCode::Char('y",
    ]
    .iter()
    .any(|raw| code.contains(raw))
}

#[test]
fn widgets_answer_keys_with_one_type_read_from_the_key_table() {
    let files = read_tree(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let tui: Vec<&(String, String)> = files
        .iter()
        .filter(|(p, _)| p.starts_with("tui/"))
        .collect();
    assert!(tui.len() > 20, "the TUI's files were read");
    // One answer to a key (`tui::focus::Handled`), not one enum per widget.
    let outcomes: Vec<&String> = tui
        .iter()
        .filter(|(_, code)| code.contains("pub enum") && code.contains("Outcome {"))
        .map(|(p, _)| p)
        .collect();
    assert!(
        outcomes.is_empty(),
        "per-widget outcome enums: {outcomes:?}"
    );
    // Keys are read through the key table: no handler compares key codes itself (the table,
    // and the widgets' tests that press keys, are the exceptions).
    let raw: Vec<&String> = tui
        .iter()
        .filter(|(p, _)| {
            p.as_str() != "tui/keys.rs" && !p.ends_with("tests.rs") && !p.ends_with("properties.rs")
        })
        .filter(|(_, code)| {
            let code = code.split("#[cfg(test)]").next().unwrap_or(code);
            raw_key_checks(code)
        })
        .map(|(p, _)| p)
        .collect();
    assert!(
        raw.is_empty(),
        "handlers that read key codes themselves: {raw:?}"
    );
    // Planted: both checks find what they look for.
    assert!(raw_key_checks("if key.code == KeyCode::Enter {"));
    assert!(!raw_key_checks("keymap.action(KeyContext::Popup, &key)"));
}

/// Issue 33, item 2: other agents live behind one interface. Outside `session/external/`, no
/// code names a particular agent's variant (`ExternalAgent::Claude`) or matches on an agent's
/// name (`"codex" =>`); the badge, product name and home come from the registry. (The command
/// line's home flags pair each flag with its agent's name, which is not a match.)
#[test]
fn no_room_outside_session_external_knows_a_particular_agent() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let agents = ["claude", "codex", "qwen", "gemini", "opencode", "copilot"];
    let mut found = Vec::new();
    for (file, source) in read_tree(&src) {
        if file.starts_with("session/external/") {
            continue;
        }
        // Tests beside the code may name fixtures' agents.
        let code = code_only(source.split("#[cfg(test)]").next().unwrap_or(&source));
        for (n, line) in code.lines().enumerate() {
            let named_variant = [
                "ExternalAgent::Claude",
                "ExternalAgent::Codex",
                "ExternalAgent::Qwen",
                "ExternalAgent::Gemini",
                "ExternalAgent::Opencode",
                "ExternalAgent::Copilot",
            ]
            .iter()
            .any(|v| line.contains(v));
            let matched = agents.iter().any(|a| {
                source
                    .lines()
                    .nth(n)
                    .is_some_and(|raw| raw.contains(&format!("\"{a}\" =>")))
            });
            if named_variant || matched {
                found.push(format!("{file}:{}", n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "agent-specific code outside session/external: {found:?}"
    );
}

/// What only the composition root (`host/workspace.rs`) builds: the sources from the flags,
/// the home's store, discovery.
const ROOT_ONLY: &[&str] = &[
    "SourceSet::from_flags",
    "SourceSet::from_homes",
    "DiskStore::new",
    "DiskStore::with_listing_cache",
    "Discovery::for_home",
    "Discovery::for_store",
    "Discovery::new",
];

/// Files of the faces (`cli/`, `tui/`, `mcp/`, the binary) whose code (tests aside) builds what
/// only the workspace may, with what it builds.
fn face_constructions(files: &[(String, String)]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (relative, source) in files {
        let face = ["cli/", "tui/", "mcp/"]
            .iter()
            .any(|room| relative.starts_with(room))
            || relative == "main.rs";
        if !face || relative.ends_with("tests.rs") {
            continue;
        }
        let code = code_only(source);
        let code = code.split("#[cfg(test)]").next().unwrap_or(&code);
        let squeezed: String = code.chars().filter(|c| !c.is_whitespace()).collect();
        for needle in ROOT_ONLY {
            if squeezed.contains(needle) {
                out.push((relative.clone(), needle.to_string()));
            }
        }
    }
    out
}

/// Every face receives the workspace (issue 33): no subcommand, no `exec`, no MCP server and
/// no TUI builds the store, the sources or discovery itself.
#[test]
fn faces_receive_the_workspace() {
    let root = std::env::var_os("DSH_ARCH_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let files = read_tree(&root.join("src"));
    assert!(
        files.iter().any(|(p, _)| p == "host/workspace.rs"),
        "the composition root is in the host room"
    );
    assert_eq!(face_constructions(&files), Vec::<(String, String)>::new());
    // Planted: a face that opens a store or makes discovery is caught (spaced paths too); a
    // comment, a string, a test module or the root itself is not.
    assert_eq!(
        face_constructions(&tree(&[
            (
                "cli/sessions.rs",
                "fn f() { let s = DiskStore::new(home); }"
            ),
            (
                "mcp/server.rs",
                "fn f() { Discovery :: for_store(s, &o.sources); }"
            ),
            (
                "tui/app/run.rs",
                "// Discovery::for_home\nconst S: &str = \"DiskStore::new\";"
            ),
            (
                "cli/exec.rs",
                "#[cfg(test)]\nmod t { fn f() { DiskStore::new(h); } }"
            ),
            (
                "host/workspace.rs",
                "fn f() { SourceSet::from_flags(a, b, c); }"
            ),
            ("main.rs", "fn f() { SourceSet::from_flags(a, b, c); }"),
        ])),
        vec![
            ("cli/sessions.rs".to_string(), "DiskStore::new".to_string()),
            (
                "mcp/server.rs".to_string(),
                "Discovery::for_store".to_string()
            ),
            ("main.rs".to_string(), "SourceSet::from_flags".to_string()),
        ]
    );
}

/// Files (their code before the unit tests) over 700 lines and functions over 120 lines, as
/// `(file, what, lines)`.
fn oversized(files: &[(String, String)]) -> Vec<(String, String, usize)> {
    let mut out = Vec::new();
    for (relative, source) in files {
        let code: Vec<&str> = source
            .lines()
            .take_while(|l| !l.starts_with("#[cfg(test)]"))
            .collect();
        if code.len() > 700 {
            out.push((relative.clone(), "file".to_string(), code.len()));
        }
        for (at, line) in code.iter().enumerate() {
            let trimmed = line.trim_start();
            let indent = &line[..line.len() - trimmed.len()];
            let head = trimmed
                .trim_start_matches("pub ")
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub(super) ")
                .trim_start_matches("async ")
                .trim_start_matches("const ");
            let Some(rest) = head.strip_prefix("fn ") else {
                continue;
            };
            if line.trim_end().ends_with(';') {
                continue;
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let close = format!("{indent}}}");
            let len = code[at + 1..]
                .iter()
                .position(|l| l.trim_end() == close)
                .map_or(code.len() - at, |end| end + 2);
            if len > 120 {
                out.push((relative.clone(), name, len));
            }
        }
    }
    out
}

/// Issue 33, item 4: no source file has more than 700 lines of code and no function more than
/// 120 (unit tests aside); a bigger one is split by idea.
#[test]
fn no_file_over_700_lines_and_no_function_over_120() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    assert_eq!(
        oversized(&read_tree(&src)),
        Vec::<(String, String, usize)>::new()
    );
    // Planted: a long function and a long file are found; tests below `#[cfg(test)]` are not.
    let long_fn = format!("fn big() {{\n{}}}\n", "    x();\n".repeat(121));
    let long_file = "const A: u8 = 0;\n".repeat(701);
    let long_test = format!("#[cfg(test)]\nmod t {{\n{}}}\n", "    x();\n".repeat(800));
    let found = oversized(&tree(&[
        ("a.rs", &long_fn),
        ("b.rs", &long_file),
        ("c.rs", &long_test),
    ]));
    assert_eq!(
        found,
        vec![
            ("a.rs".to_string(), "big".to_string(), 123),
            ("b.rs".to_string(), "file".to_string(), 701),
        ]
    );
}

/// Every path of `code` that starts at `crate`, `super` or `self`, as its segments (a
/// `{a, b::c}` group gives one path per element, each cut after its first segment).
fn rooted_paths(code: &str) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts_word = i == 0 || !is_ident(bytes[i - 1]) && bytes[i - 1] != b':';
        let root = ["crate", "super", "self"]
            .into_iter()
            .find(|r| bytes[i..].starts_with(r.as_bytes()) && after_ident(bytes, i + r.len()));
        let Some(root) = root.filter(|_| starts_word) else {
            i += 1;
            continue;
        };
        let mut segments = vec![root.to_string()];
        let mut at = i + root.len();
        loop {
            let next = skip_space(bytes, at);
            if !bytes[next..].starts_with(b"::") {
                break;
            }
            let start = skip_space(bytes, next + 2);
            if bytes.get(start) == Some(&b'{') {
                for head in path_heads(bytes, start) {
                    let mut path = segments.clone();
                    path.push(head);
                    out.push(path);
                }
                segments.clear();
                break;
            }
            let mut end = start;
            while end < bytes.len() && is_ident(bytes[end]) {
                end += 1;
            }
            if end == start {
                break;
            }
            segments.push(String::from_utf8_lossy(&bytes[start..end]).into_owned());
            at = end;
        }
        if segments.len() > 1 {
            out.push(segments);
        }
        i = at.max(i + root.len());
    }
    out
}

/// The names each module imports from its own child modules (`use listing::{rebuild, Index};`
/// in `store.rs`): `(parent module, name)` → the child module.
fn reexports(
    files: &[(String, String)],
    modules: &BTreeMap<Vec<String>, &str>,
) -> BTreeMap<(Vec<String>, String), Vec<String>> {
    let mut out = BTreeMap::new();
    for (relative, source) in files {
        let Some(parent) = module_path(relative) else {
            continue;
        };
        let code = code_only(source.split("#[cfg(test)]").next().unwrap_or(source));
        for statement in code.split(';') {
            let statement = statement.trim();
            let Some(tree) = statement
                .strip_prefix("pub(crate) use ")
                .or_else(|| statement.strip_prefix("pub(super) use "))
                .or_else(|| statement.strip_prefix("pub use "))
                .or_else(|| statement.strip_prefix("use "))
            else {
                continue;
            };
            let tree = tree.trim().trim_start_matches("self::");
            let head: String = tree
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let mut child = parent.clone();
            child.push(head.clone());
            if head.is_empty() || !modules.contains_key(&child) {
                continue;
            }
            // The leaves of the use tree: identifiers followed by `,`, `}` or the end (an `as`
            // alias names the leaf it follows).
            let rest = &tree[head.len()..];
            let words: Vec<&str> = rest
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .filter(|w| !w.is_empty())
                .collect();
            let leaves = rest
                .split([',', '}'])
                .filter_map(|piece| {
                    let piece = piece.trim();
                    let last = piece.rsplit([':', '{', ' ']).next()?;
                    (!last.is_empty() && last != "self" && words.contains(&last)).then_some(last)
                })
                .collect::<Vec<_>>();
            for leaf in leaves {
                out.insert((parent.clone(), leaf.to_string()), child.clone());
            }
        }
    }
    out
}

/// The circles of files: sets of two or more modules of one parent (files, or directories by
/// their `mod.rs`) whose code names each other round, through `super::`, `self::` or `crate::` paths (doc
/// comments aside). Each circle sorted, the list sorted.
fn circles(files: &[(String, String)]) -> Vec<Vec<String>> {
    let modules: BTreeMap<Vec<String>, &str> = files
        .iter()
        .filter_map(|(relative, _)| Some((module_path(relative)?, relative.as_str())))
        .collect();
    let reexports = reexports(files, &modules);
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (relative, source) in files {
        let Some(module) = module_path(relative) else {
            continue;
        };
        if module.is_empty() {
            continue;
        }
        let code = code_only(source.split("#[cfg(test)]").next().unwrap_or(source));
        for path in rooted_paths(&code) {
            let mut base: Vec<String> = match path[0].as_str() {
                "crate" => Vec::new(),
                _ => module.clone(),
            };
            let mut rest = &path[..];
            if rest[0] == "crate" || rest[0] == "self" {
                rest = &rest[1..];
            }
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
            // The longest prefix that is a file of its own.
            let target = (0..=rest.len()).rev().find_map(|k| {
                let mut full = base.clone();
                full.extend(rest[..k].iter().cloned());
                modules.get(&full).map(|file| (full, *file))
            });
            let Some((mut full, mut file)) = target else {
                continue;
            };
            // A name the parent imports from one of its children (`use listing::Index;` in
            // `store.rs`, named `super::Index` by a child) leads to that child.
            if full.len() + 1 == module.len() && full[..] == module[..full.len()] {
                let named = rest.get(full.len() - base.len().min(full.len()));
                let child = named.and_then(|name| reexports.get(&(full.clone(), name.clone())));
                if let Some(child) = child {
                    if let Some(child_file) = modules.get(child) {
                        full = child.clone();
                        file = child_file;
                    }
                }
            }
            // A module beside this one (a directory's own `mod.rs` is its parent, never a
            // sibling of its files; a sibling directory's `mod.rs` is a sibling).
            let sibling = full.len() == module.len()
                && full[..full.len() - 1] == module[..module.len() - 1]
                && full != module;
            if sibling {
                edges.entry(relative.as_str()).or_default().insert(file);
            }
        }
    }
    // Strongly connected components of two or more files (Tarjan, iterative enough for a tree
    // of a few hundred files).
    struct Walk<'a> {
        edges: &'a BTreeMap<&'a str, BTreeSet<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a str) {
        let n = w.index.len();
        w.index.insert(v, n);
        w.low.insert(v, n);
        w.stack.push(v);
        let next: Vec<&str> = w.edges.get(v).into_iter().flatten().copied().collect();
        for u in next {
            if !w.index.contains_key(u) {
                visit(w, u);
                let low = w.low[v].min(w.low[u]);
                w.low.insert(v, low);
            } else if w.stack.contains(&u) {
                let low = w.low[v].min(w.index[u]);
                w.low.insert(v, low);
            }
        }
        if w.low[v] == w.index[v] {
            let mut circle = Vec::new();
            while let Some(u) = w.stack.pop() {
                circle.push(u.to_string());
                if u == v {
                    break;
                }
            }
            if circle.len() > 1 {
                circle.sort();
                w.found.push(circle);
            }
        }
    }
    let mut walk = Walk {
        edges: &edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in edges.keys().copied().collect::<Vec<_>>() {
        if !walk.index.contains_key(v) {
            visit(&mut walk, v);
        }
    }
    walk.found.sort();
    walk.found
}

/// Issue 33, item 3: no circle of files inside a room — each file of a directory can be read
/// knowing only the files it names, never one that names it back.
#[test]
fn no_circles_of_files() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    assert_eq!(circles(&read_tree(&src)), Vec::<Vec<String>>::new());
    // Planted: a two-file circle through `super::`, a three-file one through `crate::` and a
    // group, a file and a sibling directory naming each other, two files naming each other
    // through names their parent imports from them, a chain that is no circle, and children
    // naming their `mod.rs` that names them (no circle either).
    let found = circles(&tree(&[
        ("lib.rs", "pub mod a;"),
        (
            "a/mod.rs",
            "mod x; mod y; mod p; mod q; mod r; pub use self::x::X;",
        ),
        ("a/x.rs", "use super::y::Y;"),
        ("a/y.rs", "fn f() { super::x::g() }"),
        ("a/p.rs", "use crate::a::{q::Q, mod_item};"),
        ("a/q.rs", "use crate::a::r::R; // super::p"),
        ("a/r.rs", "use super::{p, super::a::x};"),
        ("b/mod.rs", "mod s; mod t; mod d; use self::s::S;"),
        ("b/d/mod.rs", "use super::s::S;"),
        ("b/u.rs", "use super::d::D;"),
        ("b/w.rs", "fn f() -> super::u::U { todo!() }"),
        ("b/s.rs", "use super::t::T; use super::Item;"),
        (
            "b/t.rs",
            "use crate::b::Item; const S: &str = \"super::s\";",
        ),
        (
            "c/mod.rs",
            "mod e; mod f; mod g; mod h; use g::{G, other as Other}; use self::h::H;",
        ),
        ("c/g.rs", "use super::H;"),
        ("c/h.rs", "fn f(_: super::Other) {}"),
        ("c/e/mod.rs", "use super::f::F;"),
        ("c/f.rs", "use crate::c::e::E;"),
    ]));
    assert_eq!(
        found,
        vec![
            vec!["a/p.rs", "a/q.rs", "a/r.rs"],
            vec!["a/x.rs", "a/y.rs"],
            vec!["c/e/mod.rs", "c/f.rs"],
            vec!["c/g.rs", "c/h.rs"],
        ]
    );
}
