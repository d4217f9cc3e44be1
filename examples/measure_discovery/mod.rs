//! `measure search`: the discovery index and search over a generated home (SPEC §8 goals).
//!
//! The home holds `sessions` plain-text dsh logs written directly (the writer fsyncs every
//! batch, which would make generating 100,000 sessions take longer than measuring them): per
//! session a title, alternating prompts and answers of prose drawn from a Zipf-like vocabulary of
//! 20,000 made-up words plus common English and code words, and tool results (which the index
//! must skip). It is generated once into `target/bench-data/` and reused.
//!
//! Measured: a cold index build on one core (log MB/s and conversation MB/s), warm search
//! percentiles over several kinds of query, and the time from an append to the log until the
//! background indexer makes it visible to search.

use super::gen;
use dsh_session_references::discovery::{Discovery, SearchQuery};
use dsh_session_references::session::external::SourceSet;
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const VOCABULARY: usize = 20_000;
const COMMON: &[&str] = &[
    "the", "a", "of", "to", "and", "in", "is", "for", "with", "on", "that", "this", "it", "we",
    "test", "error", "value", "index", "cache", "build", "fix", "file", "function", "return",
];

/// A made-up word for vocabulary slot `i` (pronounceable, distinct per slot).
fn word(i: usize) -> String {
    const ON: &[&str] = &[
        "b", "c", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
    ];
    const NU: &[&str] = &["a", "e", "i", "o", "u", "ai", "ou"];
    let mut n = i + 1;
    let mut w = String::new();
    while n > 0 {
        w.push_str(ON[n % ON.len()]);
        n /= ON.len();
        w.push_str(NU[n % NU.len()]);
        n /= NU.len();
    }
    w
}

/// A word drawn Zipf-like: half the draws common words, the rest log-uniform over the vocabulary.
fn draw(rng: &mut gen::TestRng) -> String {
    if rng.below(2) == 0 {
        return COMMON[rng.below(COMMON.len())].to_string();
    }
    let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let i = ((VOCABULARY as f64).powf(u) as usize).saturating_sub(1);
    word(i.min(VOCABULARY - 1))
}

fn text(rng: &mut gen::TestRng, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 16);
    while out.len() < bytes {
        out.push_str(&draw(rng));
        out.push(if rng.below(12) == 0 { '\n' } else { ' ' });
    }
    out
}

/// The session id of generated session `i`.
pub fn id(i: usize) -> String {
    gen::session_id(i)
}

/// Records per generated session (the next seq an append uses).
const RECORDS: u64 = 8;

fn record(kind: &str, seq: u64, time: i64, data: serde_json::Value) -> String {
    let mut r = json!({"type": kind, "seq": seq, "time": time, "data": data});
    if kind != "session/title" {
        r["surfaceOp"] = json!("append");
    }
    r.to_string()
}

fn user(text: &str, id: &str) -> serde_json::Value {
    json!({"content": [{"type": "text", "text": text}], "source": {"kind": "user"},
           "role": "user", "id": id})
}

fn write_session(home: &Path, i: usize, kb: usize, rng: &mut gen::TestRng) -> std::io::Result<u64> {
    let id = id(i);
    let project = i % 500;
    let cwd = gen::project_cwd(project);
    let dir = home.join(format!(
        "sessions/--{}--/{id}",
        dsh_session_references::session::paths::project_key(&cwd)
    ));
    std::fs::create_dir_all(&dir)?;
    let created = 1_700_000_000_000i64 + i as i64 * 60_000;
    let part = kb * 1024 / 6;
    let mut lines = vec![
        json!({"type": "session", "version": 0, "id": id, "createdAt": created,
        "cwd": cwd, "delegationDepth": 0})
        .to_string(),
    ];
    let title = format!(
        "{} the {} {}",
        ["Fix", "Refactor", "Explain", "Speed up", "Test"][i % 5],
        draw(rng),
        draw(rng)
    );
    let mut seq = 0;
    let mut t = created;
    let mut next = |kind: &str, data: serde_json::Value, lines: &mut Vec<String>| {
        t += 1000;
        lines.push(record(kind, seq, t, data));
        seq += 1;
    };
    next(
        "user/message",
        user(&text(rng, part), &format!("u0-{i}")),
        &mut lines,
    );
    next(
        "session/title",
        json!({"title": title, "messageSeqs": [0], "source": {"kind": "generated"}}),
        &mut lines,
    );
    for step in 0..2 {
        next(
            "tool/result",
            json!({"turn": 1, "step": step, "message": {"role": "user", "content": [{"type": "tool-result",
                "toolCallId": format!("c{step}"), "content": [{"type": "text", "text": text(rng, part)}]}],
                "source": {"kind": "tool", "callId": format!("c{step}")}, "id": format!("t{step}-{i}")}}),
            &mut lines,
        );
        next(
            "assistant/message",
            json!({"turn": 1, "step": step, "message": {"role": "assistant", "content": [{"type": "text",
                "text": text(rng, part)}], "source": {"kind": "model", "provider": "bench", "model": "m"},
                "id": format!("a{step}-{i}")}}),
            &mut lines,
        );
    }
    next(
        "user/message",
        user(&text(rng, part), &format!("u1-{i}")),
        &mut lines,
    );
    next(
        "assistant/message",
        json!({"turn": 2, "step": 0, "message": {"role": "assistant",
        "content": [{"type": "text", "text": text(rng, part / 2)}], "source": {"kind": "model",
        "provider": "bench", "model": "m"}, "id": format!("a9-{i}")}}),
        &mut lines,
    );
    debug_assert_eq!(seq, RECORDS);
    let body = lines.join("\n") + "\n";
    std::fs::write(dir.join("session.jsonl"), &body)?;
    Ok(body.len() as u64)
}

/// A generated home of `sessions` sessions of about `kb` KiB of log each, reused across runs.
pub fn cached_search_home(sessions: usize, kb: usize) -> std::io::Result<(PathBuf, u64)> {
    let home = gen::data_dir(&format!("search-{sessions}x{kb}k"));
    let marker = home.join(".complete");
    if let Ok(text) = std::fs::read_to_string(&marker) {
        if let Ok(bytes) = text.trim().parse() {
            return Ok((home, bytes));
        }
    }
    if home.exists() {
        std::fs::remove_dir_all(&home)?;
    }
    std::fs::create_dir_all(&home)?;
    let mut rng = gen::TestRng::new(7);
    let mut bytes = 0;
    for i in 0..sessions {
        bytes += write_session(&home, i, kb, &mut rng)?;
    }
    std::fs::write(&marker, bytes.to_string())?;
    gen::age_home(&home);
    Ok((home, bytes))
}

fn percentiles(name: &str, samples: &mut [Duration]) {
    samples.sort();
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    println!(
        "{name}: n={} p50={:.2?} p90={:.2?} p99={:.2?} max={:.2?}",
        samples.len(),
        at(0.5),
        at(0.9),
        at(0.99),
        samples[samples.len() - 1]
    );
}

/// User plus system CPU time of this process so far (the machine is shared: wall time overstates
/// what the work costs).
#[allow(unsafe_code)] // getrusage has no safe wrapper in std
fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// CPU time of the calling thread so far: what one search costs, apart from waiting for a core
/// on a shared machine (a search runs on the thread that asks).
#[allow(unsafe_code)] // clock_gettime has no safe wrapper in std
fn thread_cpu() -> Duration {
    // SAFETY: clock_gettime only writes the struct it is given.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn dir_size(path: &Path) -> u64 {
    std::fs::read_dir(path)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

pub fn run(
    sessions: usize,
    kb: usize,
    rounds: usize,
    appends: usize,
    keep_index: bool,
    searches_only: bool,
    build_only: bool,
) {
    let keep_index = keep_index || searches_only;
    let started = Instant::now();
    let (home, log_bytes) = cached_search_home(sessions, kb).unwrap();
    println!(
        "home {} : {sessions} sessions, {:.1} MB of log ({:.1?} to generate or find)",
        home.display(),
        log_bytes as f64 / 1e6,
        started.elapsed()
    );
    let index_dir = home.join("index");
    if !keep_index {
        let _ = std::fs::remove_dir_all(&index_dir);
    }

    // Cold build, on this thread (the indexer is single-threaded).
    let discovery = Discovery::for_home(&home, &SourceSet::default());
    if !searches_only {
        build(&discovery, &index_dir, log_bytes);
    }
    if build_only {
        return;
    }
    searches(&discovery, sessions, rounds, searches_only);
    if searches_only {
        return;
    }
    popup(&home, &discovery, sessions, rounds.min(10));
    appended(&home, &discovery, sessions, appends);
}

/// A home of `copies` copies of the real dsh logs in `tests/data/fixtures/dsh-logs`, each copy's
/// header under a new id (and a cwd of its own per copy), reused across runs.
pub fn real_home(copies: usize) -> std::io::Result<(PathBuf, u64)> {
    let home = gen::data_dir(&format!("real-{copies}"));
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fixtures/dsh-logs");
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&source)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    logs.sort();
    let marker = home.join(".complete");
    if let Ok(text) = std::fs::read_to_string(&marker) {
        if let Ok(bytes) = text.trim().parse() {
            return Ok((home, bytes));
        }
    }
    let _ = std::fs::remove_dir_all(&home);
    let mut bytes = 0u64;
    for copy in 0..copies {
        let cwd = gen::project_cwd(copy);
        let project = format!(
            "--{}--",
            dsh_session_references::session::paths::project_key(&cwd)
        );
        for (n, log) in logs.iter().enumerate() {
            let plain = std::fs::read(log)?;
            let Some(end) = plain.iter().position(|&b| b == b'\n') else {
                continue;
            };
            let Ok(mut header) =
                serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&plain[..end])
            else {
                continue;
            };
            let id = format!("{:08x}-real-{copy:04}-{n:04}", copy * 1000 + n);
            header.insert("id".into(), id.clone().into());
            header.insert("cwd".into(), cwd.clone().into());
            let mut out = serde_json::to_vec(&header)?;
            out.extend_from_slice(&plain[end..]);
            let dir = home.join("sessions").join(&project).join(&id);
            std::fs::create_dir_all(&dir)?;
            std::fs::write(dir.join("session.jsonl"), &out)?;
            bytes += out.len() as u64;
        }
    }
    std::fs::write(&marker, bytes.to_string())?;
    Ok((home, bytes))
}

/// This process's resident memory (`VmRSS`), bytes; 0 where `/proc` does not say.
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
            let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kb * 1024)
        })
        .unwrap_or(0)
}

/// The kernel's unreclaimable slab memory (`SUnreclaim` in `/proc/meminfo`, where inotify
/// marks live), bytes; `None` where `/proc` does not say. Machine-wide, so other activity shows
/// up too: a rough measure, good for tens of megabytes.
fn kernel_slab() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("SUnreclaim:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The watcher over the generated home of `sessions` sessions: how long adding its watches
/// takes and what memory it holds, in this process and in the kernel.
pub fn watch_cost(sessions: usize, kb: usize) {
    let (home, _) = cached_search_home(sessions, kb).unwrap();
    let dirs = std::fs::read_dir(home.join("sessions"))
        .unwrap()
        .flatten()
        .map(|project| std::fs::read_dir(project.path()).map_or(0, |d| d.count()) + 1)
        .sum::<usize>()
        + 1;
    let rss_before = rss();
    let slab_before = kernel_slab();
    let started = Instant::now();
    let watcher = dsh_session_references::discovery::watch_sessions(&home.join("sessions"), |_| {})
        .expect("the watcher starts");
    let took = started.elapsed();
    let rss_after = rss();
    let slab_after = kernel_slab();
    println!(
        "watch: {dirs} directories watched in {took:.2?}; resident memory +{:.1} MB ({:.0} bytes per directory)",
        (rss_after.saturating_sub(rss_before)) as f64 / 1e6,
        rss_after.saturating_sub(rss_before) as f64 / dirs as f64
    );
    match (slab_before, slab_after) {
        (Some(before), Some(after)) => println!(
            "kernel: unreclaimable slab +{:.1} MB ({:.0} bytes per directory)",
            after.saturating_sub(before) as f64 / 1e6,
            after.saturating_sub(before) as f64 / dirs as f64
        ),
        _ => println!("kernel: /proc/meminfo does not say"),
    }
    drop(watcher);
}

/// A full index build, timed in wall and CPU time, then an idle pass.
pub fn build(discovery: &Discovery, index_dir: &Path, log_bytes: u64) {
    let started = Instant::now();
    let cpu0 = cpu_time();
    let stats = discovery.refresh_blocking().unwrap();
    let took = started.elapsed();
    let cpu = cpu_time() - cpu0;
    println!(
        "build: {} sessions indexed in {:.2?} wall, {:.2?} CPU (user+sys, all threads): \
         {:.1} MB/s of log per CPU-second ({:.1} wall), {:.1} MB/s of conversation per \
         CPU-second ({:.1} MB), index {:.1} MB",
        stats.indexed,
        took,
        cpu,
        log_bytes as f64 / 1e6 / cpu.as_secs_f64(),
        log_bytes as f64 / 1e6 / took.as_secs_f64(),
        stats.text_bytes as f64 / 1e6 / cpu.as_secs_f64(),
        stats.text_bytes as f64 / 1e6,
        dir_size(index_dir) as f64 / 1e6
    );
    let started = Instant::now();
    let again = discovery.refresh_blocking().unwrap();
    println!(
        "idle pass (nothing changed): {:.2?} over {} sessions",
        started.elapsed(),
        again.listed
    );
}

/// Warm searches of every query kind, and typing (each keystroke a search extending the last).
fn searches(discovery: &Discovery, sessions: usize, rounds: usize, quiet_typing: bool) {
    let mut rng = gen::TestRng::new(99);
    let queries: Vec<(&str, String)> = vec![
        ("common word", "the".into()),
        ("common word", "error".into()),
        ("mid word", word(300)),
        ("mid word", word(1500)),
        ("rare word", word(15_000)),
        ("rare word", word(19_000)),
        ("two words", format!("{} {}", word(40), word(900))),
        ("prefix", word(2000)[..3].to_string()),
        ("id prefix", id(sessions / 2)[..8].to_string()),
        ("title words", format!("speed up {}", draw(&mut rng))),
        ("empty", String::new()),
    ];
    // `MEASURE_QUERY=TEXT`: that query alone (for profiling one kind).
    let queries = match std::env::var("MEASURE_QUERY") {
        Ok(text) => vec![("chosen", text)],
        Err(_) => queries,
    };
    let search = |text: &str| search_at(discovery, sessions, text);
    for (_, q) in &queries {
        search(q);
    }
    if !quiet_typing {
        // Typing: each keystroke a search that extends the last one (the popup's case).
        let typed = format!("{} {}", word(40), word(900));
        let mut typing = Vec::new();
        for _ in 0..rounds.min(10) {
            for end in 1..=typed.len() {
                let started = Instant::now();
                search(&typed[..end]);
                typing.push(started.elapsed());
            }
            search("");
        }
        percentiles(
            &format!("search while typing {typed:?} per keystroke"),
            &mut typing,
        );
    }
    let mut all = Vec::new();
    let mut all_cpu = Vec::new();
    let mut kinds: Vec<(&str, Vec<Duration>, usize, Vec<Duration>)> = Vec::new();
    for (kind, q) in &queries {
        let mut samples = Vec::with_capacity(rounds);
        let mut cpu_samples = Vec::with_capacity(rounds);
        let mut total = 0;
        for _ in 0..rounds {
            // An unrelated query first, so nothing is narrowed from the same query before.
            search("");
            let cpu = thread_cpu();
            let started = Instant::now();
            total = search(q).total;
            samples.push(started.elapsed());
            cpu_samples.push(thread_cpu() - cpu);
        }
        all.extend_from_slice(&samples);
        all_cpu.extend_from_slice(&cpu_samples);
        match kinds.iter_mut().find(|k| k.0 == *kind) {
            Some(k) => {
                k.1.extend(samples);
                k.2 = k.2.max(total);
                k.3.extend(cpu_samples);
            }
            None => kinds.push((kind, samples, total, cpu_samples)),
        }
    }
    for (kind, mut samples, total, mut cpu) in kinds {
        percentiles(&format!("search {kind} (≤{total} matches)"), &mut samples);
        percentiles("  thread CPU time", &mut cpu);
    }
    percentiles("search all queries", &mut all);
    percentiles("search all queries, thread CPU time", &mut all_cpu);
}

/// One warm search as the harness asks it: limit 50, snippets on, "now" just after the newest
/// generated session, the cwd of one project (affinity).
fn search_at(
    discovery: &Discovery,
    sessions: usize,
    text: &str,
) -> dsh_session_references::discovery::SearchResult {
    discovery
        .search_blocking(
            &SearchQuery {
                text: text.into(),
                agent: None,
                cwd: Some(gen::project_cwd(3)),
                limit: 50,
                now_ms: 1_700_000_000_000 + sessions as i64 * 60_000,
                snippets: true,
            },
            None,
        )
        .unwrap()
}

/// Append → visible, with the background indexer running as in the TUI.
fn appended(home: &Path, discovery: &Discovery, sessions: usize, appends: usize) {
    let now = 1_700_000_000_000 + sessions as i64 * 60_000;
    let search = |text: &str| search_at(discovery, sessions, text);
    let started = Instant::now();
    let thread = discovery.spawn_indexer();
    std::thread::sleep(Duration::from_millis(200));
    // As in a TUI open for a few seconds: the watcher's watches added and its catch-up pass
    // done (without a watcher, polling alone, as before).
    while !thread.watched() && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
    }
    println!(
        "background indexer: watcher {} after {:.1?}",
        if thread.watched() {
            "ready"
        } else {
            "not running: polling"
        },
        started.elapsed()
    );
    let mut latencies = Vec::new();
    for n in 0..appends {
        let i = (n * 7919) % sessions;
        let path = std::fs::read_dir(home.join("sessions"))
            .unwrap()
            .flatten()
            .map(|p| p.path().join(id(i)).join("session.jsonl"))
            .find(|p| p.exists())
            .unwrap();
        let seq = RECORDS + count_appends(&path);
        // Unique across runs on a reused home (an earlier run's words are indexed already).
        let marker = format!("zqxappend{n}x{seq}");
        let line = record(
            "user/message",
            seq,
            now + n as i64,
            user(&format!("appended {marker}"), &format!("ap-{n}")),
        );
        let started = Instant::now();
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(format!("{line}\n").as_bytes()).unwrap();
        drop(file);
        loop {
            if search(&marker).total > 0 {
                break;
            }
            if started.elapsed() > Duration::from_secs(120) {
                panic!("append {n} never became visible");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        latencies.push(started.elapsed());
    }
    if !latencies.is_empty() {
        percentiles("append → visible in search", &mut latencies);
    }
}

/// The popup with discovery on: keystroke to frame (the lookup not awaited, as in the app), and
/// lookup answer to frame (`list_candidates` and discovery search at once, merged, applied,
/// drawn), while "typing" a word from the conversation after `@`.
fn popup(home: &Path, discovery: &Discovery, sessions: usize, rounds: usize) {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use dsh_session_references::reference::{
        AgentIdentity, SessionReferenceConfig, SessionReferences,
    };
    use dsh_session_references::session::DiskStore;
    use dsh_session_references::tui::composer::Composer;
    use dsh_session_references::tui::merge;
    use dsh_session_references::tui::popup::PopupState;
    use dsh_session_references::tui::Renderable;
    use ratatui::backend::TestBackend;
    use ratatui::layout::Rect;
    use ratatui::Terminal;
    use std::sync::Arc;
    use tokio_util::sync::CancellationToken;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let agent = AgentIdentity::new("agent-self", Some(gen::project_cwd(3)));
    let service = SessionReferences::new(
        Arc::new(DiskStore::new(home)),
        SessionReferenceConfig::default(),
    )
    .unwrap();
    let cancel = CancellationToken::new();
    rt.block_on(service.list_candidates(&agent, "", None, &cancel))
        .unwrap();
    let now = 1_700_000_000_000 + sessions as i64 * 60_000;
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let draw = |terminal: &mut Terminal<TestBackend>, composer: &Composer, popup: &PopupState| {
        terminal
            .draw(|frame| {
                let area = frame.area();
                let buf = frame.buffer_mut();
                let ch = composer.desired_height(area.width).min(area.height);
                composer.render(Rect::new(0, area.height - ch, area.width, ch), buf);
                if popup.is_open() {
                    let view = popup.view(now);
                    let h = view.desired_height(area.width).min(area.height - ch);
                    view.render(Rect::new(0, area.height - ch - h, area.width, h), buf);
                }
            })
            .unwrap();
    };
    let text = format!("look at @{} please", word(700));
    let mut keystrokes = Vec::new();
    let mut lookups = Vec::new();
    // The lookup's parts: the contract list, the search (both at once), then merge and frame.
    let mut parts: [Vec<Duration>; 3] = Default::default();
    for _ in 0..rounds {
        let mut composer = Composer::new();
        let mut popup = PopupState::new();
        for c in text.chars() {
            let started = Instant::now();
            composer.handle_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
            let request = popup.sync(composer.active_token().as_ref());
            draw(&mut terminal, &composer, &popup);
            keystrokes.push(started.elapsed());
            if let Some(request) = request {
                let started = Instant::now();
                let timed = |started: Instant| (started.elapsed(), Instant::now());
                let (contract, found) = rt.block_on(async {
                    tokio::join!(
                        async {
                            let started = Instant::now();
                            let contract = service
                                .list_candidates(&agent, &request.query, None, &cancel)
                                .await;
                            (contract, started.elapsed())
                        },
                        async {
                            let started = Instant::now();
                            let found = discovery
                                .search(SearchQuery {
                                    text: request.query.clone(),
                                    agent: Some(agent.id.clone()),
                                    cwd: agent.cwd.clone(),
                                    limit: 50,
                                    now_ms: now,
                                    snippets: false,
                                })
                                .await;
                            (found, started.elapsed())
                        }
                    )
                });
                let (waited, merging) = timed(started);
                let (found, search_took) = found;
                let (contract, contract_took) = contract;
                let found = found.unwrap();
                let merged = merge(contract.unwrap(), &found.hits, found.total, 50);
                popup.set_details(request.id, Some(Arc::new(merged.details)));
                popup.apply_results(request.id, Ok(merged.candidates));
                draw(&mut terminal, &composer, &popup);
                lookups.push(started.elapsed());
                parts[0].push(contract_took);
                parts[1].push(search_took);
                parts[2].push(merging.elapsed());
                let _ = waited;
            }
        }
    }
    percentiles(
        "popup keystroke to frame (discovery on, lookup not awaited)",
        &mut keystrokes,
    );
    percentiles(
        "popup lookup answer to frame (list_candidates + search + merge + frame)",
        &mut lookups,
    );
    let [contract, search, merging] = &mut parts;
    percentiles(
        "  of which list_candidates (concurrent with search)",
        contract,
    );
    percentiles(
        "  of which search (concurrent with list_candidates)",
        search,
    );
    percentiles("  of which merge and frame", merging);
}

/// Records appended to a generated log by earlier runs (lines past the generated ones).
fn count_appends(path: &Path) -> u64 {
    let text = std::fs::read_to_string(path).unwrap();
    (text.lines().count() as u64).saturating_sub(RECORDS + 1)
}

/// Start → first popup rows on the generated home of `sessions` sessions (its index built by an
/// earlier `search` run): what the TUI does from its start to the rows of the first `@` — the
/// store with its listing cache, the reference service, discovery with its background indexer,
/// then one lookup (the contract list and the discovery search at once, merged) — timed from
/// the start of this function, in wall time and in this process's CPU time. A second lookup
/// (`@a`) shows the warm cost beside it.
pub fn first_popup(sessions: usize, kb: usize) {
    use dsh_session_references::reference::{
        AgentIdentity, SessionReferenceConfig, SessionReferences,
    };
    use dsh_session_references::session::DiskStore;
    use dsh_session_references::tui::merge;
    use std::sync::Arc;
    use tokio_util::sync::CancellationToken;

    let (home, _) = cached_search_home(sessions, kb).unwrap();
    let cached = home.join("index/listing").is_file();
    let indexed = home.join("index/discovery.sqlite3").is_file();
    let started = Instant::now();
    let cpu0 = cpu_time();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let agent = AgentIdentity::new("agent-self", Some(gen::project_cwd(3)));
    let service = SessionReferences::new(
        Arc::new(DiskStore::with_listing_cache(&home)),
        SessionReferenceConfig::default(),
    )
    .unwrap();
    let discovery = Discovery::for_home(&home, &SourceSet::default());
    let indexer = discovery.spawn_indexer();
    let now = 1_700_000_000_000 + sessions as i64 * 60_000;
    let cancel = CancellationToken::new();
    let set_up = started.elapsed();
    // Each part's own time from the start of the lookup (they run at once).
    let lookup = |text: &str| {
        rt.block_on(async {
            let began = Instant::now();
            let ((contract, contract_took), (found, search_took)) = tokio::join!(
                async {
                    let contract = service.list_candidates(&agent, text, None, &cancel).await;
                    (contract, began.elapsed())
                },
                async {
                    let found = discovery
                        .search(SearchQuery {
                            text: text.to_string(),
                            agent: Some(agent.id.clone()),
                            cwd: agent.cwd.clone(),
                            limit: 50,
                            now_ms: now,
                            snippets: false,
                        })
                        .await;
                    (found, began.elapsed())
                }
            );
            let found = found.unwrap();
            let merged = merge(contract.unwrap(), &found.hits, found.total, 50);
            (
                merged.candidates.len(),
                found.from_listing,
                contract_took,
                search_took,
            )
        })
    };
    let (rows, from_listing, contract_took, search_took) = lookup("");
    let first = started.elapsed();
    let first_cpu = cpu_time() - cpu0;
    let again = Instant::now();
    let (rows_a, ..) = lookup("a");
    let second = again.elapsed();
    println!(
        "start → first popup rows: {first:.2?} wall, {first_cpu:.2?} CPU (all threads, the \
         indexer's first pass included); {rows} rows (search from the listing: {from_listing}); \
         listing cache present at start: {cached}; index present: {indexed}"
    );
    println!(
        "  set-up (store, service, discovery, indexer started) {set_up:.2?}; then the lookup's \
         list_candidates {contract_took:.2?}, search {search_took:.2?} (at once)"
    );
    println!("then `@a`: {second:.2?} wall, {rows_a} rows");
    drop(indexer);
}
