//! The Claude Code conversation scan over a file already in memory: what the first read costs
//! beyond copying the file out of the kernel.
//!
//! ```sh
//! cargo run --release --example scan_in_memory -- FILE [ROUNDS]
//! ```
//!
//! Reads FILE (a Claude Code session) into memory once, then times, on one thread, `ROUNDS`
//! times each (default 5; the best round is printed): the conversation scan `prepare` runs on
//! each line (`claude::record::differential::conversation_items`: the same walk, message read
//! in place, tree and texts, and the chain walked to the conversation), and the same scan with
//! every record read by serde alone (the reference the walk is tested against). Both answer
//! the same conversation, which is checked once outside the timed rounds.
//! A `prepare` of a session nothing has kept does this scan on every core, part by part, plus
//! the copy out of the kernel (`examples/read_floor.rs`) and the process's fixed costs; this
//! example isolates the scan, so that a change to the walk is measured without the machine's
//! I/O noise.

use dsh_session_references::session::external::claude::record::differential::{
    conversation, conversation_items,
};
use std::time::{Duration, Instant};

fn best_of(rounds: usize, mut run: impl FnMut() -> usize) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut items = 0;
    for _ in 0..rounds.max(1) {
        let started = Instant::now();
        items = std::hint::black_box(run());
        best = best.min(started.elapsed());
    }
    (best, items)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: scan_in_memory FILE [ROUNDS]");
        std::process::exit(2);
    };
    let rounds = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(5);
    let file = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!("scan_in_memory: {path}: {e}");
            std::process::exit(1);
        }
    };
    let rate = |took: Duration| file.len() as f64 / took.as_secs_f64() / 1e9;
    let (walked, items) = best_of(rounds, || conversation_items(&file, false));
    let (decoded, _) = best_of(rounds.min(3), || conversation_items(&file, true));
    println!("{path}: {} bytes, {items} items", file.len());
    println!(
        "  scan (walk):  {:8.2} ms  {:5.2} GB/s",
        walked.as_secs_f64() * 1e3,
        rate(walked)
    );
    println!(
        "  scan (serde): {:8.2} ms  {:5.2} GB/s",
        decoded.as_secs_f64() * 1e3,
        rate(decoded)
    );
    // Checked once, outside the timed rounds: the debug text of 1 MB of conversation costs
    // as much as a third of the scan.
    if conversation(&file, false) != conversation(&file, true) {
        println!("  THE WALK AND SERDE DISAGREE on this file's conversation");
        std::process::exit(1);
    }
}
