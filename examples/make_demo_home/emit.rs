//! Turning a [`Script`] into a session log with the crate's own writer.
//!
//! Every event is built from the crate's typed [`EventData`] and appended by [`SessionWriter`], so
//! the demo home is byte for byte what this crate writes. What a script does not say (message and
//! call ids, token counts, the timing of chunks and steps) comes from a small PRNG seeded by the
//! session id, so the output is the same on every run and on every machine.
//!
//! A compaction replaces the whole current surface, the way SPEC §1.5 says a writer must: the
//! replace names the first and last shadowed nodes by their event seqs, and the checkpoint's
//! `sourceEventSeqs` are `[compact/start, compact/summary, …every shadowed seq]`. The emitter
//! keeps its own list of current surface seqs for that, so it never has to ask the crate's fold.

use super::script::{Block, Item, Script, Step, Turn};
use dsh_session_references::reference::{
    parse_session_reference_text, AgentIdentity, ReferenceInput, SessionReferenceConfig,
    SessionReferences,
};
use dsh_session_references::session::format::{DisplayContent, Envelope, PackedChunks, PackedKind};
use dsh_session_references::session::surface::compaction_replace;
use dsh_session_references::session::{
    ContentBlock, DiskStore, Encoding, Event, EventData, Message, MessageSource, Record,
    SessionHeader, SessionWriter, SurfaceOp,
};
use serde_json::{json, Map, Value};
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The model every demo reply claims to come from.
pub const PROVIDER: &str = "deepseek-official";
pub const MODEL: &str = "deepseek-v4-flash";

/// Inter-chunk gaps (ms) a streamed reply draws from: bursts and pauses, as real streams show.
const DT_CHOICES: [i64; 13] = [0, 0, 0, 1, 1, 1, 24, 27, 28, 28, 29, 30, 31];

#[path = "../../src/test_rng.rs"]
#[allow(clippy::duplicate_mod)]
// One file, one generator: the demo-home test binary also loads it through the test support.
mod test_rng;

/// The project's one seeded generator (`src/test_rng.rs`); each script seeds it by its id.
pub use test_rng::TestRng;

/// A version-4 UUID drawn from `rng`.
pub fn uuid(rng: &mut TestRng) -> String {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
    bytes[8..].copy_from_slice(&rng.next_u64().to_le_bytes());
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// Splits text into model-token-sized pieces whose concatenation is the text: leading
/// whitespace joins the next word (up to 7 ASCII letters), number (up to 4 digits) or other
/// character; trailing whitespace is a piece of its own.
pub fn tokens(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let word_at = rest
            .char_indices()
            .find(|(_, c)| !c.is_whitespace())
            .map(|(i, _)| i);
        let Some(start) = word_at else {
            pieces.push(rest);
            break;
        };
        let word = &rest[start..];
        let first = word.chars().next().unwrap_or(' ');
        let take = |limit: usize, class: fn(char) -> bool| {
            word.char_indices()
                .take_while(|(_, c)| class(*c))
                .take(limit)
                .last()
                .map(|(i, c)| i + c.len_utf8())
                .unwrap_or(first.len_utf8())
        };
        let len = if first.is_ascii_alphabetic() {
            take(7, |c| c.is_ascii_alphabetic())
        } else if first.is_ascii_digit() {
            take(4, |c| c.is_ascii_digit())
        } else {
            first.len_utf8()
        };
        pieces.push(&rest[..start + len]);
        rest = &rest[start + len..];
    }
    pieces
}

/// Tool-call arguments as they stream: an empty first delta, then six characters at a time.
pub fn arg_pieces(arguments: &str) -> Vec<String> {
    let chars: Vec<char> = arguments.chars().collect();
    std::iter::once(String::new())
        .chain(chars.chunks(6).map(|c| c.iter().collect()))
        .collect()
}

/// Reads the referenced sessions of a prompt with the crate's service, from the home being
/// written, exactly as `dsh-refs` does when a message is sent.
pub trait Prepare {
    fn prepare(
        &self,
        agent: &AgentIdentity,
        content: Vec<ContentBlock>,
        references: Vec<ReferenceInput>,
    ) -> Result<Option<Message>, String>;
}

/// [`Prepare`] over the on-disk home with the default configuration.
pub struct HomePrepare<'a> {
    pub home: &'a Path,
}

impl Prepare for HomePrepare<'_> {
    fn prepare(
        &self,
        agent: &AgentIdentity,
        content: Vec<ContentBlock>,
        references: Vec<ReferenceInput>,
    ) -> Result<Option<Message>, String> {
        let store = Arc::new(DiskStore::new(self.home));
        let service = SessionReferences::new(store, SessionReferenceConfig::default())
            .map_err(|e| e.to_string())?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))?;
        let prepared = runtime
            .block_on(service.prepare(agent, content, references, &CancellationToken::new()))
            .map_err(|e| e.to_string())?;
        Ok(prepared.additional_context)
    }
}

/// Writes one session from its script under `home`.
pub struct Emitter<'p> {
    writer: SessionWriter,
    prepare: &'p dyn Prepare,
    id: String,
    cwd: Option<String>,
    /// The time of the last event (ms).
    t: i64,
    rng: TestRng,
    turn: u64,
    /// Current surface nodes `(seq, estimated tokens)`, in order.
    surface: Vec<(u64, i64)>,
    context_tokens: i64,
    first_prompt_seq: Option<u64>,
    batch: Vec<Record>,
}

type Emitted<T> = Result<T, String>;

fn chars(text: &str) -> i64 {
    text.chars().count() as i64
}

fn turn_data(turn: u64, step: u64) -> (Value, Value) {
    (turn.into(), step.into())
}

impl<'p> Emitter<'p> {
    /// Creates the session (its header) under `home`.
    pub fn create(home: &Path, script: &Script, prepare: &'p dyn Prepare) -> Emitted<Self> {
        let header = SessionHeader::new(&script.id, script.created_at, script.cwd.clone());
        let writer = SessionWriter::create(home, header, Encoding::Plain)
            .map_err(|e| format!("session {}: {e}", script.id))?;
        Ok(Emitter {
            writer,
            prepare,
            id: script.id.clone(),
            cwd: script.cwd.clone(),
            t: script.created_at,
            rng: TestRng::from_text(&format!("dsh-session-references/demo-home/{}", script.id)),
            turn: 0,
            surface: Vec::new(),
            context_tokens: 2800,
            first_prompt_seq: None,
            batch: Vec::new(),
        })
    }

    /// Writes every item of the script.
    pub fn run(mut self, script: &Script) -> Emitted<()> {
        for item in &script.items {
            match item {
                Item::Turn(turn) => self.turn(turn)?,
                Item::Retitle { time, title } => {
                    self.at(*time, "a retitle")?;
                    let Some(seq) = self.first_prompt_seq else {
                        return Err(format!("{}: a retitle before any prompt", self.id));
                    };
                    self.event(title_data(title, seq, "user"), None, None);
                    self.flush()?;
                }
                Item::Compact { time, summary } => self.compact(*time, summary)?,
            }
        }
        self.flush()?;
        self.writer.sync().map_err(|e| e.to_string())
    }

    /// Moves the clock to a time the script fixes; the script must not go back in time.
    fn at(&mut self, time: i64, what: &str) -> Emitted<()> {
        if time < self.t {
            return Err(format!(
                "{}: {what} at {time} starts before the previous event ({})",
                self.id, self.t
            ));
        }
        self.t = time;
        Ok(())
    }

    fn advance(&mut self, lo: i64, hi: i64) {
        self.t += self.rng.range(lo, hi);
    }

    fn next_seq(&self) -> u64 {
        self.writer.next_seq() + self.batch.iter().map(Record::seq_count).sum::<u64>()
    }

    fn new_id(&mut self) -> String {
        uuid(&mut self.rng)
    }

    /// Stages one event in the current batch and returns its seq.
    fn event(&mut self, data: EventData, op: Option<SurfaceOp>, sources: Option<Vec<u64>>) -> u64 {
        let seq = self.next_seq();
        let mut event = Event::new(seq, self.t, &data);
        if op.is_some() {
            event.surface_op = op;
        }
        event.source_event_seqs = sources;
        if event.surface_op == Some(SurfaceOp::Append) {
            let tokens = message_tokens(&data);
            self.surface.push((seq, tokens));
        }
        self.batch.push(Record::Event(event));
        seq
    }

    /// Appends the staged events as one batch.
    fn flush(&mut self) -> Emitted<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let records = std::mem::take(&mut self.batch);
        self.writer
            .append_records(&records)
            .map_err(|e| format!("session {}: {e}", self.id))
    }

    fn user_message(&mut self, message: Message) -> u64 {
        self.context_tokens += message_text_chars(&message) / 4;
        self.event(EventData::UserMessage(message), None, None)
    }

    fn turn(&mut self, turn: &Turn) -> Emitted<()> {
        self.at(turn.time, "a turn")?;
        self.turn += 1;
        let number = self.turn;
        self.event(
            EventData::TurnStart {
                turn: number,
                trigger: json!({"kind": "message", "source": {"kind": "user"}}),
                extra: Map::new(),
            },
            None,
            None,
        );
        self.flush()?;
        let parsed = parse_session_reference_text(&turn.prompt)
            .map_err(|e| format!("{}: prompt at {}: {e}", self.id, turn.time))?;
        let prompt_text = parsed.text.clone();
        let mut content = Vec::new();
        if let Some((_, attached)) = &turn.attached {
            content.push(ContentBlock::text(attached));
        }
        content.push(ContentBlock::text(&prompt_text));
        if !parsed.references.is_empty() {
            // The service gets the readable text and returns the snapshot that is logged first,
            // in the same batch as the prompt (SPEC §4).
            let agent = AgentIdentity::new(&self.id, self.cwd.clone());
            let references = parsed.references.into_iter().map(Into::into).collect();
            let context = self
                .prepare
                .prepare(&agent, content.clone(), references)
                .map_err(|e| format!("{}: preparing the references: {e}", self.id))?
                .ok_or_else(|| format!("{}: references gave no context", self.id))?;
            let context = Message {
                id: format!("session-reference-{}", self.new_id()),
                ..context
            };
            self.user_message(context);
        }
        let mut prompt = Message::new("user", content, MessageSource::user(), self.new_id());
        if let Some((path, _)) = &turn.attached {
            let mut extra = Map::new();
            extra.insert(
                "prefixContexts".into(),
                json!([{"kind": "file", "path": path}]),
            );
            prompt.envelope = Some(Envelope {
                display_content: Some(DisplayContent::Blocks(vec![ContentBlock::text(
                    &prompt_text,
                )])),
                extra,
            });
        }
        let seq = self.user_message(prompt);
        self.flush()?;
        self.first_prompt_seq.get_or_insert(seq);
        if let Some(title) = &turn.title {
            self.advance(1, 4);
            self.event(title_data(title, seq, "fallback"), None, None);
            self.flush()?;
        }
        for (plugin, text) in &turn.plugins {
            self.advance(0, 3);
            let id = self.new_id();
            self.user_message(Message::new(
                "user",
                vec![ContentBlock::text(text)],
                MessageSource::plugin(plugin),
                id,
            ));
            self.flush()?;
        }
        for (index, step) in turn.steps.iter().enumerate() {
            self.step(number, index as u64 + 1, step)?;
        }
        self.advance(0, 3);
        self.event(
            EventData::TurnEnd {
                turn: number,
                reason: json!({"kind": "completed"}),
                extra: Map::new(),
            },
            None,
            None,
        );
        self.flush()
    }

    fn step(&mut self, turn: u64, step_no: u64, step: &Step) -> Emitted<()> {
        let (turn_v, step_v) = turn_data(turn, step_no);
        self.advance(1, 8);
        let started = self.t;
        self.event(
            EventData::StepStart {
                turn,
                step: step_no,
                extra: Map::new(),
            },
            None,
            None,
        );
        self.flush()?;
        let mut content = Vec::new();
        let mut reasoning_chars = 0;
        let mut calls = Vec::new();
        for block in &step.blocks {
            match block {
                Block::Reasoning(text) => {
                    reasoning_chars += chars(text);
                    content.push(ContentBlock::Reasoning {
                        text: text.clone(),
                        extra: Map::new(),
                    });
                }
                Block::Text(text) => content.push(ContentBlock::text(text)),
                Block::Tool {
                    name,
                    arguments,
                    result,
                    duration_ms,
                } => {
                    let id = self.call_id(calls.len());
                    content.push(ContentBlock::ToolCall {
                        id: id.clone(),
                        name: name.clone(),
                        arguments: arguments.clone().into(),
                        extra: Map::new(),
                    });
                    calls.push((id, name.clone(), arguments.clone(), result, *duration_ms));
                }
            }
        }
        let out_chars: i64 = step
            .blocks
            .iter()
            .map(|b| match b {
                Block::Reasoning(t) | Block::Text(t) => chars(t),
                Block::Tool { arguments, .. } => chars(arguments),
            })
            .sum();
        let usage = json!({
            "inputTokens": self.rng.range(60, 400),
            "outputTokens": out_chars / 4 + self.rng.range(3, 20),
            "cacheReadTokens": self.context_tokens / 128 * 128,
            "reasoningTokens": reasoning_chars / 4,
        });
        self.context_tokens += out_chars / 4;
        let mut sources = None;
        match step.duration_ms {
            None => {
                self.advance(350, 1400);
                sources = Some(self.stream(turn, step_no, &content, &usage, !calls.is_empty())?);
                self.advance(0, 4);
            }
            Some(ms) => self.t = started + ms,
        }
        let mut extra = Map::new();
        extra.insert("usage".into(), usage);
        let message = Message::new(
            "assistant",
            content,
            MessageSource::model(PROVIDER, MODEL),
            self.new_id(),
        );
        self.event(
            EventData::AssistantMessage {
                turn: turn_v.clone(),
                step: step_v.clone(),
                message,
                extra,
            },
            Some(SurfaceOp::Append),
            sources,
        );
        let mut call_seqs = Vec::new();
        for (id, name, arguments, _, _) in &calls {
            call_seqs.push(self.event(
                EventData::ToolCall {
                    turn: turn_v.clone(),
                    step: step_v.clone(),
                    call_id: id.clone(),
                    name: name.clone(),
                    arguments: arguments.clone().into(),
                    extra: Map::new(),
                },
                None,
                None,
            ));
        }
        self.flush()?;
        for ((id, _, _, result, ms), call_seq) in calls.iter().zip(call_seqs) {
            self.t += ms;
            self.context_tokens += chars(result) / 4;
            let block = ContentBlock::ToolResult {
                tool_call_id: id.clone(),
                content: vec![ContentBlock::text(result.as_str())],
                is_error: Some(false),
                extra: Map::new(),
            };
            let source = MessageSource::Tool {
                call_id: id.clone(),
                extra: Map::new(),
            };
            let message = Message::new("user", vec![block], source, self.new_id());
            self.event(
                EventData::ToolResult {
                    turn: turn_v.clone(),
                    step: step_v.clone(),
                    message,
                    extra: Map::new(),
                },
                Some(SurfaceOp::Append),
                Some(vec![call_seq]),
            );
            self.flush()?;
        }
        if let Some(text) = &step.steer {
            self.advance(2, 40);
            let message = Message::new(
                "user",
                vec![ContentBlock::text(text)],
                MessageSource::user(),
                self.new_id(),
            );
            self.event(
                EventData::SteeringMessage {
                    turn: turn_v.clone(),
                    message,
                    extra: Map::new(),
                },
                None,
                None,
            );
            self.flush()?;
        }
        self.advance(0, 5);
        self.event(
            EventData::StepEnd {
                turn,
                step: step_no,
                extra: Map::new(),
            },
            None,
            None,
        );
        self.flush()
    }

    fn call_id(&mut self, index: usize) -> String {
        const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let tail: String = (0..24)
            .map(|_| ALNUM[(self.rng.next_u64() % ALNUM.len() as u64) as usize] as char)
            .collect();
        format!("call_{index:02}_{tail}")
    }

    /// Streams the blocks of a reply: a block-start chunk and a packed row per block, then the
    /// block-end, usage and finish chunks. Returns every chunk seq (the reply's provenance).
    fn stream(
        &mut self,
        turn: u64,
        step: u64,
        content: &[ContentBlock],
        usage: &Value,
        has_calls: bool,
    ) -> Emitted<Vec<u64>> {
        let (turn_v, step_v) = turn_data(turn, step);
        let chunk = |chunk: Value| EventData::AssistantChunk {
            turn: turn_v.clone(),
            step: step_v.clone(),
            chunk,
            extra: Map::new(),
        };
        let mut seqs = Vec::new();
        for (index, block) in content.iter().enumerate() {
            let (block_type, kind, pieces, call) = match block {
                ContentBlock::Reasoning { text, .. } => (
                    "reasoning",
                    PackedKind::Reasoning,
                    tokens(text).into_iter().map(str::to_string).collect(),
                    None,
                ),
                ContentBlock::ToolCall {
                    id,
                    name,
                    arguments,
                    ..
                } => (
                    "tool-call",
                    PackedKind::ToolCall,
                    arg_pieces(arguments.as_str().unwrap_or_default()),
                    Some((id.clone(), name.clone())),
                ),
                other => (
                    "text",
                    PackedKind::Text,
                    tokens(other.as_text().unwrap_or_default())
                        .into_iter()
                        .map(str::to_string)
                        .collect::<Vec<_>>(),
                    None,
                ),
            };
            seqs.push(self.event(
                chunk(json!({"type": "block-start", "index": index, "blockType": block_type})),
                None,
                None,
            ));
            self.advance(0, 30);
            let dt: Vec<i64> = (1..pieces.len())
                .map(|_| DT_CHOICES[(self.rng.next_u64() % DT_CHOICES.len() as u64) as usize])
                .collect();
            let seq0 = self.next_seq();
            let count = pieces.len() as u64;
            let (id, name) = call.map_or((None, None), |(id, name)| (Some(id), Some(name)));
            let row = PackedChunks {
                kind,
                seq0,
                time0: self.t,
                turn: turn_v.clone(),
                step: step_v.clone(),
                index: index.into(),
                dt: dt.clone(),
                pieces,
                id,
                name,
                extra: Map::new(),
                row_extra: Map::new(),
            };
            self.batch.push(Record::Packed(Box::new(row)));
            seqs.extend(seq0..seq0 + count);
            self.t += dt.iter().sum::<i64>();
            self.advance(0, 30);
            self.flush()?;
        }
        for (index, block) in content.iter().enumerate() {
            let block = serde_json::to_value(block).map_err(|e| e.to_string())?;
            seqs.push(self.event(
                chunk(json!({"type": "block-end", "index": index, "block": block})),
                None,
                None,
            ));
        }
        seqs.push(self.event(chunk(json!({"type": "usage", "usage": usage})), None, None));
        let reason = if has_calls { "tool-calls" } else { "stop" };
        seqs.push(self.event(
            chunk(json!({"type": "finish", "reason": {"kind": reason}})),
            None,
            None,
        ));
        self.flush()?;
        Ok(seqs)
    }

    /// A manual compaction between turns that replaces the whole current surface (SPEC §1.5).
    fn compact(&mut self, time: i64, summary: &str) -> Emitted<()> {
        self.at(time, "a compaction")?;
        let (Some(&(first, _)), Some(&(last, _))) = (self.surface.first(), self.surface.last())
        else {
            return Err(format!("{}: a compaction of an empty surface", self.id));
        };
        let shadowed: Vec<u64> = self.surface.iter().map(|(seq, _)| *seq).collect();
        let shadowed_tokens: i64 = self.surface.iter().map(|(_, tokens)| tokens).sum();
        let compaction_id = self.new_id();
        let bracket = |id: &str| {
            let mut map = Map::new();
            map.insert("compactionId".into(), id.into());
            map.insert("turn".into(), Value::Null);
            map
        };
        let start_seq = self.event(EventData::CompactStart(bracket(&compaction_id)), None, None);
        self.flush()?;
        self.advance(6_000, 14_000);
        let mut data = bracket(&compaction_id);
        data.remove("turn");
        data.insert("summary".into(), json!([{"type": "text", "text": summary}]));
        data.insert("shadowedRange".into(), json!({"start": first, "end": last}));
        data.insert("shadowedSeqs".into(), json!(shadowed));
        data.insert("shadowedTokenCount".into(), shadowed_tokens.into());
        data.insert("provider".into(), PROVIDER.into());
        data.insert("model".into(), MODEL.into());
        let summary_seq = self.event(EventData::CompactSummary(data), None, None);
        self.flush()?;
        self.advance(1, 5);
        let text = format!("<compacted-summary>\n{summary}\n</compacted-summary>");
        let message = Message::new(
            "user",
            vec![ContentBlock::text(&text)],
            MessageSource::plugin("compact"),
            self.new_id(),
        );
        let replacement = compaction_replace(
            &self.id,
            summary_seq + 1,
            &shadowed,
            first,
            last,
            &[start_seq, summary_seq],
        )
        .map_err(|e| e.to_string())?;
        let checkpoint = self.event(
            EventData::UserMessage(message),
            Some(replacement.surface_op),
            Some(replacement.source_event_seqs),
        );
        self.surface = vec![(checkpoint, chars(&text) / 4)];
        self.flush()?;
        self.advance(0, 3);
        self.event(EventData::CompactEnd(bracket(&compaction_id)), None, None);
        self.flush()?;
        self.context_tokens = 2800 + chars(summary) / 4;
        Ok(())
    }
}

fn title_data(title: &str, seq: u64, source: &str) -> EventData {
    EventData::SessionTitle {
        title: title.to_string(),
        message_seqs: vec![seq],
        source: json!({"kind": source}),
        extra: Map::new(),
    }
}

fn message_text_chars(message: &Message) -> i64 {
    message
        .content
        .iter()
        .filter_map(ContentBlock::as_text)
        .map(chars)
        .sum()
}

/// A rough token count of a surface message: its characters over four.
fn message_tokens(data: &EventData) -> i64 {
    let message = match data {
        EventData::UserMessage(message)
        | EventData::SteeringMessage { message, .. }
        | EventData::AssistantMessage { message, .. }
        | EventData::ToolResult { message, .. } => message,
        _ => return 0,
    };
    let own: i64 = message
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text, .. } | ContentBlock::Reasoning { text, .. } => chars(text),
            ContentBlock::ToolCall { arguments, .. } => {
                chars(arguments.as_str().unwrap_or_default())
            }
            ContentBlock::ToolResult { content, .. } => content
                .iter()
                .filter_map(ContentBlock::as_text)
                .map(chars)
                .sum(),
            ContentBlock::Other(_) => 0,
        })
        .sum();
    own / 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_cover_the_text_exactly() {
        for text in [
            "",
            "  ",
            "Hello, wörld 12345!\n\n- a",
            "abcdefghij 9 ",
            "😀 x",
        ] {
            assert_eq!(tokens(text).concat(), text);
        }
        assert_eq!(
            tokens("Hello, wörld 12345"),
            ["Hello", ",", " w", "ö", "rld", " 1234", "5"]
        );
    }

    #[test]
    fn the_rng_is_stable() {
        // SplitMix64's published first output from state 0 (`new` mixes the seed with the
        // increment, so seed 0x9E37_79B9_7F4A_7C15 is state 0).
        assert_eq!(
            TestRng::new(0x9E37_79B9_7F4A_7C15).next_u64(),
            0xE220_A839_7B1D_CDAF
        );
        // The FNV-1a seeding of the scripts' ids.
        assert_eq!(TestRng::from_text("").next_u64(), {
            let mut state = TestRng::new(0xcbf2_9ce4_8422_2325 ^ 0x9E37_79B9_7F4A_7C15);
            state.next_u64()
        });
        let mut a = TestRng::from_text("x");
        let mut b = TestRng::from_text("x");
        assert_eq!(a.next_u64(), b.next_u64());
        assert_eq!(uuid(&mut a), uuid(&mut b));
        assert!((0..100).all(|_| (3..=5).contains(&a.range(3, 5))));
    }
}
