//! The demo script format: the story of one demo session as readable text.
//!
//! A script is a list of sections. A section starts with a marker line `%% <kind> <args>` and
//! its body is every following line up to the next marker, joined with `\n` (so a body can hold
//! Markdown, code and blank lines verbatim; no body line may start with `%%`). One blank line
//! right before a `%% turn`, `%% compact` or `%% retitle` marker only separates, it is not
//! part of the body before it.
//!
//! ```text
//! %% session <id>                 the header: id, optional cwd, creation time
//! %% cwd <cwd>
//! %% created <time>
//! %% turn <time>                  a turn started by a direct prompt at <time>
//! %% attached <path>              optional: baked prefix context (body: the file text)
//! %% user                         the prompt (body); `@[label](dsh-session:…)` mentions in it
//!                                 are prepared by the crate's service and logged as a context
//! %% title <title>                optional: the session title, derived from this prompt
//! %% plugin <name>                optional: a plugin-generated user message (body)
//! %% step <N>ms | %% step stream  one model step: logged whole after N ms, or streamed
//! %% reasoning | %% text          a block of the step's reply (body)
//! %% tool <name> <N>ms            a tool call: body = its arguments (one JSON line), then
//! %% result                       its result (body), which arrives N ms later
//! %% steer                        a steering message typed while the step ran (body)
//! %% retitle <time> <title>       the user renames the session (titles the first prompt)
//! %% compact <time>               a manual compaction of the whole current surface (body:
//!                                 the summary)
//! ```
//!
//! Times are UTC, `YYYY-MM-DDTHH:MM:SS.mmmZ`. Invariant: parsing never panics; every malformed
//! line is an error naming the file line.

use std::fmt;

/// One demo session, as written in its script.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    pub id: String,
    pub cwd: Option<String>,
    pub created_at: i64,
    pub items: Vec<Item>,
}

/// What happens in a session, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Turn(Turn),
    Retitle { time: i64, title: String },
    Compact { time: i64, summary: String },
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Turn {
    pub time: i64,
    /// `(path, text)` of a file baked into the prompt as prefix context.
    pub attached: Option<(String, String)>,
    pub prompt: String,
    pub title: Option<String>,
    /// `(plugin, text)` messages logged after the prompt.
    pub plugins: Vec<(String, String)>,
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Step {
    /// `None`: streamed as chunk rows; `Some(ms)`: logged whole, `ms` after the step started.
    pub duration_ms: Option<i64>,
    pub blocks: Vec<Block>,
    pub steer: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Reasoning(String),
    Text(String),
    Tool {
        name: String,
        /// The arguments exactly as logged: one JSON object, compact.
        arguments: String,
        result: String,
        duration_ms: i64,
    },
}

/// A malformed script line.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

struct Section<'a> {
    line: usize,
    kind: &'a str,
    args: &'a str,
    body: String,
}

fn err<T>(line: usize, message: impl Into<String>) -> Result<T, ScriptError> {
    Err(ScriptError {
        line,
        message: message.into(),
    })
}

fn sections(text: &str) -> Result<Vec<Section<'_>>, ScriptError> {
    let lines: Vec<&str> = text
        .strip_suffix('\n')
        .unwrap_or(text)
        .split('\n')
        .collect();
    let mut out: Vec<Section<'_>> = Vec::new();
    let mut body: Vec<&str> = Vec::new();
    let finish = |out: &mut Vec<Section<'_>>, body: &mut Vec<&str>, next: Option<&str>| {
        let separated = matches!(next, Some("turn" | "compact" | "retitle"));
        if separated && body.last() == Some(&"") {
            body.pop();
        }
        if let Some(section) = out.last_mut() {
            section.body = body.join("\n");
        }
        body.clear();
    };
    for (index, line) in lines.iter().enumerate() {
        let number = index + 1;
        if let Some(marker) = line.strip_prefix("%%") {
            let Some(marker) = marker.strip_prefix(' ') else {
                return err(number, "a marker line starts with `%% `");
            };
            let (kind, args) = marker.split_once(' ').unwrap_or((marker, ""));
            finish(&mut out, &mut body, Some(kind));
            out.push(Section {
                line: number,
                kind,
                args,
                body: String::new(),
            });
        } else if out.is_empty() {
            if !line.is_empty() {
                return err(number, "text before the first `%%` marker");
            }
        } else {
            body.push(line);
        }
    }
    finish(&mut out, &mut body, None);
    Ok(out)
}

/// Parses `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC) into epoch milliseconds.
pub fn parse_time(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() != 24 || &b[4..5] != b"-" || &b[7..8] != b"-" || &b[10..11] != b"T" {
        return None;
    }
    if &b[13..14] != b":" || &b[16..17] != b":" || &b[19..20] != b"." || &b[23..24] != b"Z" {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second, milli) = (num(11..13)?, num(14..16)?, num(17..19)?, num(20..23)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    if second > 59 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some((((days * 24 + hour) * 60 + minute) * 60 + second) * 1000 + milli)
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn time_arg(section: &Section<'_>) -> Result<i64, ScriptError> {
    parse_time(section.args).map_or_else(
        || {
            err(
                section.line,
                format!(
                    "`%% {}` needs a time like 2026-11-21T10:15:52.003Z, got {:?}",
                    section.kind, section.args
                ),
            )
        },
        Ok,
    )
}

fn millis_arg(line: usize, text: &str) -> Result<i64, ScriptError> {
    text.strip_suffix("ms")
        .and_then(|n| n.parse::<i64>().ok())
        .filter(|n| *n >= 0)
        .map_or_else(
            || {
                err(
                    line,
                    format!("expected a duration like 120ms, got {text:?}"),
                )
            },
            Ok,
        )
}

fn no_body(section: &Section<'_>) -> Result<(), ScriptError> {
    if section.body.is_empty() {
        Ok(())
    } else {
        err(
            section.line,
            format!("`%% {}` takes no text below it", section.kind),
        )
    }
}

/// Parses one script.
pub fn parse(text: &str) -> Result<Script, ScriptError> {
    let sections = sections(text)?;
    let mut iter = sections.into_iter().peekable();
    let mut id = None;
    let mut cwd = None;
    let mut created_at = None;
    let mut items: Vec<Item> = Vec::new();
    let mut header_line = 1;
    while let Some(section) = iter.next_if(|s| matches!(s.kind, "session" | "cwd" | "created")) {
        header_line = section.line;
        no_body(&section)?;
        match section.kind {
            "session" if !section.args.is_empty() => id = Some(section.args.to_string()),
            "cwd" if !section.args.is_empty() => cwd = Some(section.args.to_string()),
            "created" => created_at = Some(time_arg(&section)?),
            kind => return err(section.line, format!("`%% {kind}` needs a value")),
        }
    }
    let (Some(id), Some(created_at)) = (id, created_at) else {
        return err(
            header_line,
            "a script starts with `%% session <id>` and `%% created <time>`",
        );
    };
    while let Some(section) = iter.next() {
        let line = section.line;
        match section.kind {
            "turn" => {
                no_body(&section)?;
                let mut turn = Turn {
                    time: time_arg(&section)?,
                    ..Turn::default()
                };
                let mut has_prompt = false;
                while let Some(part) =
                    iter.next_if(|s| !matches!(s.kind, "turn" | "compact" | "retitle"))
                {
                    match part.kind {
                        "attached" if !has_prompt => {
                            turn.attached = Some((part.args.to_string(), part.body))
                        }
                        "user" if !has_prompt => {
                            turn.prompt = part.body;
                            has_prompt = true;
                        }
                        "title" if has_prompt && !part.args.is_empty() => {
                            no_body(&part)?;
                            turn.title = Some(part.args.to_string());
                        }
                        "plugin" if has_prompt && !part.args.is_empty() => {
                            turn.plugins.push((part.args.to_string(), part.body))
                        }
                        "step" if has_prompt => {
                            no_body(&part)?;
                            let duration_ms = match part.args {
                                "stream" => None,
                                other => Some(millis_arg(part.line, other)?),
                            };
                            turn.steps.push(Step {
                                duration_ms,
                                ..Step::default()
                            });
                        }
                        "reasoning" | "text" | "tool" | "steer" => {
                            let Some(step) = turn.steps.last_mut() else {
                                return err(
                                    part.line,
                                    format!("`%% {}` outside a step", part.kind),
                                );
                            };
                            if step.steer.is_some() {
                                return err(part.line, "a step ends with its `%% steer`");
                            }
                            match part.kind {
                                "reasoning" => step.blocks.push(Block::Reasoning(part.body)),
                                "text" => step.blocks.push(Block::Text(part.body)),
                                "steer" => step.steer = Some(part.body),
                                _ => {
                                    let (name, ms) = part.args.split_once(' ').unwrap_or(("", ""));
                                    if name.is_empty() {
                                        return err(part.line, "`%% tool <name> <N>ms`");
                                    }
                                    let duration_ms = millis_arg(part.line, ms)?;
                                    if part.body.contains('\n')
                                        || serde_json::from_str::<serde_json::Map<_, _>>(&part.body)
                                            .is_err()
                                    {
                                        return err(
                                            part.line,
                                            "a tool's arguments are one line of JSON object",
                                        );
                                    }
                                    let Some(result) = iter.next_if(|s| s.kind == "result") else {
                                        return err(part.line, "a `%% tool` needs a `%% result`");
                                    };
                                    step.blocks.push(Block::Tool {
                                        name: name.to_string(),
                                        arguments: part.body,
                                        result: result.body,
                                        duration_ms,
                                    });
                                }
                            }
                        }
                        kind => return err(part.line, format!("`%% {kind}` is not expected here")),
                    }
                }
                if !has_prompt {
                    return err(line, "a turn needs a `%% user` prompt");
                }
                if turn.steps.iter().any(|s| s.blocks.is_empty()) {
                    return err(line, "every step of this turn needs a reply block");
                }
                items.push(Item::Turn(turn));
            }
            "retitle" => {
                no_body(&section)?;
                let (time, title) = section.args.split_once(' ').unwrap_or((section.args, ""));
                let time = parse_time(time)
                    .map_or_else(|| err(line, "`%% retitle <time> <title>` needs a time"), Ok)?;
                if title.is_empty() {
                    return err(line, "`%% retitle <time> <title>` needs a title");
                }
                items.push(Item::Retitle {
                    time,
                    title: title.to_string(),
                });
            }
            "compact" => {
                if section.body.is_empty() {
                    return err(line, "a compaction needs its summary below the marker");
                }
                items.push(Item::Compact {
                    time: time_arg(&section)?,
                    summary: section.body,
                });
            }
            kind => return err(line, format!("`%% {kind}` is not expected here")),
        }
    }
    Ok(Script {
        id,
        cwd,
        created_at,
        items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_as_utc_epoch_millis() {
        assert_eq!(parse_time("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(
            parse_time("2026-11-21T10:15:48.260Z"),
            Some(1_795_256_148_260)
        );
        assert_eq!(parse_time("2026-13-21T10:15:48.260Z"), None);
        assert_eq!(parse_time("2026-11-21 10:15:48.260Z"), None);
        assert_eq!(parse_time("2026-11-21T10:15:48.26éZ"), None);
    }

    const HEAD: &str = "%% session s\n%% created 2026-11-21T10:15:48.260Z\n";

    #[test]
    fn a_script_reads_with_its_bodies_verbatim() {
        let text = format!(
            "{HEAD}\n%% turn 2026-11-21T10:16:00.000Z\n%% user\nHi\n\n%% title T\n\
             %% step 5ms\n%% text\nline 1\n\n  line 3\n\n%% turn 2026-11-21T10:17:00.000Z\n\
             %% user\nAgain\n%% step stream\n%% tool bash 7ms\n{{\"a\":1}}\n%% result\nok\n\
             %% steer\nstop\n\n%% compact 2026-11-21T10:18:00.000Z\nsum\n"
        );
        let script = parse(&text).unwrap();
        assert_eq!(script.items.len(), 3);
        let Item::Turn(first) = &script.items[0] else {
            panic!("{:?}", script.items[0]);
        };
        // A blank line inside a body is kept; the one before `%% turn` only separates.
        assert_eq!(first.prompt, "Hi\n");
        assert_eq!(first.title.as_deref(), Some("T"));
        assert_eq!(first.steps[0].duration_ms, Some(5));
        assert_eq!(
            first.steps[0].blocks,
            [Block::Text("line 1\n\n  line 3".into())]
        );
        let Item::Turn(second) = &script.items[1] else {
            panic!("{:?}", script.items[1]);
        };
        assert_eq!(second.steps[0].steer.as_deref(), Some("stop"));
        assert_eq!(
            second.steps[0].blocks,
            [Block::Tool {
                name: "bash".into(),
                arguments: "{\"a\":1}".into(),
                result: "ok".into(),
                duration_ms: 7
            }]
        );
        assert_eq!(
            script.items[2],
            Item::Compact {
                time: parse_time("2026-11-21T10:18:00.000Z").unwrap(),
                summary: "sum".into()
            }
        );
    }

    #[test]
    fn malformed_scripts_are_errors_naming_the_line() {
        let turn = "%% turn 2026-11-21T10:16:00.000Z\n";
        let cases = [
            ("hello\n".to_string(), 1, "before the first"),
            ("%%session s\n".to_string(), 1, "starts with `%% `"),
            ("%% session s\n".to_string(), 1, "`%% created <time>`"),
            (format!("{HEAD}%% turn yesterday\n"), 3, "needs a time"),
            (format!("{HEAD}{turn}%% step 5ms\n"), 4, "not expected here"),
            (
                format!("{HEAD}{turn}%% user\nx\n%% text\ny\n"),
                6,
                "outside a step",
            ),
            (
                format!("{HEAD}{turn}%% user\nx\n%% step 1ms\n%% tool bash 2ms\n{{}}\n"),
                7,
                "needs a `%% result`",
            ),
            (
                format!(
                    "{HEAD}{turn}%% user\nx\n%% step 1ms\n%% tool bash 2ms\nnot json\n%% result\n"
                ),
                7,
                "one line of JSON object",
            ),
            (
                format!("{HEAD}{turn}%% user\nx\n%% step soon\n"),
                6,
                "a duration",
            ),
            (
                format!("{HEAD}{turn}%% user\nx\n%% step 1ms\n"),
                3,
                "needs a reply block",
            ),
            (format!("{HEAD}{turn}%% title T\n"), 4, "not expected here"),
            (
                format!("{HEAD}%% compact 2026-11-21T10:16:00.000Z\n"),
                3,
                "needs its summary",
            ),
            (
                format!("{HEAD}%% retitle 2026-11-21T10:16:00.000Z\n"),
                3,
                "needs a title",
            ),
            (format!("{HEAD}%% bogus\n"), 3, "not expected here"),
        ];
        for (text, line, needle) in cases {
            let err = parse(&text).unwrap_err();
            assert_eq!(err.line, line, "{text:?}: {err}");
            assert!(err.message.contains(needle), "{text:?}: {err}");
        }
    }
}
