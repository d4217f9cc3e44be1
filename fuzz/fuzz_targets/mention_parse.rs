//! `parse_session_reference_text` never panics, gives the same answer twice, and every reference
//! it returns survives formatting and parsing again.
#![no_main]

use dsh_session_references::reference::{
    format_session_reference_mention, parse_session_reference_text,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let first = parse_session_reference_text(&text);
    let again = parse_session_reference_text(&text);
    assert_eq!(format!("{first:?}"), format!("{again:?}"));
    if let Ok(parsed) = first {
        for reference in parsed.references {
            let mention =
                format_session_reference_mention(&reference.session_id, Some(&reference.label));
            let back = parse_session_reference_text(&mention).unwrap();
            assert_eq!(back.references.len(), 1);
            assert_eq!(back.references[0].session_id, reference.session_id);
        }
    }
});
