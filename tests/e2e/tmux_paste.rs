//! End to end (issue 38 item 4): the real `dsh-refs` in tmux against a loopback model. Four
//! lines pasted with tmux's bracketed `paste-buffer -p` are the composer's `[Pasted 4 lines]`
//! chip, stay that chip in the transcript after the send, open with the details key, and reach
//! the model whole.

use crate::support::model::{answer, chunked, Reply, Server};
use crate::support::tmux::Tmux;

#[test]
fn a_pasted_block_stays_a_chip_in_the_transcript() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(Server::start(vec![Reply::sse(chunked(&answer(
        &[],
        &["answer to the paste"],
    )))]));
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let command = format!(
        "cd {} && {} --home {} --compression none --provider ollama --base-url {} --model e2e",
        root.display(),
        env!("CARGO_BIN_EXE_dsh-refs"),
        home.display(),
        server.base_url()
    );
    let tmux = Tmux::start("paste-chip", &command, 100, 30);
    tmux.wait_for_screen("the composer", |s| s.contains("type @ to reference"));
    tmux.type_text("explain ");
    tmux.paste("pasted alpha\npasted beta\npasted gamma\npasted delta\n");
    tmux.wait_for_screen("the composer's chip", |s| {
        s.contains("explain [Pasted 4 lines]")
    });
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for_screen("the answer", |s| {
        s.contains("answer to the paste") && s.contains("idle")
    });
    // The composer is empty now: the chip on screen is the transcript's (above the composer's
    // box; the status line below it shows the session's title, made of the prompt's words).
    let transcript: String = screen
        .lines()
        .take_while(|l| !l.starts_with('╭'))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        transcript.contains("› explain [Pasted 4 lines]"),
        "{screen}"
    );
    assert!(!transcript.contains("pasted beta"), "{screen}");
    let sent: String = server
        .requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    assert!(
        sent.contains("explain pasted alpha\\npasted beta\\npasted gamma\\npasted delta"),
        "the model got every line: {sent}"
    );
    // The details key opens it in place.
    tmux.keys(&["C-o"]);
    tmux.wait_for_screen("the opened paste", |s| {
        s.contains("› explain pasted alpha") && s.contains("pasted delta")
    });
    tmux.quit();
}
