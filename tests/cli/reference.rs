//! The reference subcommands of the `dsh-refs` binary (SPEC §6): conformance vectors, output and
//! error formats, exit codes, and `prepare` against real dsh logs in a §1.1 home.

use crate::support::*;
use dsh_session_references::reference::context_json;
use dsh_session_references::reference::format_session_reference_mention;
use dsh_session_references::reference::{stringify, tag_safe};
use dsh_session_references::session::paths::session_dir;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

fn dsh_refs(home: Option<&Path>, args: &[&str], stdin: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dsh-refs"));
    if let Some(home) = home {
        command.arg("--home").arg(home);
    } else {
        command.env("DSH_HOME", "/nonexistent/dsh-refs-test-home");
    }
    command
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn dsh-refs");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    let output = child.wait_with_output().unwrap();
    Output {
        code: output.status.code().expect("exit code"),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// Asserts a successful run and returns stdout without its final newline.
fn ok(output: Output) -> String {
    assert_eq!(
        output.code, 0,
        "stderr: {}\nstdout: {}",
        output.stderr, output.stdout
    );
    output
        .stdout
        .strip_suffix('\n')
        .expect("one trailing newline")
        .to_string()
}

/// Asserts a contract error with `code` and returns its message.
fn contract_error(output: Output, code: &str) -> String {
    assert_eq!(
        output.code, 1,
        "stdout: {}\nstderr: {}",
        output.stdout, output.stderr
    );
    let line = output.stdout.strip_suffix('\n').expect("trailing newline");
    assert!(!line.contains('\n'), "one line: {line}");
    let value: Value = serde_json::from_str(line).unwrap();
    let error = value["error"].as_object().expect("error object");
    assert_eq!(
        error.keys().collect::<Vec<_>>(),
        ["code", "message"],
        "{line}"
    );
    assert_eq!(value.as_object().unwrap().len(), 1);
    assert_eq!(error["code"], code, "{line}");
    error["message"].as_str().unwrap().to_string()
}

/// Writes `log` (a JSON Lines text) as the session log of its header's id and cwd.
fn install_log(home: &Path, log: &str) {
    let header: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    let id = header["id"].as_str().unwrap();
    let dir = session_dir(home, id, header["cwd"].as_str()).unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("session.jsonl"), log).unwrap();
}

fn header_line(id: &str, created_at: i64, cwd: Option<&str>) -> String {
    let mut header = Map::new();
    header.insert("type".into(), "session".into());
    header.insert("version".into(), 0.into());
    header.insert("id".into(), id.into());
    header.insert("createdAt".into(), created_at.into());
    if let Some(cwd) = cwd {
        header.insert("cwd".into(), cwd.into());
    }
    header.insert("delegationDepth".into(), 0.into());
    stringify(&header)
}

fn title_line(seq: u64, title: &str) -> String {
    format!(
        r#"{{"type":"session/title","seq":{seq},"time":1,"data":{{"title":{},"messageSeqs":[],"source":{{"kind":"plugin","plugin":"title"}}}}}}"#,
        stringify(title)
    )
}

// ---- uri and mention -----------------------------------------------------------------------

#[test]
fn uri_vectors_through_the_binary() {
    for vector in conformance_jsonl("uri.jsonl") {
        let id = vector["id"].as_str().unwrap();
        let uri = vector["uri"].as_str().unwrap();
        // An argv element cannot hold NUL; the id still round-trips through `decode` below.
        if !id.contains('\0') {
            assert_eq!(ok(dsh_refs(None, &["uri", "encode", "--", id], None)), uri);
        }
        let decoded = ok(dsh_refs(None, &["uri", "decode", uri], None));
        assert_eq!(decoded, stringify(id), "{uri}");
    }
}

#[test]
fn uri_reject_vectors_through_the_binary() {
    for uri in read_conformance("uri-reject.txt")
        .lines()
        .filter(|l| !l.is_empty())
    {
        // `--` so that URIs starting with `-` stay positional.
        let output = dsh_refs(None, &["uri", "decode", "--", uri], None);
        contract_error(output, "SESSION_REFERENCE_INVALID_REFERENCE");
    }
}

#[test]
fn mention_parse_vectors_through_the_binary_by_argument_and_stdin() {
    for vector in conformance_jsonl("mention-parse.jsonl") {
        let input = vector["input"].as_str().unwrap();
        for output in [
            dsh_refs(None, &["mention", "parse", "--", input], None),
            dsh_refs(None, &["mention", "parse"], Some(input)),
        ] {
            match vector.get("error") {
                Some(code) => {
                    contract_error(output, code.as_str().unwrap());
                }
                None => assert_eq!(ok(output), stringify(&vector["expect"]), "{input:?}"),
            }
        }
    }
}

#[test]
fn mention_format_through_the_binary() {
    assert_eq!(
        ok(dsh_refs(None, &["mention", "format", "target"], None)),
        "@[target](dsh-session:InRhcmdldCI)"
    );
    assert_eq!(
        ok(dsh_refs(
            None,
            &["mention", "format", "target", "--label", "a]b\\c"],
            None
        )),
        "@[a\\]b\\\\c](dsh-session:InRhcmdldCI)"
    );
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        vec!["uri"],
        vec!["uri", "encode"],
        vec!["candidates"],
        vec!["prepare", "hello"],
        vec!["prepare", "--as", "me", "--max-references", "many", "x"],
        vec!["candidates", "--as", "me", "--limit", "1.5"],
        vec!["mention", "format"],
    ] {
        let output = dsh_refs(None, &args, None);
        assert_eq!(output.code, 2, "{args:?}: {}", output.stdout);
        assert!(output.stdout.is_empty(), "{args:?}");
    }
    let output = dsh_refs(None, &["uri", "--help"], None);
    assert_eq!(output.code, 0);
    assert!(output.stdout.contains("decode"));
}

// ---- prepare: conformance ------------------------------------------------------------------

fn conformance_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    install_log(
        home.path(),
        &read_conformance("source-conversation.session.jsonl"),
    );
    home
}

#[test]
fn prepare_vectors_through_the_binary() {
    let home = conformance_home();
    let text = "compare with @[source](dsh-session:InNvdXJjZSI)";
    let vectors = prepare_vectors();
    assert!(vectors.len() >= 8);
    for vector in vectors {
        let max = vector.max_reference_bytes.to_string();
        let output = dsh_refs(
            Some(home.path()),
            &[
                "prepare",
                "--as",
                "target",
                "--max-reference-bytes",
                &max,
                text,
            ],
            None,
        );
        if let Some(code) = vector.error {
            contract_error(output, &code);
            continue;
        }
        let stdout = ok(output);
        let value: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(
            value.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["content", "additionalContext"]
        );
        assert_eq!(
            stringify(&value["content"]),
            r#"[{"type":"text","text":"compare with @source"}]"#
        );
        let context = value["additionalContext"].as_object().unwrap();
        assert_eq!(context.keys().collect::<Vec<_>>(), ["source", "content"]);
        let blocks = context["content"].as_array().unwrap();
        assert_eq!(blocks.len(), 1);
        assert_eq!(blocks[0]["type"], "text");
        let objects: Vec<Box<RawValue>> =
            serde_json::from_str(context_json(blocks[0]["text"].as_str().unwrap()).unwrap())
                .unwrap();
        assert_eq!(
            objects[0].get(),
            tag_safe(vector.data.unwrap().get().to_string()),
            "max {max}"
        );
        let source = &context["source"];
        assert_eq!(source["kind"], "session-reference");
        assert_eq!(source["version"], 1);
        let mut entry = source["references"][0].as_object().unwrap().clone();
        assert_eq!(entry.remove("inputIndex"), Some(Value::from(0)));
        assert_eq!(
            stringify(&entry),
            vector.reference.unwrap().get(),
            "max {max}"
        );
    }
}

#[test]
fn prepare_reads_text_from_stdin_and_omits_context_without_references() {
    let home = conformance_home();
    let output = dsh_refs(
        Some(home.path()),
        &["prepare", "--as", "target"],
        Some("no mentions here\n"),
    );
    assert_eq!(
        ok(output),
        r#"{"content":[{"type":"text","text":"no mentions here\n"}]}"#
    );
    let output = dsh_refs(
        Some(home.path()),
        &["prepare", "--as", "target"],
        Some("see dsh-session:InNvdXJjZSI"),
    );
    let value: Value = serde_json::from_str(&ok(output)).unwrap();
    assert_eq!(value["content"][0]["text"], "see @source");
    assert_eq!(
        value["additionalContext"]["source"]["references"][0]["label"],
        "source"
    );
}

#[test]
fn prepare_contract_errors() {
    let home = conformance_home();
    let h = Some(home.path());
    let source = "@[s](dsh-session:InNvdXJjZSI)";
    contract_error(
        dsh_refs(h, &["prepare", "--as", "source", source], None),
        "SESSION_REFERENCE_SELF_REFERENCE",
    );
    let many = [
        format_session_reference_mention("a", None),
        format_session_reference_mention("b", None),
        format_session_reference_mention("a", None),
        format_session_reference_mention("c", None),
        format_session_reference_mention("d", None),
    ]
    .join(" ");
    contract_error(
        dsh_refs(h, &["prepare", "--as", "target", &many], None),
        "SESSION_REFERENCE_TOO_MANY",
    );
    let message = contract_error(
        dsh_refs(
            h,
            &[
                "prepare",
                "--as",
                "target",
                &format!(
                    "{source} {}",
                    format_session_reference_mention("ghost-7", None)
                ),
            ],
            None,
        ),
        "SESSION_REFERENCE_READ_FAILED",
    );
    assert!(message.contains("ghost-7"), "{message}");
    contract_error(
        dsh_refs(
            h,
            &["prepare", "--as", "target", "see dsh-session:IiJ"],
            None,
        ),
        "SESSION_REFERENCE_INVALID_REFERENCE",
    );
    for (flag, value) in [
        ("--max-references", "4"),
        ("--max-references", "0"),
        ("--max-reference-bytes", "0"),
    ] {
        contract_error(
            dsh_refs(h, &["prepare", "--as", "target", flag, value, source], None),
            "SESSION_REFERENCE_INVALID_CONFIG",
        );
    }
    contract_error(
        dsh_refs(
            h,
            &[
                "prepare",
                "--as",
                "target",
                "--max-reference-bytes",
                "120",
                source,
            ],
            None,
        ),
        "SESSION_REFERENCE_BUDGET_EXCEEDED",
    );
    // `--max-references 1` with one distinct source mentioned twice is fine.
    ok(dsh_refs(
        h,
        &[
            "prepare",
            "--as",
            "target",
            "--max-references",
            "1",
            &format!("{source} and {source}"),
        ],
        None,
    ));
}

// ---- candidates ----------------------------------------------------------------------------

fn candidates_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let logs = [
        vec![header_line("me", 100, Some("/w")), title_line(0, "Mine")],
        vec![header_line("other-new", 90, Some("/elsewhere"))],
        vec![header_line("nocwd", 80, None), title_line(0, "Scratch")],
        vec![
            header_line("same", 70, Some("/w")),
            title_line(0, "Old title"),
            title_line(1, "Refactor parser"),
        ],
        vec![header_line("other-old", 60, Some("/x/Project"))],
    ];
    for lines in logs {
        install_log(home.path(), &(lines.join("\n") + "\n"));
    }
    home
}

#[test]
fn candidates_through_the_binary() {
    let home = candidates_home();
    let h = Some(home.path());
    // The agent's cwd comes from its stored header.
    assert_eq!(
        ok(dsh_refs(h, &["candidates", "--as", "me"], None)),
        r#"[{"sessionId":"same","label":"Refactor parser","cwd":"/w","createdAt":70},{"sessionId":"nocwd","label":"Scratch","createdAt":80},{"sessionId":"other-new","label":"other-new","cwd":"/elsewhere","createdAt":90},{"sessionId":"other-old","label":"other-old","cwd":"/x/Project","createdAt":60}]"#
    );
    // `--cwd` overrides it.
    let ids = |stdout: String| -> Vec<String> {
        serde_json::from_str::<Vec<Value>>(&stdout)
            .unwrap()
            .iter()
            .map(|c| c["sessionId"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        ids(ok(dsh_refs(
            h,
            &["candidates", "--as", "me", "--cwd", "/x/Project"],
            None
        ))),
        ["other-old", "nocwd", "other-new", "same"]
    );
    // An agent that is not stored has no cwd.
    assert_eq!(
        ids(ok(dsh_refs(h, &["candidates", "--as", "new-agent"], None))),
        ["nocwd", "me", "other-new", "same", "other-old"]
    );
    assert_eq!(
        ids(ok(dsh_refs(
            h,
            &["candidates", "--as", "me", "--query", "PROJ"],
            None
        ))),
        ["other-old"]
    );
    assert_eq!(
        ids(ok(dsh_refs(
            h,
            &["candidates", "--as", "me", "--limit", "2"],
            None
        ))),
        ["same", "nocwd"]
    );
    contract_error(
        dsh_refs(h, &["candidates", "--as", "me", "--limit", "0"], None),
        "SESSION_REFERENCE_INVALID_REFERENCE",
    );
    let empty = tempfile::tempdir().unwrap();
    assert_eq!(
        ok(dsh_refs(
            Some(empty.path()),
            &["candidates", "--as", "me"],
            None
        )),
        "[]"
    );
}

// ---- prepare against the real dsh fixture logs ---------------------------------------------

fn text_of(blocks: &Value) -> String {
    blocks
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// The conversation SPEC §3.5 allows, computed straight from the raw log lines.
fn expected_conversation(log: &str) -> (Vec<(String, String)>, usize) {
    let mut surface: Vec<Value> = Vec::new();
    for line in log.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            break; // torn tail
        };
        match &event["surfaceOp"] {
            Value::Null => {}
            Value::String(op) if op == "append" => surface.push(event),
            op => {
                let start = op["start"].as_u64().unwrap() as usize;
                let end = op["end"].as_u64().unwrap() as usize;
                surface.splice(start..=end, [event]);
            }
        }
    }
    let mut out = Vec::new();
    let mut steering = 0;
    for event in &surface {
        let data = &event["data"];
        let message = if data.get("message").is_some() {
            &data["message"]
        } else {
            data
        };
        let source_kind = message["source"]["kind"].as_str();
        let display = || match &message["envelope"]["displayContent"] {
            Value::String(text) => text.clone(),
            blocks @ Value::Array(_) => text_of(blocks),
            _ => text_of(&message["content"]),
        };
        let item = match event["type"].as_str().unwrap() {
            "user/message"
                if source_kind == Some("plugin") && message["source"]["plugin"] == "compact" =>
            {
                Some(("user", text_of(&message["content"])))
            }
            "user/message" if source_kind == Some("user") => Some(("user", display())),
            "steering/message" if source_kind == Some("user") => {
                steering += 1;
                Some(("user", display()))
            }
            "assistant/message" => Some(("assistant", text_of(&message["content"]))),
            _ => None,
        };
        if let Some((role, text)) = item {
            if !text.is_empty() {
                out.push((role.to_string(), text));
            }
        }
    }
    (out, steering)
}

#[test]
fn prepare_references_every_real_dsh_fixture() {
    let home = tempfile::tempdir().unwrap();
    let mut fixtures = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(fixture_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    entries.sort();
    for (index, path) in entries.iter().enumerate() {
        let log = std::fs::read_to_string(path).unwrap();
        // Several fixtures share a placeholder id: give each temporary copy its own.
        let (header, rest) = log.split_once('\n').unwrap_or((&log, ""));
        let mut header: Map<String, Value> = serde_json::from_str(header).unwrap();
        let id = format!("fixture-{index:03}");
        header.insert("id".into(), id.clone().into());
        let copy = format!("{}\n{rest}", stringify(&header));
        install_log(home.path(), &copy);
        fixtures.push((
            path.file_name().unwrap().to_string_lossy().to_string(),
            id,
            copy,
        ));
    }
    assert!(fixtures.len() >= 50);

    let (mut items, mut steering_items, mut assistant_items) = (0, 0, 0);
    for (name, id, log) in &fixtures {
        let (expected, steering) = expected_conversation(log);
        let mention = format_session_reference_mention(id, Some(name));
        let stdout = ok(dsh_refs(
            Some(home.path()),
            &[
                "prepare",
                "--as",
                "the-target",
                "--max-reference-bytes",
                "100000000",
                &format!("look at {mention}"),
            ],
            None,
        ));
        let value: Value = serde_json::from_str(&stdout).unwrap();
        let context = &value["additionalContext"];
        let objects: Vec<Value> = serde_json::from_str(
            context_json(context["content"][0]["text"].as_str().unwrap()).unwrap(),
        )
        .unwrap();
        let got: Vec<(String, String)> = objects[0]["conversation"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| {
                (
                    item["role"].as_str().unwrap().to_string(),
                    item["text"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(got, expected, "{name}");
        let entry = &context["source"]["references"][0];
        assert_eq!(entry["originalMessages"], expected.len(), "{name}");
        assert_eq!(entry["truncated"], false, "{name}");
        items += got.len();
        steering_items += steering;
        assistant_items += got.iter().filter(|(role, _)| role == "assistant").count();

        // Under the default budget every fixture still prepares, within the budget.
        let stdout = ok(dsh_refs(
            Some(home.path()),
            &["prepare", "--as", "the-target", &mention],
            None,
        ));
        let value: Value = serde_json::from_str(&stdout).unwrap();
        let text = value["additionalContext"]["content"][0]["text"]
            .as_str()
            .unwrap();
        let objects: Vec<Box<RawValue>> =
            serde_json::from_str(context_json(text).unwrap()).unwrap();
        assert!(objects[0].get().len() <= 65536, "{name}");
    }
    // The fixtures exercise every kind of projected message.
    assert!(items > 100, "{items}");
    assert!(steering_items > 0);
    assert!(assistant_items > 50);
}

// ---- format versions -----------------------------------------------------------------------

#[test]
fn a_log_of_another_format_version_is_named_not_hidden() {
    let home = conformance_home();
    let h = Some(home.path());
    let v1_header =
        header_line("future", 9, Some("/source")).replace("\"version\":0", "\"version\":1");
    assert!(v1_header.contains("\"version\":1"), "{v1_header}");
    install_log(
        home.path(),
        &format!("{v1_header}\n{}\n", title_line(0, "future title")),
    );

    // Listed: only what can be read; the skipped log is named on stderr, exit 0.
    for json in [false, true] {
        let args: &[&str] = if json {
            &["sessions", "--json"]
        } else {
            &["sessions"]
        };
        let output = dsh_refs(h, args, None);
        assert!(
            output.stderr.contains("not listed")
                && output.stderr.contains("unsupported session log version 1"),
            "{}",
            output.stderr
        );
        let listed = ok(output);
        assert!(listed.contains("source"), "{listed}");
        assert!(!listed.contains("future"), "{listed}");
    }

    // Referenced: the unsupported-version error, not "not found".
    let message = contract_error(
        dsh_refs(
            h,
            &[
                "prepare",
                "--as",
                "target",
                &format_session_reference_mention("future", None),
            ],
            None,
        ),
        "SESSION_REFERENCE_READ_FAILED",
    );
    assert!(
        message.contains("unsupported session log version 1") && !message.contains("not found"),
        "{message}"
    );
}
