use super::support::gen::{generate_home, project_cwd, HomeSpec};
use dsh_session_references::host::{Settings, Workspace};
use dsh_session_references::mcp::{self, Expose, Options};
use dsh_session_references::reference::{
    decode_session_reference_uri, encode_session_reference_uri, format_session_reference_mention,
};
use dsh_session_references::session::{
    ContentBlock, Encoding, EventData, Message, MessageSource, NewEvent, SessionHeader,
    SessionWriter,
};
use rmcp::model::{
    GetPromptRequestParams, PaginatedRequestParams, ReadResourceRequestParams, Resource,
    ResourceContents,
};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::Notify;

const BIN: &str = env!("CARGO_BIN_EXE_dsh-refs");
const REFERENCED: &str = "f382e8f5-9f34-4706-bea8-95f943fbcb40";
const INFRA: &str = "1e0f9a72-694b-41d1-a29f-87cdaff19373";

/// A client that counts `list_changed` notifications.
#[derive(Clone, Default)]
struct Host {
    changed: Arc<Notify>,
}

impl ClientHandler for Host {
    async fn on_resource_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.changed.notify_one();
    }
}

type Client = RunningService<RoleClient, Host>;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The bundled demo home, installed into a temporary directory.
pub(super) fn demo_home() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    dsh_session_references::demo::install_into(&home).unwrap();
    (dir, home)
}

/// `dsh-refs --home HOME --sources dsh mcp ARGS…` as a host starts it.
fn command(home: &Path, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.arg("--home").arg(home);
    if !args.contains(&"--sources") {
        cmd.args(["--sources", "dsh"]);
    }
    cmd.arg("mcp").args(args);
    cmd.env_remove("RUST_LOG");
    cmd
}

async fn connect(home: &Path, args: &[&str]) -> (Client, Host) {
    let host = Host::default();
    let (transport, _) = TokioChildProcess::builder(command(home, args))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (host.clone().serve(transport).await.unwrap(), host)
}

/// The listing once the index has labelled it (the first listing of a home waits a little for
/// the index's first pass; a loaded machine can take longer, then labels follow).
async fn labelled(client: &Client, label: &str) -> Vec<Resource> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (resources, _) = all_pages(client).await;
        if resources.iter().any(|r| r.name == label) || Instant::now() > deadline {
            return resources;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn all_pages(client: &Client) -> (Vec<Resource>, usize) {
    let (mut resources, mut pages, mut cursor) = (Vec::new(), 0, None);
    loop {
        let page = client
            .list_resources(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .unwrap();
        pages += 1;
        resources.extend(page.resources);
        cursor = page.next_cursor;
        if cursor.is_none() {
            return (resources, pages);
        }
    }
}

async fn read(client: &Client, uri: &str) -> Result<String, ServiceError> {
    let result = client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await?;
    assert_eq!(result.contents.len(), 1);
    match &result.contents[0] {
        ResourceContents::TextResourceContents {
            text, mime_type, ..
        } => {
            assert_eq!(mime_type.as_deref(), Some("text/markdown"));
            Ok(text.clone())
        }
        other => panic!("not text: {other:?}"),
    }
}

fn mcp_error(err: ServiceError) -> rmcp::ErrorData {
    match err {
        ServiceError::McpError(e) => e,
        other => panic!("not an MCP error: {other}"),
    }
}

/// The context text `dsh-refs prepare` gives for `@[label](uri)`.
fn prepared_context(home: &Path, id: &str, label: &str, extra: &[&str]) -> Value {
    let out = Command::new(BIN)
        .arg("--home")
        .arg(home)
        .args(extra)
        .args(["prepare", "--as", "someone-else"])
        .arg(format_session_reference_mention(id, Some(label)))
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    doc
}

pub(super) fn new_session(home: &Path, id: &str, cwd: &str, prompt: &str) {
    let header = SessionHeader::new(
        id,
        dsh_session_references::session::now_ms(),
        Some(cwd.into()),
    );
    let mut writer = SessionWriter::create(home, header, Encoding::Plain).unwrap();
    let user: NewEvent = EventData::UserMessage(Message::new(
        "user",
        vec![ContentBlock::text(prompt)],
        MessageSource::user(),
        format!("m-{id}"),
    ))
    .into();
    writer.append(vec![user]).unwrap();
}

#[test]
fn the_list_ranks_same_cwd_first_then_last_activity_and_caps_and_pages() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let mut spec = HomeSpec::new(130);
    spec.projects = 2;
    spec.encoding = Encoding::Plain;
    let ids = generate_home(&home, &spec).unwrap();
    let cwd = project_cwd(1);
    runtime().block_on(async {
        let (client, _) = connect(&home, &["--cwd", &cwd, "--max-resources", "120"]).await;
        let info = client.peer_info().unwrap();
        assert!(info.capabilities.tools.is_none(), "no tools");
        assert_eq!(
            info.capabilities.resources.as_ref().unwrap().list_changed,
            Some(true)
        );
        assert!(info.capabilities.prompts.is_some() && info.capabilities.completions.is_some());
        // Once indexed (a loaded machine may list the first time by id), every row has counts.
        let deadline = Instant::now() + Duration::from_secs(30);
        let (resources, pages) = loop {
            let (resources, pages) = all_pages(&client).await;
            let indexed = resources
                .iter()
                .all(|r| r.description.as_deref().unwrap().contains(" messages · "));
            if indexed || Instant::now() > deadline {
                break (resources, pages);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(
            (resources.len(), pages),
            (120, 3),
            "capped at 120, pages of 50"
        );
        let listed: Vec<String> = resources
            .iter()
            .map(|r| decode_session_reference_uri(&r.uri).unwrap())
            .collect();
        for (r, id) in resources.iter().zip(&listed) {
            assert_eq!(r.uri, encode_session_reference_uri(id), "canonical");
            assert!(
                r.uri.ends_with(|c: char| c.is_ascii_alphabetic()),
                "{}",
                r.uri
            );
            assert_eq!(r.mime_type.as_deref(), Some("text/markdown"));
            assert_eq!(r.title.as_deref(), Some(r.name.as_str()));
            let description = r.description.as_deref().unwrap();
            assert!(
                description.starts_with(&format!("{} · dsh · ", r.name)),
                "{description}"
            );
            assert!(description.contains(" messages · "), "{description}");
            assert!(!r.name.chars().any(char::is_control));
        }
        // Same cwd first, each group newest first (generated sessions grow older with i).
        let same: Vec<bool> = resources
            .iter()
            .map(|r| {
                r.description
                    .as_deref()
                    .unwrap()
                    .contains(&format!(" · {cwd} · "))
            })
            .collect();
        let first_other = same.iter().position(|s| !s).unwrap();
        assert!(same[..first_other].iter().all(|s| *s) && same[first_other..].iter().all(|s| !s));
        assert!(first_other > 10, "{first_other} sessions of {cwd}");
        // Each group by last activity (as the index has it), newest first, ties by id.
        let out = Command::new(BIN)
            .arg("--home")
            .arg(&home)
            .args([
                "--sources",
                "dsh",
                "search",
                "",
                "--json",
                "--limit",
                "1000",
            ])
            .output()
            .unwrap();
        let found: Value = serde_json::from_slice(&out.stdout).unwrap();
        let activity: BTreeMap<String, i64> = found["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                (
                    h["sessionId"].as_str().unwrap().to_string(),
                    h["lastActivity"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(activity.len(), ids.len());
        for group in [&listed[..first_other], &listed[first_other..]] {
            assert!(
                group
                    .windows(2)
                    .all(|w| (-activity[&w[0]], &w[0]) < (-activity[&w[1]], &w[1])),
                "newest first"
            );
        }
        // A cursor that is not ours is invalid params.
        let err = client
            .list_resources(Some(
                PaginatedRequestParams::default().with_cursor(Some("zz".into())),
            ))
            .await
            .unwrap_err();
        assert_eq!(mcp_error(err).code.0, -32602);
        client.cancel().await.unwrap();
        // The default cap (200) lists all 130.
        let (client, _) = connect(&home, &[]).await;
        assert_eq!(all_pages(&client).await.0.len(), 130);
        client.cancel().await.unwrap();
    });
}

#[test]
fn a_read_is_exactly_what_prepare_gives_for_that_reference() {
    let (_dir, home) = demo_home();
    runtime().block_on(async {
        let (client, _) = connect(&home, &[]).await;
        let resources = labelled(&client, "Fix the flaky tokenizer test").await;
        assert_eq!(resources.len(), 8);
        assert!(resources
            .iter()
            .any(|r| r.name == "Fix the flaky tokenizer test"));
        for r in &resources {
            let id = decode_session_reference_uri(&r.uri).unwrap();
            let text = read(&client, &r.uri).await.unwrap();
            let doc = prepared_context(&home, &id, &r.name, &["--sources", "dsh"]);
            let expected = doc["additionalContext"]["content"][0]["text"]
                .as_str()
                .unwrap();
            assert_eq!(text, expected, "{id}");
            assert!(text.contains("untrusted, read-only snapshot"));
        }
        client.cancel().await.unwrap();
    });
}

#[test]
fn each_error_has_its_code_and_the_reference_code_in_data() {
    let (_dir, home) = demo_home();
    runtime().block_on(async {
        let (client, _) = connect(&home, &[]).await;
        let err = mcp_error(read(&client, "dsh-session:IiJ").await.unwrap_err());
        assert_eq!(err.code.0, -32602);
        assert_eq!(
            err.data.unwrap()["code"],
            "SESSION_REFERENCE_INVALID_REFERENCE"
        );
        let err = mcp_error(read(&client, "file:///etc/passwd").await.unwrap_err());
        assert_eq!(err.code.0, -32602);
        let unknown = encode_session_reference_uri("no-such-session");
        let err = mcp_error(read(&client, &unknown).await.unwrap_err());
        assert_eq!(err.code.0, -32002);
        assert_eq!(err.data.unwrap()["code"], "SESSION_REFERENCE_READ_FAILED");
        client.cancel().await.unwrap();
        // A budget nothing fits in: an internal error, never a partial text.
        let (client, _) = connect(&home, &["--max-reference-bytes", "40"]).await;
        let err = mcp_error(
            read(&client, &encode_session_reference_uri(REFERENCED))
                .await
                .unwrap_err(),
        );
        assert_eq!(err.code.0, -32603);
        assert_eq!(
            err.data.unwrap()["code"],
            "SESSION_REFERENCE_BUDGET_EXCEEDED"
        );
        client.cancel().await.unwrap();
    });
    // A listed log whose records cannot be read: an internal error, READ_FAILED.
    let (_dir, home) = demo_home();
    let log = walk(&home.join("sessions"))
        .into_keys()
        .find(|p| p.to_string_lossy().contains(REFERENCED))
        .unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    // A broken record before the last one (a torn tail alone would be skipped).
    lines[2] = "{\"seq\": \"garbage\", broken";
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    runtime().block_on(async {
        let (client, _) = connect(&home, &[]).await;
        assert_eq!(
            all_pages(&client).await.0.len(),
            8,
            "listed from its header"
        );
        let err = mcp_error(
            read(&client, &encode_session_reference_uri(REFERENCED))
                .await
                .unwrap_err(),
        );
        assert_eq!(err.code.0, -32603, "{err:?}");
        assert_eq!(err.data.unwrap()["code"], "SESSION_REFERENCE_READ_FAILED");
        client.cancel().await.unwrap();
    });
}

#[test]
fn a_session_written_while_connected_is_announced_and_listed() {
    let (_dir, home) = demo_home();
    runtime().block_on(async {
        let (client, host) = connect(&home, &[]).await;
        assert_eq!(all_pages(&client).await.0.len(), 8);
        let changed = host.changed.notified();
        new_session(&home, "fresh-session", "/p", "a brand new question");
        tokio::time::timeout(Duration::from_secs(10), changed)
            .await
            .expect("list_changed within 10 s");
        let (resources, _) = all_pages(&client).await;
        let uri = encode_session_reference_uri("fresh-session");
        assert!(
            resources.iter().any(|r| r.uri == uri),
            "the new session is listed"
        );
        // Labelled by its first prompt once indexed (another list_changed says so).
        let resources = labelled(&client, "a brand new question").await;
        let fresh = resources.iter().find(|r| r.uri == uri).unwrap();
        assert_eq!(fresh.name, "a brand new question");
        client.cancel().await.unwrap();
    });
}

/// A start on a home with an index ranks its first list from the index, made whole against the
/// home (issue 36 item 4): a session made while no server ran is listed at once (by id, until
/// indexed), one removed is not; the indexer's pass that follows labels the new one, and the
/// host is told so.
#[test]
fn a_warm_start_lists_every_session_on_disk_at_once_and_then_labels_the_new_ones() {
    let (_dir, home) = demo_home();
    runtime().block_on(async {
        let (client, _) = connect(&home, &[]).await;
        labelled(&client, "Fix the flaky tokenizer test").await;
        client.cancel().await.unwrap();
    });
    assert!(home.join("index").join("discovery.sqlite3").is_file());
    // While no server runs: one session made, one removed.
    new_session(&home, "made-while-away", "/p", "a question from yesterday");
    let gone = std::fs::read_dir(home.join("sessions"))
        .unwrap()
        .flat_map(|p| std::fs::read_dir(p.unwrap().path()).unwrap())
        .map(|d| d.unwrap().path())
        .find(|d| d.file_name().unwrap().to_string_lossy() == INFRA)
        .expect("the demo home holds the infra session");
    std::fs::remove_dir_all(&gone).unwrap();
    let (made, removed) = (
        encode_session_reference_uri("made-while-away"),
        encode_session_reference_uri(INFRA),
    );
    runtime().block_on(async {
        let (client, host) = connect(&home, &[]).await;
        let changed = host.changed.notified();
        let (first, _) = all_pages(&client).await;
        let uris = |rs: &[Resource]| rs.iter().map(|r| r.uri.clone()).collect::<Vec<_>>();
        assert!(uris(&first).contains(&made), "{:?}", uris(&first));
        assert!(!uris(&first).contains(&removed), "removed while away");
        assert_eq!(first.len(), 8, "7 of the demo home and the new one");
        assert!(first.iter().filter(|r| r.uri != made).all(|r| r
            .description
            .as_deref()
            .unwrap()
            .contains(" messages · ")));
        tokio::time::timeout(Duration::from_secs(20), changed)
            .await
            .expect("list_changed once the indexer labelled the new session");
        let now = labelled(&client, "a question from yesterday").await;
        let fresh = now.iter().find(|r| r.uri == made).expect("still listed");
        assert_eq!(fresh.name, "a question from yesterday");
        assert!(!uris(&now).contains(&removed));
        assert_eq!(now.len(), first.len());
        client.cancel().await.unwrap();
    });
}

/// Issue 35 item 4: sessions of another agent that no index holds are titled in the server's
/// first answer, from the agent's own listing, not labelled by their ids until an index has
/// them (the indexer is off here, so nothing but the listing can title them).
#[test]
fn a_first_list_titles_agent_sessions_no_index_holds() {
    let (dir, home) = demo_home();
    let claude = dir.path().join("claude");
    copy_tree(
        &super::support::data_dir().join("fixtures/claude-code/projects"),
        &claude.join("projects"),
    );
    runtime().block_on(async {
        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        let (read_half, write_half) = tokio::io::split(server_io);
        let options = Options {
            workspace: Workspace::open(&Settings {
                home: Some(home.clone()),
                sources: Some(
                    dsh_session_references::session::external::SourceChoice::parse("dsh,claude")
                        .unwrap(),
                ),
                agent_homes: vec![("claude", claude.clone())],
                ..Settings::default()
            }),
            cwd: None,
            max_resources: 200,
            expose: Expose::default(),
            max_reference_bytes: None,
            index: false,
        };
        let served = tokio::spawn(mcp::serve(options, read_half, write_half));
        let client = Host::default().serve(client_io).await.unwrap();
        let (first, _) = all_pages(&client).await;
        let agent: Vec<&Resource> = first
            .iter()
            .filter(|r| {
                r.description
                    .as_deref()
                    .is_some_and(|d| d.contains(" · Claude Code · "))
            })
            .collect();
        assert!(
            agent.len() >= 3,
            "{} Claude Code sessions listed",
            agent.len()
        );
        for resource in &agent {
            let id = decode_session_reference_uri(&resource.uri).unwrap();
            let own = id.strip_prefix("claude:").unwrap();
            assert!(
                !resource.name.contains(own) && resource.name != id,
                "{id} is labelled by its id: {:?}",
                resource.name
            );
        }
        drop(client);
        tokio::time::timeout(Duration::from_secs(5), served)
            .await
            .expect("the server ends with its client")
            .unwrap()
            .unwrap();
    });
}

#[test]
fn the_reference_prompt_resolves_ids_prefixes_and_words_and_completes() {
    let (_dir, home) = demo_home();
    runtime().block_on(async {
        let (client, _) = connect(&home, &[]).await;
        labelled(&client, "Fix the flaky tokenizer test").await;
        let prompts = client.list_prompts(None).await.unwrap().prompts;
        assert_eq!(prompts.len(), 1);
        assert_eq!(prompts[0].name, "reference");
        let args = prompts[0].arguments.as_ref().unwrap();
        assert_eq!(
            (args[0].name.as_str(), args[0].required),
            ("session", Some(true))
        );
        let get = |value: &str| {
            let mut params = GetPromptRequestParams::new("reference");
            params.arguments = Some(json!({"session": value}).as_object().unwrap().clone());
            client.get_prompt(params)
        };
        let expected = read(&client, &encode_session_reference_uri(REFERENCED))
            .await
            .unwrap();
        for value in [REFERENCED, "f382", "f382e8f5"] {
            let result = get(value).await.unwrap();
            assert_eq!(result.messages.len(), 1, "{value}");
            let message = serde_json::to_value(&result.messages[0]).unwrap();
            assert_eq!(message["role"], "user");
            assert_eq!(message["content"]["text"], expected.as_str(), "{value}");
        }
        // One word found by discovery in one session only.
        let infra = read(&client, &encode_session_reference_uri(INFRA))
            .await
            .unwrap();
        let result = get("Terraform").await.unwrap();
        let message = serde_json::to_value(&result.messages[0]).unwrap();
        assert_eq!(message["content"]["text"], infra.as_str());
        // A word two sessions hold (the second references the first): ambiguous, both named.
        let err = mcp_error(get("tokenizer").await.unwrap_err());
        assert!(
            err.message.contains(REFERENCED) && err.message.contains("7a712ba3"),
            "{}",
            err.message
        );
        // Ambiguous: both `f3…` sessions named, with their labels.
        let err = mcp_error(get("f3").await.unwrap_err());
        assert_eq!(err.code.0, -32602);
        assert!(
            err.message.contains(REFERENCED) && err.message.contains("f3bb857e"),
            "{}",
            err.message
        );
        assert!(
            err.message.contains("Fix the flaky tokenizer test"),
            "{}",
            err.message
        );
        let err = mcp_error(get("zzz-nothing-like-it").await.unwrap_err());
        assert!(err.message.contains("no session"), "{}", err.message);
        // opencode sends its own placeholder instead of what the person typed.
        for placeholder in ["$1", "$ARGUMENTS", " $2 "] {
            let err = mcp_error(get(placeholder).await.unwrap_err());
            assert_eq!(err.code.0, -32602);
            assert!(err.message.contains("placeholder"), "{}", err.message);
            assert!(err.message.contains('@'), "{}", err.message);
        }
        // Completion: single tokens, each resolving to exactly one session.
        for typed in ["", "f", "1", "Terraform"] {
            let values = client
                .complete_prompt_argument("reference", "session", typed, None)
                .await
                .unwrap()
                .values;
            assert!(
                !values.is_empty() && values.len() <= 20,
                "{typed}: {values:?}"
            );
            for value in &values {
                assert!(!value.contains(char::is_whitespace));
                get(value).await.unwrap_or_else(|e| panic!("{value}: {e}"));
            }
            if typed == "f" {
                assert_eq!(values.len(), 2, "{values:?}");
            }
        }
        client.cancel().await.unwrap();
    });
}

#[test]
fn expose_prompts_lists_nothing() {
    let (_dir, home) = demo_home();
    runtime().block_on(async {
        let (client, _) = connect(&home, &["--expose", "prompts"]).await;
        let info = client.peer_info().unwrap();
        assert!(info.capabilities.resources.is_none());
        let err = client.list_resources(None).await.unwrap_err();
        assert_eq!(mcp_error(err).code.0, -32601);
        let err = read(&client, &encode_session_reference_uri(REFERENCED))
            .await
            .unwrap_err();
        assert_eq!(mcp_error(err).code.0, -32601);
        assert_eq!(client.list_prompts(None).await.unwrap().prompts.len(), 1);
        client.cancel().await.unwrap();
        let (client, _) = connect(&home, &["--expose", "resources"]).await;
        assert!(client.peer_info().unwrap().capabilities.prompts.is_none());
        assert_eq!(all_pages(&client).await.0.len(), 8);
        client.cancel().await.unwrap();
    });
    let out = Command::new(BIN)
        .args(["mcp", "--expose", "tools"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// The server's one store keeps the listing cache (`<home>/index/listing`), so the next start
/// lists from it instead of reading every session's header.
#[test]
fn the_first_listing_leaves_a_listing_cache_for_the_next_start() {
    let (_dir, home) = demo_home();
    let cache = home.join("index").join("listing");
    assert!(!cache.exists());
    runtime().block_on(async {
        let (client, _) = connect(&home, &[]).await;
        assert_eq!(all_pages(&client).await.0.len(), 8);
        client.cancel().await.unwrap();
    });
    assert!(cache.is_file(), "no listing cache at {}", cache.display());
}

/// Path → (bytes, mtime) of every file under `root`.
fn walk(root: &Path) -> BTreeMap<PathBuf, (Vec<u8>, SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                out.insert(
                    entry.path(),
                    (
                        std::fs::read(entry.path()).unwrap(),
                        meta.modified().unwrap(),
                    ),
                );
            }
        }
    }
    out
}

fn copy_tree(from: &Path, to: &Path) {
    for (path, (bytes, _)) in walk(from) {
        let target = to.join(path.strip_prefix(from).unwrap());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(target, bytes).unwrap();
    }
}

#[test]
fn stdout_is_json_rpc_only_garbage_is_survived_eof_exits_0_and_no_home_is_written() {
    let (dir, home) = demo_home();
    let claude = dir.path().join("claude");
    copy_tree(
        &super::support::data_dir().join("fixtures/claude-code"),
        &claude,
    );
    let before = (walk(&home.join("sessions")), walk(&claude));
    let mut child = Command::new(BIN)
        .arg("--home")
        .arg(&home)
        .args(["--sources", "dsh,claude", "--claude-home"])
        .arg(&claude)
        .arg("mcp")
        .env("RUST_LOG", "trace")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in stdout.lines() {
            let _ = lines_tx.send(line.unwrap());
        }
    });
    let mut send_line = |line: String| {
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    };
    let answer = |id: i64| -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let line = lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("an answer");
            let value: Value = serde_json::from_str(&line).expect("stdout holds JSON only");
            assert_eq!(value["jsonrpc"], "2.0", "{line}");
            if value["id"] == id {
                return value;
            }
        }
    };
    send_line(json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}).to_string());
    assert_eq!(answer(1)["result"]["serverInfo"]["name"], "dsh-refs");
    send_line(json!({"jsonrpc":"2.0","method":"notifications/initialized"}).to_string());
    send_line(json!({"jsonrpc":"2.0","id":2,"method":"resources/list"}).to_string());
    let listed = answer(2);
    let resources = listed["result"]["resources"].as_array().unwrap().clone();
    let claude_sessions = resources
        .iter()
        .filter(|r| {
            r["description"]
                .as_str()
                .unwrap()
                .contains(" · Claude Code · ")
        })
        .count();
    assert!(
        claude_sessions >= 3,
        "{claude_sessions} Claude Code sessions listed"
    );
    // Not JSON: skipped. JSON of the wrong shape: an error. Serving goes on.
    send_line("this is not json {".into());
    send_line(json!({"jsonrpc":"2.0","id":3}).to_string());
    let error = loop {
        let line = lines.recv_timeout(Duration::from_secs(20)).unwrap();
        let value: Value = serde_json::from_str(&line).unwrap();
        if value.get("error").is_some() {
            break value;
        }
    };
    assert_eq!(error["error"]["code"], -32600);
    for (n, r) in resources.iter().enumerate() {
        let id = 10 + n as i64;
        send_line(
            json!({"jsonrpc":"2.0","id":id,"method":"resources/read","params":{"uri":r["uri"]}})
                .to_string(),
        );
        let read = answer(id);
        assert!(
            read["result"]["contents"][0]["text"]
                .as_str()
                .unwrap()
                .starts_with("## Referenced sessions"),
            "{read}"
        );
    }
    send_line(json!({"jsonrpc":"2.0","id":5,"method":"prompts/get","params":{"name":"reference","arguments":{"session":"f382"}}}).to_string());
    assert!(answer(5)["result"]["messages"][0]["content"]["text"].is_string());
    drop(stdin);
    let ended = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            ended.elapsed() < Duration::from_secs(5),
            "exits promptly at EOF"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    while let Ok(line) = lines.recv_timeout(Duration::from_millis(200)) {
        let value: Value = serde_json::from_str(&line).expect("stdout holds JSON only");
        assert_eq!(value["jsonrpc"], "2.0");
    }
    // The trace went to the diagnostics log, not to stdout.
    let log = std::fs::read_to_string(home.join("logs/dsh-refs.log")).unwrap();
    assert!(log.contains("TRACE"), "RUST_LOG=trace reached the log");
    assert_eq!(
        (walk(&home.join("sessions")), walk(&claude)),
        before,
        "no byte or mtime changed"
    );
}

#[test]
fn concurrent_reads_in_process_answer_alike() {
    let (_dir, home) = demo_home();
    runtime().block_on(async {
        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        let (read_half, write_half) = tokio::io::split(server_io);
        let options = Options {
            workspace: Workspace::open(&Settings {
                home: Some(home.clone()),
                sources: Some(
                    dsh_session_references::session::external::SourceChoice::parse("dsh").unwrap(),
                ),
                ..Settings::default()
            }),
            cwd: None,
            max_resources: 200,
            expose: Expose::default(),
            max_reference_bytes: None,
            index: false,
        };
        let served = tokio::spawn(mcp::serve(options, read_half, write_half));
        let client = Host::default().serve(client_io).await.unwrap();
        let (resources, _) = all_pages(&client).await;
        assert_eq!(resources.len(), 8);
        let uris: Vec<String> = resources.iter().map(|r| r.uri.clone()).collect();
        let client = Arc::new(client);
        let mut tasks = Vec::new();
        for round in 0..4 {
            for uri in &uris {
                let (client, uri) = (client.clone(), uri.clone());
                tasks.push(tokio::spawn(async move {
                    (round, uri.clone(), read(&client, &uri).await.unwrap())
                }));
            }
        }
        let mut first: BTreeMap<String, String> = BTreeMap::new();
        for task in tasks {
            let (_, uri, text) = task.await.unwrap();
            let seen = first.entry(uri).or_insert_with(|| text.clone());
            assert_eq!(*seen, text);
        }
        assert_eq!(first.len(), 8);
        drop(client);
        tokio::time::timeout(Duration::from_secs(5), served)
            .await
            .expect("the server ends with its client")
            .unwrap()
            .unwrap();
    });
}
