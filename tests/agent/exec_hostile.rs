//! `dsh-refs exec` against hostile answers and values (issue 20 §3, §2): on a terminal the
//! answer is made inert exactly as the TUI shows it, to a pipe it is the exact text, `--json`
//! spells C1 and bidi controls as `\u` escapes, every stderr diagnostic is escaped, and Ctrl-C
//! stops a turn whose server keeps sending. Through the real binary, against loopback servers.

use crate::support::model::{answer, chunked, Reply, Server};
use crate::support::raw_http::{RawBody, RawReply, RawServer};
use crate::support::tmux::Tmux;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// An answer that would take over a terminal shown raw: OSC 52 (clipboard), OSC 0 (title), a
/// screen wipe, a right-to-left override, a C1 CSI.
pub const HOSTILE: &str = "BEFORE \u{1b}]52;c;cHduZWQ=\u{7} \u{1b}]0;pwned\u{7} \u{1b}[2J \u{202e}desrever\u{202c} \u{9b}31m AFTER\r\nline two";

pub struct Run {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

/// The binary with a clean model environment, `--home home`, in `cwd`.
pub fn command(home: &Path, cwd: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dsh-refs"));
    cmd.arg("--home").arg(home).args(args).current_dir(cwd);
    for var in [
        "DEEPSEEK_API_KEY",
        "OPENAI_API_KEY",
        "OPENROUTER_API_KEY",
        "DSH_PROVIDER",
        "DSH_MODEL",
        "DSH_BASE_URL",
        "DSH_HOME",
        "DSH_ALLOW_INSECURE_HTTP",
    ] {
        cmd.env_remove(var);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

pub async fn run(mut cmd: Command) -> Run {
    tokio::task::spawn_blocking(move || {
        let out = cmd.output().unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: out.stdout,
            stderr: String::from_utf8(out.stderr).unwrap(),
        }
    })
    .await
    .unwrap()
}

/// `exec` flags for an openai-compatible server with no key.
fn local(base: &str) -> Vec<String> {
    [
        "exec",
        "--provider",
        "openai-compatible",
        "--model",
        "m",
        "--base-url",
        base,
        "--compression",
        "none",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn to_a_pipe_the_answer_is_the_exact_text() {
    let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let server = Server::start(vec![Reply::sse(chunked(&answer(&[], &[HOSTILE])))]).await;
    let mut a = local(&server.base_url());
    a.push("hi".into());
    let out = run(command(home.path(), work.path(), &args(&a))).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, format!("{HOSTILE}\n").into_bytes());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_spells_c1_and_bidi_controls_and_keeps_the_value() {
    let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let server = Server::start(vec![Reply::sse(chunked(&answer(&[], &[HOSTILE])))]).await;
    let mut a = local(&server.base_url());
    a.extend(["--json".into(), "hi".into()]);
    let out = run(command(home.path(), work.path(), &args(&a))).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        !text.contains(
            |c: char| c.is_control() && c != '\n' || ('\u{202a}'..='\u{202e}').contains(&c)
        ),
        "raw controls in --json: {text:?}"
    );
    assert!(
        text.contains(r"\u009b") && text.contains(r"\u202e"),
        "{text}"
    );
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let answer: String = events
        .iter()
        .filter(|e| e["type"] == "text")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(answer, HOSTILE);
    // The model's own name, no UI hint.
    assert_eq!(events[0]["type"], "session");
    assert_eq!(events[0]["provider"], "openai-compatible");
    assert_eq!(events[0]["model"], "m");
}

/// On a terminal (a tmux pane), the answer is inert: the escapes show as `\xNN` and `\u{…}`
/// spellings, the text before the screen wipe is still there, the title is unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_terminal_the_answer_is_inert_as_in_the_tui() {
    let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let server = Server::start(vec![Reply::sse(chunked(&answer(&[], &[HOSTILE])))]).await;
    let line = format!(
        "cd '{}' && env -u DEEPSEEK_API_KEY -u DSH_PROVIDER -u DSH_BASE_URL -u DSH_MODEL '{}' \
         --home '{}' exec --provider openai-compatible --model m --base-url {} --compression none hi",
        work.path().display(),
        env!("CARGO_BIN_EXE_dsh-refs"),
        home.path().display(),
        server.base_url()
    );
    let pane = tokio::task::spawn_blocking(move || {
        let tmux = Tmux::start_in_shell("exec-inert", &line, 200, 20);
        let screen = tmux.wait_for_screen("the exit", |s| s.contains("EXITED="));
        (screen, tmux)
    })
    .await
    .unwrap();
    let (screen, _tmux) = pane;
    assert!(screen.contains("EXITED=0"), "{screen}");
    assert!(
        screen.contains(
            r"BEFORE \x1B]52;c;cHduZWQ=\x07 \x1B]0;pwned\x07 \x1B[2J \u{202E}desrever\u{202C} \x9B31m AFTER"
        ),
        "{screen}"
    );
    assert!(screen.contains("line two"), "{screen}");
}

/// Config and server values reach stderr escaped, as on screen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_stderr_diagnostic_is_escaped() {
    let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let out = run(command(
        home.path(),
        work.path(),
        &["exec", "--provider", "\u{1b}]0;pwned\u{7}gemini", "hi"],
    ))
    .await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains(r#"unknown provider "\x1B]0;pwned\x07gemini""#),
        "{}",
        out.stderr
    );
    let out = run(command(
        home.path(),
        work.path(),
        &[
            "exec",
            "--provider",
            "openai-compatible",
            "--model",
            "m",
            "--base-url",
            "ftp://\u{1b}[2J\u{202e}x",
            "hi",
        ],
    ))
    .await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains(r#"invalid base URL "ftp://\x1B[2J\u{202E}x""#),
        "{}",
        out.stderr
    );
    // The same from config.toml, for exec and for the TUI.
    std::fs::write(
        home.path().join("config.toml"),
        "[provider]\nkind = \"\\u001b[2Jx\"\n",
    )
    .unwrap();
    for a in [vec!["exec", "hi"], vec![]] {
        let out = run(command(home.path(), work.path(), &a)).await;
        assert_eq!(out.code, 1);
        assert!(
            out.stderr.contains(r#"unknown provider "\x1B[2Jx""#),
            "{a:?}: {}",
            out.stderr
        );
    }
    std::fs::remove_file(home.path().join("config.toml")).unwrap();
    // A server's error message.
    let server = Server::start(vec![Reply::status(
        400,
        "{\"error\":{\"message\":\"bad \u{202e}request\u{9b}2J\"}}",
    )])
    .await;
    let mut a = local(&server.base_url());
    a.push("hi".into());
    let out = run(command(home.path(), work.path(), &args(&a))).await;
    assert_eq!(out.code, 1);
    assert!(
        !out.stderr.contains(['\u{202e}', '\u{9b}', '\u{1b}']),
        "{:?}",
        out.stderr
    );
    assert!(
        out.stderr.contains(r"bad \u{202E}request"),
        "{}",
        out.stderr
    );
}

/// Ctrl-C while the server keeps sending (one endless line, 1 KiB a millisecond, about 3 MiB by
/// the time of the Ctrl-C: under the line limit, and long enough that rescanning it on every
/// chunk, as the old framing did, keeps the client busy for good): the turn stops, the process
/// exits 1 saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_a_turn_whose_server_keeps_sending() {
    let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let server = RawServer::start(|_| {
        RawReply::sse(RawBody::Endless {
            first: b"data: {\"choices\":[{\"delta\":{\"content\":\"".to_vec(),
            repeat: vec![b'x'; 1024],
            pause: Duration::from_millis(1),
        })
    })
    .await;
    let mut a = local(&server.base_url());
    a.push("hi".into());
    let mut child = command(home.path(), work.path(), &args(&a))
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.requests() == 0 {
        assert!(Instant::now() < deadline, "the request never came");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pid = child.id() as i32;
    // SAFETY: `kill` with a child's pid and SIGINT only sends it the signal.
    #[allow(unsafe_code)]
    let sent = unsafe { libc::kill(pid, libc::SIGINT) };
    assert_eq!(sent, 0);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("exec ignored Ctrl-C for 10 s");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let took = started.elapsed();
    let stderr = {
        use std::io::Read;
        let mut text = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        text
    };
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the turn was cancelled"), "{stderr}");
    assert!(took < Duration::from_secs(2), "{took:?}");
}
