//! `exec` as a daily driver (issue 24 items 2–4): `@ID`, `@PREFIX` and `--ref ID|PREFIX|WORD`
//! reference sessions without the base64 dance (ambiguous → the candidates listed), a bad
//! payload's error says how to write one, `--json` reports what was attached and coalesces
//! deltas, `--api-key-env NAME` sends a key for `openai-compatible`, a 401 says how to set one,
//! and a key never goes over plain http:// to another host. Through the real binary.

use crate::exec_hostile::{command, run};
use crate::support::model::{answer, chunked, Reply, Server};
use serde_json::Value;
use std::path::Path;

fn text(out: &crate::exec_hostile::Run) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// A new session (offline model) whose first prompt is `prompt`; returns its id.
async fn session(home: &Path, work: &Path, prompt: &str) -> String {
    let out = run(command(home, work, &["exec", "--json", prompt])).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let first: Value = serde_json::from_str(text(&out).lines().next().unwrap()).unwrap();
    first["sessionId"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_prefixes_and_words_reference_sessions() {
    let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (h, w) = (home.path(), work.path());
    let a = session(h, w, "the tokenizer test is flaky").await;
    let b = session(h, w, "we chose sqlite for storage").await;

    // A word, through discovery search: one session matches.
    let out = run(command(
        h,
        w,
        &["exec", "--ref", "tokenizer", "what was it?"],
    ))
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(text(&out).contains(&format!("({a})")), "{}", text(&out));

    // The whole id, a unique prefix, and the uuid's start, typed in the prompt.
    for token in [
        a.clone(),
        a[..18].to_string(),
        a["session-".len()..][..8].to_string(),
    ] {
        let prompt = format!("@{token}, what did we decide?");
        let out = run(command(h, w, &["exec", &prompt])).await;
        assert_eq!(out.code, 0, "{token}: {}", out.stderr);
        let answer = text(&out);
        assert!(
            answer.contains(&format!("\"the tokenizer test is flaky\" ({a})")),
            "{token}: {answer}"
        );
        assert!(
            answer.contains("\"@the tokenizer test is flaky, what did we decide?\""),
            "{answer}"
        );
    }
    // --ref with a prefix.
    let out = run(command(h, w, &["exec", "--ref", &b[..18], "and this?"])).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(text(&out).contains(&format!("({b})")), "{}", text(&out));

    // Ambiguous: the candidates, one per line, nothing sent or logged.
    let before = std::fs::read_dir(h.join("sessions")).unwrap().count();
    for args in [
        vec!["exec", "@session- hi"],
        vec!["exec", "--ref", "session-", "hi"],
    ] {
        let out = run(command(h, w, &args)).await;
        assert_eq!(out.code, 1, "{args:?}");
        assert!(
            out.stderr
                .contains("sessions start with \"session-\"; give more of the id:"),
            "{}",
            out.stderr
        );
        for id in [&a, &b] {
            assert!(
                out.stderr.lines().any(|l| l.trim() == id.as_str()),
                "{id}: {}",
                out.stderr
            );
        }
    }
    // A word several sessions match: listed with their titles.
    let out = run(command(h, w, &["exec", "--ref", "what", "hi"])).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("sessions match; name one by id"),
        "{}",
        out.stderr
    );
    // Naming nothing.
    let out = run(command(h, w, &["exec", "@session-0000nothing hi"])).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("no session id is or starts with \"session-0000nothing\""),
        "{}",
        out.stderr
    );
    let out = run(command(h, w, &["exec", "--ref", "zzzqqqxxx", "hi"])).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("no session matches it"),
        "{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read_dir(h.join("sessions")).unwrap().count(),
        before
    );

    // Anything else stays text.
    let out = run(command(
        h,
        w,
        &["exec", "see @README.md and mail me@example.com"],
    ))
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        text(&out).contains("\"see @README.md and mail me@example.com\""),
        "{}",
        text(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_payload_says_how_to_write_a_mention() {
    let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let out = run(command(
        home.path(),
        work.path(),
        &["exec", "@[x](dsh-session:session-123) hi"],
    ))
    .await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("Invalid session reference")
            && out.stderr.contains("dsh-refs mention format ID"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_reports_the_references_and_coalesces_deltas() {
    let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (h, w) = (home.path(), work.path());
    let a = session(h, w, "the tokenizer test is flaky").await;
    let prompt = format!("@{a} what did we decide about it, and why, and when, and who said so?");
    let out = run(command(h, w, &["exec", "--json", &prompt])).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events: Vec<Value> = text(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types[0], "session");
    assert_eq!(events[0]["provider"], "offline");
    assert_eq!(events[0]["model"], "describe");
    let refs = events.iter().find(|e| e["type"] == "references").unwrap();
    let first_text = types.iter().position(|t| *t == "text").unwrap();
    assert!(types.iter().position(|t| *t == "references").unwrap() < first_text);
    let source = &refs["references"][0];
    assert_eq!(source["sessionId"], a.as_str());
    assert_eq!(source["label"], "the tokenizer test is flaky");
    assert_eq!(source["retainedMessages"], source["originalMessages"]);
    assert!(source["originalMessages"].as_u64().unwrap() >= 2, "{refs}");
    assert!(source["bytes"].as_u64().unwrap() > 100, "{refs}");
    assert_eq!(source["truncated"], false);
    assert!(refs["contextBytes"].as_u64().unwrap() > source["bytes"].as_u64().unwrap());
    // The offline model streams word by word at once: the deltas come as a few events.
    let texts: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "text")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    let whole: String = texts.concat();
    let words = whole.split(' ').count();
    assert!(words > 30, "{whole}");
    assert!(
        texts.len() * 10 <= words,
        "{} events for {words} words",
        texts.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_env_sends_a_key_and_a_401_says_how_to_set_one() {
    let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (h, w) = (home.path(), work.path());
    let server = Server::start(vec![
        Reply::sse(chunked(&answer(&[], &["ok"]))),
        Reply::status(401, r#"{"error":{"message":"missing key"}}"#),
    ])
    .await;
    let base = server.base_url();
    let flags = [
        "exec",
        "--provider",
        "openai-compatible",
        "--model",
        "m",
        "--base-url",
        base.as_str(),
        "--compression",
        "none",
    ];
    let mut with_key = flags.to_vec();
    with_key.extend(["--api-key-env", "DSH_TEST_LOCAL_KEY", "hi"]);
    let mut cmd = command(h, w, &with_key);
    cmd.env("DSH_TEST_LOCAL_KEY", "sk-local-1");
    let out = run(cmd).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        server.requests()[0].authorization.as_deref(),
        Some("Bearer sk-local-1")
    );
    let mut without = flags.to_vec();
    without.push("hi");
    let out = run(command(h, w, &without)).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("HTTP 401")
            && out.stderr.contains("no API key is configured")
            && out.stderr.contains("--api-key-env NAME")
            && out.stderr.contains("api_key_env"),
        "{}",
        out.stderr
    );
    assert_eq!(server.requests()[1].authorization, None);
    // A named variable that is unset is a start-up error naming it.
    let mut unset = flags.to_vec();
    unset.extend(["--api-key-env", "DSH_TEST_UNSET_KEY", "hi"]);
    let out = run(command(h, w, &unset)).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("DSH_TEST_UNSET_KEY is not set"),
        "{}",
        out.stderr
    );
}

/// The key never goes over plain http:// to a host that is not this machine: refused before any
/// connection, naming the setting that allows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_over_plain_http_to_another_host_is_refused() {
    let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut cmd = command(
        home.path(),
        work.path(),
        &[
            "exec",
            "--provider",
            "deepseek",
            "--base-url",
            "http://203.0.113.9/v1",
            "hi",
        ],
    );
    cmd.env("DEEPSEEK_API_KEY", "sk-never-sent");
    let out = run(cmd).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("refusing to send the API key in DEEPSEEK_API_KEY over plain http://")
            && out.stderr.contains("203.0.113.9")
            && out.stderr.contains("allow_insecure_http = true")
            && out.stderr.contains("--allow-insecure-http"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("sk-never-sent"));
}
