//! Server-sent events framing (the WHATWG `text/event-stream` rules the OpenAI-compatible
//! provider needs): bytes in, the `data` of each complete event out.
//!
//! Purpose: a model server decides how its bytes arrive, so the framing must cost the same
//! whatever it sends. A line that never ends, or a hundred megabytes without a newline, must not
//! be rescanned on every chunk, and must not be held without limit.
//!
//! Invariant: every byte is looked at once — the buffer only ever holds the unfinished line, and
//! a chunk is searched for a line end only from where it starts, so pushing `n` bytes costs
//! `O(n)` however they are split — and neither the unfinished line nor an event's `data` ever
//! holds more than the limit: the push that would pass it fails with
//! [`SseError::LineTooLong`] or [`SseError::EventTooLarge`]. Lines end at `\n`, `\r\n` or a lone
//! `\r` (a `\r\n` split between two chunks counts once); `:` lines are comments; a field line
//! without a colon is a field with an empty value; one space after the colon is dropped; `data`
//! lines of one event join with `\n`; an empty line ends the event, and an event without `data`
//! is not reported; fields other than `data` are ignored (the provider needs none). A UTF-8 BOM
//! at the very start is skipped.
//!
//! Proof: the unit tests below (every split of a sample stream gives the same events; the
//! limits; the cost of a long line stays linear), and `tests/agent/provider_openai.rs`, which
//! feeds it a never-ending line from a loopback server.

/// Why the stream cannot be framed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A line passed the limit without ending.
    #[error("an event line went past {0} bytes without ending")]
    LineTooLong(usize),
    /// The `data` of one event passed the limit.
    #[error("one event's data went past {0} bytes")]
    EventTooLarge(usize),
    /// An event's `data` is not UTF-8.
    #[error("an event's data is not UTF-8")]
    NotUtf8,
}

/// Incremental SSE framing; see the module doc.
#[derive(Debug)]
pub struct SseParser {
    /// The unfinished line (its bytes so far, no line end).
    line: Vec<u8>,
    /// The `data` of the event being read.
    data: Vec<u8>,
    /// The event being read has at least one `data` line.
    has_data: bool,
    /// The last line ended with `\r`: a `\n` that comes next belongs to it.
    after_cr: bool,
    /// The first bytes of the stream, until they tell whether it starts with a BOM.
    head: Vec<u8>,
    /// The start of the stream has been checked for a BOM.
    bom_checked: bool,
    /// The most bytes a line, and an event's data, may hold.
    limit: usize,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl SseParser {
    /// A parser whose lines and events hold at most `limit` bytes.
    pub fn new(limit: usize) -> SseParser {
        SseParser {
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            after_cr: false,
            head: Vec::new(),
            bom_checked: false,
            limit,
        }
    }

    /// Whether the bytes so far end inside an event (an unfinished line, or `data` lines not yet
    /// closed by an empty line): a stream that stops here was cut in the middle of an event.
    pub fn in_event(&self) -> bool {
        !self.line.is_empty() || self.has_data
    }

    /// Feeds `chunk`; appends the `data` of every event it completes to `events`.
    pub fn push(&mut self, mut chunk: &[u8], events: &mut Vec<String>) -> Result<(), SseError> {
        if !self.bom_checked {
            // The first three bytes decide whether the stream starts with a BOM; they may come
            // split over several chunks.
            let take = (BOM.len() - self.head.len()).min(chunk.len());
            self.head.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
            if self.head.len() < BOM.len() && BOM.starts_with(&self.head) {
                return Ok(());
            }
            self.bom_checked = true;
            let head = std::mem::take(&mut self.head);
            if head != BOM {
                self.feed(&head, events)?;
            }
        }
        self.feed(chunk, events)
    }

    fn feed(&mut self, mut chunk: &[u8], events: &mut Vec<String>) -> Result<(), SseError> {
        if self.after_cr && !chunk.is_empty() {
            self.after_cr = false;
            if chunk[0] == b'\n' {
                chunk = &chunk[1..];
            }
        }
        while let Some(end) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
            let cr = chunk[end] == b'\r';
            if self.line.is_empty() {
                self.line_done(&chunk[..end], events)?;
            } else {
                if self.line.len() + end > self.limit {
                    return Err(SseError::LineTooLong(self.limit));
                }
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(&chunk[..end]);
                self.line_done(&line, events)?;
                line.clear();
                self.line = line;
            }
            chunk = &chunk[end + 1..];
            if cr {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        if self.line.len() + chunk.len() > self.limit {
            return Err(SseError::LineTooLong(self.limit));
        }
        self.line.extend_from_slice(chunk);
        Ok(())
    }

    fn line_done(&mut self, line: &[u8], events: &mut Vec<String>) -> Result<(), SseError> {
        if line.is_empty() {
            if self.has_data {
                let data = std::mem::take(&mut self.data);
                self.has_data = false;
                events.push(String::from_utf8(data).map_err(|_| SseError::NotUtf8)?);
            }
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        if field != b"data" {
            return Ok(());
        }
        let extra = usize::from(self.has_data);
        if self.data.len() + extra + value.len() > self.limit {
            return Err(SseError::EventTooLarge(self.limit));
        }
        if self.has_data {
            self.data.push(b'\n');
        }
        self.data.extend_from_slice(value);
        self.has_data = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(parser: &mut SseParser, chunks: &[&[u8]]) -> Result<Vec<String>, SseError> {
        let mut out = Vec::new();
        for chunk in chunks {
            parser.push(chunk, &mut out)?;
        }
        Ok(out)
    }

    const SAMPLE: &[u8] = b"\xEF\xBB\xBF: keep-alive\r\n\r\ndata: {\"a\":1}\n\nevent: x\ndata:two\r\ndata:  lines\r\rid: 7\nretry: 10\ndata\n\ndata: \xC3\xA9\n\n:tail\n";

    fn expected() -> Vec<String> {
        vec![
            "{\"a\":1}".to_string(),
            "two\n lines".to_string(),
            String::new(),
            "é".to_string(),
        ]
    }

    #[test]
    fn frames_events_whatever_the_split() {
        let whole = all(&mut SseParser::new(1024), &[SAMPLE]).unwrap();
        assert_eq!(whole, expected());
        for at in 0..=SAMPLE.len() {
            let mut p = SseParser::new(1024);
            let got = all(&mut p, &[&SAMPLE[..at], &SAMPLE[at..]]).unwrap();
            assert_eq!(got, expected(), "split at {at}");
            assert!(!p.in_event());
        }
        let mut p = SseParser::new(1024);
        let bytes: Vec<&[u8]> = SAMPLE.chunks(1).collect();
        assert_eq!(all(&mut p, &bytes).unwrap(), expected());
    }

    #[test]
    fn knows_when_it_stopped_inside_an_event() {
        let mut p = SseParser::new(64);
        all(&mut p, &[b"data: {\"a\""]).unwrap();
        assert!(p.in_event());
        let mut p = SseParser::new(64);
        all(&mut p, &[b"data: x\n"]).unwrap();
        assert!(p.in_event());
        let mut p = SseParser::new(64);
        all(&mut p, &[b"data: x\n\n: ping\n"]).unwrap();
        assert!(!p.in_event());
    }

    #[test]
    fn a_line_or_an_event_past_the_limit_fails() {
        let mut p = SseParser::new(16);
        assert_eq!(
            all(&mut p, &[b"data: 0123456789", b"abc"]),
            Err(SseError::LineTooLong(16))
        );
        let mut p = SseParser::new(16);
        assert_eq!(
            all(&mut p, &[b"data: 0123456789abcdef\n"]),
            Err(SseError::LineTooLong(16))
        );
        let mut p = SseParser::new(16);
        assert_eq!(
            all(&mut p, &[b"data: 01234567\ndata: 89abcdef\n"]),
            Err(SseError::EventTooLarge(16))
        );
        let mut p = SseParser::new(16);
        assert_eq!(all(&mut p, &[b"data: \xFF\n\n"]), Err(SseError::NotUtf8));
        // Exactly at the limit is fine.
        let mut p = SseParser::new(16);
        assert_eq!(
            all(&mut p, &[b"data: 0123456789\n\n"]).unwrap(),
            ["0123456789"]
        );
    }

    /// A long line fed in small chunks costs linear time: 16 MiB in 1 KiB pushes. Were every
    /// push to rescan the unfinished line, this would touch 2^37 bytes (minutes, and more in a
    /// debug build); scanned once, it takes well under a second.
    #[test]
    fn a_long_line_in_small_chunks_is_scanned_once() {
        let mut p = SseParser::new(64 * 1024 * 1024);
        let mut out = Vec::new();
        p.push(b"data: ", &mut out).unwrap();
        let chunk = vec![b'x'; 1024];
        for _ in 0..16 * 1024 {
            p.push(&chunk, &mut out).unwrap();
        }
        p.push(b"\n\n", &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].len(), 16 * 1024 * 1024);
    }
}
