//! The one interface every other agent's format implements (the registry of them is
//! [`super::registry`]).
//!
//! Purpose: everything that differs between Claude Code, Codex, Qwen Code and the agents to come
//! lives behind [`AgentFormat`]: where the agent keeps its home (default directory, environment
//! variable), how its session files lie under it, how one file is folded into a listing row
//! ([`Head`]), a title and a conversation. [`ExternalSessions`](super::ExternalSessions) does the
//! file I/O, the caching and the `SessionQuery` plumbing for all of them; nothing outside
//! `session/external/` names a particular agent (`tests/architecture.rs`).
//!
//! # Adding an agent
//! 1. A module `session/external/<name>.rs`: pure line parsers (a head scan, a title scan, a
//!    conversation scan over complete lines, linear and bounded), a unit struct implementing
//!    [`AgentFormat`] (its names and layout one [`Layout`] constant), and unit tests over inline
//!    records.
//! 2. One line in [`AGENTS`](super::registry::AGENTS).
//! 3. The home flag: a `--<name>-home` field in `cli::SharedFlags` and its entry in the list of
//!    homes it hands to `SourceSet::from_homes`.
//! 4. Fixtures written by the real CLI under `tests/data/fixtures/` with their provenance, and
//!    tests: listing, projection, `prepare`, a vanished session, nothing written under the home,
//!    and a drift guard over the record kinds the parser relies on.
//!
//! Invariant: this file names no particular agent (each names it), so an agent's module and
//! this interface never depend on each other both ways. Proof: `tests/architecture.rs`
//! (`no_circles_of_files`).

use super::lines::{read_lines, read_lines_in_parts, LineSink};
use super::parts::parts_for;
use super::{Conversation, Head};
use crate::session::error::Result;
use std::path::{Path, PathBuf};

/// What an agent is called and where its sessions lie: plain data, one constant per agent
/// (the trait's naming and layout methods read it).
#[derive(Debug)]
pub struct Layout {
    /// The id namespace, `--sources` name and badge (`claude`).
    pub name: &'static str,
    /// A human name for cards and descriptions (`Claude Code`).
    pub product: &'static str,
    /// The environment variable the agent itself reads for its home (`CLAUDE_CONFIG_DIR`).
    pub home_env: &'static str,
    /// The home below the user's home directory when nothing names another (`.claude`).
    pub default_home: &'static str,
    /// The directory under the home that holds the sessions.
    pub sessions_subdir: &'static str,
    /// Directory levels between `sessions_subdir` and the session files.
    pub depth: usize,
}

/// One other agent's session format.
pub trait AgentFormat: Send + Sync + 'static {
    /// What the agent is called and where its sessions lie.
    fn layout(&self) -> &'static Layout;
    /// The id namespace, `--sources` name and badge (`claude`).
    fn name(&self) -> &'static str {
        self.layout().name
    }
    /// A human name for cards and descriptions (`Claude Code`).
    fn product(&self) -> &'static str {
        self.layout().product
    }
    /// The environment variable the agent itself reads for its home (`CLAUDE_CONFIG_DIR`).
    fn home_env(&self) -> &'static str {
        self.layout().home_env
    }
    /// The home a value of [`AgentFormat::home_env`] names (`None` when it names none).
    fn home_from_env(&self, value: &str) -> Option<PathBuf> {
        let value = value.trim();
        (!value.is_empty()).then(|| PathBuf::from(value))
    }
    /// The home the environment names (`var` reads one variable, `None` when it is unset or
    /// empty): by default [`AgentFormat::home_env`] through [`AgentFormat::home_from_env`].
    fn home_from_environment(&self, var: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
        var(self.home_env()).and_then(|value| self.home_from_env(&value))
    }
    /// The home under the user's home directory when nothing names another (`~/.claude`).
    fn default_home(&self, user_home: &Path) -> PathBuf {
        user_home.join(self.layout().default_home)
    }
    /// The directory under the home that holds the sessions (its presence means the agent was
    /// used here).
    fn sessions_subdir(&self) -> &'static str {
        self.layout().sessions_subdir
    }
    /// Directory levels between [`AgentFormat::sessions_subdir`] and the session files.
    fn depth(&self) -> usize {
        self.layout().depth
    }
    /// Whether the file at `path` (at that depth) is a session.
    fn is_session_file(&self, path: &Path) -> bool;
    /// The head of one session file: `None` while it is incomplete (or holds no session yet);
    /// an error naming the file when it is not this agent's format.
    fn read_head(&self, path: &Path) -> Result<Option<Head>>;
    /// An incremental title scan: a fresh one (fed a file's complete lines from its start), or
    /// (`saved`) one resumed from a state its [`TitleScan::save`] wrote, fed from where the last
    /// one ended when the file grew. `None` when `saved` is not a state this agent wrote (the
    /// file is then scanned again from its start).
    fn title_scan(&self, saved: Option<&serde_json::Value>) -> Option<Box<dyn TitleScan>>;
    /// The projected conversation of one session file.
    fn read_conversation(&self, path: &Path) -> Result<Conversation>;
    /// An incremental conversation scan, when this agent's conversation can be folded line by
    /// line and its state saved (a heavy session that grew is then read from where the last
    /// read ended): a fresh one, or (`saved`) one resumed from the state its
    /// [`ConversationScan::save`] wrote. `None`: the agent has none
    /// ([`AgentFormat::read_conversation`] reads the file whole), or `saved` is not a state this
    /// agent wrote (the file is then read whole).
    fn conversation_scan(&self, _saved: Option<&[u8]>) -> Option<Box<dyn ConversationScan>> {
        None
    }
    /// Names the agent keeps beside the session files (an index, a database), looked up by the
    /// agent's own id; `None` when it keeps none. `listing` is where the source keeps its
    /// listing between processes, under the dsh home (`None`: it keeps none): a side store may
    /// keep what it folded beside it, never under the agent's home.
    fn side_names(&self, _home: &Path, _listing: Option<&Path>) -> Option<Box<dyn SideNames>> {
        None
    }

    /// Whether `home` holds this agent's sessions (listed by default only then).
    fn present(&self, home: &Path) -> bool {
        home.join(self.sessions_subdir()).is_dir()
    }

    /// An agent that keeps its sessions in a database instead of files (opencode): listing,
    /// titles and conversations come from it, and the file methods above are not used.
    fn database(&self) -> Option<&dyn DatabaseFormat> {
        None
    }
}

/// One session as a database lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct DatabaseRow {
    /// Id, creation time and cwd.
    pub head: Head,
    /// Its title by the agent's rules (SPEC §9), if any.
    pub title: Option<String>,
}

/// An agent whose sessions live in one database under its home.
pub trait DatabaseFormat: Send + Sync {
    /// The files whose stamps say the database changed (the database and its log).
    fn files(&self, home: &Path) -> Vec<PathBuf>;
    /// Every session, read without writing under the home.
    fn list(&self, home: &Path) -> Result<Vec<DatabaseRow>>;
    /// The projected conversation of session `own_id` (`None` when there is no such session).
    fn conversation(&self, home: &Path, own_id: &str) -> Result<Option<Conversation>>;
}

/// An incremental title scan of one session file.
pub trait TitleScan: LineSink + Send {
    /// The title (SPEC §9: the name the person gave last, else the agent's latest generated
    /// title, else the first prompt) as far as the lines fed so far tell, with the names the
    /// agent keeps beside the files.
    fn choose(&self, side: Option<&dyn SideNames>, own_id: &str) -> Option<String>;
    /// The scan's state, for the persistent listing (read back by
    /// [`AgentFormat::title_scan`] of the same agent).
    fn save(&self) -> serde_json::Value;
}

/// An incremental conversation scan of one session file: fed its complete lines in order, it
/// gives the projected conversation of the lines fed so far, and its state can be saved and
/// resumed to be fed the lines appended since.
pub trait ConversationScan: LineSink + Send + Sync + std::any::Any {
    /// The projected conversation as far as the lines fed so far tell (the scan ends: save it
    /// first to go on later).
    fn conversation(self: Box<Self>) -> Conversation;
    /// [`ConversationScan::conversation`] of the scan as it is, left as it was: a scan being
    /// saved on another thread is walked meanwhile (the conversation's text is copied).
    fn conversation_now(&self) -> Conversation;
    /// A fresh scan of the same agent and mode, to be fed a later part of the same file on
    /// another thread and then given to [`ConversationScan::absorb`]; `None` (the default)
    /// when this agent's scan reads a file on one thread only.
    fn part(&self) -> Option<Box<dyn ConversationScan>> {
        None
    }
    /// Takes in `later`, a scan [`ConversationScan::part`] made and fed the lines right after
    /// this scan's (numbered from 0 within its part; `lines_before` lines of the file came
    /// before them). Afterwards this scan is the one a single scan fed both runs of lines would
    /// be. `false` (nothing taken in) when `later` is not a part of this scan's kind.
    fn absorb(&mut self, _later: Box<dyn ConversationScan>, _lines_before: u64) -> bool {
        false
    }
    /// Appends the scan's state to `out`, to be read back by
    /// [`AgentFormat::conversation_scan`] of the same agent ([`save_state_into`] is the usual
    /// way: the state of a heavy session is megabytes, so it is written as compact binary,
    /// never as JSON text to escape and parse again, and where it goes, never copied after).
    /// `false`, with `out` as it was, when it cannot be written: nothing is kept then.
    fn save_into(&self, out: &mut Vec<u8>) -> bool;
    /// The scan's state on its own ([`ConversationScan::save_into`]; empty when it cannot be
    /// written).
    fn save(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.save_into(&mut out) {
            out
        } else {
            Vec::new()
        }
    }
}

/// Feeds the whole file at `path` to `scan`, a fresh scan: in parts, on every core
/// (`lines::read_lines_in_parts`), when the file is large enough to be worth it and the agent's
/// scan can be read in parts; on this thread otherwise. The parts' scans are taken in by the
/// first in file order, so the result is the one reading the file on one thread gives.
/// Returns the offset and line number just past the last line consumed.
pub fn scan_whole(path: &Path, scan: &mut Box<dyn ConversationScan>) -> Result<(u64, u64)> {
    let len = std::fs::metadata(path).map_or(0, |meta| meta.len());
    let (parts, threads) = parts_for(len);
    let mut later: Vec<Box<dyn ConversationScan>> = (1..parts).map_while(|_| scan.part()).collect();
    if parts > 1 && later.len() == parts - 1 {
        let mut sinks: Vec<&mut (dyn LineSink + Send)> = Vec::with_capacity(parts);
        sinks.push(&mut **scan);
        sinks.extend(
            later
                .iter_mut()
                .map(|part| &mut **part as &mut (dyn LineSink + Send)),
        );
        // `None`: the file shrank while it was read; what the parts saw is thrown away.
        if let Some((lines, end)) = read_lines_in_parts(path, len, threads, &mut sinks)? {
            let mut before = lines[0];
            let mut whole = true;
            for (part, consumed) in later.into_iter().zip(&lines[1..]) {
                whole &= scan.absorb(part, before);
                before += consumed;
            }
            if whole {
                return Ok((end, before));
            }
        }
        // A part of another kind (never made by `part`), or a file that shrank: read again,
        // on one thread.
        *scan = scan.part().ok_or_else(|| {
            crate::session::error::SessionError::io(
                path,
                std::io::Error::other("a conversation scan that cannot start again"),
            )
        })?;
    }
    read_lines(path, 0, 0, &mut **scan)
}

/// Feeds the complete lines of `file` to `sink` as the reader of a mapped file does: each line
/// is offered with the rest of the file after it ([`LineSink::line_in`]), and a line the sink
/// leaves is found with `memchr` and fed whole. The last line, without its newline, is not fed.
/// (For the differential tests of the agents' walks, which compare this with serde.)
#[doc(hidden)]
pub fn feed_as_mapped(file: &[u8], sink: &mut dyn LineSink) {
    let complete = memchr::memrchr(b'\n', file).map_or(0, |end| end + 1);
    let (mut at, mut index) = (0, 0u64);
    while at < complete {
        let rest = &file[at..complete];
        let len = match sink.line_in(index, rest) {
            Some((len, _)) => len,
            None => {
                let len = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
                sink.line(index, &rest[..len]);
                len
            }
        };
        at += len + 1;
        index += 1;
    }
}

/// The conversation of the whole file at `path` by a fresh scan of type `T` ([`scan_whole`]:
/// in parts on every core when the file is large enough): the usual
/// [`AgentFormat::read_conversation`] of an agent whose conversation folds line by line.
pub fn read_whole<T: ConversationScan + Default>(path: &Path) -> Result<Conversation> {
    let mut scan: Box<dyn ConversationScan> = Box::new(T::default());
    scan_whole(path, &mut scan)?;
    Ok(scan.conversation())
}

/// A scan's state as [`ConversationScan::save`] usually writes it: its serde form in postcard's
/// binary encoding (strings as a length and their bytes; empty when it cannot be written, which
/// keeps nothing).
pub fn save_state<T: serde::Serialize>(scan: &T) -> Vec<u8> {
    let mut out = Vec::new();
    if save_state_into(scan, &mut out) {
        out
    } else {
        Vec::new()
    }
}

/// [`save_state`] appended to `out` (false, `out` as it was, when it cannot be written).
pub fn save_state_into<T: serde::Serialize>(scan: &T, out: &mut Vec<u8>) -> bool {
    /// Postcard's output appended to a buffer that already holds something.
    struct Append<'a>(&'a mut Vec<u8>);
    impl postcard::ser_flavors::Flavor for Append<'_> {
        type Output = ();
        fn try_push(&mut self, byte: u8) -> postcard::Result<()> {
            self.0.push(byte);
            Ok(())
        }
        fn try_extend(&mut self, bytes: &[u8]) -> postcard::Result<()> {
            self.0.extend_from_slice(bytes);
            Ok(())
        }
        fn finalize(self) -> postcard::Result<()> {
            Ok(())
        }
    }
    let before = out.len();
    let written = postcard::serialize_with_flavor(scan, Append(out)).is_ok();
    if !written {
        out.truncate(before);
    }
    written
}

/// A state [`save_state`] wrote, read back whole: `None` when the bytes are not one state of
/// `T` exactly (cut short, trailing bytes, a length past the end or a string that is not UTF-8).
/// Each length is checked against the bytes left before anything is allocated, so a state of
/// n bytes costs O(n) whatever it claims.
pub fn load_state<'a, T: serde::Deserialize<'a>>(saved: &'a [u8]) -> Option<T> {
    match postcard::take_from_bytes(saved) {
        Ok((state, [])) => Some(state),
        _ => None,
    }
}

/// A conversation scan of type `T`: fresh, or resumed from the state its
/// [`ConversationScan::save`] wrote with [`save_state`] (the usual
/// [`AgentFormat::conversation_scan`]).
pub fn conversation_scan_of<T>(saved: Option<&[u8]>) -> Option<Box<dyn ConversationScan>>
where
    T: ConversationScan + Default + serde::de::DeserializeOwned + 'static,
{
    let scan: T = match saved {
        Some(saved) => load_state(saved)?,
        None => T::default(),
    };
    Some(Box::new(scan))
}

/// A title scan of type `T`: fresh, or resumed from what its [`TitleScan::save`] wrote (the
/// usual [`AgentFormat::title_scan`] of a scan that derives serde's traits).
pub fn title_scan_of<T>(saved: Option<&serde_json::Value>) -> Option<Box<dyn TitleScan>>
where
    T: TitleScan + Default + serde::de::DeserializeOwned + 'static,
{
    let scan = match saved {
        Some(saved) => T::deserialize(saved).ok()?,
        None => T::default(),
    };
    Some(Box::new(scan))
}

/// Titles an agent keeps outside its session files, by the agent's own id.
pub trait SideNames: Send + Sync {
    /// A name the person gave the session, if the side store has one.
    fn given_name(&self, own_id: &str) -> Option<String>;
    /// A title the agent generated, if the side store has one.
    fn generated_title(&self, _own_id: &str) -> Option<String> {
        None
    }
}
