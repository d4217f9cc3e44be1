//! Issue 32 (trust, round three), item 1: a process serves only the homes and sources it was
//! given. One dsh home, two Claude Code homes: a process given home A fills the discovery index
//! (search, the MCP server's indexer); a process given home B must never show, complete or read
//! A's sessions in any face — `sessions`, `search`, `candidates`, `exec --ref`, and the MCP
//! server's `resources/list` and `completion/complete`, the TUI's `@` popup in tmux — and A's rows
//! must still be there for A.

use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_dsh-refs");
const A_ID: &str = "aaaaaaaa-1111-4111-8111-000000000001";
const B_ID: &str = "bbbbbbbb-2222-4222-8222-000000000002";

fn claude_home(root: &Path, name: &str, id: &str, words: &str) -> PathBuf {
    let home = root.join(name);
    let project = home.join("projects/-work-proj");
    std::fs::create_dir_all(&project).unwrap();
    let lines = [
        json!({"type":"user","uuid":"11111111-0000-4000-8000-000000000001","parentUuid":null,"sessionId":id,"cwd":"/work/proj","timestamp":"2026-12-01T10:00:00.000Z","message":{"role":"user","content":format!("{words} first prompt")}}),
        json!({"type":"assistant","uuid":"11111111-0000-4000-8000-000000000002","parentUuid":"11111111-0000-4000-8000-000000000001","sessionId":id,"cwd":"/work/proj","timestamp":"2026-12-01T10:00:05.000Z","message":{"id":"m1","role":"assistant","model":"m","content":[{"type":"text","text":format!("{words} answer")}]}}),
        json!({"type":"custom-title","customTitle":format!("{words} title"),"sessionId":id}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(project.join(format!("{id}.jsonl")), text).unwrap();
    home
}

fn dsh(home: &Path, claude: &Path, args: &[&str]) -> (i32, String, String) {
    let mut child = Command::new(BIN)
        .arg("--home")
        .arg(home)
        .args(["--sources", "dsh,claude", "--claude-home"])
        .arg(claude)
        .args(args)
        .env("HOME", home)
        .env_remove("DSH_PROVIDER")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{args:?} hangs"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `resources/list` and a completion of `word` from an MCP server given `claude`, after its
/// indexer had time for a pass.
fn mcp_answers(home: &Path, claude: &Path, word: &str) -> String {
    let mut child = Command::new(BIN)
        .arg("--home")
        .arg(home)
        .args(["--sources", "dsh,claude", "--claude-home"])
        .arg(claude)
        .arg("mcp")
        .env("HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel::<String>();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut send = |v: Value| writeln!(stdin, "{v}").and_then(|_| stdin.flush()).unwrap();
    let answer = |id: i64| loop {
        let line = lines
            .recv_timeout(Duration::from_secs(30))
            .expect("an answer");
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == id {
            return v;
        }
    };
    send(
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
    );
    answer(1);
    send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    send(json!({"jsonrpc":"2.0","id":2,"method":"resources/list"}));
    let mut all = answer(2).to_string();
    // The indexer starts after the first answer; give it a pass, then ask again.
    std::thread::sleep(Duration::from_millis(1500));
    send(json!({"jsonrpc":"2.0","id":3,"method":"resources/list"}));
    all.push_str(&answer(3).to_string());
    send(
        json!({"jsonrpc":"2.0","id":4,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"reference"},"argument":{"name":"session","value":word}}}),
    );
    all.push_str(&answer(4).to_string());
    send(
        json!({"jsonrpc":"2.0","id":5,"method":"prompts/get","params":{"name":"reference","arguments":{"session":word}}}),
    );
    all.push_str(&answer(5).to_string());
    drop(stdin);
    let _ = child.wait();
    all
}

/// The TUI face: the real binary in tmux, given home B over the index home A filled. Its `@`
/// popup, asked for A's word, offers nothing of A; asked for B's, it offers B (so the popup did
/// search, and the first check could fail).
fn tui_given_b_never_offers_a(home: &Path, b: &Path) {
    use crate::support::tmux::Tmux;
    let workdir = tempfile::tempdir().unwrap();
    let command = format!(
        "cd {} && HOME={} {BIN} --home {} --sources dsh,claude --claude-home {} --compression none",
        workdir.path().display(),
        home.display(),
        home.display(),
        b.display()
    );
    let tmux = Tmux::start("serve-only", &command, 120, 34);
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));
    tmux.type_text("@quokkafish");
    tmux.wait_for_screen("B's session in the popup", |s| {
        s.contains("quokkafish title")
    });
    for _ in 0.."quokkafish".len() {
        tmux.keys(&["BSpace"]);
    }
    tmux.type_text("zebracorn");
    // The popup settles on its answer for the new query: B's row is gone from it.
    let screen = tmux.wait_for_screen("the popup's answer for A's word", |s| {
        s.contains("@zebracorn") && !s.contains("quokkafish title")
    });
    std::thread::sleep(Duration::from_millis(500));
    let screen = screen + &tmux.screen();
    assert!(
        !screen.contains("zebracorn title") && !screen.contains("zebracorn first"),
        "the TUI given home B offers home A's session:\n{screen}"
    );
    tmux.keys(&["Escape"]);
    tmux.keys(&["C-c"]);
    tmux.quit();
}

#[test]
fn a_process_given_one_claude_home_never_serves_another_homes_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("dsh");
    dsh_session_references::demo::install_into(&home).unwrap();
    let a = claude_home(dir.path(), "claude-a", A_ID, "zebracorn");
    let b = claude_home(dir.path(), "claude-b", B_ID, "quokkafish");
    // Home A's process fills the index.
    let (code, out, err) = dsh(&home, &a, &["search", "zebracorn", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(A_ID), "A's own search finds A: {out}");
    let served_a = mcp_answers(&home, &a, "zebracorn");
    assert!(served_a.contains("zebracorn"), "A's server lists A");
    // Home B's process, every face.
    let leaks = |what: &str, text: &str| {
        assert!(
            !text.contains(A_ID)
                && !["zebracorn title", "zebracorn first", "zebracorn answer"]
                    .iter()
                    .any(|w| text.contains(w)),
            "{what} given home B shows home A's session: {text}"
        );
    };
    // The MCP server first: it ranks its first list straight from an index it finds.
    let served_b = mcp_answers(&home, &b, "zebracorn");
    leaks("the MCP server", &served_b);
    assert!(
        served_b.contains("quokkafish"),
        "B's server lists B: {served_b}"
    );
    let (_, out, err) = dsh(&home, &b, &["sessions", "--json"]);
    leaks("sessions", &(out.clone() + &err));
    assert!(out.contains(B_ID), "{out}");
    let (_, out, err) = dsh(&home, &b, &["search", "zebracorn", "--json"]);
    leaks("search", &(out + &err));
    let (_, out, err) = dsh(&home, &b, &["search", "quokkafish", "--json"]);
    assert!(out.contains(B_ID), "B's search finds B: {out}{err}");
    let (_, out, err) = dsh(
        &home,
        &b,
        &[
            "candidates",
            "--as",
            "x",
            "--query",
            "claude",
            "--limit",
            "50",
        ],
    );
    leaks("candidates", &(out + &err));
    let (code, out, err) = dsh(
        &home,
        &b,
        &["exec", "--ref", "zebracorn", "--json", "hello"],
    );
    assert_ne!(code, 0, "exec --ref of A's word must not resolve in B");
    leaks("exec --ref", &out);
    let (code, out, err2) = dsh(
        &home,
        &b,
        &["exec", "--ref", &format!("claude:{A_ID}"), "hello"],
    );
    assert_ne!(
        code, 0,
        "exec --ref of A's id must not read it: {out}{err2}"
    );
    let _ = err;
    tui_given_b_never_offers_a(&home, &b);
    // A's rows are still A's: its process finds them again.
    let (_, out, _) = dsh(&home, &a, &["search", "zebracorn", "--json"]);
    assert!(out.contains(A_ID), "{out}");
}

/// Issue 32, item 5: one unreadable file costs one session. A dsh log and a Claude Code
/// session nobody may read, and a Claude Code session replaced by a FIFO: every other session
/// is listed, and each of those files is named on stderr. (Permission is tried as the user
/// `nobody` through `setpriv` when the tests run as root, as in CI; the FIFO always.)
#[test]
fn one_unreadable_file_costs_one_session_and_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("dsh");
    dsh_session_references::demo::install_into(&home).unwrap();
    let claude = claude_home(dir.path(), "claude", A_ID, "readable");
    let project = claude.join("projects/-work-proj");
    let fifo = project.join("cccccccc-3333-4333-8333-000000000003.jsonl");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // A directory where a session file would be.
    let directory = project.join("dddddddd-4444-4444-8444-000000000004.jsonl");
    std::fs::create_dir(&directory).unwrap();
    let locked_claude = project.join(format!("{B_ID}.jsonl"));
    std::fs::copy(project.join(format!("{A_ID}.jsonl")), &locked_claude).unwrap();
    let text = std::fs::read_to_string(&locked_claude)
        .unwrap()
        .replace(A_ID, B_ID);
    std::fs::write(&locked_claude, text).unwrap();
    // A dsh session whose log is a FIFO, and one whose log is a directory.
    let mut logs = std::fs::read_dir(home.join("sessions"))
        .unwrap()
        .flat_map(|p| std::fs::read_dir(p.unwrap().path()).unwrap())
        .flat_map(|s| {
            let dir = s.unwrap().path();
            [dir.join("session.jsonl.zstd"), dir.join("session.jsonl")]
        })
        .filter(|p| p.is_file())
        .collect::<Vec<_>>();
    logs.sort();
    let (fifo_log, directory_log) = (logs.pop().unwrap(), logs.pop().unwrap());
    std::fs::remove_file(&fifo_log).unwrap();
    assert!(Command::new("mkfifo")
        .arg(&fifo_log)
        .status()
        .unwrap()
        .success());
    std::fs::remove_file(&directory_log).unwrap();
    std::fs::create_dir(&directory_log).unwrap();
    let locked_log = std::fs::read_dir(home.join("sessions"))
        .unwrap()
        .flat_map(|p| std::fs::read_dir(p.unwrap().path()).unwrap())
        .flat_map(|s| {
            let dir = s.unwrap().path();
            [dir.join("session.jsonl.zstd"), dir.join("session.jsonl")]
        })
        .find(|p| p.is_file())
        .expect("a demo log");
    let as_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let setpriv = as_root
        && Command::new("setpriv")
            .arg("--help")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    let run = |unprivileged: bool| {
        let mut command = if unprivileged {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN]);
            c
        } else {
            Command::new(BIN)
        };
        let out = command
            .arg("--home")
            .arg(&home)
            .args(["--sources", "dsh,claude", "--claude-home"])
            .arg(&claude)
            .args(["sessions", "--json"])
            .env("HOME", &home)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // The FIFO, as anyone.
    let (code, out, err) = run(false);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(A_ID) && out.contains(B_ID), "{out}");
    assert!(
        err.contains(&fifo.display().to_string()),
        "the FIFO is named: {err}"
    );
    for named in [&directory, &fifo_log, &directory_log] {
        assert!(
            err.contains(&named.display().to_string()),
            "{} is named: {err}",
            named.display()
        );
    }
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        listed.as_array().unwrap().len(),
        8 - 2 + 2,
        "every other session is listed: {out}"
    );
    eprintln!("permission case run as nobody: {setpriv}");
    if setpriv {
        use std::os::unix::fs::PermissionsExt;
        // Everything readable and writable by `nobody` but the two locked files.
        for entry in walk(dir.path()) {
            let mode = if entry.is_dir() { 0o777 } else { 0o666 };
            let _ = std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(mode));
        }
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        for locked in [&locked_claude, &locked_log] {
            std::fs::set_permissions(locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        }
        let (code, out, err) = run(true);
        assert_eq!(code, Some(0), "{err}");
        let listed: Value = serde_json::from_str(&out).unwrap();
        let ids: Vec<&str> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["sessionId"].as_str().unwrap())
            .collect();
        assert!(ids.contains(&format!("claude:{A_ID}").as_str()), "{ids:?}");
        assert!(!ids.contains(&format!("claude:{B_ID}").as_str()), "{ids:?}");
        assert!(
            ids.len() >= 5,
            "the other demo sessions are listed: {ids:?}"
        );
        for locked in [&locked_claude, &locked_log] {
            assert!(
                err.contains(&locked.display().to_string()),
                "{} is named: {err}",
                locked.display()
            );
        }
    }
}

fn walk(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(path.clone());
            }
            if kind.is_dir() || kind.is_file() {
                out.push(path);
            }
        }
    }
    out
}
