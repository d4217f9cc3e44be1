//! Writes a heavy home of Claude Code and Codex sessions, shaped like the files those agents
//! write (see `tests/data/fixtures/FORMATS-external.md` and the fixtures beside it), for
//! measuring listing and `prepare` on homes of people who live in those agents (issue 35).
//!
//! ```sh
//! cargo run --release --example make_heavy_home -- --out /tmp/heavy            # ~2 GB
//! cargo run --release --example make_heavy_home -- --out /tmp/heavy --scale 0.05 # ~200 MB
//! ```
//!
//! Layout: `<out>/claude/projects/<cwd with / as ->/<uuid>.jsonl` and
//! `<out>/codex/sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<uuid>.jsonl` plus
//! `<out>/codex/session_index.jsonl`. Flags: `--claude N` and `--codex N` sessions (2000 each),
//! `--seed S` (the same seed gives the same bytes), `--scale F` (multiplies every byte size:
//! file sizes, the three ~60 MB Claude sessions and their ~12 MB line; the counts stay).
//!
//! What makes it heavy: log-normal file sizes; tool output stored twice (in the message and in
//! Claude's `toolUseResult`, in Codex's `function_call_output` and `exec_command_end`); three
//! Claude sessions of ~60 MB each with one ~12 MB line (a `git diff` result); base64 images;
//! thinking blocks with signatures; Codex's ~20 KB `base_instructions` on every first line and
//! encrypted reasoning; `ai-title`/`custom-title` records appended at the end of some Claude
//! files, `thread_name_updated` events in some rollouts and names in `session_index.jsonl`;
//! compactions (`system/compact_boundary` then the summary; Codex `compacted`). File times are
//! set to each session's last record. The last lines of stdout name the largest Claude
//! session (`largest_claude=<id> <bytes> <path>`).

use base64::Engine as _;
use serde_json::{json, Value};
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

// ---------------------------------------------------------------------------------------------
// Flags

struct Opts {
    out: PathBuf,
    claude: usize,
    codex: usize,
    seed: u64,
    scale: f64,
}

const USAGE: &str =
    "usage: make_heavy_home --out DIR [--claude N] [--codex N] [--seed S] [--scale F]";

fn parse_args() -> Result<Opts, String> {
    let mut opts = Opts {
        out: PathBuf::new(),
        claude: 2000,
        codex: 2000,
        seed: 1,
        scale: 1.0,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--out" => opts.out = PathBuf::from(value()?),
            "--claude" => opts.claude = value()?.parse().map_err(|e| format!("--claude: {e}"))?,
            "--codex" => opts.codex = value()?.parse().map_err(|e| format!("--codex: {e}"))?,
            "--seed" => opts.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--scale" => opts.scale = value()?.parse().map_err(|e| format!("--scale: {e}"))?,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if opts.out.as_os_str().is_empty() {
        return Err("--out is required".into());
    }
    if !(opts.scale > 0.0 && opts.scale <= 16.0) {
        return Err("--scale must be in (0, 16]".into());
    }
    Ok(opts)
}

fn main() -> ExitCode {
    let opts = match parse_args() {
        Ok(opts) => opts,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("make_heavy_home: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    for agent in ["claude", "codex"] {
        if opts.out.join(agent).exists() {
            eprintln!(
                "make_heavy_home: {} exists; give an empty or new --out",
                opts.out.join(agent).display()
            );
            return ExitCode::from(2);
        }
    }
    match run(&opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("make_heavy_home: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(opts: &Opts) -> std::io::Result<()> {
    let claude_plan = plan_claude(opts);
    let codex_plan = plan_codex(opts);
    let started = std::time::Instant::now();
    let (claude, codex) = std::thread::scope(|s| {
        let c = s.spawn(|| write_claude_home(&opts.out.join("claude"), &claude_plan));
        let x = s.spawn(|| write_codex_home(&opts.out.join("codex"), &codex_plan));
        (
            c.join().expect("claude writer"),
            x.join().expect("codex writer"),
        )
    });
    let claude = claude?;
    let codex = codex?;
    println!(
        "claude_files={} claude_bytes={}",
        claude.files, claude.bytes
    );
    println!("codex_files={} codex_bytes={}", codex.files, codex.bytes);
    println!(
        "total_bytes={} seconds={:.1}",
        claude.bytes + codex.bytes,
        started.elapsed().as_secs_f64()
    );
    if let Some((id, bytes, path)) = claude.largest {
        println!("largest_claude={id} {bytes} {}", path.display());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// A small deterministic generator (SplitMix64): the same seed gives the same home.

#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        let mut r = Rng(seed ^ 0x243F_6A88_85A3_08D3);
        r.next();
        r
    }

    /// An independent stream for item `index` of kind `kind` (a file's content depends on the
    /// seed and its index only).
    fn stream(seed: u64, kind: u64, index: u64) -> Self {
        Rng::new(
            seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ kind.wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
                ^ index.wrapping_mul(0x1656_67B1_9E37_79F9),
        )
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Standard normal (Box–Muller).
    fn normal(&mut self) -> f64 {
        let u = 1.0 - self.unit();
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// Log-normal around `median` with spread `sigma`.
    fn lognormal(&mut self, median: f64, sigma: f64) -> f64 {
        median * (sigma * self.normal()).exp()
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    fn uuid_v4(&mut self) -> String {
        let a = self.next();
        let b = self.next();
        let hi = (a & !0xF000) | 0x4000; // version nibble
        let lo = (b & !(0xC << 60)) | (0x8 << 60); // variant bits
        format_uuid(hi, lo)
    }

    /// A time-ordered id like Codex's thread ids (48 bits of milliseconds first).
    fn uuid_v7(&mut self, ms: i64) -> String {
        let hi = ((ms as u64) << 16) | 0x7000 | (self.next() & 0x0FFF);
        let lo = (self.next() & !(0xC << 60)) | (0x8 << 60);
        format_uuid(hi, lo)
    }

    /// `n` characters of `[A-Za-z0-9]` (Anthropic message and tool ids).
    fn base62(&mut self, n: usize) -> String {
        const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        (0..n).map(|_| char::from(*self.pick(CHARS))).collect()
    }

    fn hex(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| char::from(b"0123456789abcdef"[self.below(16) as usize]))
            .collect()
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n + 8);
        while out.len() < n {
            out.extend_from_slice(&self.next().to_le_bytes());
        }
        out.truncate(n);
        out
    }
}

fn format_uuid(hi: u64, lo: u64) -> String {
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xFFFF,
        hi & 0xFFFF,
        lo >> 48,
        lo & 0xFFFF_FFFF_FFFF
    )
}

// ---------------------------------------------------------------------------------------------
// Time (UTC milliseconds since the epoch; civil-date arithmetic written out, no dependency)

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

struct Civil {
    y: i64,
    mo: i64,
    d: i64,
    h: i64,
    mi: i64,
    s: i64,
    ms: i64,
}

fn civil(ms: i64) -> Civil {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (y, mo, d) = civil_from_days(days);
    Civil {
        y,
        mo,
        d,
        h: rem / 3_600_000,
        mi: rem / 60_000 % 60,
        s: rem / 1000 % 60,
        ms: rem % 1000,
    }
}

/// `2026-11-30T08:15:02.123Z`.
fn rfc3339(ms: i64) -> String {
    let c = civil(ms);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        c.y, c.mo, c.d, c.h, c.mi, c.s, c.ms
    )
}

/// The newest session ends before this instant (2026-11-30T00:00:00Z).
fn epoch_end() -> i64 {
    days_from_civil(2026, 11, 30) * 86_400_000
}

const DAY_MS: i64 = 86_400_000;

// ---------------------------------------------------------------------------------------------
// Text

const WORDS: &[&str] = &[
    "the", "listing", "reader", "session", "cache", "index", "file", "line", "record", "title",
    "prompt", "reply", "tool", "result", "build", "test", "error", "path", "module", "config",
    "value", "parser", "offset", "stream", "buffer", "worker", "thread", "queue", "store", "fold",
    "head", "tail", "append", "rename", "check", "fix", "add", "remove", "update", "handle",
    "return", "should", "would", "could", "because", "when", "then", "after", "before", "every",
    "each", "one", "two", "three", "small", "large", "slow", "fast", "stale", "fresh", "empty",
    "broken", "missing", "new", "old", "first", "last", "next", "and", "or", "but", "with",
    "without", "from", "into", "over", "under", "a", "an", "is", "are", "was", "not", "it", "this",
    "that", "we", "you", "I", "let's", "please", "now", "again", "also", "only", "still", "just",
    "here", "there", "function", "struct", "trait", "crate", "commit", "branch", "diff", "patch",
    "review", "deploy", "server", "client", "request", "response", "timeout", "retry", "panic",
    "unwrap", "option", "vector", "map",
];

const IDENTS: &[&str] = &[
    "reader", "listing", "entry", "cache", "offset", "line", "title", "state", "path", "buffer",
    "worker", "home", "store", "record", "source", "cursor", "chunk", "index", "session",
    "message", "block", "result", "config", "handle", "scan", "fold",
];

/// About `n` bytes of prose: sentences, sometimes paragraphs.
fn prose(rng: &mut Rng, n: usize) -> String {
    let mut out = String::with_capacity(n + 32);
    let mut start = true;
    while out.len() < n {
        let w = *rng.pick(WORDS);
        if start {
            let mut chars = w.chars();
            if let Some(c) = chars.next() {
                out.extend(c.to_uppercase());
                out.push_str(chars.as_str());
            }
            start = false;
        } else {
            out.push(' ');
            out.push_str(w);
        }
        if rng.below(11) == 0 {
            out.push_str(if rng.below(5) == 0 { ".\n\n" } else { ". " });
            start = true;
            if out.ends_with(". ") {
                out.pop();
            }
        }
    }
    out
}

/// A short prompt or title (at most `words` words).
fn phrase(rng: &mut Rng, words: u64) -> String {
    let n = rng.range(2, words.max(2));
    let mut out = String::new();
    for i in 0..n {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(rng.pick::<&str>(WORDS));
    }
    out
}

/// One line of Rust-looking code (with quotes and tabs now and then, so escaping is exercised).
fn code_line(rng: &mut Rng, out: &mut String) {
    let a = rng.pick(IDENTS);
    let b = rng.pick(IDENTS);
    let n = rng.below(1000);
    match rng.below(8) {
        0 => out.push_str(&format!(
            "fn {a}_{b}(&mut self, {b}: &{a}) -> Result<(), Error> {{"
        )),
        1 => out.push_str("    }"),
        2 => out.push_str(&format!("    let {a}_{n} = self.{b}.get({n}).copied();")),
        3 => out.push_str(&format!(
            "    if {a}.len() > {n} {{ return Err(Error::{b}); }}"
        )),
        4 => out.push_str(&format!("    tracing::debug!(\"{a} {b} at {{}}\", {n});")),
        5 => out.push_str(&format!("\t// {} {a} {b}", rng.pick(WORDS))),
        6 => out.push_str(&format!("    {a}.push_str(\"{b}\\t{n}\");")),
        _ => out.push_str(&format!("use crate::{a}::{{{b}, {}}};", rng.pick(IDENTS))),
    }
}

/// About `n` bytes of code, one statement per line.
fn code(rng: &mut Rng, n: usize) -> String {
    let mut out = String::with_capacity(n + 96);
    while out.len() < n {
        code_line(rng, &mut out);
        out.push('\n');
    }
    out
}

/// About `n` bytes of `cat -n`-style numbered lines (what Claude Code's Read returns).
fn numbered(content: &str) -> String {
    let mut out = String::with_capacity(content.len() + content.len() / 6);
    for (i, line) in content.lines().enumerate() {
        out.push_str(&format!("{:>6}\t{line}\n", i + 1));
    }
    out
}

/// About `n` bytes of `git diff` output over several files.
fn git_diff(rng: &mut Rng, n: usize) -> String {
    let mut out = String::with_capacity(n + 256);
    while out.len() < n {
        let file = format!("src/{}/{}.rs", rng.pick(IDENTS), rng.pick(IDENTS));
        out.push_str(&format!(
            "diff --git a/{file} b/{file}\nindex {}..{} 100644\n--- a/{file}\n+++ b/{file}\n",
            rng.hex(7),
            rng.hex(7)
        ));
        for _ in 0..rng.range(1, 6) {
            let at = rng.range(1, 4000);
            out.push_str(&format!(
                "@@ -{at},{} +{at},{} @@ impl {} {{\n",
                rng.range(3, 40),
                rng.range(3, 40),
                rng.pick(IDENTS)
            ));
            for _ in 0..rng.range(6, 60) {
                out.push(*rng.pick(&[' ', ' ', '+', '-']));
                code_line(rng, &mut out);
                out.push('\n');
            }
            if out.len() >= n {
                break;
            }
        }
    }
    out
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A base64 "screenshot" of about `n` encoded bytes (a PNG signature, then noise).
fn png_base64(rng: &mut Rng, n: usize) -> String {
    let mut raw = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    raw.extend(rng.bytes(n * 3 / 4));
    b64(&raw)
}

/// Codex's encrypted reasoning blob (Fernet-looking: `gAAAAAB` then url-safe base64).
fn encrypted(rng: &mut Rng, n: usize) -> String {
    let mut s = String::from("gAAAAAB");
    s.push_str(&base64::engine::general_purpose::URL_SAFE.encode(rng.bytes(n * 3 / 4)));
    s
}

/// `n` bytes scaled, at least `min`.
fn scaled(n: f64, scale: f64, min: usize) -> usize {
    ((n * scale) as usize).max(min)
}

// ---------------------------------------------------------------------------------------------
// Writing one JSONL file

struct Jsonl {
    out: BufWriter<File>,
    buf: Vec<u8>,
    written: u64,
}

impl Jsonl {
    fn create(path: &Path) -> std::io::Result<Self> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        Ok(Jsonl {
            out: BufWriter::with_capacity(1 << 20, File::create(path)?),
            buf: Vec::with_capacity(1 << 16),
            written: 0,
        })
    }

    fn line(&mut self, value: &Value) -> std::io::Result<()> {
        self.buf.clear();
        serde_json::to_writer(&mut self.buf, value).map_err(std::io::Error::other)?;
        self.buf.push(b'\n');
        self.out.write_all(&self.buf)?;
        self.written += self.buf.len() as u64;
        Ok(())
    }

    /// Flushes and sets the file's modification time to `last_ms` (the agent's last write).
    fn finish(self, last_ms: i64) -> std::io::Result<u64> {
        let file = self.out.into_inner().map_err(|e| e.into_error())?;
        let when = UNIX_EPOCH + Duration::from_millis(last_ms.max(0) as u64);
        file.set_modified(when.min(SystemTime::now()))?;
        Ok(self.written)
    }
}

/// Appends `extra` (an object) to `base` (an object), keeping both orders.
fn with(mut base: Value, extra: Value) -> Value {
    if let (Some(map), Value::Object(more)) = (base.as_object_mut(), extra) {
        for (k, v) in more {
            map.insert(k, v);
        }
    }
    base
}

struct Totals {
    files: usize,
    bytes: u64,
    largest: Option<(String, u64, PathBuf)>,
}

/// Log-normal sizes with mean `mean` (each at least `min`, at most `max`).
fn sizes(rng: &mut Rng, n: usize, mean: f64, sigma: f64, min: f64, max: f64) -> Vec<usize> {
    let raw: Vec<f64> = (0..n).map(|_| rng.lognormal(1.0, sigma)).collect();
    let sum: f64 = raw.iter().sum();
    let k = if sum > 0.0 {
        mean * n as f64 / sum
    } else {
        0.0
    };
    raw.iter()
        .map(|r| (r * k).clamp(min, max) as usize)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Claude Code

/// Mean bytes of an ordinary Claude Code session at scale 1 (~1.4 GB for 2,000 with the giants).
const CLAUDE_MEAN: f64 = 620_000.0;
/// The three giant sessions and their one huge line, at scale 1.
const CLAUDE_GIANT: f64 = 60_000_000.0;
const CLAUDE_GIANT_LINE: f64 = 12_000_000.0;
const GIANTS: usize = 3;

struct Project {
    cwd: String,
    dir: String,
    branch: String,
}

struct ClaudePlan {
    seed: u64,
    scale: f64,
    projects: Vec<Project>,
    sessions: Vec<ClaudeSessionPlan>,
}

struct ClaudeSessionPlan {
    project: usize,
    id: String,
    start_ms: i64,
    target: usize,
    giant: bool,
}

fn projects(rng: &mut Rng, n: usize) -> Vec<Project> {
    (0..n)
        .map(|i| {
            let cwd = format!(
                "/home/dev/src/{}-{}{}",
                rng.pick(IDENTS),
                rng.pick(IDENTS),
                if i % 7 == 3 { "/crates/core" } else { "" }
            );
            Project {
                dir: cwd.replace(['/', '.'], "-"),
                cwd,
                branch: rng
                    .pick(&["main", "main", "dev", "fix/listing", "feat/cache"])
                    .to_string(),
            }
        })
        .collect()
}

/// Sessions per project follow a steep curve: a few projects hold most sessions.
fn zipf_project(rng: &mut Rng, n: usize) -> usize {
    let x = rng.unit();
    ((n as f64).powf(x * x) as usize)
        .saturating_sub(1)
        .min(n - 1)
}

fn plan_claude(opts: &Opts) -> ClaudePlan {
    let mut rng = Rng::stream(opts.seed, 1, 0);
    let projects = projects(&mut rng, 40);
    let giants = if opts.claude >= 10 { GIANTS } else { 0 };
    let mut body = sizes(
        &mut rng,
        opts.claude - giants,
        CLAUDE_MEAN * opts.scale,
        1.5,
        3_000.0,
        30_000_000.0 * opts.scale,
    );
    body.extend(std::iter::repeat_n(
        scaled(CLAUDE_GIANT, opts.scale, 1),
        giants,
    ));
    let end = epoch_end();
    let sessions = body
        .into_iter()
        .enumerate()
        .map(|(i, target)| ClaudeSessionPlan {
            project: zipf_project(&mut rng, projects.len()),
            id: rng.uuid_v4(),
            start_ms: end - 2 * DAY_MS - rng.below(180 * DAY_MS as u64) as i64,
            target,
            giant: i >= opts.claude - giants,
        })
        .collect();
    ClaudePlan {
        seed: opts.seed,
        scale: opts.scale,
        projects,
        sessions,
    }
}

fn write_claude_home(home: &Path, plan: &ClaudePlan) -> std::io::Result<Totals> {
    let mut totals = Totals {
        files: 0,
        bytes: 0,
        largest: None,
    };
    for (i, s) in plan.sessions.iter().enumerate() {
        let project = &plan.projects[s.project];
        let path = home
            .join("projects")
            .join(&project.dir)
            .join(format!("{}.jsonl", s.id));
        let rng = Rng::stream(plan.seed, 2, i as u64);
        let bytes = ClaudeWriter::new(&path, rng, s, project, plan.scale)?.write(s)?;
        totals.files += 1;
        totals.bytes += bytes;
        if totals.largest.as_ref().is_none_or(|(_, b, _)| bytes > *b) {
            totals.largest = Some((s.id.clone(), bytes, path));
        }
    }
    Ok(totals)
}

struct ClaudeWriter<'a> {
    file: Jsonl,
    rng: Rng,
    id: &'a str,
    project: &'a Project,
    version: &'static str,
    entrypoint: &'static str,
    scale: f64,
    now: i64,
    parent: Option<String>,
    messages: u64,
}

impl<'a> ClaudeWriter<'a> {
    fn new(
        path: &Path,
        mut rng: Rng,
        plan: &'a ClaudeSessionPlan,
        project: &'a Project,
        scale: f64,
    ) -> std::io::Result<Self> {
        let version = *rng.pick(&["2.1.150", "2.1.172", "2.1.197"]);
        let entrypoint = if rng.chance(0.8) { "cli" } else { "sdk-cli" };
        Ok(ClaudeWriter {
            file: Jsonl::create(path)?,
            rng,
            id: &plan.id,
            project,
            version,
            entrypoint,
            scale,
            now: plan.start_ms,
            parent: None,
            messages: 0,
        })
    }

    fn tick(&mut self, lo_ms: u64, hi_ms: u64) -> String {
        self.now += self.rng.range(lo_ms, hi_ms) as i64;
        rfc3339(self.now)
    }

    /// The fields every conversation record ends with.
    fn tail(&self) -> Value {
        json!({
            "userType": "external",
            "entrypoint": self.entrypoint,
            "cwd": self.project.cwd,
            "sessionId": self.id,
            "version": self.version,
            "gitBranch": self.project.branch,
        })
    }

    /// Writes a conversation record (its own fields, then the common tail) and makes it the
    /// parent of the next one.
    fn record(&mut self, uuid: String, fields: Value) -> std::io::Result<()> {
        let line = with(fields, self.tail());
        self.file.line(&line)?;
        self.parent = Some(uuid);
        self.messages += 1;
        Ok(())
    }

    fn user(&mut self, prompt_id: &str, content: Value) -> std::io::Result<()> {
        let uuid = self.rng.uuid_v4();
        let ts = self.tick(2_000, 600_000);
        self.file.line(&json!({
            "type": "file-history-snapshot",
            "messageId": uuid,
            "snapshot": {"messageId": uuid, "trackedFileBackups": {}, "timestamp": ts},
            "isSnapshotUpdate": false,
        }))?;
        let fields = json!({
            "parentUuid": self.parent,
            "isSidechain": false,
            "promptId": prompt_id,
            "type": "user",
            "message": {"role": "user", "content": content},
            "uuid": uuid,
            "timestamp": ts,
            "permissionMode": "default",
            "origin": {"kind": "human"},
            "promptSource": "typed",
        });
        self.record(uuid, fields)
    }

    fn assistant(&mut self, msg_id: &str, block: Value, stop: &str) -> std::io::Result<()> {
        let uuid = self.rng.uuid_v4();
        let ts = self.tick(200, 20_000);
        let out_tokens = self.rng.range(5, 3000);
        let fields = json!({
            "parentUuid": self.parent,
            "isSidechain": false,
            "message": {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": "claude-opus-4-5",
                "content": [block],
                "stop_reason": stop,
                "stop_sequence": null,
                "usage": {
                    "input_tokens": self.rng.range(3, 40),
                    "cache_creation_input_tokens": self.rng.range(0, 20_000),
                    "cache_read_input_tokens": self.rng.range(10_000, 180_000),
                    "output_tokens": out_tokens,
                    "service_tier": "standard",
                },
            },
            "requestId": format!("req_011C{}", self.rng.base62(18)),
            "type": "assistant",
            "uuid": uuid,
            "timestamp": ts,
        });
        self.record(uuid, fields)
    }

    /// One tool call and its result (the result stored twice: in the message content and in
    /// `toolUseResult`). `big` forces a Bash `git diff` of that many bytes.
    fn tool_round(&mut self, prompt_id: &str, big: Option<usize>) -> std::io::Result<()> {
        let msg_id = format!("msg_01{}", self.rng.base62(22));
        if self.rng.chance(0.55) {
            let n = self.rng.lognormal(900.0, 1.0).min(40_000.0) as usize;
            let thinking = prose(&mut self.rng, n);
            let sig_len = self.rng.range(200, 1200) as usize;
            let signature = b64(&self.rng.bytes(sig_len));
            self.assistant(
                &msg_id,
                json!({"type": "thinking", "thinking": thinking, "signature": signature}),
                "tool_use",
            )?;
        }
        if self.rng.chance(0.4) {
            let n = self.rng.range(40, 400) as usize;
            let text = prose(&mut self.rng, n);
            self.assistant(&msg_id, json!({"type": "text", "text": text}), "tool_use")?;
        }
        let tool_id = format!("toolu_01{}", self.rng.base62(22));
        let file = format!(
            "{}/src/{}/{}.rs",
            self.project.cwd,
            self.rng.pick(IDENTS),
            self.rng.pick(IDENTS)
        );
        let out_len = match big {
            Some(n) => n,
            None => scaled(
                self.rng.lognormal(2_500.0, 1.3).min(400_000.0),
                self.scale.sqrt(),
                64,
            ),
        };
        let kind = if big.is_some() { 0 } else { self.rng.below(3) };
        let (input, content, result) = match kind {
            0 => {
                let (command, stdout) = if big.is_some() || self.rng.chance(0.3) {
                    ("git diff".to_string(), git_diff(&mut self.rng, out_len))
                } else {
                    let text = code(&mut self.rng, out_len);
                    (
                        format!("cargo test -p {} 2>&1", self.rng.pick(IDENTS)),
                        text,
                    )
                };
                (
                    json!({"command": command, "description": phrase(&mut self.rng, 5)}),
                    Value::String(stdout.clone()),
                    json!({
                        "stdout": stdout,
                        "stderr": "",
                        "interrupted": false,
                        "isImage": false,
                        "noOutputExpected": false,
                    }),
                )
            }
            1 => {
                let body = code(&mut self.rng, out_len);
                let lines = body.lines().count();
                (
                    json!({"file_path": file}),
                    Value::String(numbered(&body)),
                    json!({
                        "type": "text",
                        "file": {
                            "filePath": file,
                            "content": body,
                            "numLines": lines,
                            "startLine": 1,
                            "totalLines": lines,
                        },
                    }),
                )
            }
            _ => {
                let original = code(&mut self.rng, out_len);
                let old = original.lines().nth(1).unwrap_or("").to_string();
                let mut new = String::new();
                code_line(&mut self.rng, &mut new);
                let snippet: String = original.lines().take(12).collect::<Vec<_>>().join("\n");
                (
                    json!({"file_path": file, "old_string": old, "new_string": new, "replace_all": false}),
                    Value::String(format!(
                        "The file {file} has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n{}",
                        numbered(&snippet)
                    )),
                    json!({
                        "filePath": file,
                        "oldString": old,
                        "newString": new,
                        "originalFile": original,
                        "structuredPatch": [{
                            "oldStart": 2, "oldLines": 1, "newStart": 2, "newLines": 1,
                            "lines": [format!("-{old}"), format!("+{new}")],
                        }],
                        "userModified": false,
                        "replaceAll": false,
                    }),
                )
            }
        };
        let name = ["Bash", "Read", "Edit"][kind as usize];
        self.assistant(
            &msg_id,
            json!({"type": "tool_use", "id": tool_id, "name": name, "input": input}),
            "tool_use",
        )?;
        let source = self.parent.clone();
        let uuid = self.rng.uuid_v4();
        let ts = self.tick(100, 90_000);
        let fields = json!({
            "parentUuid": self.parent,
            "isSidechain": false,
            "promptId": prompt_id,
            "type": "user",
            "message": {"role": "user", "content": [{
                "tool_use_id": tool_id,
                "type": "tool_result",
                "content": content,
                "is_error": false,
            }]},
            "uuid": uuid,
            "timestamp": ts,
            "toolUseResult": result,
            "sourceToolAssistantUUID": source,
        });
        self.record(uuid, fields)
    }

    fn turn_end(&mut self, prompt: &str) -> std::io::Result<()> {
        let msg_id = format!("msg_01{}", self.rng.base62(22));
        let n = self.rng.lognormal(700.0, 1.0).min(20_000.0) as usize;
        let text = prose(&mut self.rng, n);
        self.assistant(&msg_id, json!({"type": "text", "text": text}), "end_turn")?;
        let uuid = self.rng.uuid_v4();
        let ts = self.tick(5, 100);
        let fields = json!({
            "parentUuid": self.parent,
            "isSidechain": false,
            "type": "system",
            "subtype": "turn_duration",
            "durationMs": self.rng.range(2_000, 600_000),
            "messageCount": self.messages,
            "timestamp": ts,
            "uuid": uuid,
            "isMeta": false,
        });
        self.record(uuid, fields)?;
        self.file.line(&json!({
            "type": "last-prompt",
            "lastPrompt": prompt,
            "leafUuid": self.parent,
            "sessionId": self.id,
        }))
    }

    /// A compaction: the boundary (a new root) and the summary that stands for what came before.
    fn compaction(&mut self) -> std::io::Result<()> {
        let uuid = self.rng.uuid_v4();
        let ts = self.tick(1_000, 60_000);
        let fields = json!({
            "parentUuid": null,
            "logicalParentUuid": self.parent,
            "isSidechain": false,
            "type": "system",
            "subtype": "compact_boundary",
            "content": "Conversation compacted",
            "isMeta": false,
            "timestamp": ts,
            "uuid": uuid,
            "level": "info",
            "compactMetadata": {
                "trigger": *self.rng.pick(&["auto", "manual"]),
                "preTokens": self.rng.range(100_000, 190_000),
            },
        });
        self.record(uuid, fields)?;
        let n = self.rng.range(3_000, 14_000) as usize;
        let summary = format!(
            "This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\n{}",
            prose(&mut self.rng, n)
        );
        let uuid = self.rng.uuid_v4();
        let prompt_id = self.rng.uuid_v4();
        let ts = self.tick(10, 500);
        let fields = json!({
            "parentUuid": self.parent,
            "isSidechain": false,
            "promptId": prompt_id,
            "type": "user",
            "message": {"role": "user", "content": summary},
            "isVisibleInTranscriptOnly": true,
            "isCompactSummary": true,
            "uuid": uuid,
            "timestamp": ts,
        });
        self.record(uuid, fields)
    }

    fn ai_title(&mut self) -> std::io::Result<()> {
        let title = phrase(&mut self.rng, 7);
        self.file
            .line(&json!({"type": "ai-title", "sessionId": self.id, "aiTitle": title}))
    }

    fn write(mut self, plan: &ClaudeSessionPlan) -> std::io::Result<u64> {
        let target = plan.target as u64;
        if self.entrypoint == "cli" {
            self.file
                .line(&json!({"type": "mode", "mode": "normal", "sessionId": self.id}))?;
            self.file.line(&json!({
                "type": "permission-mode", "permissionMode": "default", "sessionId": self.id,
            }))?;
        }
        let compact_at = self
            .rng
            .chance(0.15)
            .then(|| target * self.rng.range(40, 80) / 100);
        let giant_at = plan.giant.then(|| target * self.rng.range(30, 60) / 100);
        let mid_title = self.rng.chance(0.2);
        let mut compacted = false;
        let mut giant_done = false;
        let mut turns = 0u64;
        loop {
            let prompt_id = self.rng.uuid_v4();
            let prompt = if self.rng.chance(0.15) {
                let n = self.rng.range(200, 3000) as usize;
                prose(&mut self.rng, n)
            } else {
                phrase(&mut self.rng, 16)
            };
            if self.entrypoint == "sdk-cli" {
                let ts = self.tick(100, 2_000);
                self.file.line(&json!({
                    "type": "queue-operation", "operation": "enqueue", "timestamp": ts,
                    "sessionId": self.id, "content": prompt,
                }))?;
                self.file.line(&json!({
                    "type": "queue-operation", "operation": "dequeue", "timestamp": ts,
                    "sessionId": self.id,
                }))?;
            }
            let content = if self.rng.chance(0.08) {
                let n = scaled(
                    self.rng.range(60_000, 600_000) as f64,
                    self.scale.sqrt(),
                    2_000,
                );
                let image = png_base64(&mut self.rng, n);
                json!([
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": image}},
                    {"type": "text", "text": prompt},
                ])
            } else {
                Value::String(prompt.clone())
            };
            self.user(&prompt_id, content)?;
            for _ in 0..self.rng.range(0, 8) {
                if self.file.written >= target && (giant_at.is_none() || giant_done) {
                    break;
                }
                let big = match giant_at {
                    Some(at) if !giant_done && self.file.written >= at => {
                        giant_done = true;
                        // The line holds the diff twice (content and toolUseResult).
                        Some(scaled(CLAUDE_GIANT_LINE / 2.0, self.scale, 1))
                    }
                    _ => None,
                };
                self.tool_round(&prompt_id, big)?;
            }
            self.turn_end(&prompt)?;
            turns += 1;
            if turns == 1 && mid_title {
                self.ai_title()?;
            }
            if let Some(at) = compact_at {
                if !compacted && self.file.written >= at {
                    compacted = true;
                    self.compaction()?;
                }
            }
            if self.file.written >= target && (giant_at.is_none() || giant_done) {
                break;
            }
        }
        // Titles land at the end of the file, where an append puts them.
        if self.rng.chance(0.45) {
            self.ai_title()?;
        }
        if self.rng.chance(0.12) {
            let name = phrase(&mut self.rng, 5);
            self.file.line(
                &json!({"type": "custom-title", "customTitle": name, "sessionId": self.id}),
            )?;
            self.file
                .line(&json!({"type": "agent-name", "agentName": name, "sessionId": self.id}))?;
        }
        let last = self.now;
        self.file.finish(last)
    }
}

// ---------------------------------------------------------------------------------------------
// Codex

/// Mean bytes of a Codex rollout at scale 1 (~600 MB for 2,000).
const CODEX_MEAN: f64 = 300_000.0;
/// `session_meta.base_instructions.text` (not scaled: every real first line carries it).
const BASE_INSTRUCTIONS_BYTES: usize = 20_500;

struct CodexPlan {
    seed: u64,
    scale: f64,
    projects: Vec<Project>,
    base_instructions: String,
    threads: Vec<CodexThreadPlan>,
}

struct CodexThreadPlan {
    project: usize,
    id: String,
    start_ms: i64,
    target: usize,
}

fn plan_codex(opts: &Opts) -> CodexPlan {
    let mut rng = Rng::stream(opts.seed, 3, 0);
    let projects = projects(&mut rng, 25);
    let mut base = String::from(
        "You are Codex, a coding agent working in the user's terminal and editor. Follow the \
         instructions below.\n\n",
    );
    base.push_str(&prose(&mut rng, BASE_INSTRUCTIONS_BYTES - base.len()));
    let targets = sizes(
        &mut rng,
        opts.codex,
        CODEX_MEAN * opts.scale,
        1.4,
        1.0,
        25_000_000.0 * opts.scale,
    );
    let end = epoch_end();
    let threads = targets
        .into_iter()
        .map(|target| {
            let start_ms = end - 2 * DAY_MS - rng.below(150 * DAY_MS as u64) as i64;
            CodexThreadPlan {
                project: zipf_project(&mut rng, projects.len()),
                id: rng.uuid_v7(start_ms),
                start_ms,
                target,
            }
        })
        .collect();
    CodexPlan {
        seed: opts.seed,
        scale: opts.scale,
        projects,
        base_instructions: base,
        threads,
    }
}

/// One `session_index.jsonl` line before sorting: when, thread, name.
type IndexEntry = (i64, String, String);

fn write_codex_home(home: &Path, plan: &CodexPlan) -> std::io::Result<Totals> {
    let mut totals = Totals {
        files: 0,
        bytes: 0,
        largest: None,
    };
    let mut index: Vec<IndexEntry> = Vec::new();
    for (i, t) in plan.threads.iter().enumerate() {
        let c = civil(t.start_ms);
        let path = home
            .join("sessions")
            .join(format!("{:04}", c.y))
            .join(format!("{:02}", c.mo))
            .join(format!("{:02}", c.d))
            .join(format!(
                "rollout-{:04}-{:02}-{:02}T{:02}-{:02}-{:02}-{}.jsonl",
                c.y, c.mo, c.d, c.h, c.mi, c.s, t.id
            ));
        let rng = Rng::stream(plan.seed, 4, i as u64);
        let project = &plan.projects[t.project];
        let writer = CodexWriter {
            file: Jsonl::create(&path)?,
            rng,
            plan,
            thread: t,
            project,
            now: t.start_ms,
        };
        let bytes = writer.write(&mut index)?;
        totals.files += 1;
        totals.bytes += bytes;
    }
    index.sort();
    let mut out = BufWriter::new(File::create(home.join("session_index.jsonl"))?);
    for (ms, id, name) in &index {
        // Codex writes nanoseconds here.
        let when = rfc3339(*ms).replace(
            'Z',
            &format!("{:06}Z", (ms.unsigned_abs() * 7919) % 1_000_000),
        );
        let line = json!({"id": id, "thread_name": name, "updated_at": when});
        serde_json::to_writer(&mut out, &line).map_err(std::io::Error::other)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(totals)
}

struct CodexWriter<'a> {
    file: Jsonl,
    rng: Rng,
    plan: &'a CodexPlan,
    thread: &'a CodexThreadPlan,
    project: &'a Project,
    now: i64,
}

impl CodexWriter<'_> {
    fn line(&mut self, kind: &str, payload: Value, lo_ms: u64, hi_ms: u64) -> std::io::Result<()> {
        self.now += self.rng.range(lo_ms, hi_ms) as i64;
        self.file.line(&json!({
            "timestamp": rfc3339(self.now),
            "type": kind,
            "payload": payload,
        }))
    }

    fn event(&mut self, payload: Value) -> std::io::Result<()> {
        self.line("event_msg", payload, 0, 50)
    }

    fn item(&mut self, payload: Value) -> std::io::Result<()> {
        self.line("response_item", payload, 1, 4_000)
    }

    fn token_count(&mut self) -> std::io::Result<()> {
        let usage = |r: &mut Rng| {
            let input = r.range(10_000, 200_000);
            let output = r.range(20, 4_000);
            json!({
                "input_tokens": input,
                "cached_input_tokens": input * 9 / 10,
                "output_tokens": output,
                "reasoning_output_tokens": output / 3,
                "total_tokens": input + output,
            })
        };
        let total = usage(&mut self.rng);
        let last = usage(&mut self.rng);
        self.event(json!({
            "type": "token_count",
            "info": {"total_token_usage": total, "last_token_usage": last, "model_context_window": 258400},
            "rate_limits": null,
        }))
    }

    fn reasoning(&mut self) -> std::io::Result<()> {
        let n = self.rng.lognormal(1_800.0, 0.8).min(30_000.0) as usize;
        let blob = encrypted(&mut self.rng, n);
        self.item(
            json!({"type": "reasoning", "summary": [], "content": null, "encrypted_content": blob}),
        )
    }

    fn assistant(&mut self, text: String, phase: &str) -> std::io::Result<()> {
        self.event(json!({"type": "agent_message", "message": text, "phase": phase, "memory_citation": null}))?;
        self.item(json!({
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
            "phase": phase,
        }))
    }

    /// A shell call: its output stored twice (`function_call_output` and `exec_command_end`).
    fn exec(&mut self, turn_id: &str) -> std::io::Result<()> {
        let call_id = format!("call_{}", self.rng.base62(24));
        let cmd = match self.rng.below(3) {
            0 => "git diff".to_string(),
            1 => format!("rg -n {} src", self.rng.pick(IDENTS)),
            _ => format!("sed -n '1,200p' src/{}.rs", self.rng.pick(IDENTS)),
        };
        let n = scaled(
            self.rng.lognormal(3_000.0, 1.3).min(300_000.0),
            self.plan.scale.sqrt(),
            32,
        );
        let out = if cmd == "git diff" {
            git_diff(&mut self.rng, n)
        } else {
            code(&mut self.rng, n)
        };
        let args =
            json!({"cmd": cmd, "workdir": self.project.cwd, "yield_time_ms": 10000}).to_string();
        self.item(json!({"type": "function_call", "name": "exec_command", "arguments": args, "call_id": call_id}))?;
        self.token_count()?;
        let output = format!(
            "Chunk ID: {}\nWall time: {}.{:04} seconds\nProcess exited with code 0\nOriginal token count: {}\nOutput:\n{out}",
            self.rng.hex(6),
            self.rng.below(5),
            self.rng.below(10_000),
            out.len() / 4
        );
        self.item(json!({"type": "function_call_output", "call_id": call_id, "output": output}))?;
        let secs = self.rng.below(20);
        let nanos = self.rng.below(1_000_000_000);
        let pid = self.rng.range(1_000, 99_999).to_string();
        self.event(json!({
            "type": "exec_command_end",
            "call_id": call_id,
            "process_id": pid,
            "turn_id": turn_id,
            "command": ["/bin/zsh", "-lc", cmd],
            "cwd": self.project.cwd,
            "parsed_cmd": [{"type": "unknown", "cmd": cmd}],
            "source": "unified_exec_startup",
            "stdout": "",
            "stderr": "",
            "aggregated_output": out,
            "exit_code": 0,
            "duration": {"secs": secs, "nanos": nanos},
            "formatted_output": "",
            "status": "completed",
        }))
    }

    /// An `apply_patch` custom tool call, its end event and its output.
    fn patch(&mut self, turn_id: &str) -> std::io::Result<()> {
        let call_id = format!("call_{}", self.rng.base62(24));
        let file = format!("src/{}/{}.rs", self.rng.pick(IDENTS), self.rng.pick(IDENTS));
        let n = self.rng.range(300, 6_000) as usize;
        let body = code(&mut self.rng, n);
        let diff: String = body.lines().map(|l| format!("+{l}\n")).collect();
        let input = format!("*** Begin Patch\n*** Update File: {file}\n@@\n{diff}*** End Patch\n");
        self.item(json!({"type": "custom_tool_call", "status": "completed", "call_id": call_id, "name": "apply_patch", "input": input}))?;
        let stdout = format!("Success. Updated the following files:\nM {file}\n");
        let full = format!("{}/{file}", self.project.cwd);
        self.event(json!({
            "type": "patch_apply_end",
            "call_id": call_id,
            "turn_id": turn_id,
            "stdout": stdout,
            "stderr": "",
            "success": true,
            "changes": {(full): {"type": "update", "unified_diff": diff, "move_path": null}},
            "status": "completed",
        }))?;
        let output =
            json!({"output": stdout, "metadata": {"exit_code": 0, "duration_seconds": 0.1}})
                .to_string();
        self.item(json!({"type": "custom_tool_call_output", "call_id": call_id, "output": output}))
    }

    fn write(mut self, index: &mut Vec<IndexEntry>) -> std::io::Result<u64> {
        let t = self.thread;
        let target = t.target as u64;
        let start = rfc3339(t.start_ms);
        self.now += self.rng.range(500, 60_000) as i64;
        let meta = json!({
            "id": t.id,
            "timestamp": start,
            "cwd": self.project.cwd,
            "originator": "codex-tui",
            "cli_version": "0.125.0",
            "source": "cli",
            "model_provider": "openai",
            "base_instructions": {"text": self.plan.base_instructions},
            "git": {
                "commit_hash": self.rng.hex(40),
                "branch": self.project.branch,
                "repository_url": format!("git@github.com:dev/{}.git", self.project.dir.rsplit('-').next().unwrap_or("repo")),
            },
        });
        self.line("session_meta", meta, 0, 0)?;
        let named = self.rng.chance(0.35);
        let renamed = named && self.rng.chance(0.45);
        let compact_at = self
            .rng
            .chance(0.1)
            .then(|| target * self.rng.range(40, 80) / 100);
        let mut compacted = false;
        let mut prompts: Vec<String> = Vec::new();
        let mut turn = 0u64;
        loop {
            let turn_id = self.rng.uuid_v7(self.now);
            self.now += self.rng.range(5_000, 900_000) as i64;
            let started = self.now / 1000;
            self.event(json!({
                "type": "task_started",
                "turn_id": turn_id,
                "started_at": started,
                "model_context_window": 258400,
                "collaboration_mode_kind": "default",
            }))?;
            if turn == 0 {
                let permissions = format!(
                    "<permissions instructions>\n{}\n</permissions instructions>",
                    prose(&mut self.rng, 2_400)
                );
                let mode = format!("<collaboration_mode># Collaboration Mode: Default\n\n{}\n</collaboration_mode>", prose(&mut self.rng, 900));
                self.item(json!({"type": "message", "role": "developer", "content": [
                    {"type": "input_text", "text": permissions},
                    {"type": "input_text", "text": mode},
                ]}))?;
                let agents = format!(
                    "# AGENTS.md instructions for {}\n\n<INSTRUCTIONS>\n{}\n</INSTRUCTIONS>",
                    self.project.cwd,
                    prose(&mut self.rng, 1_100)
                );
                let env = format!(
                    "<environment_context>\n  <cwd>{}</cwd>\n  <shell>zsh</shell>\n  <current_date>{}</current_date>\n  <timezone>Etc/UTC</timezone>\n</environment_context>",
                    self.project.cwd,
                    &start[..10]
                );
                self.item(json!({"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": agents},
                    {"type": "input_text", "text": env},
                ]}))?;
            }
            self.line(
                "turn_context",
                json!({
                    "turn_id": turn_id,
                    "cwd": self.project.cwd,
                    "current_date": &start[..10],
                    "timezone": "Etc/UTC",
                    "approval_policy": "on-request",
                    "sandbox_policy": {"type": "workspace-write", "network_access": false, "exclude_tmpdir_env_var": false, "exclude_slash_tmp": false},
                    "model": "gpt-5.5",
                    "personality": "pragmatic",
                    "collaboration_mode": {"mode": "default", "settings": {"model": "gpt-5.5", "reasoning_effort": "medium", "developer_instructions": null}},
                    "effort": "medium",
                    "summary": "auto",
                }),
                0,
                5,
            )?;
            let prompt = if self.rng.chance(0.15) {
                let n = self.rng.range(200, 2500) as usize;
                prose(&mut self.rng, n)
            } else {
                phrase(&mut self.rng, 16)
            };
            let mut content = vec![json!({"type": "input_text", "text": prompt})];
            let mut images = Vec::new();
            if self.rng.chance(0.05) {
                let n = scaled(
                    self.rng.range(60_000, 500_000) as f64,
                    self.plan.scale.sqrt(),
                    2_000,
                );
                let url = format!("data:image/png;base64,{}", png_base64(&mut self.rng, n));
                content.push(json!({"type": "input_image", "image_url": url}));
                images.push(Value::String(url));
            }
            self.item(json!({"type": "message", "role": "user", "content": content}))?;
            self.event(json!({
                "type": "user_message",
                "message": prompt,
                "images": images,
                "local_images": [],
                "text_elements": [],
            }))?;
            prompts.push(prompt);
            for _ in 0..self.rng.range(0, 9) {
                if self.file.written >= target {
                    break;
                }
                self.reasoning()?;
                if self.rng.chance(0.3) {
                    let n = self.rng.range(60, 400) as usize;
                    let text = prose(&mut self.rng, n);
                    self.assistant(text, "commentary")?;
                }
                if self.rng.chance(0.15) {
                    self.patch(&turn_id)?;
                } else {
                    self.exec(&turn_id)?;
                }
            }
            self.reasoning()?;
            let n = self.rng.lognormal(900.0, 1.0).min(20_000.0) as usize;
            let answer = prose(&mut self.rng, n);
            self.assistant(answer.clone(), "final_answer")?;
            self.token_count()?;
            let duration = self.rng.range(2_000, 600_000);
            let first_token = self.rng.range(300, 9_000);
            self.event(json!({
                "type": "task_complete",
                "turn_id": turn_id,
                "last_agent_message": answer,
                "completed_at": self.now / 1000,
                "duration_ms": duration,
                "time_to_first_token_ms": first_token,
            }))?;
            turn += 1;
            if turn == 1 && named {
                let name = phrase(&mut self.rng, 6);
                index.push((self.now, t.id.clone(), name));
            }
            if let Some(at) = compact_at {
                if !compacted && self.file.written >= at {
                    compacted = true;
                    let n = self.rng.range(1_500, 8_000) as usize;
                    let message = prose(&mut self.rng, n);
                    let mut history: Vec<Value> = prompts
                        .iter()
                        .map(|p| json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": p}]}))
                        .collect();
                    history.push(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": message}]}));
                    self.line(
                        "compacted",
                        json!({"message": message, "replacement_history": history}),
                        100,
                        30_000,
                    )?;
                    self.event(json!({"type": "context_compacted"}))?;
                }
            }
            if self.file.written >= target {
                break;
            }
        }
        if renamed {
            let name = phrase(&mut self.rng, 5);
            self.event(
                json!({"type": "thread_name_updated", "thread_id": t.id, "thread_name": name}),
            )?;
            index.push((self.now, t.id.clone(), name));
        }
        let last = self.now;
        self.file.finish(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_round_trip() {
        for days in [-1000, 0, 1, 59, 365, 20_000, 20_787] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(epoch_end()), "2026-11-30T00:00:00.000Z");
    }

    #[test]
    fn same_seed_same_stream() {
        let mut a = Rng::stream(7, 2, 3);
        let mut b = Rng::stream(7, 2, 3);
        assert_eq!(a.uuid_v4(), b.uuid_v4());
        assert_ne!(Rng::stream(7, 2, 4).next(), Rng::stream(7, 2, 3).next());
    }
}
