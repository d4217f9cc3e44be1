//! The skimmer is sound: a line it accepts is a record serde accepts, with the same envelope.
#![no_main]

use dsh_session_references::session::skim;
use dsh_session_references::session::Record;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(envelope) = skim(data) else {
        return;
    };
    let record: Record = serde_json::from_slice(data).expect("skim accepted what serde rejects");
    assert_eq!(record.kind(), envelope.kind);
    assert_eq!(record.first_seq(), envelope.first_seq);
    assert_eq!(record.seq_count(), envelope.seq_count);
    if let Record::Event(event) = &record {
        assert_eq!(event.time, envelope.time);
        assert_eq!(event.surface_op, envelope.surface_op);
        assert_eq!(event.source_event_seqs, envelope.source_event_seqs);
    }
});
