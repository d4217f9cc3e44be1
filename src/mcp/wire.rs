//! The stdio wire: JSON-RPC lines in and out, with an answer for every request.
//!
//! Purpose: `rmcp`'s line transport drops what it cannot type — a lone UTF-16 surrogate in a
//! string, a request nested past serde's depth limit, an oversized line — and turns a known
//! method with wrongly typed params (a number for `uri`) into a custom request that is answered
//! "method not found". A host then waits until its own timeout, or is told a method it just
//! listed does not exist. This transport reads the lines itself and lets through only what
//! `rmcp` types as it should; everything else that carries an id is answered here, by that id,
//! with the code JSON-RPC gives it (-32602 invalid params for a method we serve, -32600 for a
//! request we refuse whole, -32700 for JSON that does not parse). Text that is not JSON and names
//! no id is skipped, as the official SDKs do (answering garbage can start an error storm with a
//! peer that echoes).
//!
//! Invariant: every line read is either handed to `rmcp` typed as the method expects, answered
//! here by its id, or (no readable id) skipped; a line is read through a bound
//! ([`MAX_LINE_BYTES`]) and scanned once for its id, so memory and time stay linear whatever it
//! holds; error messages are single-line and escaped (`crate::escape`), so nothing a request
//! carried reaches a host's screen raw; writes of `rmcp`'s messages and of our answers never
//! interleave inside a line (one lock over the writer, a whole line per write).
//! Proof: the unit tests below over every kind of line, and `tests/mcp/wire.rs` against the real
//! binary (each fault answered by id, the server still serving after it).

use rmcp::model::{
    ClientRequest, CompleteRequestParams, DiscoverRequestParams, GetPromptRequestParams,
    InitializeRequestParams, PaginatedRequestParams, ReadResourceRequestParams,
    SubscriptionsListenRequestParams,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleServer;
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, Mutex};
use tokio_util::sync::CancellationToken;

pub use super::id_scan::IdScan;

/// The longest line read (as `rmcp`'s own transport): a longer one is answered -32600 by its id
/// (when it names one) and never held whole.
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// Invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON is not a request we take.
pub const INVALID_REQUEST: i64 = -32600;
/// A method we serve, with params of the wrong shape.
pub const INVALID_PARAMS: i64 = -32602;
/// A method we do not serve.
pub const METHOD_NOT_FOUND: i64 = -32601;

/// The requests this server answers, with the shape of their params for the error message.
const SERVED: &[(&str, &str)] = &[
    (
        "initialize",
        "{\"protocolVersion\": string, \"capabilities\": object, \"clientInfo\": {\"name\": string, \"version\": string}}",
    ),
    ("ping", "no params"),
    ("resources/list", "{\"cursor\"?: string}"),
    ("resources/templates/list", "{\"cursor\"?: string}"),
    ("resources/read", "{\"uri\": string}"),
    ("prompts/list", "{\"cursor\"?: string}"),
    (
        "prompts/get",
        "{\"name\": string, \"arguments\"?: {string: string}}",
    ),
    (
        "completion/complete",
        "{\"ref\": {\"type\": \"ref/prompt\", \"name\": string}, \"argument\": {\"name\": string, \"value\": string}}",
    ),
    ("server/discover", "{\"_meta\": {\"io.modelcontextprotocol/protocolVersion\": string, \"io.modelcontextprotocol/clientCapabilities\": object}}"),
    (
        "subscriptions/listen",
        "{\"notifications\": {\"resourcesListChanged\"?: boolean, \"promptsListChanged\"?: boolean, \"toolsListChanged\"?: boolean, \"resourceSubscriptions\"?: [string]}, \"_meta\": object}",
    ),
];

/// What becomes of one line.
#[derive(Debug)]
pub enum Admit {
    /// Typed as its method expects: `rmcp` serves it.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Answered here: the whole JSON-RPC error response.
    Reply(Value),
    /// Nothing to answer (blank, or not JSON and no id to answer by).
    Skip,
}

/// Decides what becomes of one complete line (without its newline).
pub fn admit(line: &[u8]) -> Admit {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Admit::Skip;
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(err) => return unparsed(line, &err),
    };
    let Some(object) = value.as_object() else {
        return Admit::Reply(error(
            Value::Null,
            INVALID_REQUEST,
            "a JSON-RPC message is one JSON object (batches are not part of MCP)".into(),
        ));
    };
    let id = object.get("id").cloned();
    let method = object
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_string);
    let params = object.get("params").cloned();
    match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
        Ok(message) => {
            if let RxJsonRpcMessage::<RoleServer>::Request(request) = &message {
                if let ClientRequest::CustomRequest(custom) = &request.request {
                    if let Some(shape) = served(&custom.method) {
                        return Admit::Reply(error(
                            id.unwrap_or(Value::Null),
                            INVALID_PARAMS,
                            params_message(&custom.method, shape, params.as_ref()),
                        ));
                    }
                }
            }
            Admit::Message(Box::new(message))
        }
        Err(err) => match (id, method) {
            // A notification is never answered, whatever its shape.
            (None, Some(_)) => Admit::Skip,
            (Some(id), Some(method)) if served(&method).is_some() => Admit::Reply(error(
                id,
                INVALID_PARAMS,
                params_message(&method, served(&method).unwrap_or(""), params.as_ref()),
            )),
            (id, _) => Admit::Reply(error(
                id.unwrap_or(Value::Null),
                INVALID_REQUEST,
                format!("not a JSON-RPC request, response or notification: {err}"),
            )),
        },
    }
}

fn served(method: &str) -> Option<&'static str> {
    SERVED
        .iter()
        .find(|(name, _)| *name == method)
        .map(|(_, shape)| *shape)
}

/// "invalid params for resources/read: expected {…} (what was wrong)".
fn params_message(method: &str, shape: &str, params: Option<&Value>) -> String {
    let detail = params_error(method, params);
    match detail {
        Some(detail) => format!("invalid params for {method}: expected {shape} ({detail})"),
        None => format!("invalid params for {method}: expected {shape}"),
    }
}

/// What the SDK's own type for `method`'s params says about `params`.
fn params_error(method: &str, params: Option<&Value>) -> Option<String> {
    let Some(params) = params else {
        return Some("params are missing".into());
    };
    fn check<T: serde::de::DeserializeOwned>(params: &Value) -> Option<String> {
        serde_json::from_value::<T>(params.clone())
            .err()
            .map(|e| e.to_string())
    }
    match method {
        "initialize" => check::<InitializeRequestParams>(params),
        "resources/read" => check::<ReadResourceRequestParams>(params),
        "prompts/get" => check::<GetPromptRequestParams>(params),
        "completion/complete" => check::<CompleteRequestParams>(params),
        "resources/list" | "resources/templates/list" | "prompts/list" => {
            check::<PaginatedRequestParams>(params)
        }
        "subscriptions/listen" => check::<SubscriptionsListenRequestParams>(params),
        "server/discover" => {
            // `_meta` is read apart from the params' own fields.
            let mut rest = params.clone();
            if let Some(object) = rest.as_object_mut() {
                object.remove("_meta");
            }
            check::<DiscoverRequestParams>(&rest)
        }
        _ => None,
    }
}

/// A line that is not JSON serde can read: answered by its id when one can be found.
fn unparsed(line: &[u8], err: &serde_json::Error) -> Admit {
    let mut scan = IdScan::default();
    scan.feed(line);
    let Some(id) = scan.id() else {
        return Admit::Skip;
    };
    let text = err.to_string();
    if text.contains("recursion limit") {
        return Admit::Reply(error(
            id,
            INVALID_REQUEST,
            "the request is nested deeper than this server reads (128 levels)".into(),
        ));
    }
    if has_lone_surrogate(line) {
        return Admit::Reply(error(
            id,
            INVALID_PARAMS,
            format!("a string holds a lone UTF-16 surrogate, which is not Unicode text: {err}"),
        ));
    }
    if std::str::from_utf8(line).is_err() {
        return Admit::Reply(error(
            id,
            PARSE_ERROR,
            "the request is not UTF-8 text".into(),
        ));
    }
    Admit::Reply(error(id, PARSE_ERROR, format!("not valid JSON: {err}")))
}

/// Whether a `\\uXXXX` escape in `line` names half of a UTF-16 surrogate pair without its other
/// half (JSON's grammar allows it; Unicode text, and so a Rust `String`, cannot hold it). One pass.
fn has_lone_surrogate(line: &[u8]) -> bool {
    let hex = |at: usize| -> Option<u16> {
        let digits = line.get(at..at + 4)?;
        u16::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    };
    let mut i = 0;
    while i + 1 < line.len() {
        if line[i] != b'\\' {
            i += 1;
            continue;
        }
        if line[i + 1] != b'u' {
            i += 2;
            continue;
        }
        let Some(unit) = hex(i + 2) else {
            i += 2;
            continue;
        };
        match unit {
            0xD800..=0xDBFF => {
                let low = (line.get(i + 6..i + 8) == Some(b"\\u"))
                    .then(|| hex(i + 8))
                    .flatten();
                if !matches!(low, Some(0xDC00..=0xDFFF)) {
                    return true;
                }
                i += 12;
            }
            0xDC00..=0xDFFF => return true,
            _ => i += 6,
        }
    }
    false
}

/// A JSON-RPC error response, its message on one escaped line.
pub fn error(id: Value, code: i64, message: String) -> Value {
    let message = crate::escape::diagnostic(&message).into_owned();
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// How a line read ended.
enum Line {
    /// A whole line is in the buffer (newline removed).
    Whole,
    /// The line passed [`MAX_LINE_BYTES`]: skipped, with the id it named, if any.
    Oversized(Option<Value>),
    /// The input ended (a last line without its newline is delivered as whole first).
    Eof,
}

/// Reads one line into `buf` (cleared first), never holding more than `max` bytes of it.
async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    buf.clear();
    let mut scan: Option<IdScan> = None;
    loop {
        let chunk = reader.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(match scan {
                Some(mut scan) => Line::Oversized(scan.id()),
                None if buf.is_empty() => Line::Eof,
                None => Line::Whole,
            });
        }
        let newline = memchr::memchr(b'\n', chunk);
        let take = newline.map_or(chunk.len(), |i| i);
        let piece = &chunk[..take];
        match scan.as_mut() {
            Some(scan) => scan.feed(piece),
            None if buf.len() + piece.len() > max => {
                let mut s = IdScan::default();
                s.feed(buf);
                s.feed(piece);
                buf.clear();
                buf.shrink_to(64 << 10);
                scan = Some(s);
            }
            None => buf.extend_from_slice(piece),
        }
        let consumed = newline.map_or(take, |i| i + 1);
        reader.consume(consumed);
        if newline.is_some() {
            return Ok(match scan {
                Some(mut scan) => Line::Oversized(scan.id()),
                None => Line::Whole,
            });
        }
    }
}

type Writer = Arc<Mutex<Option<Box<dyn AsyncWrite + Send + Unpin>>>>;

async fn write_line(writer: &Writer, value: &impl serde::Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let mut guard = writer.lock().await;
    let Some(out) = guard.as_mut() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            "the MCP output is closed",
        ));
    };
    out.write_all(&line).await?;
    out.flush().await
}

/// An outgoing error with its message (and `data.message`) escaped for a terminal: handlers
/// echo what a request named (a URI, an id, a prompt name), and a host prints the message as
/// it is. Line breaks stay (a candidate list is one per line); every other control, DEL, C1 and
/// bidi character is spelled visibly. Results are left as they are: their labels and
/// descriptions are cleaned where they are made (`listing::clean`).
fn neutralised(mut item: TxJsonRpcMessage<RoleServer>) -> TxJsonRpcMessage<RoleServer> {
    if let TxJsonRpcMessage::<RoleServer>::Error(error) = &mut item {
        neutralise(&mut error.error);
    }
    item
}

/// Escapes an error's message (line breaks kept) and its `data.message` (one line) for a
/// terminal, in place; text with nothing to escape is left as it is, so escaping twice is
/// escaping once.
pub(crate) fn neutralise(error: &mut rmcp::ErrorData) {
    let message = crate::escape::escape_multiline(&error.message);
    if let std::borrow::Cow::Owned(message) = message {
        error.message = message.into();
    }
    if let Some(Value::String(inner)) = error.data.as_mut().and_then(|data| data.get_mut("message"))
    {
        let escaped = crate::escape::escape_line(inner).into_owned();
        *inner = escaped;
    }
}

/// The server's transport over a byte stream pair (stdin/stdout, or a duplex in tests).
pub struct Wire {
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleServer>>,
    writer: Writer,
    reader: tokio::task::JoinHandle<()>,
    ended: CancellationToken,
}

impl Wire {
    /// Starts reading `reader` on a task of its own; `rmcp` receives what [`admit`] lets through.
    pub fn new<R, W>(reader: R, writer: W) -> Wire
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let writer: Writer = Arc::new(Mutex::new(Some(Box::new(writer))));
        let (tx, incoming) = mpsc::channel(32);
        let answers = writer.clone();
        let ended = CancellationToken::new();
        let end = ended.clone().drop_guard();
        let reader = tokio::spawn(async move {
            let _end = end;
            let mut reader = BufReader::with_capacity(64 << 10, reader);
            let mut buf = Vec::new();
            loop {
                let admitted = match read_line(&mut reader, &mut buf, MAX_LINE_BYTES).await {
                    Ok(Line::Whole) => admit(&buf),
                    Ok(Line::Oversized(Some(id))) => Admit::Reply(error(
                        id,
                        INVALID_REQUEST,
                        format!("the request is longer than {MAX_LINE_BYTES} bytes"),
                    )),
                    Ok(Line::Oversized(None)) => {
                        tracing::warn!(
                            limit = MAX_LINE_BYTES,
                            "skipped an oversized line that names no id"
                        );
                        Admit::Skip
                    }
                    Ok(Line::Eof) => return,
                    Err(err) => {
                        tracing::warn!(error = %err, "the MCP input failed");
                        return;
                    }
                };
                match admitted {
                    Admit::Message(message) => {
                        if tx.send(*message).await.is_err() {
                            return;
                        }
                    }
                    Admit::Reply(answer) => {
                        tracing::debug!(%answer, "answered a request rmcp could not type");
                        if write_line(&answers, &answer).await.is_err() {
                            return;
                        }
                    }
                    Admit::Skip => {
                        tracing::debug!("skipped a line that is not JSON-RPC and names no id");
                    }
                }
            }
        });
        Wire {
            incoming,
            writer,
            reader,
            ended,
        }
    }

    /// Cancelled once the input has ended (or failed): long-lived handlers (a
    /// `subscriptions/listen` stream) end with it, so the end of stdin ends the server promptly.
    pub fn ended(&self) -> CancellationToken {
        self.ended.clone()
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Transport<RoleServer> for Wire {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.writer.clone();
        let item = neutralised(item);
        async move { write_line(&writer, &item).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        self.incoming.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        let mut guard = self.writer.lock().await;
        if let Some(mut out) = guard.take() {
            let _ = out.flush().await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(line: &str) -> Value {
        match admit(line.as_bytes()) {
            Admit::Reply(value) => value,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn wrongly_typed_params_of_a_served_method_are_invalid_params_by_id() {
        for params in [
            r#"{"uri":5}"#,
            r#"{"uri":null}"#,
            r#"{}"#,
            r#"{"uri":["a"]}"#,
            r#"5"#,
        ] {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{params}}}"#
            );
            let answer = reply(&line);
            assert_eq!(answer["id"], 7, "{line}");
            assert_eq!(answer["error"]["code"], INVALID_PARAMS, "{line}: {answer}");
            let message = answer["error"]["message"].as_str().unwrap();
            assert!(message.contains("resources/read"), "{message}");
        }
        let answer = reply(r#"{"jsonrpc":"2.0","id":"x","method":"resources/read"}"#);
        assert_eq!(answer["id"], "x");
        assert_eq!(answer["error"]["code"], INVALID_PARAMS);
        let answer = reply(
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":3,"arguments":[]}}"#,
        );
        assert_eq!(answer["error"]["code"], INVALID_PARAMS);
        let answer =
            reply(r#"{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":5}}"#);
        assert_eq!(answer["error"]["code"], INVALID_PARAMS);
    }

    #[test]
    fn the_stateless_methods_with_wrong_params_are_invalid_params_by_id() {
        let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
        for params in [
            "5".to_string(),
            format!(r#"{{"notifications":5,{meta}}}"#),
            format!(r#"{{{meta}}}"#),
        ] {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":{params}}}"#
            );
            let answer = reply(&line);
            assert_eq!(answer["id"], "l", "{line}");
            assert_eq!(answer["error"]["code"], INVALID_PARAMS, "{line}: {answer}");
        }
        let answer = reply(r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":5}"#);
        assert_eq!(answer["error"]["code"], INVALID_PARAMS, "{answer}");
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{{"notifications":{{"resourcesListChanged":true}},{meta}}}}}"#
        );
        assert!(
            matches!(admit(line.as_bytes()), Admit::Message(_)),
            "{line}"
        );
        let line =
            format!(r#"{{"jsonrpc":"2.0","id":3,"method":"server/discover","params":{{{meta}}}}}"#);
        assert!(
            matches!(admit(line.as_bytes()), Admit::Message(_)),
            "{line}"
        );
    }

    #[test]
    fn well_typed_requests_and_notifications_go_to_the_sdk() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"dsh-session:InRhcmdldCI"}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"some/custom","params":{"a":1}}"#,
        ] {
            assert!(
                matches!(admit(line.as_bytes()), Admit::Message(_)),
                "{line}"
            );
        }
    }

    #[test]
    fn a_lone_surrogate_is_answered_by_id() {
        let answer = reply(
            r#"{"jsonrpc":"2.0","id":6,"method":"resources/read","params":{"uri":"dsh-session:\ud800"}}"#,
        );
        assert_eq!(answer["id"], 6);
        assert_eq!(answer["error"]["code"], INVALID_PARAMS);
        assert!(!has_lone_surrogate(
            br#"{"a":"\\ud800 \ud83d\ude00 \u00e9"}"#
        ));
        assert!(has_lone_surrogate(br#"{"a":"\ud83d\u0041"}"#));
        // The id before or after the offending string.
        let answer = reply(
            r#"{"jsonrpc":"2.0","method":"prompts/get","params":{"name":"\udc00"},"id":"after"}"#,
        );
        assert_eq!(answer["id"], "after");
    }

    #[test]
    fn deep_nesting_is_refused_by_id_and_garbage_without_an_id_is_skipped() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"prompts/get","params":{}1{}}}"#,
            "[".repeat(5000),
            "]".repeat(5000)
        );
        let answer = reply(&deep);
        assert_eq!(answer["id"], 9);
        assert_eq!(answer["error"]["code"], INVALID_REQUEST);
        assert!(matches!(admit(b"this is not json {"), Admit::Skip));
        assert!(matches!(admit(b"   "), Admit::Skip));
        let answer = reply(r#"{"jsonrpc":"2.0","id":12,"method":"ping","#);
        assert_eq!(answer["id"], 12);
        assert_eq!(answer["error"]["code"], PARSE_ERROR);
    }

    #[test]
    fn shapes_that_are_not_requests_are_invalid_requests() {
        assert_eq!(
            reply(r#"{"jsonrpc":"2.0","id":3}"#)["error"]["code"],
            INVALID_REQUEST
        );
        assert_eq!(reply(r#"[1,2]"#)["error"]["code"], INVALID_REQUEST);
        // A notification of a bad shape is never answered.
        assert!(matches!(
            admit(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":5}"#),
            Admit::Skip | Admit::Message(_)
        ));
    }

    #[test]
    fn messages_that_echo_the_request_carry_no_raw_controls() {
        let answer = reply(
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/read\",\"params\":{\"uri\":[\"\\u001b]0;pwned\\u0007\\u202e\"]}}",
        );
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            !message
                .chars()
                .any(|c| crate::escape::needs_escape(c, crate::escape::EscapeMode::SingleLine)),
            "{message:?}"
        );
    }

    #[tokio::test]
    async fn an_oversized_line_is_skipped_with_bounded_memory_and_answered_by_id() {
        let mut input = Vec::new();
        input.extend_from_slice(br#"{"jsonrpc":"2.0","id":44,"method":"ping","params":{"pad":""#);
        input.extend(std::iter::repeat_n(b'a', 3000));
        input.extend_from_slice(b"\"}}\n{\"next\":1}\n");
        let mut reader = BufReader::with_capacity(64, &input[..]);
        let mut buf = Vec::new();
        match read_line(&mut reader, &mut buf, 1000).await.unwrap() {
            Line::Oversized(id) => assert_eq!(id, Some(json!(44))),
            _ => panic!("not oversized"),
        }
        assert!(buf.capacity() <= 64 << 10);
        assert!(matches!(
            read_line(&mut reader, &mut buf, 1000).await.unwrap(),
            Line::Whole
        ));
        assert_eq!(buf, br#"{"next":1}"#);
        assert!(matches!(
            read_line(&mut reader, &mut buf, 1000).await.unwrap(),
            Line::Eof
        ));
    }
}
