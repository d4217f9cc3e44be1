//! End to end (issue 20 §1): the real `dsh-refs` in tmux against a loopback model server. A
//! bracketed paste naming a planted key outside the project attaches nothing; a typed `@path`
//! becomes a sized chip and goes; a file outside the project goes only after `y`.

use crate::support::model::{answer, chunked, Reply, Server};
use crate::support::tmux::Tmux;

const KEY_MARKER: &str = "PLANTED-KEY-tmux-5e02-do-not-send";
const NOTES_MARKER: &str = "tmux notes 0c3d";

#[test]
fn a_pasted_key_path_attaches_nothing() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(Server::start(
        (1..=3)
            .map(|n| Reply::sse(chunked(&answer(&[], &[&format!("answer number {n}")]))))
            .collect(),
    ));
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let cwd = root.join("proj");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::write(cwd.join("notes.md"), format!("{NOTES_MARKER}\n")).unwrap();
    std::fs::create_dir_all(root.join("secret")).unwrap();
    let key = root.join("secret/id_rsa");
    std::fs::write(&key, format!("{KEY_MARKER}\n")).unwrap();
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let bodies = || -> String {
        server
            .requests()
            .iter()
            .map(|r| r.body.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };

    let command = format!(
        "cd {} && {} --home {} --compression none --provider ollama --base-url {} --model e2e",
        cwd.display(),
        env!("CARGO_BIN_EXE_dsh-refs"),
        home.display(),
        server.base_url()
    );
    let tmux = Tmux::start("attach", &command, 120, 30);
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));

    // A long bracketed paste that names the key twice: collapsed, sent as text, no file read.
    let mut pasted: String = (1..=30).map(|n| format!("trace {n}\n")).collect();
    pasted.push_str(&format!("@{} \n@../secret/id_rsa \n", key.display()));
    tmux.type_text("look at ");
    tmux.paste(&pasted);
    tmux.wait_for_screen("the collapsed paste", |s| s.contains("[Pasted 32 lines]"));
    tmux.type_text(" thanks");
    tmux.keys(&["Enter"]);
    tmux.wait_for_screen("the first answer", |s| {
        s.contains("answer number 1") && s.contains("idle")
    });
    let sent = bodies();
    assert!(sent.contains("trace 30"), "the paste went: {sent}");
    assert!(!sent.contains(KEY_MARKER), "the key went: {sent}");

    // Typed and made a chip with Space: sized on screen, then sent.
    tmux.type_text("summarize @notes.md ");
    tmux.wait_for_screen("the chip", |s| s.contains("@notes.md ⟨16 B⟩"));
    tmux.keys(&["Enter"]);
    tmux.wait_for_screen("the second answer", |s| {
        s.contains("answer number 2") && s.contains("idle")
    });
    assert!(bodies().contains(NOTES_MARKER));

    // Outside the project: asked first, sent after `y`.
    tmux.type_text("and @../secret/id_rsa ");
    tmux.wait_for_screen("the prompt", |s| {
        s.contains("Send a file from outside this session's directory?")
    });
    // Keys within a quarter second of the prompt are typing, not an answer.
    std::thread::sleep(std::time::Duration::from_millis(300));
    tmux.keys(&["y"]);
    tmux.wait_for_screen("the outside chip", |s| {
        s.contains("@../secret/id_rsa ⟨outside · ")
    });
    tmux.keys(&["Enter"]);
    tmux.wait_for_screen("the third answer", |s| {
        s.contains("answer number 3") && s.contains("idle")
    });
    assert!(bodies().contains(KEY_MARKER), "confirmed, it went");
    tmux.quit();
}
