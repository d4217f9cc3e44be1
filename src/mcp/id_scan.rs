//! The id of a JSON-RPC line that does not parse, found without parsing it (`wire`'s fallback).
//!
//! Purpose: a request that serde cannot read (not UTF-8, a lone surrogate, nested too deep,
//! longer than the line bound) still deserves its answer by id, so the wire scans the bytes for
//! the top-level `"id"` as they stream past.
//!
//! Invariant: one pass over the bytes, constant memory (an id longer than [`IdScan::MAX_ID`]
//! bytes is not kept); only an `id` key at depth one counts, never one inside `params` or inside
//! a string; only a JSON string or number is returned.
//! Proof: the test below (ids before and after other keys, nested and quoted decoys, a number at
//! the end of the input, an overlong id) and `tests/mcp/wire.rs` against the real binary.

use serde_json::Value;

/// Finds the value of a JSON object's top-level `"id"` in bytes fed in pieces, without parsing
/// the rest: one pass, constant memory (an id longer than [`IdScan::MAX_ID`] bytes is not kept).
#[derive(Debug, Default)]
pub struct IdScan {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// The current depth-1 string (a key or a value), while it is short.
    text: Vec<u8>,
    text_too_long: bool,
    /// The last depth-1 string was the key `id` and a `:` followed it.
    want_value: bool,
    last_key_is_id: bool,
    /// The raw bytes of the id's value while it is being read.
    value: Vec<u8>,
    reading_value: bool,
    found: Option<Vec<u8>>,
}

impl IdScan {
    /// The longest id kept.
    pub const MAX_ID: usize = 256;

    /// Feeds the next bytes of the line.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.found.is_some() {
                return;
            }
            self.step(b);
        }
    }

    fn step(&mut self, b: u8) {
        if self.reading_value {
            self.value_byte(b);
            return;
        }
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if self.depth == 1 {
                    self.last_key_is_id = !self.text_too_long && self.text == b"id";
                }
                return;
            }
            if self.depth == 1 && !self.text_too_long {
                if self.text.len() >= 8 {
                    self.text_too_long = true;
                } else {
                    self.text.push(b);
                }
            }
            return;
        }
        if self.want_value {
            if b.is_ascii_whitespace() {
                return;
            }
            self.want_value = false;
            match b {
                b'"' | b'-' | b'0'..=b'9' | b'a'..=b'z' => {
                    self.reading_value = true;
                    self.escaped = false;
                    self.value.clear();
                    self.value.push(b);
                    return;
                }
                // An object or array id is no id; read on.
                _ => {}
            }
        }
        match b {
            b'"' => {
                self.in_string = true;
                self.text.clear();
                self.text_too_long = false;
            }
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b':' => {
                self.want_value = self.depth == 1 && self.last_key_is_id;
                self.last_key_is_id = false;
            }
            b if b.is_ascii_whitespace() => {}
            _ => self.last_key_is_id = false,
        }
    }

    fn value_byte(&mut self, b: u8) {
        if self.value.len() > Self::MAX_ID {
            // Too long to be an id worth echoing: read on as if there were none (inside the
            // string still, when it is one).
            self.reading_value = false;
            self.in_string = self.value[0] == b'"';
            self.text_too_long = true;
            self.value.clear();
            return;
        }
        if self.value[0] == b'"' {
            self.value.push(b);
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.finish();
            }
        } else if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.') {
            self.value.push(b);
        } else {
            self.finish();
        }
    }

    fn finish(&mut self) {
        self.reading_value = false;
        self.found = Some(std::mem::take(&mut self.value));
    }

    /// The id, when one was read whole and is a JSON string, number or null.
    pub fn id(&mut self) -> Option<Value> {
        if self.reading_value && self.value.first().is_some_and(|b| *b != b'"') {
            // A number at the very end of the input.
            self.finish();
        }
        let raw = self.found.as_ref()?;
        match serde_json::from_slice::<Value>(raw) {
            Ok(value @ (Value::String(_) | Value::Number(_))) => Some(value),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_id_scan_finds_top_level_ids_only() {
        let id = |text: &str| {
            let mut scan = IdScan::default();
            for piece in text.as_bytes().chunks(3) {
                scan.feed(piece);
            }
            scan.id()
        };
        assert_eq!(id(r#"{"id":5}"#), Some(json!(5)));
        assert_eq!(id(r#"{"a":{"id":1},"id":"b\"c"}"#), Some(json!("b\"c")));
        assert_eq!(id(r#"{"params":{"id":3}}"#), None);
        assert_eq!(id(r#"{"x":"\"id\":4","id" : -12 }"#), Some(json!(-12)));
        assert_eq!(id(r#"{"id":null}"#), None);
        assert_eq!(id(r#"{"id":5"#), Some(json!(5)));
        assert_eq!(id(&format!(r#"{{"id":"{}"}}"#, "x".repeat(1000))), None);
    }
}
