//! The `dsh-session:` URI (SPEC §2): `dsh-session:` + base64url-no-pad of the UTF-8 bytes of the
//! id's `JSON.stringify` text.
//!
//! Decoding is strict on purpose: a URI is accepted only when re-encoding its id reproduces it
//! byte for byte, so every id has exactly one URI and two URIs for the same session always
//! compare equal as text.

use super::error::{Result, SessionReferenceError};
use super::json::string_literal;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

/// The case-sensitive scheme prefix, colon included.
pub const SESSION_URI_PREFIX: &str = "dsh-session:";

/// The URI of session `id`.
pub fn encode_session_reference_uri(id: &str) -> String {
    let json = string_literal(id);
    let mut uri = String::with_capacity(SESSION_URI_PREFIX.len() + json.len().div_ceil(3) * 4);
    uri.push_str(SESSION_URI_PREFIX);
    URL_SAFE_NO_PAD.encode_string(json.as_bytes(), &mut uri);
    uri
}

/// Whether `byte` may appear in a URI payload (`[A-Za-z0-9_-]`).
pub(crate) fn is_payload_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-'
}

/// The session id of a canonical `dsh-session:` URI; anything else is `INVALID_REFERENCE`.
pub fn decode_session_reference_uri(uri: &str) -> Result<String> {
    let invalid = |why: &str| {
        SessionReferenceError::invalid_reference(format!(
            "invalid session reference URI {}: {why}",
            string_literal(uri)
        ))
    };
    let payload = uri
        .strip_prefix(SESSION_URI_PREFIX)
        .ok_or_else(|| invalid("it does not start with \"dsh-session:\""))?;
    if payload.is_empty() {
        return Err(invalid("the payload is empty"));
    }
    if !payload.bytes().all(is_payload_byte) {
        return Err(invalid("the payload is not base64url"));
    }
    let bytes = URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|err| invalid("the payload is not canonical base64url").with_cause(err))?;
    let json = String::from_utf8(bytes)
        .map_err(|err| invalid("the payload is not UTF-8").with_cause(err))?;
    let id: String = serde_json::from_str(&json)
        .map_err(|err| invalid("the payload is not a JSON string").with_cause(err))?;
    if encode_session_reference_uri(&id) != uri {
        return Err(invalid("the URI is not in canonical form"));
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::error::ErrorCode;

    #[test]
    fn spec_examples() {
        assert_eq!(
            encode_session_reference_uri("target"),
            "dsh-session:InRhcmdldCI"
        );
        assert_eq!(encode_session_reference_uri(""), "dsh-session:IiI");
        assert_eq!(encode_session_reference_uri("😀"), "dsh-session:IvCfmIAi");
        assert_eq!(
            decode_session_reference_uri("dsh-session:IvCfmIAi").unwrap(),
            "😀"
        );
    }

    #[test]
    fn rejects_noncanonical_forms() {
        let with_space = format!("dsh-session:{}", URL_SAFE_NO_PAD.encode(" \"a\""));
        let escaped = format!("dsh-session:{}", URL_SAFE_NO_PAD.encode("\"\\u0061\""));
        let lone = format!("dsh-session:{}", URL_SAFE_NO_PAD.encode("\"\\ud800\""));
        let not_utf8 = format!("dsh-session:{}", URL_SAFE_NO_PAD.encode(b"\"\xff\""));
        let number = format!("dsh-session:{}", URL_SAFE_NO_PAD.encode("12"));
        for uri in [
            "dsh-session:",
            "dsh-session:IiI=",
            "dsh-session:IiJ",
            "dsh-session:I",
            "Dsh-session:IiI",
            "dsh-session:Ii+I",
            " dsh-session:IiI",
            "dsh-session:IiI ",
            &with_space,
            &escaped,
            &lone,
            &not_utf8,
            &number,
        ] {
            let err = decode_session_reference_uri(uri).unwrap_err();
            assert_eq!(err.kind(), ErrorCode::InvalidReference, "{uri}");
        }
    }
}
