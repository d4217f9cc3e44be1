//! How the OpenAI-compatible provider names what went wrong: a status and its server message,
//! `Retry-After`, a redirect, a body that is no event stream, a transport failure, a client
//! that could not be built.
//!
//! Invariant: every failure is a specific [`ModelError::Provider`] whose message names the
//! cause (status, host, wait, TLS or timeout), the server's text shortened to
//! `MAX_ERROR_TEXT` bytes and the API key redacted from it. Proof: the unit tests below and
//! `tests/agent/provider_openai.rs`.

use crate::agent::config::ProviderSettings;
use crate::agent::provider::ModelError;
use serde_json::Value;
use std::time::Duration;

/// The longest `Retry-After` we honour; longer waits fail the turn instead.
pub(super) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// How much of a server's error body we show.
const MAX_ERROR_TEXT: usize = 600;

pub(super) fn failure(code: &str, message: impl Into<String>) -> ModelError {
    ModelError::Provider {
        code: code.to_string(),
        message: message.into(),
    }
}

/// The server's own message out of an error body (`{"error":{"message"}}`, `{"message"}`,
/// `{"error":"…"}`, or the text itself), shortened.
pub fn server_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let text = parsed
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("message"))
                .or_else(|| v.get("error").filter(|e| e.is_string()))
                .or_else(|| v.get("detail").filter(|e| e.is_string()))
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| body.trim().to_string());
    let text: String = text
        .chars()
        .filter(|c| !c.is_control() || *c == ' ')
        .collect();
    if text.chars().count() > MAX_ERROR_TEXT {
        text.chars().take(MAX_ERROR_TEXT).collect::<String>() + "…"
    } else if text.is_empty() {
        "(no message)".to_string()
    } else {
        text
    }
}

/// Whether an HTTP status is worth retrying.
pub fn is_retryable(status: u16) -> bool {
    status == 429 || (500..=599).contains(&status)
}

/// The error for a final non-success status.
pub fn status_error(
    settings: &ProviderSettings,
    status: u16,
    body: &str,
    retries: u32,
) -> ModelError {
    let text = server_message(body);
    let text = match &settings.api_key {
        Some(key) => key.redact(&text),
        None => text,
    };
    let after = if retries > 0 {
        format!(
            " after {retries} retr{}",
            if retries == 1 { "y" } else { "ies" }
        )
    } else {
        String::new()
    };
    match status {
        401 | 403 => {
            let (key, hint) = match &settings.api_key_env {
                Some(var) => (
                    format!("the API key in {var}"),
                    format!(
                        "check the key in {var}, or name the variable that holds the right one \
                         with --api-key-env NAME or api_key_env = \"NAME\" in the [provider] table"
                    ),
                ),
                None => (
                    "the request (no API key is configured for this provider)".to_string(),
                    "to send a key, export it in a variable and name that variable with \
                     --api-key-env NAME or api_key_env = \"NAME\" in the [provider] table of \
                     config.toml"
                        .to_string(),
                ),
            };
            failure(
                "AUTH",
                format!(
                    "{} rejected {key} (HTTP {status}): {text}; {hint}",
                    settings.base_url
                ),
            )
        }
        404 => failure(
            "NOT_FOUND",
            format!(
                "HTTP 404 from {}/chat/completions: the model \"{}\" does not exist there, or the base URL is wrong: {text}",
                settings.base_url, settings.model
            ),
        ),
        400 | 422 => failure(
            "BAD_REQUEST",
            format!("the server refused the request (HTTP {status}): {text}"),
        ),
        429 => failure(
            "RATE_LIMIT",
            format!("rate limited by {} (HTTP 429){after}: {text}", settings.base_url),
        ),
        500..=599 => failure(
            "SERVER",
            format!("server error from {} (HTTP {status}){after}: {text}", settings.base_url),
        ),
        _ => failure(
            "HTTP",
            format!("unexpected HTTP {status} from {}: {text}", settings.base_url),
        ),
    }
}

/// `Retry-After` (delta seconds, possibly fractional, or an HTTP date) or `retry-after-ms`, in
/// seconds from now; `None` when absent or unreadable. Not capped: a wait longer than we are
/// willing to sit through is reported as such by the caller.
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<f64> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
    {
        return Some(ms / 1000.0);
    }
    let value = headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())?
        .trim();
    if let Some(seconds) = value
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
    {
        return Some(seconds);
    }
    let at = http_date(value)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs() as i64;
    Some((at - now).max(0) as f64)
}

/// Seconds since the epoch of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, the form
/// RFC 9110 requires senders to use); `None` for anything else.
fn http_date(text: &str) -> Option<i64> {
    let parts: Vec<&str> = text.split_ascii_whitespace().collect();
    let [_, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| m == month)? as i64 + 1;
    let day: i64 = day.parse().ok().filter(|d| (1..=31).contains(d))?;
    let year: i64 = year.parse().ok().filter(|y| (1970..=9999).contains(y))?;
    let hms: Vec<i64> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, s] = hms.as_slice() else {
        return None;
    };
    let days = crate::session::civil::days_from_civil(year, month, day);
    Some(days * 86_400 + h * 3600 + m * 60 + s)
}

/// A wait, as a person reads it: `45 s`, `10 min`, `1 h`, `48 h`, `more than a year`.
pub fn human_wait(seconds: f64) -> String {
    if seconds >= 365.0 * 86_400.0 {
        "more than a year".to_string()
    } else if seconds >= 3600.0 {
        let hours = seconds / 3600.0;
        if (hours - hours.round()).abs() < 0.05 {
            format!("{:.0} h", hours)
        } else {
            format!("{:.1} h", hours)
        }
    } else if seconds >= 120.0 {
        format!("{:.0} min", seconds / 60.0)
    } else {
        format!("{:.0} s", seconds)
    }
}

/// `error` (the server's status error) with the wait it asked for, longer than we retry after.
pub(super) fn wait_too_long(error: ModelError, seconds: f64) -> ModelError {
    let (code, message) = error.failure();
    failure(
        &code,
        format!(
            "{message} (the server asked to wait {} before retrying, longer than the {} we \
             wait; try again later)",
            human_wait(seconds),
            human_wait(MAX_RETRY_AFTER.as_secs_f64())
        ),
    )
}

/// The error for a redirect: we do not follow it (a 307/308 would send the whole conversation
/// to wherever it points), so the person can fix `base_url`.
pub(super) fn redirect_error(
    settings: &ProviderSettings,
    status: u16,
    headers: &reqwest::header::HeaderMap,
) -> ModelError {
    let location = headers
        .get(reqwest::header::LOCATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let pointed = match location {
        Some(to) => format!("to \"{}\"", crate::escape::escape_line(&to)),
        None => "elsewhere (no Location given)".to_string(),
    };
    failure(
        "REDIRECT",
        format!(
            "{}/chat/completions answered HTTP {status}, a redirect {pointed}; redirects are not \
             followed (the conversation would be sent there): if that is the right server, set \
             base_url to it",
            settings.base_url
        ),
    )
}

/// The content type of a 200 that is not `text/event-stream` (`"(none)"` when absent); `None`
/// for an event stream.
pub(super) fn not_an_event_stream(headers: &reqwest::header::HeaderMap) -> Option<String> {
    let Some(value) = headers.get(reqwest::header::CONTENT_TYPE) else {
        return Some("(none)".to_string());
    };
    let text = String::from_utf8_lossy(value.as_bytes()).into_owned();
    let essence = text.split(';').next().unwrap_or("").trim();
    if essence.eq_ignore_ascii_case("text/event-stream") {
        None
    } else {
        Some(text)
    }
}

/// The error for an answer that is not an event stream (a plain JSON completion, a captive
/// portal's page): what came, and what to check.
pub(super) fn not_streaming_error(
    settings: &ProviderSettings,
    status: u16,
    kind: &str,
    body: &str,
) -> ModelError {
    let text = server_message(body);
    let text = match &settings.api_key {
        Some(key) => key.redact(&text),
        None => text,
    };
    let excerpt: String = text.chars().take(200).collect();
    let more = if excerpt.len() < text.len() {
        "…"
    } else {
        ""
    };
    failure(
        "NOT_STREAMING",
        format!(
            "the server did not stream: {}/chat/completions answered HTTP {status} with content \
             type \"{}\", not text/event-stream; check base_url (it must be an \
             OpenAI-compatible API root): {excerpt}{more}",
            settings.base_url,
            crate::escape::escape_line(kind)
        ),
    )
}

/// The error chain of a transport failure, as one line.
pub(super) fn chain(error: &dyn std::error::Error) -> String {
    let mut parts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = e.source();
    }
    parts.join(": ")
}

/// Classifies a reqwest error that happened before any answer byte.
pub(super) fn transport_error(settings: &ProviderSettings, error: &reqwest::Error) -> ModelError {
    let detail = chain(error);
    let lower = detail.to_lowercase();
    let url = &settings.base_url;
    if error.is_timeout() {
        return failure(
            "TIMEOUT",
            format!(
                "connecting to {url} timed out after {:.1}s",
                settings.connect_timeout.as_secs_f64()
            ),
        );
    }
    if lower.contains("connection refused") {
        return failure(
            "TRANSPORT",
            format!("could not connect to {url}: connection refused (is the server running?)"),
        );
    }
    let tls_words = [
        "tls",
        "certificate",
        "handshake",
        "ssl",
        "corrupt message",
        "invalidcontenttype",
    ];
    if url.starts_with("https://") && tls_words.iter().any(|w| lower.contains(w)) {
        return failure("TLS", format!("TLS error talking to {url}: {detail}"));
    }
    if error.is_connect() {
        return failure("TRANSPORT", format!("could not connect to {url}: {detail}"));
    }
    failure("TRANSPORT", format!("request to {url} failed: {detail}"))
}

/// The HTTP client of a provider could not be built (no TLS roots, a bad proxy setting…).
#[derive(Debug, thiserror::Error)]
#[error("could not build the HTTP client: {reason}")]
pub struct ClientError {
    /// The whole chain of causes, as one line.
    pub reason: String,
    /// reqwest's error.
    #[source]
    pub source: reqwest::Error,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::openai::test_settings as settings;

    #[test]
    fn status_errors_name_the_cause() {
        let s = settings();
        let auth = status_error(
            &s,
            401,
            r#"{"error":{"message":"bad key sk-test-secret"}}"#,
            0,
        );
        assert_eq!(auth.failure().0, "AUTH");
        let text = auth.to_string();
        assert!(text.contains("DEEPSEEK_API_KEY"), "{text}");
        assert!(!text.contains("sk-test-secret"), "{text}");
        let missing = status_error(&s, 404, "Not Found", 0).to_string();
        assert!(
            missing.contains("deepseek-v4-flash") && missing.contains("base URL"),
            "{missing}"
        );
        let bad = status_error(
            &s,
            400,
            r#"{"error":{"message":"max_tokens too large"}}"#,
            0,
        );
        assert!(bad.to_string().ends_with("max_tokens too large"), "{bad}");
        let busy = status_error(&s, 503, "", 2).to_string();
        assert!(
            busy.contains("HTTP 503") && busy.contains("after 2 retries"),
            "{busy}"
        );
        assert!(is_retryable(429) && is_retryable(502) && !is_retryable(400));
    }

    #[test]
    fn retry_after_reads_seconds_milliseconds_and_dates_uncapped() {
        let mut h = reqwest::header::HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(2.0));
        h.insert("retry-after", "172800".parse().unwrap());
        assert_eq!(retry_after(&h), Some(172_800.0));
        h.insert("retry-after-ms", "150".parse().unwrap());
        assert_eq!(retry_after(&h), Some(0.15));
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("retry-after", "soon".parse().unwrap());
        assert_eq!(retry_after(&h), None);
        // A date in the past is "now"; one far ahead is that far.
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), Some(0.0));
        h.insert(
            "retry-after",
            "Fri, 01 Jan 9999 00:00:00 GMT".parse().unwrap(),
        );
        assert!(retry_after(&h).unwrap() > 365.0 * 86_400.0);
        assert_eq!(
            http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(http_date("Sunday, 06-Nov-94 08:49:37 GMT"), None);
    }

    #[test]
    fn waits_read_as_a_person_reads_them() {
        assert_eq!(human_wait(45.0), "45 s");
        assert_eq!(human_wait(600.0), "10 min");
        assert_eq!(human_wait(3600.0), "1 h");
        assert_eq!(human_wait(5400.0), "1.5 h");
        assert_eq!(human_wait(172_800.0), "48 h");
        assert_eq!(human_wait(1e300), "more than a year");
    }
}
