//! `decode_session_reference_uri` never panics, and what it accepts is canonical: encoding the
//! decoded id gives back the input exactly.
#![no_main]

use dsh_session_references::reference::{
    decode_session_reference_uri, encode_session_reference_uri,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for uri in [text.to_string(), format!("dsh-session:{text}")] {
        if let Ok(id) = decode_session_reference_uri(&uri) {
            assert_eq!(encode_session_reference_uri(&id), uri);
        }
    }
    // Any id round-trips.
    let uri = encode_session_reference_uri(text);
    assert_eq!(decode_session_reference_uri(&uri).unwrap(), text);
});
