//! Generated Claude Code and Codex homes for the external-source measurements, in the shapes of
//! the fixtures under `tests/data/fixtures/` (`claude-code/`, `codex/`): a Claude session is a
//! `file-history-snapshot` line, a prompt, a thinking + text reply split over records of one
//! `message.id`, a tool call and its result, and sometimes an `ai-title`; a Codex rollout is a
//! `session_meta`, injected context, a `user_message`, reasoning, a tool call and a reply.

use super::gen::{age, data_dir, prose, TestRng};
use std::io::Write;
use std::path::{Path, PathBuf};

const PROJECTS: usize = 100;
const DAYS: usize = 100;

fn uuid(kind: u64, i: usize) -> String {
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        kind,
        i >> 16,
        i & 0xfff,
        (i >> 12) & 0xfff,
        i
    )
}

fn time(i: usize, second: usize) -> String {
    let day = 1 + i % 28;
    let month = 1 + (i / 28) % 12;
    format!(
        "2026-{month:02}-{day:02}T{:02}:{:02}:{:02}.000Z",
        (i / 60) % 24,
        i % 60,
        second % 60
    )
}

fn json(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

/// One Claude session of about `bytes` bytes of conversation (several turns when large).
pub fn claude_session(
    out: &mut impl Write,
    i: usize,
    bytes: usize,
    rng: &mut TestRng,
) -> std::io::Result<()> {
    let sid = uuid(0xc1a0de, i);
    let cwd = format!("/home/dev/project-{}", i % PROJECTS);
    writeln!(
        out,
        r#"{{"type":"file-history-snapshot","messageId":"x","snapshot":{{}},"isSnapshotUpdate":false}}"#
    )?;
    let mut parent = "null".to_string();
    let mut n = 0;
    let mut written = 0;
    let mut turn = 0;
    while turn == 0 || written < bytes {
        let prompt = prose(rng, 120);
        let reply = prose(rng, 600);
        let tool_out = prose(rng, 400);
        let ts = time(i, turn);
        let u = format!("{sid}-{n}");
        writeln!(
            out,
            r#"{{"parentUuid":{parent},"isSidechain":false,"userType":"external","cwd":"{cwd}","sessionId":"{sid}","version":"2.1.7","gitBranch":"main","type":"user","message":{{"role":"user","content":{}}},"uuid":"{u}","timestamp":"{ts}"}}"#,
            json(&prompt)
        )?;
        let mid = format!("msg_{i}_{turn}");
        let a1 = format!("{sid}-{}", n + 1);
        writeln!(
            out,
            r#"{{"parentUuid":"{u}","isSidechain":false,"cwd":"{cwd}","sessionId":"{sid}","type":"assistant","message":{{"id":"{mid}","role":"assistant","content":[{{"type":"thinking","thinking":{}}}],"stop_reason":null}},"uuid":"{a1}","timestamp":"{ts}"}}"#,
            json(&prose(rng, 200))
        )?;
        let a2 = format!("{sid}-{}", n + 2);
        writeln!(
            out,
            r#"{{"parentUuid":"{a1}","isSidechain":false,"cwd":"{cwd}","sessionId":"{sid}","type":"assistant","message":{{"id":"{mid}","role":"assistant","content":[{{"type":"tool_use","id":"t{n}","name":"Bash","input":{{"command":"ls"}}}}],"stop_reason":null}},"uuid":"{a2}","timestamp":"{ts}"}}"#
        )?;
        let r = format!("{sid}-{}", n + 3);
        writeln!(
            out,
            r#"{{"parentUuid":"{a2}","isSidechain":false,"cwd":"{cwd}","sessionId":"{sid}","type":"user","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t{n}","content":{}}}]}},"uuid":"{r}","timestamp":"{ts}"}}"#,
            json(&tool_out)
        )?;
        let a3 = format!("{sid}-{}", n + 4);
        writeln!(
            out,
            r#"{{"parentUuid":"{r}","isSidechain":false,"cwd":"{cwd}","sessionId":"{sid}","type":"assistant","message":{{"id":"{mid}b","role":"assistant","content":[{{"type":"text","text":{}}}],"stop_reason":null}},"uuid":"{a3}","timestamp":"{ts}"}}"#,
            json(&reply)
        )?;
        writeln!(
            out,
            r#"{{"parentUuid":"{a3}","isSidechain":false,"type":"system","subtype":"turn_duration","durationMs":1200,"uuid":"{sid}-{}d","timestamp":"{ts}","sessionId":"{sid}"}}"#,
            n + 4
        )?;
        parent = format!("\"{a3}\"");
        written += prompt.len() + reply.len() + tool_out.len() + 2000;
        n += 5;
        turn += 1;
    }
    if i.is_multiple_of(3) {
        writeln!(
            out,
            r#"{{"type":"ai-title","aiTitle":"Generated task {i}","sessionId":"{sid}"}}"#
        )?;
    }
    Ok(())
}

/// One Codex rollout of about `bytes` bytes of conversation.
pub fn codex_rollout(
    out: &mut impl Write,
    i: usize,
    bytes: usize,
    rng: &mut TestRng,
) -> std::io::Result<()> {
    let id = uuid(0xc0de, i);
    let ts = time(i, 0);
    writeln!(
        out,
        r#"{{"timestamp":"{ts}","type":"session_meta","payload":{{"id":"{id}","timestamp":"{ts}","cwd":"/home/dev/project-{}","originator":"codex_cli_rs","cli_version":"0.128.0","source":"cli","model_provider":"openai"}}}}"#,
        i % PROJECTS
    )?;
    writeln!(
        out,
        r##"{{"timestamp":"{ts}","type":"response_item","payload":{{"type":"message","role":"user","content":[{{"type":"input_text","text":"# AGENTS.md instructions for /home/dev\n\n<INSTRUCTIONS>be brief</INSTRUCTIONS>"}}]}}}}"##
    )?;
    let mut written = 0;
    let mut turn = 0;
    while turn == 0 || written < bytes {
        let ts = time(i, turn + 1);
        let prompt = prose(rng, 120);
        let reply = prose(rng, 600);
        let tool_out = prose(rng, 400);
        writeln!(
            out,
            r#"{{"timestamp":"{ts}","type":"event_msg","payload":{{"type":"task_started","turn_id":"t{turn}"}}}}"#
        )?;
        writeln!(
            out,
            r#"{{"timestamp":"{ts}","type":"response_item","payload":{{"type":"message","role":"user","content":[{{"type":"input_text","text":{}}}]}}}}"#,
            json(&prompt)
        )?;
        writeln!(
            out,
            r#"{{"timestamp":"{ts}","type":"event_msg","payload":{{"type":"user_message","message":{},"images":[]}}}}"#,
            json(&prompt)
        )?;
        writeln!(
            out,
            r#"{{"timestamp":"{ts}","type":"response_item","payload":{{"type":"reasoning","summary":[],"encrypted_content":"gAAAA{}"}}}}"#,
            "x".repeat(200)
        )?;
        writeln!(
            out,
            r#"{{"timestamp":"{ts}","type":"response_item","payload":{{"type":"function_call","name":"exec_command","arguments":"{{}}","call_id":"c{turn}"}}}}"#
        )?;
        writeln!(
            out,
            r#"{{"timestamp":"{ts}","type":"response_item","payload":{{"type":"function_call_output","call_id":"c{turn}","output":{}}}}}"#,
            json(&tool_out)
        )?;
        writeln!(
            out,
            r#"{{"timestamp":"{ts}","type":"response_item","payload":{{"type":"message","role":"assistant","content":[{{"type":"output_text","text":{}}}],"phase":"final_answer"}}}}"#,
            json(&reply)
        )?;
        writeln!(
            out,
            r#"{{"timestamp":"{ts}","type":"event_msg","payload":{{"type":"agent_message","message":{}}}}}"#,
            json(&reply)
        )?;
        writeln!(
            out,
            r#"{{"timestamp":"{ts}","type":"event_msg","payload":{{"type":"task_complete","turn_id":"t{turn}"}}}}"#
        )?;
        written += 2 * prompt.len() + 2 * reply.len() + tool_out.len() + 1500;
        turn += 1;
    }
    Ok(())
}

fn codex_day(i: usize) -> (usize, usize) {
    let d = i % DAYS;
    (1 + d / 28 % 12, 1 + d % 28)
}

/// A Claude home and a Codex home of `sessions` small sessions each, reused across runs.
pub fn cached_external_homes(sessions: usize) -> std::io::Result<(PathBuf, PathBuf)> {
    let root = data_dir(&format!("external-{sessions}"));
    let (claude, codex) = (root.join("claude"), root.join("codex"));
    if !root.join(".complete").exists() {
        if root.exists() {
            std::fs::remove_dir_all(&root)?;
        }
        let mut rng = TestRng::new(14);
        for i in 0..sessions {
            let dir = claude
                .join("projects")
                .join(format!("-home-dev-project-{}", i % PROJECTS));
            std::fs::create_dir_all(&dir)?;
            let file = std::fs::File::create(dir.join(format!("{}.jsonl", uuid(0xc1a0de, i))))?;
            let mut out = std::io::BufWriter::new(file);
            claude_session(&mut out, i, 0, &mut rng)?;
            out.flush()?;
            let (m, d) = codex_day(i);
            let dir = codex.join(format!("sessions/2026/{m:02}/{d:02}"));
            std::fs::create_dir_all(&dir)?;
            let name = format!(
                "rollout-2026-{m:02}-{d:02}T00-00-00-{}.jsonl",
                uuid(0xc0de, i)
            );
            let mut out = std::io::BufWriter::new(std::fs::File::create(dir.join(name))?);
            codex_rollout(&mut out, i, 0, &mut rng)?;
            out.flush()?;
        }
        let mut index =
            std::io::BufWriter::new(std::fs::File::create(codex.join("session_index.jsonl"))?);
        for i in (0..sessions).step_by(4) {
            writeln!(
                index,
                r#"{{"id":"{}","thread_name":"Named thread {i}","updated_at":"2026-01-01T00:00:00Z"}}"#,
                uuid(0xc0de, i)
            )?;
        }
        index.flush()?;
        std::fs::write(root.join(".complete"), b"")?;
    }
    age_tree(&root);
    Ok((claude, codex))
}

/// One Claude session and one Codex rollout of about `mb` MB each.
pub fn cached_big_external(mb: u64) -> std::io::Result<(PathBuf, PathBuf)> {
    let root = data_dir(&format!("external-big-{mb}"));
    let (claude, codex) = (root.join("claude"), root.join("codex"));
    if !root.join(".complete").exists() {
        if root.exists() {
            std::fs::remove_dir_all(&root)?;
        }
        let mut rng = TestRng::new(41);
        let bytes = (mb * 1024 * 1024) as usize;
        let dir = claude.join("projects/-home-dev-big");
        std::fs::create_dir_all(&dir)?;
        let mut out = std::io::BufWriter::new(std::fs::File::create(
            dir.join(format!("{}.jsonl", uuid(0xc1a0de, 0))),
        )?);
        claude_session(&mut out, 0, bytes, &mut rng)?;
        out.flush()?;
        let dir = codex.join("sessions/2026/01/01");
        std::fs::create_dir_all(&dir)?;
        let name = format!("rollout-2026-01-01T00-00-00-{}.jsonl", uuid(0xc0de, 0));
        let mut out = std::io::BufWriter::new(std::fs::File::create(dir.join(name))?);
        codex_rollout(&mut out, 0, bytes, &mut rng)?;
        out.flush()?;
        std::fs::write(root.join(".complete"), b"")?;
    }
    age_tree(&root);
    Ok((claude, codex))
}

/// Ages every directory under `root` (listings do not trust stamps younger than two seconds).
fn age_tree(root: &Path) {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(entry.path());
                }
            }
        }
        age(&dir);
    }
}

/// The namespaced id of generated session `i`.
pub fn claude_id(i: usize) -> String {
    format!("claude:{}", uuid(0xc1a0de, i))
}

pub fn codex_id(i: usize) -> String {
    format!("codex:{}", uuid(0xc0de, i))
}
