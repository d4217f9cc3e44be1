//! `prepare` of a big source holds its conversation about once, not three times: no copy kept
//! for the cache beside the snapshot, the raw surface freed as it is projected, and one heap
//! for the reading and projecting threads (see `one_malloc_arena` in the binary).
//!
//! Measured as the peak RSS of a `dsh-refs prepare` child (getrusage of waited children); this
//! file holds one test so that no other child's peak is mixed in.
#![allow(unsafe_code)] // getrusage of the waited children.

use dsh_session_references::session::{
    ContentBlock, Event, EventData, Message, MessageSource, SessionHeader,
};
use std::io::Write;
use std::process::Command;

const MIB: u64 = 1 << 20;

#[cfg(target_os = "linux")]
fn children_peak_rss() -> u64 {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) },
        0
    );
    usage.ru_maxrss as u64 * 1024
}

#[cfg(target_os = "linux")]
#[test]
fn prepare_of_a_big_assistant_log_peaks_near_its_conversation() {
    let home = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_dsh-refs");
    let write_log = |id: &str, mib: u64| {
        let dir = home.path().join("sessions/--w--").join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let file = std::fs::File::create(dir.join("session.jsonl")).unwrap();
        let mut out = std::io::BufWriter::new(file);
        let header = SessionHeader::new(id, 1, Some("/w".into()));
        writeln!(out, "{}", serde_json::to_string(&header).unwrap()).unwrap();
        let mut written = 0;
        let mut seq = 0u64;
        while written < mib * MIB {
            let text = format!("{seq} {}", "lorem ipsum dolor ".repeat(900));
            let data = EventData::AssistantMessage {
                turn: seq.into(),
                step: 0.into(),
                message: Message::new(
                    "assistant",
                    vec![ContentBlock::text(text)],
                    MessageSource::user(),
                    format!("a-{seq}"),
                ),
                extra: Default::default(),
            };
            let line = serde_json::to_string(&Event::new(seq, 1, &data)).unwrap();
            writeln!(out, "{line}").unwrap();
            written += line.len() as u64 + 1;
            seq += 1;
        }
        out.flush().unwrap();
    };
    write_log("agent", 0);
    let size = 40;
    write_log("src", size);
    let mention = Command::new(bin)
        .args(["mention", "format", "src"])
        .output()
        .unwrap();
    let text = format!(
        "{} what happened?",
        String::from_utf8(mention.stdout).unwrap().trim()
    );
    // The baseline: the same binary preparing a reference to an empty session (the same code
    // paths, the same pages of a debug build touched, no conversation to hold).
    write_log("empty", 0);
    let empty = Command::new(bin)
        .args(["mention", "format", "empty"])
        .output()
        .unwrap();
    let baseline = Command::new(bin)
        .arg("--home")
        .arg(home.path())
        .args(["prepare", "--as", "agent", "--cwd", "/w"])
        .arg(String::from_utf8(empty.stdout).unwrap().trim())
        .output()
        .unwrap();
    assert!(baseline.status.success());
    let before = children_peak_rss();
    let output = Command::new(bin)
        .arg("--home")
        .arg(home.path())
        .args(["prepare", "--as", "agent", "--cwd", "/w", &text])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("lorem ipsum"));
    let peak = children_peak_rss();
    assert!(peak > before, "the prepare child is the largest so far");
    eprintln!("prepare peak RSS: {} MiB", peak / MIB);
    // The conversation is nearly the whole log: about `size` MiB. Three copies (raw kept for
    // the cache, the snapshot, the projected text) or two heaps were 2-3 times that. The bound
    // counts from what the same binary peaks at preparing a reference to an empty session
    // (`before`, ~16 MiB of a debug build's own pages and buffers), so a bigger binary does not
    // eat the margin for the conversation's copies: one copy plus a fifth is allowed.
    let bound = before + size * MIB * 6 / 5;
    assert!(
        peak < bound,
        "peak RSS {} MiB for a {size} MiB conversation (bound {} MiB: the empty prepare's {} MiB plus 1.2 copies)",
        peak / MIB,
        bound / MIB,
        before / MIB
    );
}
