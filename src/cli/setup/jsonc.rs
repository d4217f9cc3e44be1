//! Text edits of a JSON or JSONC file (comments, trailing commas) that leave every byte outside
//! the edited member as it was: set or remove the member `NAME` of the object at `CONTAINER` in
//! the root object.
//!
//! Invariant: the edit touches only the entry's own lines, the comma that separates it from its
//! neighbour and, when the container is missing, the lines of the new container; an insertion
//! followed by a removal gives the original text back byte for byte (when the object had no
//! trailing comma, the common case; otherwise up to that comma's place).
//!
//! Proof: the unit tests below (round trips with comments, trailing commas, one-line and empty
//! objects, a missing container, a missing file) and `tests/cli/mcp_setup.rs` over the hosts'
//! files.

use serde_json::Value;

/// A parse error: the byte offset and what was expected.
#[derive(Debug)]
pub struct SyntaxError {
    /// Byte offset into the text.
    pub at: usize,
    /// What the parser expected there.
    pub expected: &'static str,
}

impl std::fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "expected {} at byte {}", self.expected, self.at)
    }
}

/// Why an edit was refused.
#[derive(Debug)]
pub enum EditError {
    /// The file is not JSON (with comments).
    Syntax(SyntaxError),
    /// The root, or the container, is not an object.
    NotAnObject(String),
}

impl std::fmt::Display for EditError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EditError::Syntax(e) => write!(f, "not JSON: {e}"),
            EditError::NotAnObject(what) => write!(f, "{what} is not an object"),
        }
    }
}

struct Member {
    key: String,
    key_start: usize,
    value: Node,
    /// Where the comma after the value is, if one follows.
    comma: Option<usize>,
}

enum Node {
    Object {
        open: usize,
        close: usize,
        members: Vec<Member>,
    },
    Other {
        end: usize,
    },
}

impl Node {
    fn end(&self) -> usize {
        match self {
            Node::Object { close, .. } => close + 1,
            Node::Other { end } => *end,
        }
    }
}

struct Parser<'a> {
    text: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, expected: &'static str) -> SyntaxError {
        SyntaxError {
            at: self.pos,
            expected,
        }
    }

    /// Skips whitespace, `// …` and `/* … */`.
    fn skip(&mut self) -> Result<(), SyntaxError> {
        loop {
            match self.text.get(self.pos..self.pos + 2) {
                Some(b"//") => {
                    while self.pos < self.text.len() && self.text[self.pos] != b'\n' {
                        self.pos += 1;
                    }
                }
                Some(b"/*") => {
                    let rest = &self.text[self.pos + 2..];
                    let end = rest
                        .windows(2)
                        .position(|w| w == b"*/")
                        .ok_or_else(|| self.error("the end of a comment"))?;
                    self.pos += 2 + end + 2;
                }
                _ => match self.text.get(self.pos) {
                    Some(b' ' | b'\t' | b'\r' | b'\n') => self.pos += 1,
                    _ => return Ok(()),
                },
            }
        }
    }

    fn string(&mut self) -> Result<String, SyntaxError> {
        let start = self.pos;
        if self.text.get(self.pos) != Some(&b'"') {
            return Err(self.error("a string"));
        }
        self.pos += 1;
        loop {
            match self.text.get(self.pos) {
                None => return Err(self.error("the end of a string")),
                Some(b'\\') => self.pos += 2,
                Some(b'"') => {
                    self.pos += 1;
                    break;
                }
                Some(_) => self.pos += 1,
            }
        }
        let raw = std::str::from_utf8(&self.text[start..self.pos])
            .map_err(|_| self.error("UTF-8 text"))?;
        serde_json::from_str(raw).map_err(|_| SyntaxError {
            at: start,
            expected: "a valid string",
        })
    }

    fn value(&mut self) -> Result<Node, SyntaxError> {
        match self.text.get(self.pos) {
            Some(b'{') => self.object(),
            Some(b'[') => {
                self.pos += 1;
                loop {
                    self.skip()?;
                    if self.text.get(self.pos) == Some(&b']') {
                        self.pos += 1;
                        return Ok(Node::Other { end: self.pos });
                    }
                    self.value()?;
                    self.skip()?;
                    match self.text.get(self.pos) {
                        Some(b',') => self.pos += 1,
                        Some(b']') => {}
                        _ => return Err(self.error("`,` or `]`")),
                    }
                }
            }
            Some(b'"') => {
                self.string()?;
                Ok(Node::Other { end: self.pos })
            }
            Some(_) => {
                let start = self.pos;
                while let Some(&b) = self.text.get(self.pos) {
                    if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.') {
                        self.pos += 1;
                    } else {
                        break;
                    }
                }
                let word = &self.text[start..self.pos];
                let number = word
                    .first()
                    .is_some_and(|b| b.is_ascii_digit() || *b == b'-');
                if matches!(word, b"true" | b"false" | b"null") || number {
                    Ok(Node::Other { end: self.pos })
                } else {
                    self.pos = start;
                    Err(self.error("a value"))
                }
            }
            None => Err(self.error("a value")),
        }
    }

    fn object(&mut self) -> Result<Node, SyntaxError> {
        let open = self.pos;
        self.pos += 1;
        let mut members = Vec::new();
        loop {
            self.skip()?;
            if self.text.get(self.pos) == Some(&b'}') {
                self.pos += 1;
                return Ok(Node::Object {
                    open,
                    close: self.pos - 1,
                    members,
                });
            }
            let key_start = self.pos;
            let key = self.string()?;
            self.skip()?;
            if self.text.get(self.pos) != Some(&b':') {
                return Err(self.error("`:`"));
            }
            self.pos += 1;
            self.skip()?;
            let value = self.value()?;
            self.skip()?;
            let comma = match self.text.get(self.pos) {
                Some(b',') => {
                    self.pos += 1;
                    Some(self.pos - 1)
                }
                Some(b'}') => None,
                _ => return Err(self.error("`,` or `}`")),
            };
            members.push(Member {
                key,
                key_start,
                value,
                comma,
            });
        }
    }
}

fn parse(text: &str) -> Result<Node, SyntaxError> {
    let mut parser = Parser {
        text: text.as_bytes(),
        pos: 0,
    };
    if text.starts_with('\u{feff}') {
        parser.pos = 3;
    }
    parser.skip()?;
    let root = parser.value()?;
    parser.skip()?;
    if parser.pos != text.len() {
        return Err(parser.error("the end of the file"));
    }
    Ok(root)
}

/// The member called `key` (the last one, as JSON parsers take duplicates).
fn find<'a>(members: &'a [Member], key: &str) -> Option<(usize, &'a Member)> {
    members.iter().enumerate().rev().find(|(_, m)| m.key == key)
}

fn line_start(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |i| i + 1)
}

/// The whitespace that starts the line holding `at`, if only whitespace comes before `at` on it.
fn indent_before(text: &str, at: usize) -> Option<&str> {
    let start = line_start(text, at);
    let lead = &text[start..at];
    lead.chars().all(|c| c == ' ' || c == '\t').then_some(lead)
}

/// The file's indentation unit: that of the root object's first member, else two spaces.
fn unit(text: &str, root: &Node) -> String {
    if let Node::Object { members, .. } = root {
        if let Some(first) = members.first() {
            if let Some(lead) = indent_before(text, first.key_start) {
                if !lead.is_empty() {
                    return lead.to_string();
                }
            }
        }
    }
    "  ".to_string()
}

/// `value` pretty-printed with `unit`, its lines after the first indented by `indent`.
fn render(value: &Value, unit: &str, indent: &str) -> String {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(unit.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    serde::Serialize::serialize(value, &mut ser).expect("a JSON value serializes");
    let text = String::from_utf8(out).expect("serde_json writes UTF-8");
    text.replace('\n', &format!("\n{indent}"))
}

fn member_text(key: &str, value: &Value, unit: &str, indent: &str) -> String {
    format!(
        "{}: {}",
        Value::String(key.to_string()),
        render(value, unit, indent)
    )
}

/// Past the spaces, tabs and comments that follow `at` on its line (where a new line may go).
fn end_of_line_tail(text: &str, mut at: usize) -> usize {
    let bytes = text.as_bytes();
    loop {
        while matches!(bytes.get(at), Some(b' ' | b'\t')) {
            at += 1;
        }
        match bytes.get(at..at + 2) {
            Some(b"//") => {
                while at < bytes.len() && bytes[at] != b'\n' && bytes[at] != b'\r' {
                    at += 1;
                }
                return at;
            }
            Some(b"/*") => match text[at + 2..].find("*/") {
                Some(end) if !text[at..at + 2 + end].contains('\n') => at += 2 + end + 2,
                _ => return at,
            },
            _ => return at,
        }
    }
}

/// Inserts member `key: value` at the end of the object `node`.
fn insert(text: &str, node: &Node, key: &str, value: &Value, unit_: &str) -> String {
    let Node::Object {
        open,
        close,
        members,
    } = node
    else {
        unreachable!("insert is called on objects only")
    };
    // The indentation of the line the object opens on.
    let object_indent: String = text[line_start(text, *open)..]
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect();
    match members.last() {
        None => {
            let indent = format!("{object_indent}{unit_}");
            let member = member_text(key, value, unit_, &indent);
            let inside = &text[open + 1..*close];
            let mut out = String::with_capacity(text.len() + member.len() + 8);
            out.push_str(&text[..=*open]);
            if inside.trim().is_empty() {
                out.push_str(&format!("\n{indent}{member}\n{object_indent}"));
            } else {
                out.push_str(&format!("\n{indent}{member}"));
                out.push_str(inside);
            }
            out.push_str(&text[*close..]);
            out
        }
        Some(last) => {
            let indent = members
                .first()
                .and_then(|m| indent_before(text, m.key_start))
                .map(str::to_string);
            let one_line = indent.is_none();
            let indent = indent.unwrap_or_else(|| format!("{object_indent}{unit_}"));
            let member = member_text(key, value, unit_, &indent);
            let mut out = String::with_capacity(text.len() + member.len() + 8);
            if one_line {
                // `{"a": 1}`: the new member goes on the same line.
                let at = last.comma.map_or(last.value.end(), |c| c + 1);
                let compact = format!("{}: {value}", Value::String(key.to_string()));
                out.push_str(&text[..at]);
                if last.comma.is_some() {
                    out.push_str(&format!(" {compact},"));
                } else {
                    out.push_str(&format!(", {compact}"));
                }
                out.push_str(&text[at..]);
                return out;
            }
            match last.comma {
                Some(comma) => {
                    let at = end_of_line_tail(text, comma + 1);
                    out.push_str(&text[..at]);
                    out.push_str(&format!("\n{indent}{member},"));
                    out.push_str(&text[at..]);
                }
                None => {
                    let value_end = last.value.end();
                    let at = end_of_line_tail(text, value_end);
                    out.push_str(&text[..value_end]);
                    out.push(',');
                    out.push_str(&text[value_end..at]);
                    out.push_str(&format!("\n{indent}{member}"));
                    out.push_str(&text[at..]);
                }
            }
            out
        }
    }
}

/// `text` with the member `name` of the object `container` set to `value` (replaced whole when
/// present, added at the end otherwise, the container added to the root when missing). An empty
/// or blank text is a new file.
pub fn set(text: &str, container: &str, name: &str, value: &Value) -> Result<String, EditError> {
    if text.trim().is_empty() {
        let mut inner = serde_json::Map::new();
        inner.insert(name.to_string(), value.clone());
        let mut root = serde_json::Map::new();
        root.insert(container.to_string(), Value::Object(inner));
        return Ok(render(&Value::Object(root), "  ", "") + "\n");
    }
    let root = parse(text).map_err(EditError::Syntax)?;
    let unit_ = unit(text, &root);
    let Node::Object { members, .. } = &root else {
        return Err(EditError::NotAnObject("the file's top level".into()));
    };
    let Some((_, holder)) = find(members, container) else {
        let mut inner = serde_json::Map::new();
        inner.insert(name.to_string(), value.clone());
        return Ok(insert(
            text,
            &root,
            container,
            &Value::Object(inner),
            &unit_,
        ));
    };
    let Node::Object {
        members: entries, ..
    } = &holder.value
    else {
        return Err(EditError::NotAnObject(format!("`{container}`")));
    };
    match find(entries, name) {
        Some((_, entry)) => {
            let value_start = value_start(text, entry);
            let rendered = match indent_before(text, entry.key_start) {
                Some(indent) => render(value, &unit_, indent),
                // On a line with others: kept on one line.
                None => value.to_string(),
            };
            let mut out = String::with_capacity(text.len());
            out.push_str(&text[..value_start]);
            out.push_str(&rendered);
            out.push_str(&text[entry.value.end()..]);
            Ok(out)
        }
        None => Ok(insert(text, &holder.value, name, value, &unit_)),
    }
}

/// Where a member's value starts (past the key, the colon and any comment).
fn value_start(text: &str, member: &Member) -> usize {
    let mut parser = Parser {
        text: text.as_bytes(),
        pos: member.key_start,
    };
    parser.string().expect("parsed before");
    parser.skip().expect("parsed before");
    parser.pos += 1; // the colon
    parser.skip().expect("parsed before");
    parser.pos
}

/// `text` without the member `name` of the object `container`; `None` when there is none.
pub fn remove(text: &str, container: &str, name: &str) -> Result<Option<String>, EditError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let root = parse(text).map_err(EditError::Syntax)?;
    let Node::Object { members, .. } = &root else {
        return Err(EditError::NotAnObject("the file's top level".into()));
    };
    let Some((_, holder)) = find(members, container) else {
        return Ok(None);
    };
    let Node::Object {
        members: entries, ..
    } = &holder.value
    else {
        return Ok(None);
    };
    let Some((index, _)) = find(entries, name) else {
        return Ok(None);
    };
    // Our entry alone in its container: the container goes with it (as `set` added it).
    if entries.len() == 1 {
        let (holder_index, _) = find(members, container).expect("found above");
        return Ok(Some(remove_member(text, members, holder_index)));
    }
    Ok(Some(remove_member(text, entries, index)))
}

/// `text` without `members[index]`: the member with its own comma, its whole line(s) when only
/// comments follow it there; the last member takes its neighbour's comma instead.
fn remove_member(text: &str, members: &[Member], index: usize) -> String {
    let entry = &members[index];
    let mut start = entry.key_start;
    let mut end = entry.comma.map_or(entry.value.end(), |c| c + 1);
    if indent_before(text, start).is_some() {
        let tail = end_of_line_tail(text, end);
        if text[tail..].starts_with('\n') {
            start = line_start(text, start);
            end = tail + 1;
        } else if text[tail..].starts_with("\r\n") {
            start = line_start(text, start);
            end = tail + 2;
        }
    } else {
        // On a line with others (`{"a": 1, "dsh-refs": {…}}`): the space before it goes too.
        while start > 0 && matches!(text.as_bytes()[start - 1], b' ' | b'\t') {
            start -= 1;
        }
    }
    let previous_comma = match (entry.comma, index.checked_sub(1)) {
        (None, Some(before)) => members[before].comma,
        _ => None,
    };
    let mut out = String::with_capacity(text.len());
    match previous_comma {
        Some(comma) => {
            out.push_str(&text[..comma]);
            out.push_str(&text[comma + 1..start]);
        }
        None => out.push_str(&text[..start]),
    }
    out.push_str(&text[end..]);
    out
}

/// The text's value with comments and trailing commas ignored (what the tests compare).
#[cfg(test)]
pub fn value(text: &str) -> Result<Value, EditError> {
    parse(text).map_err(EditError::Syntax)?;
    // Blank out comments and trailing commas, then read it as JSON.
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = if text.starts_with('\u{feff}') { 3 } else { 0 };
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.extend_from_slice(&bytes[start..i.min(bytes.len())]);
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let end = text[i + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |e| i + 2 + e + 2);
                out.push(b' ');
                i = end;
            }
            b',' => {
                let mut j = i + 1;
                let mut probe = Parser {
                    text: bytes,
                    pos: j,
                };
                if probe.skip().is_ok() {
                    j = probe.pos;
                }
                if !matches!(bytes.get(j), Some(b'}' | b']')) {
                    out.push(b',');
                }
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    serde_json::from_slice(&out).map_err(|_| {
        EditError::Syntax(SyntaxError {
            at: 0,
            expected: "JSON",
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry() -> Value {
        json!({"command": "/opt/bin/dsh-refs", "args": ["mcp"]})
    }

    fn round_trip(original: &str) -> String {
        let added = set(original, "mcpServers", "dsh-refs", &entry()).unwrap();
        let read = value(&added).unwrap();
        assert_eq!(read["mcpServers"]["dsh-refs"], entry(), "{added}");
        // Setting again changes nothing.
        assert_eq!(
            set(&added, "mcpServers", "dsh-refs", &entry()).unwrap(),
            added
        );
        let removed = remove(&added, "mcpServers", "dsh-refs").unwrap().unwrap();
        assert!(remove(&removed, "mcpServers", "dsh-refs")
            .unwrap()
            .is_none());
        assert_eq!(
            removed, original,
            "the removal did not give the original back"
        );
        added
    }

    #[test]
    fn a_new_file() {
        let text = set("", "mcpServers", "dsh-refs", &entry()).unwrap();
        assert_eq!(
            text,
            "{\n  \"mcpServers\": {\n    \"dsh-refs\": {\n      \"command\": \"/opt/bin/dsh-refs\",\n      \"args\": [\n        \"mcp\"\n      ]\n    }\n  }\n}\n"
        );
    }

    #[test]
    fn comments_order_and_other_servers_stay() {
        let original = "// my settings\n{\n    \"theme\": \"dark\", // kept\n    /* servers */\n    \"mcpServers\": {\n        \"other\": {\"command\": \"x\"} // theirs\n    },\n    \"z\": [1, 2]\n}\n";
        let added = round_trip(original);
        assert!(added.starts_with("// my settings\n{\n    \"theme\": \"dark\", // kept\n    /* servers */\n    \"mcpServers\": {\n        \"other\": {\"command\": \"x\"}, // theirs\n        \"dsh-refs\": {\n            \"command\""), "{added}");
        assert!(
            added.ends_with("        }\n    },\n    \"z\": [1, 2]\n}\n"),
            "{added}"
        );
    }

    #[test]
    fn a_missing_container_goes_last_in_the_root() {
        let original = "{\n  \"theme\": \"dark\"\n}\n";
        let added = round_trip(original);
        assert!(
            added
                .starts_with("{\n  \"theme\": \"dark\",\n  \"mcpServers\": {\n    \"dsh-refs\": {"),
            "{added}"
        );
    }

    #[test]
    fn trailing_commas_and_empty_objects() {
        let with_trailing = "{\n  \"mcpServers\": {\n    \"a\": {},\n  },\n}\n";
        let added = set(with_trailing, "mcpServers", "dsh-refs", &entry()).unwrap();
        assert_eq!(value(&added).unwrap()["mcpServers"]["dsh-refs"], entry());
        let removed = remove(&added, "mcpServers", "dsh-refs").unwrap().unwrap();
        assert_eq!(removed, with_trailing);
        round_trip("{\"a\": 1}");
        // An empty object is opened onto lines; the removal takes the container that held only
        // our entry, and leaves the lines.
        for original in ["{\n  \"mcpServers\": {}\n}\n", "{}\n"] {
            let added = set(original, "mcpServers", "dsh-refs", &entry()).unwrap();
            assert_eq!(value(&added).unwrap()["mcpServers"]["dsh-refs"], entry());
            let removed = remove(&added, "mcpServers", "dsh-refs").unwrap().unwrap();
            assert_eq!(value(&removed).unwrap(), json!({}), "{removed}");
        }
    }

    #[test]
    fn an_existing_entry_is_replaced_in_place() {
        let original = "{\n  \"mcpServers\": {\n    \"dsh-refs\": {\"command\": \"old\"}, // ours\n    \"b\": 2\n  }\n}\n";
        let replaced = set(original, "mcpServers", "dsh-refs", &entry()).unwrap();
        assert!(replaced.contains("\"args\""), "{replaced}");
        assert!(
            replaced.contains("}, // ours\n    \"b\": 2\n"),
            "{replaced}"
        );
        let removed = remove(&replaced, "mcpServers", "dsh-refs")
            .unwrap()
            .unwrap();
        assert_eq!(removed, "{\n  \"mcpServers\": {\n    \"b\": 2\n  }\n}\n");
    }

    #[test]
    fn not_json_and_not_objects_are_refused() {
        assert!(matches!(
            set("{\"a\": }", "m", "n", &entry()),
            Err(EditError::Syntax(_))
        ));
        assert!(matches!(
            set("[1]", "m", "n", &entry()),
            Err(EditError::NotAnObject(_))
        ));
        assert!(matches!(
            set("{\"m\": 3}", "m", "n", &entry()),
            Err(EditError::NotAnObject(_))
        ));
    }
}
