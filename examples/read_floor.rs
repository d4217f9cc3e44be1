//! The floor under any exact reader of a file: its bytes copied out of the page cache and
//! looked at once.
//!
//! ```sh
//! cargo run --release --example read_floor -- FILE [THREADS] [BUFFER_BYTES]
//! hyperfine -N --warmup 5 "cat FILE" "target/release/examples/read_floor FILE 2"
//! ```
//!
//! A reader that must tell whether every line is JSON serde accepts (what `prepare`'s first
//! read of another agent's session does, so that a line serde rejects is dropped exactly as
//! serde drops it) reads every byte out of the kernel and classifies every byte at least once.
//! This example does exactly that and nothing more: `THREADS` threads (default 2) each read
//! their share of the file with `pread` into one reused buffer of `BUFFER_BYTES` (default 256
//! KiB, small enough to stay in the core's cache) and count its quotes, backslashes and control
//! characters (line ends among them) in a loop the compiler makes SIMD. No line is cut out, no record walked, nothing kept or printed but the
//! count. Timed beside `cat` of the same file, it is the lowest ratio to `cat` an exact reader
//! can reach on the machine without mapping the file (which this crate does not do: a
//! truncation by another process would kill the reader with `SIGBUS`). The process start of
//! `dsh-refs` itself (`dsh-refs --version`) comes on top.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// How many bytes of `bytes` are quotes, backslashes or control characters (line ends among
/// them): the one look at every byte an exact JSON reader cannot do without. A plain loop the
/// compiler turns into SIMD compares.
fn classify(bytes: &[u8]) -> usize {
    bytes
        .chunks(256)
        .map(|chunk| {
            chunk
                .iter()
                .map(|&b| u16::from(b == b'"' || b == b'\\' || b < 0x20))
                .sum::<u16>() as usize
        })
        .sum()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: read_floor FILE [THREADS] [BUFFER_BYTES]");
        std::process::exit(2);
    };
    let threads: u64 = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(2).max(1);
    let buffer: usize = args
        .get(2)
        .and_then(|n| n.parse().ok())
        .unwrap_or(256 << 10)
        .max(4096);
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) => {
            eprintln!("read_floor: {path}: {e}");
            std::process::exit(1);
        }
    };
    let len = file.metadata().map_or(0, |meta| meta.len());
    let share = |k: u64| {
        let mut buf = vec![0u8; buffer];
        let (mut at, end) = (len * k / threads, len * (k + 1) / threads);
        let mut count = 0usize;
        while at < end {
            let want = buffer.min(usize::try_from(end - at).unwrap_or(buffer));
            match file.read_at(&mut buf[..want], at) {
                Ok(0) | Err(_) => break,
                Ok(got) => {
                    count += classify(&buf[..got]);
                    at += got as u64;
                }
            }
        }
        count
    };
    let total: usize = std::thread::scope(|scope| {
        let others: Vec<_> = (1..threads)
            .map(|k| scope.spawn(move || share(k)))
            .collect();
        let first = share(0);
        first
            + others
                .into_iter()
                .map(|h| h.join().unwrap_or(0))
                .sum::<usize>()
    });
    println!("{total}");
}
