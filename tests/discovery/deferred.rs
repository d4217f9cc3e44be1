//! The background indexer started deferred (the TUI's start-up, issue 35 item 4): its first pass
//! and its watcher wait for a poke or a bound, and nothing written meanwhile is lost. A dsh
//! session and another agent's session written during the wait, and an append to a session a
//! previous process indexed, are all searchable after the deferred pass; a poke starts it at
//! once, and the watcher it adds afterwards sees later appends.

use crate::support::user;
use crate::watch::{eventually, found};
use dsh_session_references::discovery::{Cadence, Discovery};
use dsh_session_references::session::external::{ExternalAgent, ExternalSessions, SourceSet};
use dsh_session_references::session::{Encoding, SessionHeader, SessionWriter};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const HOUR: Duration = Duration::from_secs(3600);
/// Passes an hour apart: after the deferred first pass only a poke or an event indexes.
const SLOW: Cadence = Cadence {
    min: HOUR,
    max: HOUR,
    watched_min: HOUR,
    watch: true,
};
/// The Claude Code fixtures used: two there from the start, one written during the wait.
const DEMO: &str = "tests/data/fixtures/claude-code/projects/-path-to-Demo";
const EARLY: [&str; 2] = [
    "fe5e1c67-53e7-4862-81ae-d0e013e3270b",
    "1af7fc5e-8455-4414-9ccd-011d40f70b2a",
];
const LATE: &str = "5c0375b4-57a5-4f26-b12d-d022ee4e51b7";

fn session(home: &Path, id: &str, text: &str) -> PathBuf {
    let header = SessionHeader::new(id, 1_700_000_000_000, Some("/w/d".to_string()));
    let mut writer = SessionWriter::create(home, header, Encoding::Zstd).unwrap();
    writer.append(vec![user(text)]).unwrap();
    writer.path().to_path_buf()
}

fn append(path: &Path, text: &str) {
    let (mut writer, _) = SessionWriter::open(path).unwrap();
    writer.append(vec![user(text)]).unwrap();
}

fn copy_claude(claude: &Path, id: &str) {
    let dir = claude.join("projects").join("-path-to-Demo");
    fs::create_dir_all(&dir).unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(DEMO)
        .join(format!("{id}.jsonl"));
    fs::copy(from, dir.join(format!("{id}.jsonl"))).unwrap();
}

/// A dsh home with one session and a Claude Code home with two, indexed by a previous process.
struct Homes {
    _dir: tempfile::TempDir,
    dsh: PathBuf,
    claude: PathBuf,
    old_log: PathBuf,
}

impl Homes {
    fn indexed() -> Homes {
        let dir = tempfile::tempdir().unwrap();
        let (dsh, claude) = (dir.path().join("dsh"), dir.path().join("claude"));
        fs::create_dir_all(&dsh).unwrap();
        let old_log = session(&dsh, "s-old", "the first words");
        for id in EARLY {
            copy_claude(&claude, id);
        }
        let homes = Homes {
            _dir: dir,
            dsh,
            claude,
            old_log,
        };
        let previous = homes.discovery();
        previous.refresh_blocking().unwrap();
        assert_eq!(found(&previous, "first"), ["s-old"]);
        homes
    }

    /// A new process's discovery over both homes.
    fn discovery(&self) -> Discovery {
        let sources = SourceSet {
            hide_dsh: false,
            external: vec![ExternalSessions::new(
                ExternalAgent::Claude,
                self.claude.clone(),
            )],
        };
        Discovery::for_home(&self.dsh, &sources)
    }

    /// Writes, as another process would while the indexer waits: an append to the old session,
    /// a new dsh session, a new Claude Code session.
    fn write_meanwhile(&self) {
        append(&self.old_log, "later about the quolldefer");
        session(&self.dsh, "s-new", "a wombatdefer plan");
        copy_claude(&self.claude, LATE);
    }

    /// Every write of [`Homes::write_meanwhile`] is in the index.
    fn all_indexed(&self, d: &Discovery) -> bool {
        found(d, "quolldefer") == ["s-old"]
            && found(d, "wombatdefer") == ["s-new"]
            && found(d, "").contains(&format!("claude:{LATE}"))
    }
}

#[test]
fn a_deferred_indexer_starts_at_its_bound_and_indexes_what_was_written_meanwhile() {
    let homes = Homes::indexed();
    let d = homes.discovery();
    let bound = Duration::from_millis(1500);
    let started = Instant::now();
    let thread = d.spawn_indexer_after(SLOW, bound);
    homes.write_meanwhile();
    std::thread::sleep(Duration::from_millis(300));
    if started.elapsed() < bound {
        assert_eq!(d.passes(), 0, "no pass before the bound or a poke");
        assert!(!thread.watching(), "no watcher before the bound or a poke");
    }
    // Never poked: the bound starts it.
    eventually("the deferred pass indexes every write", || {
        homes.all_indexed(&d)
    });
    assert!(
        started.elapsed() >= bound,
        "indexed before its bound: {:?}",
        started.elapsed()
    );
    assert!(d.passes() >= 1);
    eventually("the watcher runs after the deferred pass", || {
        thread.watched()
    });
}

#[test]
fn a_poke_starts_a_deferred_indexer_and_its_watcher_sees_later_appends() {
    let homes = Homes::indexed();
    let d = homes.discovery();
    let thread = d.spawn_indexer_after(SLOW, HOUR);
    homes.write_meanwhile();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(d.passes(), 0, "waits for a poke");
    assert!(!homes.all_indexed(&d), "nothing indexed before the poke");
    // What the popup does once it has answered.
    d.poke();
    eventually("the poked pass indexes every write", || {
        homes.all_indexed(&d)
    });
    eventually("the watcher runs", || thread.watched());
    let passes = d.passes();
    append(&homes.old_log, "and then the numbatdefer");
    eventually("an append after the pass is found by its event", || {
        found(&d, "numbatdefer") == ["s-old"]
    });
    assert_eq!(d.passes(), passes, "found by the watcher, not by a pass");
    drop(thread);
}
