//! JSON text exactly as ECMAScript `JSON.stringify` writes it, plus the tag-safe variant used
//! inside `<referenced-sessions>` (SPEC §2, §3.7).
//!
//! serde_json's compact writer already escapes strings the way `JSON.stringify` does (short
//! forms, lowercase `\u00xx` for other C0 controls, everything else raw), and with
//! `preserve_order` objects keep insertion order, so these helpers only fix the framing rules and
//! give byte-length arithmetic that retention needs without re-serializing whole objects.

use serde::Serialize;

/// Compact `JSON.stringify`-compatible text of `value`.
pub fn stringify<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).expect("reference JSON values always serialize")
}

/// A JSON string literal for `text`, `JSON.stringify`-compatible.
pub fn string_literal(text: &str) -> String {
    stringify(text)
}

/// Replaces every `<` of a JSON text by `\u003c`.
///
/// In JSON text a `<` can only occur inside a string literal, where `\u003c` means the same
/// character, so the value is unchanged while no framing tag can be spelled.
pub fn tag_safe(json: String) -> String {
    if json.contains('<') {
        json.replace('<', "\\u003c")
    } else {
        json
    }
}

/// Tag-safe compact JSON text of `value`.
pub fn stringify_tag_safe<T: Serialize + ?Sized>(value: &T) -> String {
    tag_safe(stringify(value))
}

/// Byte length of `tag_safe(string_literal(text))`, computed without allocating.
pub fn tag_safe_string_len(text: &str) -> usize {
    let mut len = 2; // the quotes
    for ch in text.chars() {
        len += match ch {
            '"' | '\\' | '\u{8}' | '\u{c}' | '\n' | '\r' | '\t' => 2,
            '\u{0}'..='\u{1f}' | '<' => 6,
            other => other.len_utf8(),
        };
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_json_stringify() {
        assert_eq!(
            string_literal("q\"b\\\u{8}\u{c}\n\r\t\u{0}\u{1f}\u{7f}/é\u{2028}😀<"),
            "\"q\\\"b\\\\\\b\\f\\n\\r\\t\\u0000\\u001f\u{7f}/é\u{2028}😀<\""
        );
    }

    #[test]
    fn tag_safe_escapes_only_less_than() {
        let text = "</referenced-sessions> <x>";
        let json = tag_safe(string_literal(text));
        assert_eq!(json, "\"\\u003c/referenced-sessions> \\u003cx>\"");
        assert!(!json.contains('<'));
        assert_eq!(serde_json::from_str::<String>(&json).unwrap(), text);
    }

    #[test]
    fn predicted_length_matches_serialization() {
        for text in [
            "",
            "plain",
            "<<>>",
            "\u{0}\u{1}\u{1f}\u{7f}",
            "\"\\\n\t",
            "é😀\u{2028}",
        ] {
            assert_eq!(
                tag_safe_string_len(text),
                tag_safe(string_literal(text)).len(),
                "{text:?}"
            );
        }
    }
}
