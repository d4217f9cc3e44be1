//! Generators for realistic session homes, shared by the benchmarks (`benches/`), the measuring
//! example (`examples/measure.rs`) and the reliability tests.
//!
//! Everything is written through the crate's own [`SessionWriter`], so the bytes on disk are what
//! a real run of ours would leave: a header frame, then one batch per append, in plain or zstd
//! encoding. The data is deterministic (a seeded PRNG), so two runs measure the same bytes.
//!
//! Two shapes:
//! - [`generate_home`]: many small sessions spread over many project directories, each with a
//!   header, a short exchange and a title: what the `@` popup lists.
//! - [`generate_big_log`]: one long session whose bytes are dominated by tool output
//!   (`tool/result` events with large text) and packed chunk rows (`text-chunks`,
//!   `reasoning-chunks`), with compactions (a checkpoint `user/message` replacing the surface)
//!   part-way through. Its conversation text (prompts and answers) is small.
//! - [`generate_tool_heavy_log`] (issue 25): the same kind of session as an agent leaves after a
//!   day of file reading: every turn a short prompt, 40 tool calls of ~125 bytes each followed by
//!   a ~4 KB result, and a short answer, written 64 records per batch (so one zstd frame per 64
//!   records); one compaction early on. Half its lines are short, so per-line costs weigh as
//!   much as per-byte ones.
#![allow(dead_code)]

use dsh_session_references::session::format::{PackedChunks, PackedKind};
use dsh_session_references::session::surface::compaction_replace;
use dsh_session_references::session::{
    ContentBlock, Encoding, EventData, Message, MessageSource, NewEvent, Record, SessionHeader,
    SessionWriter, SurfaceOp,
};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

#[path = "../../src/test_rng.rs"]
#[allow(clippy::duplicate_mod)]
// One file, one generator: a test binary may also load it through the demo-home generator.
mod test_rng;

/// The project's one seeded generator (`src/test_rng.rs`, SplitMix64): benchmarks must not
/// depend on `rand`, and a spec's seed must give the same data on every run.
pub use test_rng::TestRng;

const WORDS: &[&str] = &[
    "fn", "let", "mut", "self", "impl", "struct", "return", "match", "Some", "None", "Ok", "Err",
    "session", "reader", "writer", "batch", "frame", "offset", "length", "surface", "event",
    "title", "cursor", "buffer", "config", "error", "value", "index", "cache", "stamp", "query",
    "the", "a", "of", "to", "and", "in", "is", "for", "with", "on", "that", "this", "it", "we",
    "=>", "{", "}", "(", ")", "&", "::", "->", ";", ",", "0", "1", "42", "1024", "\"text\"",
];

/// Source-code-like text of about `bytes` bytes: words, indentation and newlines.
pub fn prose(rng: &mut TestRng, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 16);
    let mut line = 0usize;
    while out.len() < bytes {
        if line == 0 {
            for _ in 0..rng.below(4) * 4 {
                out.push(' ');
            }
        }
        let word = rng.pick(WORDS);
        out.push_str(word);
        line += word.len() + 1;
        if line > 60 + rng.below(30) {
            out.push('\n');
            line = 0;
        } else {
            out.push(' ');
        }
    }
    out.truncate(bytes);
    out
}

fn user(text: String, id: String) -> EventData {
    EventData::UserMessage(Message::new(
        "user",
        vec![ContentBlock::text(text)],
        MessageSource::user(),
        id,
    ))
}

fn assistant(turn: u64, step: u64, blocks: Vec<ContentBlock>, id: String) -> EventData {
    EventData::AssistantMessage {
        turn: turn.into(),
        step: step.into(),
        message: Message::new(
            "assistant",
            blocks,
            MessageSource::model("bench", "gen-1"),
            id,
        ),
        extra: Map::new(),
    }
}

fn title(text: String) -> EventData {
    EventData::SessionTitle {
        title: text,
        message_seqs: vec![],
        source: serde_json::json!({"kind": "generated"}),
        extra: Map::new(),
    }
}

fn turn_start(turn: u64) -> EventData {
    EventData::TurnStart {
        turn,
        trigger: "prompt".into(),
        extra: Map::new(),
    }
}

fn turn_end(turn: u64) -> EventData {
    EventData::TurnEnd {
        turn,
        reason: "stop".into(),
        extra: Map::new(),
    }
}

/// Shape of a generated home of many sessions.
#[derive(Debug, Clone)]
pub struct HomeSpec {
    pub sessions: usize,
    /// Distinct project directories (cwds) the sessions are spread over.
    pub projects: usize,
    /// Every n-th session has no cwd (`_no-cwd`).
    pub no_cwd_every: usize,
    pub encoding: Encoding,
    pub seed: u64,
}

impl HomeSpec {
    pub fn new(sessions: usize) -> HomeSpec {
        HomeSpec {
            sessions,
            projects: (sessions / 200).clamp(1, 500),
            no_cwd_every: 50,
            encoding: Encoding::Zstd,
            seed: 1,
        }
    }
}

/// The id of generated session `i`: uuid-like, as dsh ids are.
pub fn session_id(i: usize) -> String {
    let mut rng = TestRng::new(i as u64);
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        rng.next_u64() as u32,
        rng.next_u64() as u16,
        rng.next_u64() as u16 & 0xfff,
        rng.next_u64() as u16,
        rng.next_u64() & 0xffff_ffff_ffff
    )
}

/// The cwd of project `p`.
pub fn project_cwd(p: usize) -> String {
    const TOPS: &[&str] = &["work", "src", "code", "repos", "projects"];
    const NAMES: &[&str] = &[
        "harness", "billing", "frontend", "infra", "compiler", "notes", "api", "search", "mobile",
        "data",
    ];
    format!(
        "/home/dev/{}/{}-{p:03}",
        TOPS[p % TOPS.len()],
        NAMES[(p / TOPS.len()) % NAMES.len()]
    )
}

/// Writes `spec.sessions` small sessions under `<home>/sessions` (newest is session 0's
/// neighbour: `createdAt` grows with `i`). Returns the ids in creation order.
pub fn generate_home(home: &Path, spec: &HomeSpec) -> std::io::Result<Vec<String>> {
    let mut rng = TestRng::new(spec.seed);
    let mut ids = Vec::with_capacity(spec.sessions);
    let base = 1_700_000_000_000i64;
    for i in 0..spec.sessions {
        let id = session_id(i);
        let cwd = if spec.no_cwd_every > 0 && i % spec.no_cwd_every == spec.no_cwd_every - 1 {
            None
        } else {
            Some(project_cwd(rng.below(spec.projects)))
        };
        let created = base + (i as i64) * 60_000;
        let header = SessionHeader::new(id.clone(), created, cwd);
        let mut writer =
            SessionWriter::create(home, header, spec.encoding).map_err(std::io::Error::other)?;
        let topic = format!(
            "{} the {} {}",
            rng.pick(&["fix", "refactor", "explain", "speed up", "test"]),
            rng.pick(WORDS),
            rng.pick(WORDS)
        );
        let batch: Vec<NewEvent> = vec![
            turn_start(1).into(),
            user(format!("please {topic}"), format!("u-{i}")).into(),
            assistant(
                1,
                1,
                vec![ContentBlock::text(format!("Done: {topic}."))],
                format!("a-{i}"),
            )
            .into(),
            title(format!("{topic} ({i})")).into(),
            turn_end(1).into(),
        ];
        writer.append(batch).map_err(std::io::Error::other)?;
        ids.push(id);
    }
    Ok(ids)
}

/// Which generator writes a big log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BigShape {
    /// [`generate_big_log`]: 12–36 KB tool outputs and packed chunk rows.
    ToolOutput,
    /// [`generate_tool_heavy_log`]: 40 short tool calls and ~4 KB results a turn.
    ToolHeavy,
}

/// Shape of one big log.
#[derive(Debug, Clone)]
pub struct BigLogSpec {
    /// Approximate logical (uncompressed JSONL) size.
    pub bytes: u64,
    pub encoding: Encoding,
    /// Typical tool output per `tool/result` (varies ±50%).
    pub tool_output: usize,
    /// Pieces per packed chunk row.
    pub chunk_pieces: usize,
    /// Compactions happen when the log passes these fractions of `bytes`.
    pub compact_at: Vec<f64>,
    pub seed: u64,
}

impl BigLogSpec {
    pub fn new(bytes: u64, encoding: Encoding) -> BigLogSpec {
        BigLogSpec {
            bytes,
            encoding,
            tool_output: 24 * 1024,
            chunk_pieces: 400,
            compact_at: vec![0.25, 0.5],
            seed: 7,
        }
    }
}

/// Writes one tool-heavy session `id` (cwd `cwd`) under `home`, about `spec.bytes` logical
/// bytes (`spec.tool_output`, `spec.chunk_pieces` and `spec.compact_at` are not used: the shape
/// is fixed, with one compaction at 5 % of the log).
pub fn generate_tool_heavy_log(
    home: &Path,
    id: &str,
    cwd: Option<&str>,
    spec: &BigLogSpec,
) -> std::io::Result<BigLog> {
    const CALLS: u64 = 40;
    const FRAME: usize = 64;
    let io = std::io::Error::other;
    let mut rng = TestRng::new(spec.seed ^ id.len() as u64);
    let header = SessionHeader::new(id, 1_700_000_000_000, cwd.map(str::to_string));
    let mut writer = SessionWriter::create(home, header, spec.encoding).map_err(io)?;
    let mut logical: u64 = 0;
    let mut surface: Vec<u64> = Vec::new();
    let mut pending: Vec<NewEvent> = Vec::new();
    let mut conversation: u64 = 0;
    let mut compactions = 0;
    let mut turn: u64 = 0;
    let mut time = 1_700_000_000_000i64;
    let flush = |writer: &mut SessionWriter,
                 pending: &mut Vec<NewEvent>,
                 logical: &mut u64,
                 surface: &mut Vec<u64>|
     -> std::io::Result<()> {
        if pending.is_empty() {
            return Ok(());
        }
        let events = writer.append(std::mem::take(pending)).map_err(io)?;
        for event in &events {
            match event.surface_op {
                Some(SurfaceOp::Append) => surface.push(event.seq),
                Some(SurfaceOp::Replace { .. }) => *surface = vec![event.seq],
                None => {}
            }
            *logical += serde_json::to_vec(event)
                .map(|v| v.len() as u64 + 1)
                .unwrap_or(0);
        }
        Ok(())
    };
    // Appends `event`, writing a batch whenever 64 records are pending.
    macro_rules! push {
        ($event:expr) => {{
            pending.push(timed($event, time));
            if pending.len() == FRAME {
                flush(&mut writer, &mut pending, &mut logical, &mut surface)?;
            }
        }};
    }
    while logical < spec.bytes {
        turn += 1;
        time += 1_000;
        let len = 40 + rng.below(80);
        let prompt = format!("turn {turn}: {}", prose(&mut rng, len));
        conversation += prompt.len() as u64;
        push!(turn_start(turn).into());
        push!(user(prompt, format!("u-{turn}")).into());
        for step in 1..=CALLS {
            let call_id = format!("call-{turn}-{step}");
            let path = format!("src/{}/{}.rs", rng.pick(WORDS), rng.pick(WORDS));
            push!(EventData::ToolCall {
                turn: turn.into(),
                step: step.into(),
                call_id: call_id.clone(),
                name: "read".into(),
                arguments: serde_json::json!({ "path": path }),
                extra: Map::new(),
            }
            .into());
            let size = 3 * 1024 + rng.below(2 * 1024);
            let result = Message::new(
                "user",
                vec![ContentBlock::ToolResult {
                    tool_call_id: call_id.clone(),
                    content: vec![ContentBlock::text(prose(&mut rng, size))],
                    is_error: Some(false),
                    extra: Map::new(),
                }],
                MessageSource::Tool {
                    call_id,
                    extra: Map::new(),
                },
                format!("r-{turn}-{step}"),
            );
            push!(EventData::ToolResult {
                turn: turn.into(),
                step: step.into(),
                message: result,
                extra: Map::new(),
            }
            .into());
        }
        let answer = format!("Turn {turn} done: {}", prose(&mut rng, 60));
        conversation += answer.len() as u64;
        push!(assistant(
            turn,
            CALLS + 1,
            vec![ContentBlock::text(answer)],
            format!("a-{turn}-end"),
        )
        .into());
        push!(turn_end(turn).into());
        if turn % 10 == 1 {
            push!(title(format!("tool-heavy session, turn {turn}")).into());
        }
        if compactions == 0 && logical as f64 >= 0.05 * spec.bytes as f64 {
            // The compaction's records go in a batch of their own, after what is pending.
            flush(&mut writer, &mut pending, &mut logical, &mut surface)?;
            compactions += 1;
            conversation = 0;
            let summary = format!("Summary of turns 1..={turn}: {}", prose(&mut rng, 300));
            conversation += summary.len() as u64;
            let checkpoint = Message::new(
                "user",
                vec![ContentBlock::text(summary)],
                MessageSource::plugin("compact"),
                "checkpoint-1".to_string(),
            );
            let mut marker = Map::new();
            marker.insert("compaction".into(), Value::from(1));
            let first = writer.next_seq();
            let replacement = compaction_replace(
                id,
                first + 2,
                &surface,
                surface[0],
                surface[surface.len() - 1],
                &[first, first + 1],
            )
            .map_err(io)?;
            pending.extend([
                timed(EventData::CompactStart(marker.clone()).into(), time),
                timed(EventData::CompactSummary(marker.clone()).into(), time),
                timed(
                    NewEvent::new(EventData::UserMessage(checkpoint)).with_replacement(replacement),
                    time,
                ),
                timed(EventData::CompactEnd(marker).into(), time),
            ]);
            flush(&mut writer, &mut pending, &mut logical, &mut surface)?;
        }
    }
    flush(&mut writer, &mut pending, &mut logical, &mut surface)?;
    let path = writer.path().to_path_buf();
    let file_bytes = std::fs::metadata(&path)?.len();
    Ok(BigLog {
        path,
        logical_bytes: logical,
        file_bytes,
        turns: turn,
        compactions,
        conversation_bytes: conversation,
    })
}

/// What [`generate_big_log`] wrote.
#[derive(Debug, Clone)]
pub struct BigLog {
    pub path: PathBuf,
    pub logical_bytes: u64,
    pub file_bytes: u64,
    pub turns: u64,
    pub compactions: usize,
    /// UTF-8 bytes of direct prompts and assistant text on the final surface.
    pub conversation_bytes: u64,
}

/// Writes one long session `id` (cwd `cwd`) under `home`.
pub fn generate_big_log(
    home: &Path,
    id: &str,
    cwd: Option<&str>,
    spec: &BigLogSpec,
) -> std::io::Result<BigLog> {
    let io = std::io::Error::other;
    let mut rng = TestRng::new(spec.seed ^ id.len() as u64);
    let header = SessionHeader::new(id, 1_700_000_000_000, cwd.map(str::to_string));
    let mut writer = SessionWriter::create(home, header, spec.encoding).map_err(io)?;
    let mut logical: u64 = 0;
    // The current surface's seqs, as the fold keeps them.
    let mut surface: Vec<u64> = Vec::new();
    let mut conversation: u64 = 0;
    let mut compactions = 0;
    let mut turn: u64 = 0;
    let mut time = 1_700_000_000_000i64;
    // Tracks the logical size of what we append (JSON lines), to stop near `spec.bytes`.
    let append = |writer: &mut SessionWriter,
                  batch: Vec<NewEvent>,
                  logical: &mut u64,
                  surface: &mut Vec<u64>|
     -> std::io::Result<()> {
        let events = writer.append(batch).map_err(io)?;
        for event in &events {
            match event.surface_op {
                Some(SurfaceOp::Append) => surface.push(event.seq),
                // Compactions replace the whole surface.
                Some(SurfaceOp::Replace { .. }) => *surface = vec![event.seq],
                None => {}
            }
            *logical += serde_json::to_vec(event)
                .map(|v| v.len() as u64 + 1)
                .unwrap_or(0);
        }
        Ok(())
    };
    while logical < spec.bytes {
        turn += 1;
        time += 1_000;
        let len = 40 + rng.below(80);
        let prompt = format!("turn {turn}: {}", prose(&mut rng, len));
        conversation += prompt.len() as u64;
        append(
            &mut writer,
            vec![
                timed(turn_start(turn).into(), time),
                timed(user(prompt, format!("u-{turn}")).into(), time),
            ],
            &mut logical,
            &mut surface,
        )?;
        let steps = 2 + rng.below(3) as u64;
        for step in 1..=steps {
            append(
                &mut writer,
                vec![timed(
                    EventData::StepStart {
                        turn,
                        step,
                        extra: Map::new(),
                    }
                    .into(),
                    time,
                )],
                &mut logical,
                &mut surface,
            )?;
            // Streaming deltas, packed: reasoning then text.
            for kind in [PackedKind::Reasoning, PackedKind::Text] {
                let pieces: Vec<String> = (0..spec.chunk_pieces)
                    .map(|_| format!("{} ", rng.pick(WORDS)))
                    .collect();
                let row = PackedChunks {
                    kind,
                    seq0: writer.next_seq(),
                    time0: time,
                    turn: turn.into(),
                    step: step.into(),
                    index: 0.into(),
                    dt: (1..pieces.len()).map(|_| rng.below(40) as i64).collect(),
                    pieces,
                    id: None,
                    name: None,
                    extra: Map::new(),
                    row_extra: Map::new(),
                };
                let line = serde_json::to_vec(&row).map(|v| v.len()).unwrap_or(0);
                writer
                    .append_records(&[Record::Packed(Box::new(row))])
                    .map_err(io)?;
                logical += line as u64 + 1;
            }
            let call_id = format!("call-{turn}-{step}");
            let path = format!("src/{}/{}.rs", rng.pick(WORDS), rng.pick(WORDS));
            let said = format!("Reading {path}.");
            conversation += said.len() as u64;
            let call = ContentBlock::ToolCall {
                id: call_id.clone(),
                name: "read".into(),
                arguments: serde_json::json!({ "path": path }),
                extra: Map::new(),
            };
            let size = spec.tool_output / 2 + rng.below(spec.tool_output);
            let output = prose(&mut rng, size);
            let result = Message::new(
                "user",
                vec![ContentBlock::ToolResult {
                    tool_call_id: call_id.clone(),
                    content: vec![ContentBlock::text(output)],
                    is_error: Some(false),
                    extra: Map::new(),
                }],
                MessageSource::Tool {
                    call_id: call_id.clone(),
                    extra: Map::new(),
                },
                format!("r-{turn}-{step}"),
            );
            append(
                &mut writer,
                vec![
                    timed(
                        assistant(
                            turn,
                            step,
                            vec![
                                ContentBlock::Reasoning {
                                    text: "Looking at the file first.".into(),
                                    extra: Map::new(),
                                },
                                ContentBlock::text(said),
                                call,
                            ],
                            format!("a-{turn}-{step}"),
                        )
                        .into(),
                        time,
                    ),
                    timed(
                        EventData::ToolCall {
                            turn: turn.into(),
                            step: step.into(),
                            call_id: call_id.clone(),
                            name: "read".into(),
                            arguments: serde_json::json!({ "path": "x" }),
                            extra: Map::new(),
                        }
                        .into(),
                        time,
                    ),
                ],
                &mut logical,
                &mut surface,
            )?;
            append(
                &mut writer,
                vec![
                    timed(
                        EventData::ToolResult {
                            turn: turn.into(),
                            step: step.into(),
                            message: result,
                            extra: Map::new(),
                        }
                        .into(),
                        time,
                    ),
                    timed(
                        EventData::StepEnd {
                            turn,
                            step,
                            extra: Map::new(),
                        }
                        .into(),
                        time,
                    ),
                ],
                &mut logical,
                &mut surface,
            )?;
        }
        let answer = format!("Turn {turn} done: {}", prose(&mut rng, 60));
        conversation += answer.len() as u64;
        let mut closing = vec![
            timed(
                assistant(
                    turn,
                    steps + 1,
                    vec![ContentBlock::text(answer)],
                    format!("a-{turn}-end"),
                )
                .into(),
                time,
            ),
            timed(turn_end(turn).into(), time),
        ];
        if turn % 10 == 1 {
            closing.push(timed(
                title(format!("big session, turn {turn}")).into(),
                time,
            ));
        }
        append(&mut writer, closing, &mut logical, &mut surface)?;

        if compactions < spec.compact_at.len()
            && logical as f64 >= spec.compact_at[compactions] * spec.bytes as f64
        {
            compactions += 1;
            // The checkpoint stands for everything before it.
            conversation = 0;
            let summary = format!("Summary of turns 1..={turn}: {}", prose(&mut rng, 300));
            conversation += summary.len() as u64;
            let checkpoint = Message::new(
                "user",
                vec![ContentBlock::text(summary)],
                MessageSource::plugin("compact"),
                format!("checkpoint-{compactions}"),
            );
            let mut marker = Map::new();
            marker.insert("compaction".into(), Value::from(compactions));
            // compact/start and compact/summary come first; the checkpoint follows them.
            let first = writer.next_seq();
            let replacement = compaction_replace(
                id,
                first + 2,
                &surface,
                surface[0],
                surface[surface.len() - 1],
                &[first, first + 1],
            )
            .map_err(io)?;
            append(
                &mut writer,
                vec![
                    timed(EventData::CompactStart(marker.clone()).into(), time),
                    timed(EventData::CompactSummary(marker.clone()).into(), time),
                    timed(
                        NewEvent::new(EventData::UserMessage(checkpoint))
                            .with_replacement(replacement),
                        time,
                    ),
                    timed(EventData::CompactEnd(marker).into(), time),
                ],
                &mut logical,
                &mut surface,
            )?;
        }
    }
    let path = writer.path().to_path_buf();
    let file_bytes = std::fs::metadata(&path)?.len();
    Ok(BigLog {
        path,
        logical_bytes: logical,
        file_bytes,
        turns: turn,
        compactions,
        conversation_bytes: conversation,
    })
}

fn timed(mut event: NewEvent, time: i64) -> NewEvent {
    event.time = Some(time);
    event
}

/// Sets a path's modification time an hour back: the store does not trust directory stamps
/// younger than two seconds, and a real home is not being written while it is listed.
pub fn age(path: &Path) {
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    if let Ok(file) = std::fs::File::open(path) {
        let _ = file.set_modified(old);
    }
}

/// Ages `<home>/sessions` and every project directory in it.
pub fn age_home(home: &Path) {
    let sessions = home.join("sessions");
    if let Ok(entries) = std::fs::read_dir(&sessions) {
        for entry in entries.flatten() {
            age(&entry.path());
        }
    }
    age(&sessions);
}

/// Where benchmark data lives: `target/bench-data/<name>` (never committed; delete freely).
pub fn data_dir(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("bench-data").join(name)
}

/// A generated home of `sessions` sessions, reused across runs (a `.complete` marker tells a
/// finished one from an interrupted one).
pub fn cached_home(sessions: usize) -> std::io::Result<PathBuf> {
    let home = data_dir(&format!("home-{sessions}"));
    let marker = home.join(".complete");
    if !marker.exists() {
        if home.exists() {
            std::fs::remove_dir_all(&home)?;
        }
        std::fs::create_dir_all(&home)?;
        generate_home(&home, &HomeSpec::new(sessions))?;
        std::fs::write(&marker, b"")?;
    }
    age_home(&home);
    Ok(home)
}

/// The ids of the three big sources in a [`cached_big_home`].
pub const BIG_SOURCES: [&str; 3] = ["big-source-a", "big-source-b", "big-source-c"];

/// A home holding three big logs of `mb` MB each (plus the agent's own small session), reused
/// across runs.
pub fn cached_big_home(mb: u64, encoding: Encoding) -> std::io::Result<(PathBuf, Vec<BigLog>)> {
    cached_big_home_shaped(mb, encoding, BigShape::ToolOutput)
}

/// [`cached_big_home`] with logs of the given shape.
pub fn cached_big_home_shaped(
    mb: u64,
    encoding: Encoding,
    shape: BigShape,
) -> std::io::Result<(PathBuf, Vec<BigLog>)> {
    // The suffix changes whenever generated logs change shape, so stale data is never reused
    // (`seqs`: compactions replace by event seqs with full provenance).
    let encoding_name = match encoding {
        Encoding::Plain => "plain",
        Encoding::Zstd => "zstd",
    };
    let name = match shape {
        BigShape::ToolOutput => format!("big-{mb}mb-{encoding_name}-seqs"),
        BigShape::ToolHeavy => format!("big-{mb}mb-{encoding_name}-tool-heavy"),
    };
    let home = data_dir(&name);
    let marker = home.join(".complete");
    let logs = if marker.exists() {
        let text = std::fs::read_to_string(&marker)?;
        text.lines()
            .filter_map(|line| {
                let mut parts = line.split('\t');
                Some(BigLog {
                    path: PathBuf::from(parts.next()?),
                    logical_bytes: parts.next()?.parse().ok()?,
                    file_bytes: parts.next()?.parse().ok()?,
                    turns: parts.next()?.parse().ok()?,
                    compactions: parts.next()?.parse().ok()?,
                    conversation_bytes: parts.next()?.parse().ok()?,
                })
            })
            .collect()
    } else {
        if home.exists() {
            std::fs::remove_dir_all(&home)?;
        }
        std::fs::create_dir_all(&home)?;
        let mut logs = Vec::new();
        for (i, id) in BIG_SOURCES.iter().enumerate() {
            let mut spec = BigLogSpec::new(mb * 1_000_000, encoding);
            spec.seed = 100 + i as u64;
            let generate = match shape {
                BigShape::ToolOutput => generate_big_log,
                BigShape::ToolHeavy => generate_tool_heavy_log,
            };
            logs.push(generate(&home, id, Some("/home/dev/work/big"), &spec)?);
        }
        let agent = SessionHeader::new("agent", 1, Some("/home/dev/work/big".into()));
        SessionWriter::create(&home, agent, encoding).map_err(std::io::Error::other)?;
        let text: String = logs
            .iter()
            .map(|l| {
                format!(
                    "{}\t{}\t{}\t{}\t{}\t{}\n",
                    l.path.display(),
                    l.logical_bytes,
                    l.file_bytes,
                    l.turns,
                    l.compactions,
                    l.conversation_bytes
                )
            })
            .collect();
        std::fs::write(&marker, text)?;
        logs
    };
    age_home(&home);
    Ok((home, logs))
}
