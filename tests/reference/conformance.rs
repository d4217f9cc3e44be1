//! Every vector of `tests/data/conformance/`, through the library.

use crate::support::*;
use dsh_session_references::reference::context_json;
use dsh_session_references::reference::{
    decode_session_reference_uri, encode_session_reference_uri, parse_session_reference_text,
    AgentIdentity, ReferenceInput, SessionReferenceConfig, SessionReferences,
};
use dsh_session_references::reference::{stringify, tag_safe};
use dsh_session_references::session::{ContentBlock, MessageSource};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

#[test]
fn uri_vectors_encode_and_decode() {
    let vectors = conformance_jsonl("uri.jsonl");
    assert!(vectors.len() >= 10);
    for vector in vectors {
        let id = vector["id"].as_str().unwrap();
        let uri = vector["uri"].as_str().unwrap();
        assert_eq!(encode_session_reference_uri(id), uri, "encode {id:?}");
        assert_eq!(
            decode_session_reference_uri(uri).unwrap(),
            id,
            "decode {uri}"
        );
    }
}

#[test]
fn uri_reject_vectors_fail_with_invalid_reference() {
    let text = read_conformance("uri-reject.txt");
    let mut count = 0;
    for uri in text.lines().filter(|line| !line.is_empty()) {
        let err = decode_session_reference_uri(uri).expect_err(uri);
        assert_eq!(err.code(), "SESSION_REFERENCE_INVALID_REFERENCE", "{uri}");
        count += 1;
    }
    assert!(count >= 7);
}

#[test]
fn mention_parse_vectors() {
    let vectors = conformance_jsonl("mention-parse.jsonl");
    assert!(vectors.len() >= 15);
    for vector in vectors {
        let input = vector["input"].as_str().unwrap();
        let result = parse_session_reference_text(input);
        if let Some(code) = vector.get("error") {
            let err = result.expect_err(input);
            assert_eq!(err.code(), code.as_str().unwrap(), "{input:?}");
        } else {
            let parsed = result.unwrap_or_else(|e| panic!("{input:?}: {e}"));
            // Byte-exact against the expected object, key order included.
            assert_eq!(
                stringify(&parsed),
                stringify(&vector["expect"]),
                "{input:?}"
            );
        }
    }
}

#[tokio::test]
async fn prepare_vectors_through_the_library() {
    let vectors = prepare_vectors();
    assert!(vectors.len() >= 8);
    for vector in vectors {
        let query = MemoryQuery::new();
        query.insert(conformance_source(), None);
        let config = SessionReferenceConfig {
            max_reference_bytes: vector.max_reference_bytes,
            ..Default::default()
        };
        let service = SessionReferences::new(query.clone(), config).unwrap();
        let agent = AgentIdentity::new("target", None);
        let content = vec![ContentBlock::text("@source")];
        let result = service
            .prepare(
                &agent,
                content.clone(),
                vec![ReferenceInput::new("source", Some("source".into()))],
                &CancellationToken::new(),
            )
            .await;
        assert_eq!(query.read_count("source"), 1);
        let max = vector.max_reference_bytes;
        if let Some(code) = vector.error {
            let err = result.expect_err("expected an error");
            assert_eq!(err.code(), code, "max {max}");
            continue;
        }
        let prepared = result.unwrap_or_else(|e| panic!("max {max}: {e}"));
        assert_eq!(prepared.content, content);
        let context = prepared.additional_context.expect("context");
        assert_eq!(context.role.as_deref(), Some("user"));
        assert_eq!(context.content.len(), 1);
        let text = context.content[0].as_text().expect("text block");

        // The data object, byte for byte (tag-safe inside the frame).
        let json = context_json(text).expect("framed JSON");
        let objects: Vec<Box<RawValue>> = serde_json::from_str(json).unwrap();
        assert_eq!(objects.len(), 1);
        let expected_data = vector.data.expect("data").get().to_string();
        assert_eq!(objects[0].get(), tag_safe(expected_data), "max {max}");
        assert!(objects[0].get().len() as i64 <= max);

        // The reference entry, byte for byte, plus the index.
        let MessageSource::SessionReference {
            version,
            references,
            extra,
        } = &context.source
        else {
            panic!("not a session-reference source: {:?}", context.source);
        };
        assert_eq!(version, &Value::from(1));
        assert!(extra.is_empty());
        let mut entry: Map<String, Value> = serde_json::from_value(references[0].clone()).unwrap();
        assert_eq!(entry.remove("inputIndex"), Some(Value::from(0)));
        assert_eq!(
            stringify(&entry),
            vector.reference.expect("reference").get(),
            "max {max}"
        );
    }
}
