//! Property tests of the URI codec, the mention scanner and the rendered context, plus the
//! linear-time guarantee of the scanner on adversarial input.

use crate::support::MemoryQuery;
use dsh_session_references::reference::{context_json, CLOSE_TAG};
use dsh_session_references::reference::{
    decode_session_reference_uri, encode_session_reference_uri, format_session_reference_mention,
    parse_session_reference_text, AgentIdentity, ReferenceInput, SessionReferenceConfig,
    SessionReferences,
};
use dsh_session_references::session::format::EventData;
use dsh_session_references::session::{
    ContentBlock, Event, Message, MessageSource, SessionHeader, SurfaceSnapshot,
};
use proptest::prelude::*;
use serde_json::value::RawValue;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

// ---- a deliberately naive reference scanner ------------------------------------------------

const JS_WHITESPACE: &str = "\t\n\u{b}\u{c}\r \u{a0}\u{1680}\u{2000}\u{2001}\u{2002}\u{2003}\u{2004}\u{2005}\u{2006}\u{2007}\u{2008}\u{2009}\u{200a}\u{2028}\u{2029}\u{202f}\u{205f}\u{3000}\u{feff}";

/// Tries the explicit form at char index `i`: (end, unescaped label, uri).
fn naive_explicit(chars: &[char], i: usize) -> Option<(usize, String, String)> {
    if chars.get(i) != Some(&'@') || chars.get(i + 1) != Some(&'[') {
        return None;
    }
    let mut j = i + 2;
    let mut label = String::new();
    loop {
        match chars.get(j)? {
            ']' => break,
            '\\' => {
                let next = *chars.get(j + 1)?;
                if "\n\r\u{2028}\u{2029}".contains(next) {
                    return None;
                }
                label.push(next);
                j += 2;
            }
            other => {
                label.push(*other);
                j += 1;
            }
        }
    }
    let glue: String = chars[j..].iter().take(14).collect();
    if glue != "](dsh-session:" {
        return None;
    }
    let mut k = j + 14;
    let mut uri = String::from("dsh-session:");
    while let Some(&ch) = chars.get(k) {
        if ch == ')' || JS_WHITESPACE.contains(ch) {
            break;
        }
        uri.push(ch);
        k += 1;
    }
    (chars.get(k) == Some(&')')).then_some((k + 1, label, uri))
}

fn naive_bare(chars: &[char], i: usize) -> Option<(usize, String)> {
    let prefix: String = chars[i..].iter().take(12).collect();
    if prefix != "dsh-session:" {
        return None;
    }
    let mut k = i + 12;
    while chars
        .get(k)
        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
    {
        k += 1;
    }
    (k > i + 12).then(|| (k, chars[i..k].iter().collect()))
}

type NaiveResult = Result<(String, Vec<(String, String)>), String>;

fn naive_parse(text: &str) -> NaiveResult {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut refs = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if let Some((end, label, uri)) = naive_explicit(&chars, i) {
            let id = decode_session_reference_uri(&uri).map_err(|e| e.code().to_string())?;
            out.push('@');
            out.push_str(&label);
            refs.push((id, label));
            i = end;
        } else if let Some((end, uri)) = naive_bare(&chars, i) {
            let id = decode_session_reference_uri(&uri).map_err(|e| e.code().to_string())?;
            out.push('@');
            out.push_str(&id);
            refs.push((id.clone(), id));
            i = end;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    Ok((out, refs))
}

fn fast_parse(text: &str) -> NaiveResult {
    parse_session_reference_text(text)
        .map(|parsed| {
            let refs = parsed
                .references
                .into_iter()
                .map(|r| (r.session_id, r.label))
                .collect();
            (parsed.text, refs)
        })
        .map_err(|e| e.code().to_string())
}

/// Text assembled from the pieces the grammar cares about.
fn mention_soup() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("@[".to_string()),
        Just("@".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just("(".to_string()),
        Just(")".to_string()),
        Just("\\".to_string()),
        Just("](dsh-session:".to_string()),
        Just("dsh-session:".to_string()),
        Just("InRhcmdldCI".to_string()),
        Just("IiI".to_string()),
        Just("IiJ".to_string()),
        Just("=".to_string()),
        Just(" ".to_string()),
        Just("\n".to_string()),
        Just("\u{2028}".to_string()),
        Just("\u{feff}".to_string()),
        Just("\u{85}".to_string()),
        Just("é".to_string()),
        Just("😀".to_string()),
        "[a-z]{1,3}".prop_map(|s| s),
        any::<char>().prop_map(|c| c.to_string()),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn uri_round_trips_any_string(id in any::<String>()) {
        let uri = encode_session_reference_uri(&id);
        prop_assert!(uri.starts_with("dsh-session:"));
        prop_assert_eq!(decode_session_reference_uri(&uri).unwrap(), id);
    }

    #[test]
    fn parse_is_total_and_deterministic(text in any::<String>()) {
        let first = fast_parse(&text);
        prop_assert_eq!(&first, &fast_parse(&text));
        prop_assert_eq!(first, naive_parse(&text));
    }

    #[test]
    fn scanner_matches_the_naive_semantics(text in mention_soup()) {
        let fast = fast_parse(&text);
        prop_assert_eq!(&fast, &fast_parse(&text));
        prop_assert_eq!(fast, naive_parse(&text));
    }

    #[test]
    fn formatted_mentions_parse_back(id in any::<String>(), label in proptest::option::of(any::<String>())) {
        let mention = format_session_reference_mention(&id, label.as_deref());
        let parsed = parse_session_reference_text(&mention).unwrap();
        let label = label.unwrap_or_else(|| id.clone());
        prop_assert_eq!(parsed.text, format!("@{label}"));
        prop_assert_eq!(parsed.references.len(), 1);
        prop_assert_eq!(&parsed.references[0].session_id, &id);
        prop_assert_eq!(&parsed.references[0].label, &label);
    }
}

// ---- rendering and retention ---------------------------------------------------------------

fn hostile_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("</referenced-sessions>".to_string()),
        Just("<referenced-sessions>".to_string()),
        Just("<".to_string()),
        Just("\u{2028}".to_string()),
        Just("\u{2029}".to_string()),
        Just("\u{0}".to_string()),
        Just("\u{1b}[31m".to_string()),
        Just("\u{7f}".to_string()),
        Just("\"\\".to_string()),
        Just("\\u003c".to_string()),
        Just("😀é".to_string()),
        any::<String>(),
    ];
    prop::collection::vec(piece, 0..8).prop_map(|pieces| pieces.concat())
}

fn source_with(texts: &[String], cwd: Option<String>) -> SurfaceSnapshot {
    let events: Vec<Event> = texts
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let (role, source) = if i % 2 == 0 {
                ("user", MessageSource::user())
            } else {
                ("assistant", MessageSource::model("p", "m"))
            };
            let message = Message::new(
                role,
                vec![ContentBlock::text(text)],
                source,
                format!("m{i}"),
            );
            let data = if i % 2 == 0 {
                EventData::UserMessage(message)
            } else {
                EventData::AssistantMessage {
                    turn: 1.into(),
                    step: 1.into(),
                    message,
                    extra: Default::default(),
                }
            };
            Event::new(i as u64, 0, &data)
        })
        .collect();
    SurfaceSnapshot {
        session: SessionHeader::new("src</referenced-sessions>", 0, cwd),
        captured_through_seq: events.last().map(|e| e.seq),
        events,
    }
}

fn prepare_blocking(
    snapshot: SurfaceSnapshot,
    label: String,
    max_reference_bytes: i64,
) -> Result<Message, String> {
    let query = MemoryQuery::new();
    let id = snapshot.session.id.clone();
    query.insert(snapshot, None);
    let service = SessionReferences::new(
        query,
        SessionReferenceConfig {
            max_reference_bytes,
            ..Default::default()
        },
    )
    .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(service.prepare(
            &AgentIdentity::new("me", None),
            vec![],
            vec![ReferenceInput::new(id, Some(label))],
            &CancellationToken::new(),
        ))
        .map(|prepared| prepared.additional_context.unwrap())
        .map_err(|e| e.code().to_string())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn rendered_context_is_framed_once_and_lossless(
        texts in prop::collection::vec(hostile_text(), 0..6),
        label in hostile_text(),
        cwd in proptest::option::of(hostile_text()),
    ) {
        let context = prepare_blocking(source_with(&texts, cwd.clone()), label.clone(), 1 << 30).unwrap();
        let text = context.content[0].as_text().unwrap();
        prop_assert_eq!(text.matches(CLOSE_TAG).count(), 1);
        prop_assert!(text.ends_with(CLOSE_TAG));
        let json = context_json(text).unwrap();
        prop_assert!(!json.contains('<'));
        prop_assert!(!json.contains('\n'));
        let objects: Vec<serde_json::Value> = serde_json::from_str(json).unwrap();
        prop_assert_eq!(objects.len(), 1);
        prop_assert_eq!(objects[0]["label"].as_str().unwrap(), label);
        prop_assert_eq!(objects[0]["cwd"].as_str(), cwd.as_deref());
        let got: Vec<&str> = objects[0]["conversation"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["text"].as_str().unwrap())
            .collect();
        let want: Vec<&str> = texts.iter().map(String::as_str).filter(|t| !t.is_empty()).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn retained_objects_fit_the_budget(
        texts in prop::collection::vec(hostile_text(), 0..8),
        max in 1i64..1500,
    ) {
        match prepare_blocking(source_with(&texts, Some("/w".into())), "label".into(), max) {
            Ok(context) => {
                let text = context.content[0].as_text().unwrap();
                let objects: Vec<Box<RawValue>> =
                    serde_json::from_str(context_json(text).unwrap()).unwrap();
                prop_assert!(objects[0].get().len() as i64 <= max,
                    "{} > {}", objects[0].get().len(), max);
            }
            Err(code) => prop_assert_eq!(code, "SESSION_REFERENCE_BUDGET_EXCEEDED"),
        }
    }
}

// ---- linear time ---------------------------------------------------------------------------

const MB: usize = 1 << 20;

/// The fastest of three runs of `f`.
/// CPU time this thread has used: unlike wall time, it does not grow when a loaded machine
/// preempts the test.
#[allow(unsafe_code)] // clock_gettime has no safe wrapper in std
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the struct it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The least thread CPU time of five runs.
fn best_of_five(mut f: impl FnMut()) -> Duration {
    (0..5)
        .map(|_| {
            let start = thread_cpu_time();
            f();
            thread_cpu_time().saturating_sub(start)
        })
        .min()
        .unwrap()
}

/// Linear time, judged without a wall-clock budget (which a loaded machine would break): the
/// parse of `make(4 * MB)` may take at most 10 times the thread CPU time of the parse of
/// `make(MB)`. Linear work gives
/// about 4, quadratic work 16.
fn assert_linear(name: &str, make: impl Fn(usize) -> String) {
    let small = make(MB);
    let large = make(4 * MB);
    assert!(
        small.len() >= MB && large.len() >= 4 * MB,
        "{name}: input too small"
    );
    let t_small = best_of_five(|| drop(parse_session_reference_text(&small)));
    let t_large = best_of_five(|| drop(parse_session_reference_text(&large)));
    let floor = Duration::from_millis(2);
    assert!(
        t_large <= t_small.max(floor) * 10,
        "{name}: {t_small:?} for 1 MiB but {t_large:?} for 4 MiB"
    );
    // Determinism on the same large input.
    assert_eq!(
        parse_session_reference_text(&large).map_err(|e| e.code()),
        parse_session_reference_text(&large).map_err(|e| e.code())
    );
}

fn repeat_to(piece: &str, bytes: usize) -> String {
    piece.repeat(bytes.div_ceil(piece.len()))
}

#[test]
fn adversarial_megabyte_inputs_parse_in_linear_time() {
    type Make = fn(usize) -> String;
    let cases: [(&str, Make); 12] = [
        ("@[ repeated", |n| repeat_to("@[", n)),
        ("backslash run", |n| repeat_to("\\", n)),
        ("label then backslash run", |n| {
            format!("@[{}", repeat_to("\\", n))
        }),
        ("escaped brackets", |n| repeat_to("@[\\]", n)),
        ("unclosed mention heads", |n| {
            repeat_to("@[a](dsh-session:", n)
        }),
        ("closed labels without uri", |n| repeat_to("@[a]", n)),
        ("labels with wrong glue", |n| {
            repeat_to("@[a](dsh-session", n)
        }),
        ("bare schemes", |n| repeat_to("dsh-session:", n)),
        ("bare schemes without payload", |n| {
            repeat_to("dsh-session:%", n)
        }),
        ("nested heads", |n| format!("{}]", repeat_to("@[", n))),
        ("long tail", |n| {
            format!("@[x](dsh-session:{}", repeat_to("@[a](dsh-session:A", n))
        }),
        ("backslash line breaks", |n| repeat_to("@[\\\n", n)),
    ];
    for (name, make) in cases {
        assert_linear(name, make);
    }
}

#[test]
fn many_valid_mentions_parse_in_linear_time() {
    let mention = format_session_reference_mention("target", Some("a\\]b"));
    let piece = format!("{mention} ");
    assert_linear("valid mentions", |n| repeat_to(&piece, n));
    let input = repeat_to(&piece, MB);
    let parsed = parse_session_reference_text(&input).unwrap();
    assert_eq!(parsed.references.len(), input.len() / piece.len());
}
