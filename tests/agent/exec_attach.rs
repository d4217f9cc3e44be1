//! `dsh-refs exec` attaches only what the person named (issue 20 §1): `@path` tokens of the
//! prompt argument under the working directory, and `--attach PATH` anywhere. A planted key
//! outside the working directory never reaches the loopback model server through an `@path`
//! of the prompt, a mention's label or a prompt read from stdin.

use crate::support::model::{answer, chunked, Reply, Server};
use dsh_session_references::reference::format_session_reference_mention;
use std::io::Write;
use std::process::{Command, Stdio};

const KEY_MARKER: &str = "PLANTED-KEY-exec-93af-do-not-send";
const NOTES_MARKER: &str = "exec notes 77c4";

use crate::support::planted::{planted, Planted as Tree};

fn tree() -> Tree {
    planted(NOTES_MARKER, KEY_MARKER)
}

struct Run {
    code: i32,
    stderr: String,
}

/// Runs `dsh-refs exec ARGS` in the tree's `proj/` against `server`, off the async workers.
async fn exec(tree: &Tree, server: &Server, args: &[String], stdin: Option<&str>) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dsh-refs"));
    cmd.arg("--home")
        .arg(&tree.home)
        .args(["exec", "--provider", "deepseek", "--base-url"])
        .arg(server.base_url())
        .args(["--compression", "none"])
        .args(args)
        .current_dir(&tree.cwd);
    for var in [
        "OPENAI_API_KEY",
        "DSH_PROVIDER",
        "DSH_MODEL",
        "DSH_BASE_URL",
        "DSH_HOME",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("DEEPSEEK_API_KEY", "sk-exec-attach")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let stdin = stdin.map(str::to_string);
    tokio::task::spawn_blocking(move || {
        let mut child = cmd.spawn().unwrap();
        {
            let mut input = child.stdin.take().unwrap();
            if let Some(text) = stdin {
                input.write_all(text.as_bytes()).unwrap();
            }
        }
        let out = child.wait_with_output().unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    })
    .await
    .unwrap()
}

async fn server(turns: usize) -> Server {
    Server::start(
        (0..turns)
            .map(|_| Reply::sse(chunked(&answer(&[], &["ok"]))))
            .collect(),
    )
    .await
}

fn last_body(server: &Server) -> String {
    server
        .requests()
        .last()
        .expect("a request")
        .body
        .to_string()
}

fn key_arg(tree: &Tree) -> String {
    tree.key.to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_attaches_prompt_paths_under_the_cwd_only() {
    let tree = tree();
    let server = server(1).await;
    let prompt = format!(
        "read @notes.md, @../secret/id_rsa and @{} please",
        key_arg(&tree)
    );
    let run = exec(&tree, &server, &[prompt], None).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let body = last_body(&server);
    assert!(body.contains(NOTES_MARKER), "the cwd file went: {body}");
    assert!(!body.contains(KEY_MARKER), "the key went: {body}");
    assert_eq!(
        run.stderr
            .matches("is outside the working directory: not attached")
            .count(),
        2,
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--attach"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_attach_names_any_file_and_a_missing_one_is_an_error() {
    let tree = tree();
    let server = server(1).await;
    let args = ["--attach".to_string(), key_arg(&tree), "check it".into()];
    let run = exec(&tree, &server, &args, None).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(last_body(&server).contains(KEY_MARKER), "named, it went");
    let args = ["--attach".to_string(), "gone.txt".into(), "check it".into()];
    let run = exec(&tree, &server, &args, None).await;
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("--attach gone.txt: no such file"),
        "{}",
        run.stderr
    );
    assert_eq!(server.requests().len(), 1, "nothing was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_never_attaches_from_a_mention_label_or_stdin() {
    let tree = tree();
    let server = server(3).await;
    // A first session, whose id the mention names.
    let run = exec(&tree, &server, &["remember the deploy".into()], None).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sessions = std::fs::read_dir(tree.home.join("sessions"))
        .unwrap()
        .flatten()
        .flat_map(|project| std::fs::read_dir(project.path()).unwrap().flatten())
        .map(|session| session.file_name().to_string_lossy().into_owned())
        .collect::<Vec<_>>();
    let label = format!("deploy @{} and @notes.md notes", key_arg(&tree));
    let mention = format_session_reference_mention(&sessions[0], Some(&label));
    let run = exec(&tree, &server, &[format!("{mention} what now?")], None).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let body = last_body(&server);
    assert!(body.contains("deploy @"), "the label went: {body}");
    assert!(!body.contains(KEY_MARKER), "the key went: {body}");
    assert!(
        !body.contains(NOTES_MARKER),
        "a label attaches nothing: {body}"
    );
    // A prompt from stdin was not typed as an argument: its tokens attach nothing.
    let piped = format!("read @notes.md and @{}", key_arg(&tree));
    let run = exec(&tree, &server, &["-".into()], Some(&piped)).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let body = last_body(&server);
    assert!(
        !body.contains(KEY_MARKER) && !body.contains(NOTES_MARKER),
        "{body}"
    );
}
