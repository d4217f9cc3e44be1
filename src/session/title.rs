//! A session's fallback title: the person's own words of its first prompt, with the sessions it
//! referenced named after them (`what was the fix? (re: Fix the flaky tokenizer test)`).
//!
//! Purpose: a prompt that mentions another session reads `@Fix the flaky tokenizer test what was
//! the fix?` once its mentions are rewritten (SPEC §3.7); titled by its first words, every copy
//! would carry the referenced session's label at the front and outrank the original wherever
//! titles are matched. So the labels of the prompt's references are taken out of its words and
//! named after them, and the search side ([`own_words_of_title`]) matches only the words before
//! that suffix.
//!
//! Invariant: a title made here never starts with a referenced label (unless the person typed the
//! label's words themselves), and [`own_words_of_title`] of it gives back exactly its own-words
//! part. Proof: the unit tests below, and `tests/agent` / `tests/discovery` on real logs.

use super::format::{Message, MessageSource};

/// Words of a prompt kept in a title.
const TITLE_WORDS: usize = 6;
/// Characters of the own-words part of a title, at most.
const OWN_CHARS: usize = 60;
/// Characters of one referenced label named in a title, at most.
const LABEL_CHARS: usize = 40;
/// What opens the suffix naming the referenced sessions.
const RE_OPEN: &str = "(re: ";

/// The labels of the session-reference contexts among `contexts` (SPEC §3.9), in order, each
/// once.
pub fn reference_labels<'a>(contexts: impl IntoIterator<Item = &'a Message>) -> Vec<String> {
    let mut labels: Vec<String> = Vec::new();
    for message in contexts {
        if let MessageSource::SessionReference { references, .. } = &message.source {
            for reference in references.as_array().into_iter().flatten() {
                if let Some(label) = reference.get("label").and_then(|l| l.as_str()) {
                    if !label.is_empty() && !labels.iter().any(|l| l == label) {
                        labels.push(label.to_string());
                    }
                }
            }
        }
    }
    labels
}

/// `text` with each `@label` of `labels` taken out (every occurrence), whitespace collapsed to
/// single spaces.
pub fn own_words(text: &str, labels: &[String]) -> String {
    let mut rest = text.to_string();
    // Longest first, so a label that extends another is taken out whole.
    let mut sorted: Vec<&String> = labels.iter().collect();
    sorted.sort_by_key(|l| std::cmp::Reverse(l.len()));
    for label in sorted {
        let mention = format!("@{label}");
        rest = rest.replace(&mention, " ");
    }
    rest.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The title of a first prompt `text` whose references carry `labels`: its first words, then
/// `(re: L1, L2)`. `None` when there is nothing to title it by.
pub fn prompt_title(text: &str, labels: &[String]) -> Option<String> {
    let own = own_words(text, labels);
    let words: Vec<&str> = own.split_whitespace().take(TITLE_WORDS).collect();
    let mut title = cut(&words.join(" "), OWN_CHARS);
    let named: Vec<String> = labels
        .iter()
        .map(|l| {
            cut(
                &l.split_whitespace().collect::<Vec<_>>().join(" "),
                LABEL_CHARS,
            )
        })
        .filter(|l| !l.is_empty())
        .collect();
    if !named.is_empty() {
        if !title.is_empty() {
            title.push(' ');
        }
        title.push_str(RE_OPEN);
        title.push_str(&named.join(", "));
        title.push(')');
    }
    (!title.is_empty()).then_some(title)
}

/// The person's own words of a title: the part before a trailing `(re: …)` naming referenced
/// sessions (the whole title when it has none; empty when it is only that suffix).
pub fn own_words_of_title(title: &str) -> &str {
    if !title.ends_with(')') {
        return title;
    }
    if title.starts_with(RE_OPEN) {
        return "";
    }
    match title.find(" (re: ") {
        Some(at) => &title[..at],
        None => title,
    }
}

/// `text` cut to at most `max` characters, an ellipsis marking the cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    text.chars().take(max - 1).collect::<String>() + "…"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(l: &[&str]) -> Vec<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_mention_is_named_after_the_persons_words() {
        let l = labels(&["Fix the flaky tokenizer test"]);
        let title = prompt_title("@Fix the flaky tokenizer test what was the fix?", &l).unwrap();
        assert_eq!(
            title,
            "what was the fix? (re: Fix the flaky tokenizer test)"
        );
        assert_eq!(own_words_of_title(&title), "what was the fix?");
    }

    #[test]
    fn only_a_mention_is_named_but_never_leads() {
        let l = labels(&["Fix the flaky tokenizer test", "Other"]);
        let title = prompt_title("@Fix the flaky tokenizer test  @Other", &l).unwrap();
        assert_eq!(title, "(re: Fix the flaky tokenizer test, Other)");
        assert_eq!(own_words_of_title(&title), "");
    }

    #[test]
    fn a_plain_prompt_keeps_its_first_words() {
        let title = prompt_title("one two three four five six seven", &[]).unwrap();
        assert_eq!(title, "one two three four five six");
        assert_eq!(own_words_of_title(&title), title);
        assert_eq!(prompt_title("  ", &[]), None);
        assert_eq!(own_words_of_title("f(x)"), "f(x)");
    }

    #[test]
    fn long_words_and_labels_are_cut() {
        let long = "x".repeat(100);
        let l = labels(&[&long]);
        let title = prompt_title(&format!("@{long} {long}"), &l).unwrap();
        assert_eq!(own_words_of_title(&title).chars().count(), OWN_CHARS);
        assert!(title.ends_with("…)"), "{title}");
    }
}
