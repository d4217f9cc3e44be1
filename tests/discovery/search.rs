//! Search quality (SPEC §8): labelled queries a person would type, over the bundled demo home and
//! over a generated home of 400 sessions; the session meant must be in the top 3. Also: the
//! agent's own session and sessions outside the listing are never hits, and `dsh-refs search
//! --json` prints its keys in the documented order.

use crate::support::gen;

use dsh_session_references::discovery::{Discovery, SearchQuery};
use dsh_session_references::session::external::SourceSet;
use dsh_session_references::session::{
    ContentBlock, Encoding, EventData, Message, MessageSource, NewEvent, SessionHeader,
    SessionWriter,
};
use serde_json::Map;
use std::collections::HashSet;
use std::path::Path;

const NOW: i64 = 1_800_000_000_000;

fn query(text: &str, agent: Option<&str>, cwd: Option<&str>) -> SearchQuery {
    SearchQuery {
        text: text.into(),
        agent: agent.map(str::to_string),
        cwd: cwd.map(str::to_string),
        limit: 10,
        now_ms: NOW,
        snippets: true,
    }
}

fn top3(d: &Discovery, q: &SearchQuery) -> Vec<String> {
    d.search_blocking(q, None)
        .unwrap()
        .hits
        .into_iter()
        .take(3)
        .map(|h| h.meta.id)
        .collect()
}

const TOKENIZER: &str = "f382e8f5-9f34-4706-bea8-95f943fbcb40";
const DARK: &str = "a8f01f96-be8e-44a5-b9a9-08c9ae458e4b";
const BENCH: &str = "7a712ba3-b648-4c24-90a9-8184f793c5cc";
const RECOVERY: &str = "be266e1a-9461-46be-a367-b6f347259b89";
const TERRAFORM: &str = "1e0f9a72-694b-41d1-a29f-87cdaff19373";
const ZSTD: &str = "session-cca0e6ab-2135-40bb-a46e-5a60b6392db0";
const PRINT: &str = "1bfb8862-f1f1-499a-bc31-14369f03389b";

#[test]
fn labelled_queries_over_the_demo_home() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    dsh_session_references::demo::install_into(&home).unwrap();
    let d = Discovery::for_home(&home, &SourceSet::default());
    d.refresh_blocking().unwrap();
    // (query, the session a person means): title words, partial words, id prefixes, a cwd, and
    // words only the conversation holds.
    let labelled: &[(&str, &str)] = &[
        ("tokenizer", TOKENIZER),
        ("flaky", TOKENIZER),
        ("dark", DARK),
        ("dark mode", DARK),
        ("toggle", DARK),
        ("benchmark regression", BENCH),
        ("error recovery", RECOVERY),
        ("terraform", TERRAFORM),
        ("staging", TERRAFORM),
        ("zstd frame", ZSTD),
        ("print stylesheet", PRINT),
        ("résumé", PRINT),
        ("f382e8", TOKENIZER),
        ("1bfb", PRINT),
        ("web-dashboard", DARK),
    ];
    let mut misses = Vec::new();
    for (text, meant) in labelled {
        let top = top3(&d, &query(text, None, None));
        if !top.iter().any(|id| id == meant) {
            misses.push(format!("{text:?} → {top:?}, meant {meant}"));
        }
    }
    assert!(misses.is_empty(), "{misses:#?}");

    // The agent's own session is never a hit, even when it matches best.
    let top = top3(&d, &query("tokenizer", Some(TOKENIZER), None));
    assert!(!top.contains(&TOKENIZER.to_string()), "{top:?}");

    // Sessions outside the caller's listing are never hits.
    let listed: HashSet<String> = [DARK.to_string()].into();
    let result = d
        .search_blocking(&query("", None, None), Some(&listed))
        .unwrap();
    assert_eq!(result.total, 1);
    assert_eq!(result.hits[0].id, DARK);
}

fn user(text: &str, id: String) -> NewEvent {
    EventData::UserMessage(Message::new(
        "user",
        vec![ContentBlock::text(text)],
        MessageSource::user(),
        id,
    ))
    .into()
}

fn assistant(text: &str, id: String) -> NewEvent {
    EventData::AssistantMessage {
        turn: 1.into(),
        step: 1.into(),
        message: Message::new(
            "assistant",
            vec![ContentBlock::text(text)],
            MessageSource::model("p", "m"),
            id,
        ),
        extra: Map::new(),
    }
    .into()
}

fn title(text: &str) -> NewEvent {
    EventData::SessionTitle {
        title: text.into(),
        message_seqs: vec![],
        source: serde_json::json!({"kind": "generated"}),
        extra: Map::new(),
    }
    .into()
}

/// A session a person will look for, among generated ones.
fn target(home: &Path, id: &str, cwd: &str, created: i64, name: &str, talk: &[&str]) {
    let header = SessionHeader::new(id, created, Some(cwd.into()));
    let mut writer = SessionWriter::create(home, header, Encoding::Zstd).unwrap();
    let mut rng = gen::TestRng::new(created as u64);
    let mut batch = vec![title(name)];
    for (i, line) in talk.iter().enumerate() {
        // Each message buried in generated prose, as real conversations are.
        let text = format!(
            "{} {line} {}",
            gen::prose(&mut rng, 300),
            gen::prose(&mut rng, 300)
        );
        batch.push(if i % 2 == 0 {
            user(&text, format!("u-{id}-{i}"))
        } else {
            assistant(&text, format!("a-{id}-{i}"))
        });
    }
    writer.append(batch).unwrap();
}

#[test]
fn labelled_queries_over_a_generated_home() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let mut spec = gen::HomeSpec::new(400);
    spec.encoding = Encoding::Zstd;
    gen::generate_home(home, &spec).unwrap();
    let base = 1_700_000_000_000i64;
    target(
        home,
        "t-deploy",
        "/home/dev/work/infra-007",
        base + 1000,
        "Blue-green rollout for the payments service",
        &[
            "we switch traffic with the load balancer weights",
            "canary was flaky because of the sticky sessions",
        ],
    );
    target(
        home,
        "t-oauth",
        "/home/dev/code/api-012",
        base + 2000,
        "OAuth token refresh race",
        &[
            "two tabs refresh the token at once and one gets a 401",
            "serialize refreshes behind a single in-flight promise",
        ],
    );
    target(
        home,
        "t-sqlite",
        "/home/dev/src/notes-003",
        base + 3000,
        "Move notes storage to SQLite",
        &[
            "use WAL mode so the sync daemon can read while we write",
            "the migration copies the JSON files into one table",
        ],
    );
    let d = Discovery::for_home(home, &SourceSet::default());
    let stats = d.refresh_blocking().unwrap();
    assert_eq!(stats.indexed, 403);
    let labelled: &[(&str, &str)] = &[
        ("blue green", "t-deploy"),
        ("payments rollout", "t-deploy"),
        ("sticky sessions", "t-deploy"),
        ("canary flaky", "t-deploy"),
        ("oauth", "t-oauth"),
        ("token refresh", "t-oauth"),
        ("in-flight promise", "t-oauth"),
        ("401", "t-oauth"),
        ("sqlite", "t-sqlite"),
        ("WAL mode", "t-sqlite"),
        ("sync daemon", "t-sqlite"),
        ("notes storage", "t-sqlite"),
    ];
    let mut misses = Vec::new();
    for (text, meant) in labelled {
        let top = top3(&d, &query(text, None, Some("/home/dev/work/harness-000")));
        if !top.iter().any(|id| id == meant) {
            misses.push(format!("{text:?} → {top:?}, meant {meant}"));
        }
    }
    assert!(misses.is_empty(), "{misses:#?}");

    // A generated session found by the start of its id and by its title.
    let id = gen::session_id(123);
    assert_eq!(top3(&d, &query(&id[..8], None, None))[0], id);
}

#[test]
fn search_json_keys_are_in_the_documented_order() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    dsh_session_references::demo::install_into(&home).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dsh-refs"))
        .arg("--home")
        .arg(&home)
        .args(["search", "tokenizer", "--json", "--limit", "1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["query", "total", "hits"]);
    assert_eq!(value["hits"].as_array().unwrap().len(), 1);
    let hit = value["hits"][0].as_object().unwrap();
    let keys: Vec<&str> = hit.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "sessionId",
            "title",
            "firstPrompt",
            "cwd",
            "createdAt",
            "lastActivity",
            "messages",
            "conversationBytes",
            "source",
            "score",
            "matched",
            "snippet"
        ]
    );
    assert_eq!(hit["sessionId"], TOKENIZER);
    assert_eq!(hit["matched"][0], "title");
    assert!(value["total"].as_u64().unwrap() >= 1);

    // Plain output: one block per hit, and a bad limit is a usage error.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dsh-refs"))
        .arg("--home")
        .arg(&home)
        .args(["search", "dark"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with(DARK), "{text}");
    assert!(text.contains("Add a dark mode toggle"), "{text}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dsh-refs"))
        .arg("--home")
        .arg(&home)
        .args(["search", "dark", "--limit", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Typing narrows the rows looked at in memory (each keystroke extends the last query): the
/// answers equal those of a fresh search, keystroke by keystroke.
#[test]
fn typing_answers_like_fresh_searches() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    dsh_session_references::demo::install_into(&home).unwrap();
    let typing = Discovery::for_home(&home, &SourceSet::default());
    typing.refresh_blocking().unwrap();
    for text in [
        "dark mode",
        "tokenizer test",
        "be266e1a",
        "/home/dev/projects/par",
        "résumé",
    ] {
        for end in (1..=text.len()).filter(|&e| text.is_char_boundary(e)) {
            let q = query(&text[..end], None, Some("/home/dev/projects/parser"));
            let typed = typing.search_blocking(&q, None).unwrap();
            let fresh = Discovery::for_home(&home, &SourceSet::default())
                .search_blocking(&q, None)
                .unwrap();
            assert_eq!(typed, fresh, "{:?}", &text[..end]);
        }
    }
}

/// A home's first process searches before its indexer made the index: the listing answers, and
/// what is said is that the index is not built yet, never that it "cannot be used".
#[test]
fn an_index_not_built_yet_is_not_called_unusable() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    target(
        home,
        "t-first",
        "/w",
        NOW - 1000,
        "Warm the cache",
        &["hello there"],
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let fresh = Discovery::for_home(home, &SourceSet::default());
    let found = runtime
        .block_on(fresh.search(query("warm", None, None)))
        .unwrap();
    assert_eq!(found.hits.len(), 1);
    let note = fresh.take_note().expect("a note");
    assert!(
        note.contains("not built yet") && !note.contains("cannot be used"),
        "{note}"
    );
    // Said once.
    runtime
        .block_on(fresh.search(query("warm", None, None)))
        .unwrap();
    assert_eq!(fresh.take_note(), None);
}
