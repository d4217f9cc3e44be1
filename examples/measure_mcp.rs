//! Measures `dsh-refs mcp` (SPEC §10) as a host sees it: the release binary as a child process,
//! JSON-RPC lines on its stdin and stdout.
//!
//! `list`: spawn → `initialize` → first `resources/list` answer, on a generated home of
//! `--sessions` sessions: *cold* (no discovery index yet: the first start on that home, OS
//! caches warm) once, then *warm* (the index exists) `--rounds` times; and the server's peak
//! resident memory (VmHWM) after the listing and a read of every listed session.
//! `read`: one `resources/read` of a `--mb` MB tool-heavy log against `dsh-refs prepare` for the
//! same reference (each a fresh process, after one untimed run of each).
//!
//! ```sh
//! cargo build --release && cargo run --release --example measure_mcp -- list --sessions 100000
//! cargo run --release --example measure_mcp -- read --mb 100
//! ```

#[path = "../benches/support/gen.rs"]
mod gen;

#[path = "measure_discovery/mod.rs"]
#[allow(dead_code)]
mod measure_discovery;

use dsh_session_references::reference::{
    encode_session_reference_uri, format_session_reference_mention,
};
use dsh_session_references::session::Encoding;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

fn binary() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/dsh-refs")
}

struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Server {
    fn start(home: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(binary())
            .arg("--home")
            .arg(home)
            .args(["--sources", "dsh", "mcp"])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("build the release binary first: cargo build --release");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Server {
            child,
            stdin,
            stdout,
        }
    }

    fn ask(&mut self, id: i64, method: &str, params: Value) -> Value {
        let request = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
        writeln!(self.stdin, "{request}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        loop {
            line.clear();
            self.stdout.read_line(&mut line).unwrap();
            let value: Value = serde_json::from_str(&line).unwrap();
            if value["id"] == id {
                return value;
            }
        }
    }

    fn initialize(&mut self) {
        self.ask(
            1,
            "initialize",
            json!({"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"measure","version":"1"}}),
        );
        writeln!(
            self.stdin,
            "{}",
            json!({"jsonrpc":"2.0","method":"notifications/initialized"})
        )
        .unwrap();
    }

    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    /// User + system CPU time the server has used so far.
    fn cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        // Fields after the parenthesised command name: utime and stime are the 12th and 13th.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = after.split(' ').collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        Duration::from_millis(ticks * 10)
    }

    fn stop(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

/// spawn → initialize → first resources/list; returns the time and the listing.
fn first_list(home: &Path) -> (Duration, Server, Vec<Value>) {
    let started = Instant::now();
    let mut server = Server::start(home, &[]);
    server.initialize();
    let listed = server.ask(2, "resources/list", json!({}));
    let took = started.elapsed();
    let resources = listed["result"]["resources"].as_array().unwrap().clone();
    eprintln!(
        "  first list after {took:.1?}, server CPU {:.2?}",
        server.cpu()
    );
    (took, server, resources)
}

fn list(sessions: usize, rounds: usize) {
    let (home, bytes) = measure_discovery::cached_search_home(sessions, 1).unwrap();
    println!(
        "home: {sessions} sessions, {:.0} MB of log at {}",
        bytes as f64 / 1e6,
        home.display()
    );
    let _ = std::fs::remove_dir_all(home.join("index"));
    let (cold, server, resources) = first_list(&home);
    println!(
        "cold (no index): first list {:.1?} ({} resources, first label {:?})",
        cold,
        resources.len(),
        resources[0]["name"]
    );
    // Let the index fill (the first pass over the whole home), then measure warm starts.
    let started = Instant::now();
    while !home.join("index").exists() || started.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut server = server;
    loop {
        std::thread::sleep(Duration::from_secs(2));
        let listed = server.ask(3, "resources/list", json!({}));
        let first = listed["result"]["resources"][0]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let id = dsh_session_references::reference::decode_session_reference_uri(
            listed["result"]["resources"][0]["uri"].as_str().unwrap(),
        )
        .unwrap();
        if first != id || started.elapsed() > Duration::from_secs(600) {
            println!(
                "index filled after {:.1?} (labels now titles: {first:?})",
                started.elapsed()
            );
            break;
        }
    }
    // Reads of every listed resource, then the peak memory.
    for (n, r) in resources.iter().enumerate() {
        server.ask(100 + n as i64, "resources/read", json!({"uri": r["uri"]}));
    }
    println!(
        "peak resident memory after the listing and {} reads: {:.1} MiB",
        resources.len(),
        server.peak_rss_kib() as f64 / 1024.0
    );
    server.stop();
    let mut warm = Vec::new();
    for _ in 0..rounds {
        let (took, server, _) = first_list(&home);
        warm.push(took);
        server.stop();
    }
    warm.sort();
    // Memory while serving: a warm start that lists, reads every listed session, and then
    // serves on while its indexer checks the home (VmHWM after 10 s).
    let (_, mut server, resources) = first_list(&home);
    for (n, r) in resources.iter().enumerate() {
        server.ask(100 + n as i64, "resources/read", json!({"uri": r["uri"]}));
    }
    std::thread::sleep(Duration::from_secs(10));
    server.ask(99, "resources/list", json!({}));
    println!(
        "peak resident memory of a warm start after a list, {} reads and 10 s of serving: {:.1} MiB",
        resources.len(),
        server.peak_rss_kib() as f64 / 1024.0
    );
    server.stop();
    println!(
        "warm (index present): first list p50 {:.1?}, min {:.1?}, max {:.1?} over {rounds} starts",
        warm[warm.len() / 2],
        warm[0],
        warm[warm.len() - 1]
    );
}

fn read(mb: u64, rounds: usize) {
    // One big tool-heavy log (the prepare benchmark's shape), generated once.
    let home = gen::data_dir(&format!("mcp-big-{mb}mb-plain"));
    let id = "big-source-a";
    if !home.join(".complete").exists() {
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(&home).unwrap();
        let spec = gen::BigLogSpec::new(mb * 1_000_000, Encoding::Plain);
        let log = gen::generate_big_log(&home, id, Some("/work/big"), &spec).unwrap();
        std::fs::write(
            home.join(".complete"),
            format!("{} {}", log.logical_bytes, log.conversation_bytes),
        )
        .unwrap();
    }
    println!(
        "log: {} (logical bytes, conversation bytes)",
        std::fs::read_to_string(home.join(".complete")).unwrap()
    );
    let uri = encode_session_reference_uri(id);
    let mut mcp = Vec::new();
    let mut prepare = Vec::new();
    let mut label = String::new();
    for round in 0..=rounds {
        let started = Instant::now();
        let mut server = Server::start(&home, &["--max-resources", "10"]);
        server.initialize();
        let listed = server.ask(2, "resources/list", json!({}));
        let read = server.ask(3, "resources/read", json!({"uri": uri}));
        let took = started.elapsed();
        assert!(read["result"]["contents"][0]["text"].is_string(), "{read}");
        label = listed["result"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["uri"] == uri.as_str())
            .map(|r| r["name"].as_str().unwrap().to_string())
            .unwrap();
        server.stop();
        let started = Instant::now();
        let out = Command::new(binary())
            .arg("--home")
            .arg(&home)
            .args(["--sources", "dsh", "prepare", "--as", "measure"])
            .arg(format_session_reference_mention(id, Some(&label)))
            .output()
            .unwrap();
        let took_prepare = started.elapsed();
        assert!(out.status.success());
        if round > 0 {
            mcp.push(took);
            prepare.push(took_prepare);
        }
    }
    mcp.sort();
    prepare.sort();
    let (m, p) = (mcp[mcp.len() / 2], prepare[prepare.len() / 2]);
    println!(
        "spawn + initialize + list + read {:.0?} (p50 of {rounds}) vs spawn + prepare {:.0?}: {:.2}× (label {label:?})",
        m,
        p,
        m.as_secs_f64() / p.as_secs_f64()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str, default: usize| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    match args.first().map(String::as_str) {
        Some("list") => list(value("--sessions", 100_000), value("--rounds", 5)),
        Some("read") => read(value("--mb", 100) as u64, value("--rounds", 5)),
        _ => eprintln!(
            "usage: measure_mcp list [--sessions N] [--rounds N] | read [--mb N] [--rounds N]"
        ),
    }
}
