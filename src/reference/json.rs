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
///
/// By bytes, not characters: a character past ASCII is written as it is, so its bytes count
/// once each; only ASCII bytes grow (a two-byte escape adds one, a `\u00XX` adds five). Eight
/// bytes at a time are passed over while none of them is a control, `"`, `\\` or `<`.
pub fn tag_safe_string_len(text: &str) -> usize {
    let bytes = text.as_bytes();
    let mut extra = 0;
    let (words, rest) = bytes.as_chunks::<8>();
    for word in words {
        if plain_word(u64::from_le_bytes(*word)) {
            continue;
        }
        extra += word
            .iter()
            .map(|&b| GROWTH[usize::from(b)] as usize)
            .sum::<usize>();
    }
    extra += rest
        .iter()
        .map(|&b| GROWTH[usize::from(b)] as usize)
        .sum::<usize>();
    2 + bytes.len() + extra // the quotes, every byte, the escapes' growth
}

/// How many bytes an ASCII byte grows by when written in a tag-safe JSON string.
const GROWTH: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = 5; // \u00XX
        b += 1;
    }
    let short = [0x08, 0x0c, b'\n', b'\r', b'\t', b'"', b'\\'];
    let mut i = 0;
    while i < short.len() {
        table[short[i] as usize] = 1; // a two-byte escape
        i += 1;
    }
    table[b'<' as usize] = 5; // \u003c
    table
};

/// Whether none of the eight bytes of `word` grows: no byte below 0x20, and none equal to `"`,
/// `\\` or `<` (bytes from 0x80 never grow).
fn plain_word(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // A byte b < n (n <= 0x80) sets its high bit in (b - n) & !b; others never do.
    let below = |n: u64| word.wrapping_sub(ONES * n) & !word & HIGHS;
    let equal = |c: u64| {
        let x = word ^ (ONES * c);
        x.wrapping_sub(ONES) & !x & HIGHS
    };
    (below(0x20) | equal(u64::from(b'"')) | equal(u64::from(b'\\')) | equal(u64::from(b'<'))) == 0
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
        // Every byte that grows, at every place in an eight-byte word, among bytes that do not.
        let pieces = [
            "a", "é", "😀", "<", "\"", "\\", "\n", "\u{0}", "\u{1f}", "\u{7f}", " ", "~", ">",
        ];
        let mut seed = 7u64;
        for _ in 0..4000 {
            let mut text = String::new();
            for _ in 0..(seed % 40) {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                text.push_str(pieces[(seed >> 33) as usize % pieces.len()]);
            }
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            assert_eq!(
                tag_safe_string_len(&text),
                tag_safe(string_literal(&text)).len(),
                "{text:?}"
            );
        }
    }
}
