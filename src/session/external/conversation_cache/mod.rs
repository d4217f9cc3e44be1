//! Heavy sessions' projected conversations kept on disk between processes
//! (`<dsh home>/index/agents/conversations/<agent>-<home key>-<id key>.json`).
//!
//! Purpose: a Claude Code or Codex session of tens of megabytes projects to a conversation a
//! hundred times smaller (tool results, images, thinking and reasoning are left out). Reading
//! and checking every byte of the file again in each new process that references it would make
//! every `prepare`, MCP read and TUI submit of that session pay many times what `cat` of the
//! file costs, for work a previous process already did. So when a file agent's session of at
//! least [`MIN_FILE_BYTES`] is read whole, its head and projection are kept here, by agent, home
//! and session id, with the file's path and the stamp (inode, size, mtime, status change time)
//! it had before and after the read. The next process that reads that session finds it here by its id, `stat`s the
//! file, and when the stamp is the same uses what was kept: it reads neither the session's file
//! nor the home's listing. For an agent whose conversation folds line by line (Claude Code,
//! Codex: [`AgentFormat::conversation_scan`](super::agent::AgentFormat::conversation_scan)),
//! the scan's state is kept too, in a `.scan` file beside the document (read only when the
//! session grew), with the byte offset and line it stopped at: a session that grew since (the
//! one being worked in) is read from there only; a reference that read less than
//! [`KEEP_AGAIN_AFTER`] past it leaves what was kept as it was (the next reader reads that
//! tail again, which costs less than writing megabytes of state). A reference's read always keeps; the
//! discovery indexer's pass, which reads every session anyway and puts the same text in its
//! index, keeps the sessions worked in last ([`Keep`]), so that the first reference to a heavy
//! session after a pass does not read its file either.
//!
//! Invariant: nothing in a kept file is trusted without a check, and nothing is kept that the
//! person did not already have on this machine longer than they keep it.
//! - The file starts with a versioned magic line, then the session file's path (a JSON string on
//!   a line of its own), then the document (its head as a JSON line, then the items in binary,
//!   as [`save_state`](super::agent::save_state) writes them: megabytes of text neither
//!   escaped nor parsed), and ends with a checksum of everything between; it
//!   names the agent, the home and the session it describes. One of another version, agent,
//!   home or session is not used; a torn or corrupt one is removed with a warning and the
//!   session read from its file.
//! - What is kept is used only while the file it names is under the home's sessions directory
//!   (plain components) and is a session file by the agent's rule: as it is while the file has
//!   the stamp it had when it was read; through the kept scan, fed only the lines after its
//!   offset, while the file is the same inode and not shorter (records are only appended, as
//!   the persistent listing assumes); else the file is read again whole (and kept again). A
//!   status change (`chmod`, `chown`) opens the file again, so a file no longer readable fails
//!   its read, naming it.
//! - A scan has its own magic line, the stamp of the file it was taken of and a checksum; it is
//!   written before its document and used only with the document of the same stamp, so a crash
//!   between the two writes costs a whole read, never a wrong conversation.
//! - A projection is written only when the file's stamp was the same before and after the read
//!   (a file growing meanwhile is read again next time), to a temporary name renamed over the
//!   old one, readable by its owner only, never under an agent's home, and never when the
//!   `conversations` directory (or `index/`, `agents/`) is not a plain directory.
//! - Bounded: a kept file over [`MAX_BYTES`] is neither written nor read (a large one is
//!   mapped, as the persistent listing is: one cut short while it is read is damaged, never a
//!   crash); at most [`MAX_FILES`] are kept, the least recently touched going first (each
//!   document's mtime is when the person last referenced the session or, kept by the indexer,
//!   worked in it); a kept projection whose session file is gone is removed whenever one is
//!   written, so a deleted session's text does not outlive it here by more than a write.
//!
//! Proof: the unit tests below (round trip by agent, home and id, a large one mapped; every kind
//! of damage named; a file outside the home or changed not trusted; the bound on files; a bulk
//! read keeps only with room or above the lowest rank) and
//! `tests/session/agent_conversation_cache.rs` (a new process's read comes from here and is
//! the same as a fresh read, reading a small part of the file's bytes; a grown Claude Code
//! session and Codex rollout read from where the last read ended, rewinds and rollbacks
//! included; a short tail leaves the kept files as they were, a long one keeps again; every fixture's scan saved and resumed at several cuts gives the whole read's
//! conversation; an append, a truncation and a replacement are read again; a light
//! session is never kept; a damaged kept file is replaced; a deleted session's text goes;
//! the indexer's read keeps a session ranked by its activity and the next reference reads
//! that; nothing is written under the agent's home).

mod rank;
mod scan_file;

pub(super) use rank::Keep;
use rank::{prune, rank_of, room_for, touch};
use scan_file::{load_scan, scan_path};

use super::agent::ConversationScan;
use super::lines::FileStamp;
use super::persist::{seal, unseal};
use super::{Conversation, ExternalAgent, Head, Item, ItemKind};
use crate::session::error::Result;
use serde::{Deserialize, Serialize};
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The first line of a kept file; its last number is the format's version.
const MAGIC: &str = "dsh-refs agent conversation 3\n";
/// Sessions smaller than this are read from their file every time (a few milliseconds), and
/// their text is never copied here.
pub(super) const MIN_FILE_BYTES: u64 = 4 << 20;
/// The largest kept file read or written.
const MAX_BYTES: usize = 64 << 20;
/// The most projections kept; the lowest ranked go first ([`Keep`]).
const MAX_FILES: usize = 64;
/// A reference that read less than this past what was kept leaves the kept files as they are:
/// writing a heavy session's scan and projection again (megabytes) costs more than the next
/// reader's re-reading of that tail. A line appended to a 60 MB session: 14.0 ms with the
/// rewrite, 8.2 ms without (`cat` 6.5 ms). The indexer's pass keeps them current.
const KEEP_AGAIN_AFTER: u64 = 4 << 20;

/// The directory of kept projections beside the agents' persistent listings (`listing` is one
/// of them: `<dsh home>/index/agents/<agent>-<key>.bin`).
fn dir_beside(listing: &Path) -> Option<PathBuf> {
    Some(listing.parent()?.join("conversations"))
}

/// Where the projection of session `id` of `agent`'s home `home` is kept.
fn path_of(listing: &Path, agent: &str, home: &Path, id: &str) -> Option<PathBuf> {
    let hash = |bytes: &[u8]| {
        let mut hasher = rustc_hash::FxHasher::default();
        hasher.write(bytes);
        hasher.finish()
    };
    let (home, id) = (
        hash(home.as_os_str().as_encoded_bytes()),
        hash(id.as_bytes()),
    );
    Some(dir_beside(listing)?.join(format!("{agent}-{home:016x}-{id:016x}.json")))
}

/// What the kept file says after its path line (then a line of the conversation's items; the
/// agent's scan, when it has one, is a file of its own beside it: `scan_file.rs`).
#[derive(Serialize, Deserialize)]
struct Document {
    agent: String,
    home: String,
    id: String,
    stamp: Stamp,
    head: KeptHead,
    last_line: Option<u64>,
    last_activity: Option<i64>,
}

#[derive(Serialize, Deserialize)]
struct KeptHead {
    id: String,
    created: i64,
    cwd: Option<String>,
}

#[derive(Serialize, Deserialize, PartialEq, Eq, Debug, Clone, Copy)]
struct Stamp {
    len: u64,
    /// Nanoseconds since the epoch (a file system that gives no time keeps nothing here).
    mtime: u128,
    inode: u64,
    /// The status change time in nanoseconds: a `chmod`, `chown` or rename since the read makes
    /// the file read again (its readability is the file's to say, not ours).
    ctime: i64,
}

impl Stamp {
    fn of(stamp: FileStamp) -> Option<Stamp> {
        let (len, modified, inode) = stamp.parts();
        let mtime = modified?
            .duration_since(SystemTime::UNIX_EPOCH)
            .ok()?
            .as_nanos();
        let ctime = stamp.changed()?;
        Some(Stamp {
            len,
            mtime,
            inode,
            ctime,
        })
    }
}

/// Where and how a read keeps what it read.
pub(super) struct Keeping<'a> {
    /// The persistent listing beside which sessions are kept (`None`: nothing is kept or used).
    pub listing: Option<&'a Path>,
    /// Who reads: what decides whether a heavy session read whole here (or grown) is written
    /// for the next process.
    pub keep: Keep,
}

/// A session as read back, its items' line unparsed (only a file as it was needs them).
#[derive(Debug, PartialEq)]
struct Loaded {
    path: PathBuf,
    stamp: Stamp,
    head: Head,
    last_line: Option<u64>,
    last_activity: Option<i64>,
    /// The kept file's bytes (read, or mapped when large), and where its items lie in them.
    file: super::persist::Whole,
    items: std::ops::Range<usize>,
}

impl Loaded {
    /// The kept conversation (`None`: its items' line is damaged).
    fn conversation(&self) -> Option<Conversation> {
        let items: Vec<KeptItem> =
            super::agent::load_state(self.file.bytes().get(self.items.clone())?)?;
        let items = items
            .into_iter()
            .map(KeptItem::item)
            .collect::<Option<_>>()?;
        if !self.file.intact() {
            return None;
        }
        Some(Conversation {
            items,
            last_line: self.last_line,
            last_activity: self.last_activity,
        })
    }
}

#[derive(Deserialize)]
struct KeptItem {
    /// `u` (user), `a` (assistant) or `s` (summary).
    k: char,
    t: String,
    /// Epoch milliseconds.
    at: i64,
}

/// A [`KeptItem`] as written: the same fields, the text borrowed from the conversation.
#[derive(Serialize)]
struct KeptItemRef<'a> {
    k: char,
    t: &'a str,
    at: i64,
}

impl KeptItem {
    fn of(item: &Item) -> KeptItemRef<'_> {
        let k = match item.kind {
            ItemKind::User => 'u',
            ItemKind::Assistant => 'a',
            ItemKind::Summary => 's',
        };
        KeptItemRef {
            k,
            t: &item.text,
            at: item.time,
        }
    }

    fn item(self) -> Option<Item> {
        let kind = match self.k {
            'u' => ItemKind::User,
            'a' => ItemKind::Assistant,
            's' => ItemKind::Summary,
            _ => return None,
        };
        Some(Item {
            kind,
            text: self.t,
            time: self.at,
        })
    }
}

/// What a previous process kept of a session, judged against its file now.
enum Found {
    /// Nothing usable: read the file whole.
    Nothing,
    /// The file is as it was: its head and conversation.
    Same(Head, Conversation),
    /// The file grew (same inode, not shorter): the scan to feed what was appended.
    Grown(Grown),
}

/// A kept session whose file grew since: its head, file, and the agent's scan resumed.
struct Grown {
    head: Head,
    path: PathBuf,
    scan: Box<dyn ConversationScan>,
    offset: u64,
    line: u64,
}

/// The session `id` (`claude:<own id>`) of `agent`'s home `home` as a previous process kept
/// it beside the persistent listing `listing`, judged against its file: usable while the file
/// is still where it was, under the home's sessions directory and a session file by the agent's
/// rule; the same when its inode, size, mtime and status change time are ([`Found::Same`]: a
/// new process then reads neither the session's file nor the home's listing); grown when its
/// inode is the same and it is not shorter and the agent's scan was kept ([`Found::Grown`]).
/// A damaged kept file is removed with a warning.
fn kept(listing: &Path, agent: ExternalAgent, home: &Path, id: &str) -> Found {
    let root = home.join(agent.format().sessions_subdir());
    let kept = match load(listing, agent.name(), home, id) {
        Ok(kept) => kept,
        Err(Miss::Absent) => return Found::Nothing,
        Err(Miss::Damaged(why)) => {
            tracing::warn!(source = agent.name(), reason = %why, "reading the session again: its kept conversation is damaged");
            forget(listing, agent.name(), home, id);
            return Found::Nothing;
        }
    };
    let plain = kept.path.strip_prefix(&root).is_ok_and(|relative| {
        relative
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
    });
    if !plain || !agent.format().is_session_file(&kept.path) {
        return Found::Nothing;
    }
    let Some(now) = stamp_of(&kept.path).and_then(Stamp::of) else {
        return Found::Nothing;
    };
    if now == kept.stamp {
        let Some(conversation) = kept.conversation() else {
            tracing::warn!(source = agent.name(), kept = %kept.path.display(), "reading the session again: its kept conversation's items are damaged");
            forget(listing, agent.name(), home, id);
            return Found::Nothing;
        };
        return Found::Same(kept.head, conversation);
    }
    // Only a file that grew is read on from its scan (read from disk only then).
    let grown = now.inode == kept.stamp.inode && now.len >= kept.stamp.len;
    let saved = grown
        .then(|| path_of(listing, agent.name(), home, id))
        .flatten()
        .and_then(|file| load_scan(&file, kept.stamp));
    match saved {
        Some(saved) if saved.offset <= now.len => {
            match agent.format().conversation_scan(Some(saved.state())) {
                Some(scan) => Found::Grown(Grown {
                    head: kept.head,
                    path: kept.path,
                    scan,
                    offset: saved.offset,
                    line: saved.line,
                }),
                None => Found::Nothing,
            }
        }
        _ => Found::Nothing,
    }
}

/// The head and projected conversation of session `id` of `agent`'s home `home`: as kept
/// beside the persistent listing `listing` when its file is unchanged; from the kept scan fed
/// only what was appended when the file grew; else read from the file `locate` finds, whole.
/// A heavy file's result is kept (again) when `keeping` says to write and the file did not
/// change while it was read. Without a listing on disk the file is always read whole and
/// nothing is kept.
pub(super) fn kept_or_read(
    keeping: Keeping<'_>,
    agent: ExternalAgent,
    home: &Path,
    id: &str,
    locate: impl FnOnce() -> Result<(PathBuf, Head)>,
) -> Result<(Head, Conversation)> {
    let (listing, keep) = (keeping.listing, keeping.keep);
    let format = agent.format();
    let Some(listing) = listing else {
        let (session, head) = locate()?;
        return Ok((head, format.read_conversation(&session)?));
    };
    let (head, session, scan, from) = match kept(listing, agent, home, id) {
        Found::Same(head, conversation) => {
            if keep == Keep::Reference {
                touch(listing, agent.name(), home, id, SystemTime::now());
            }
            return Ok((head, conversation));
        }
        Found::Grown(grown) => (
            grown.head,
            grown.path,
            Some(grown.scan),
            (grown.offset, grown.line),
        ),
        Found::Nothing => {
            let (session, head) = locate()?;
            (head, session, format.conversation_scan(None), (0, 0))
        }
    };
    let before = stamp_of(&session).filter(|stamp| {
        stamp.parts().0 >= MIN_FILE_BYTES
            && (keep == Keep::Reference || room_for(listing, agent.name(), home, id, *stamp))
    });
    // Kept only when the file did not move while it was read.
    let unmoved = |stamp: &FileStamp| {
        Stamp::of(*stamp).is_some_and(|kept| stamp_of(&session).and_then(Stamp::of) == Some(kept))
    };
    let to = |stamp| Target {
        listing,
        agent: agent.name(),
        home,
        id,
        path: &session,
        stamp,
    };
    let Some(mut scan) = scan else {
        let conversation = format.read_conversation(&session)?;
        if let Some(stamp) = before.filter(unmoved) {
            report(to(stamp), keep, save(to(stamp), &head, &conversation));
        }
        return Ok((head, conversation));
    };
    // A reference waits on a whole read: every core. The indexer's pass waits on nobody, and
    // leaves the other cores to the face it runs beside.
    let (offset, line) = if from == (0, 0) && keep == Keep::Reference {
        super::agent::scan_whole(&session, &mut scan)?
    } else {
        super::lines::read_lines(&session, from.0, from.1, &mut *scan)?
    };
    // (A file that only changed status, nothing appended, is kept anew: from then on its kept
    // document serves as it is.)
    if keep == Keep::Reference
        && from != (0, 0)
        && (1..KEEP_AGAIN_AFTER).contains(&offset.saturating_sub(from.0))
    {
        touch(listing, agent.name(), home, id, SystemTime::now());
        return Ok((head, scan.conversation()));
    }
    match before.filter(unmoved) {
        Some(stamp) => {
            let (conversation, saved) = keep_scan((to(stamp), keep), &head, &*scan, (offset, line));
            report(to(stamp), keep, saved);
            Ok((head, conversation))
        }
        None => Ok((head, scan.conversation())),
    }
}

/// Where a read's result is kept: beside the persistent listing `listing`, as session `id` of
/// `agent`'s home `home`, read from the file `path` of stamp `stamp`.
#[derive(Clone, Copy)]
struct Target<'a> {
    listing: &'a Path,
    agent: &'a str,
    home: &'a Path,
    id: &'a str,
    path: &'a Path,
    stamp: FileStamp,
}

/// A read's result kept ([`Keep::Bulk`]: ranked by its file's time) or why it could not be.
fn report(to: Target<'_>, keep: Keep, saved: std::io::Result<()>) {
    match saved {
        Ok(()) if keep == Keep::Bulk => {
            touch(to.listing, to.agent, to.home, to.id, rank_of(to.stamp))
        }
        Ok(()) => {}
        Err(e) => {
            tracing::warn!(source = to.agent, error = %e, "could not keep a heavy session's conversation");
        }
    }
}

/// The conversation of `scan`, which stopped at byte `offset`, line `line` of its file, kept
/// with the scan's state. The two are independent until the document is written: for a
/// reference, which waits on them, one thread encodes the state and writes the scan file while
/// another walks the conversation and encodes the document (`sync::both`; on one thread when
/// no other starts in time); the indexer's pass does one after the other, on its own thread.
/// The document is written last, after its scan, as [`save`] does.
fn keep_scan(
    (to, keep): (Target<'_>, Keep),
    head: &Head,
    scan: &dyn ConversationScan,
    (offset, line): (u64, u64),
) -> (Conversation, std::io::Result<()>) {
    let (Some(file), Some(stamp), Some(_)) = (
        path_of(to.listing, to.agent, to.home, to.id),
        Stamp::of(to.stamp),
        to.path.to_str(),
    ) else {
        return (scan.conversation_now(), Ok(()));
    };
    let document = || {
        let conversation = scan.conversation_now();
        let document = document_body(to, head, &conversation);
        (conversation, document)
    };
    let state = || {
        let body = scan_file::scan_body(stamp, offset, line, |out| scan.save_into(out));
        write_scan(&file, body.as_deref())
    };
    let ((conversation, document), scan_written) = match keep {
        Keep::Reference => crate::sync::both(document, state),
        Keep::Bulk => (document(), state()),
    };
    let written = scan_written.and_then(|()| match document {
        Some(document) => write_document(&file, &document),
        // Too large to keep: neither file stays.
        None => {
            let _ = std::fs::remove_file(scan_path(&file));
            Ok(())
        }
    });
    (conversation, written)
}

fn stamp_of(path: &Path) -> Option<FileStamp> {
    std::fs::metadata(path).ok().map(|m| FileStamp::of(&m))
}

/// Why a kept projection was not used.
#[derive(Debug, PartialEq, Eq)]
enum Miss {
    /// None is kept for this session (or one of a name that hashes alike).
    Absent,
    /// One is kept but damaged; the reason names what was wrong.
    Damaged(String),
}

/// The session `id` of `agent`'s home `home` as kept beside `listing` (unchecked against its
/// file: [`kept`] does that).
fn load(listing: &Path, agent: &str, home: &Path, id: &str) -> std::result::Result<Loaded, Miss> {
    let kept = path_of(listing, agent, home, id).ok_or(Miss::Absent)?;
    if std::fs::symlink_metadata(&kept).is_err() {
        return Err(Miss::Absent);
    }
    let damaged = |why: &str| Miss::Damaged(format!("{}: {why}", kept.display()));
    let file = super::persist::read_whole(&kept, MAX_BYTES)
        .ok_or_else(|| damaged("not a readable regular file within the size limit"))?;
    let bytes = file.bytes();
    let body = unseal(bytes, MAGIC).map_err(damaged)?;
    let (path, rest) = path_line(body).ok_or_else(|| damaged("no session path"))?;
    // The document's head, then the items.
    let Some(end) = memchr::memchr(b'\n', rest) else {
        return Err(damaged("no items line"));
    };
    let (json, items) = (&rest[..end], &rest[end + 1..]);
    let document: Document =
        serde_json::from_slice(json).map_err(|e| damaged(&format!("not readable: {e}")))?;
    if !file.intact() {
        return Err(damaged("cut short while it was read"));
    }
    if document.agent != agent || document.home != home.to_string_lossy() || document.id != id {
        // Another session whose names hash alike: not damage, just not this one.
        return Err(Miss::Absent);
    }
    // Where the items lie in the file's bytes (kept whole, mapped or read, not copied out).
    let start = items.as_ptr() as usize - bytes.as_ptr() as usize;
    let items = start..start + items.len();
    Ok(Loaded {
        path: PathBuf::from(path),
        stamp: document.stamp,
        head: Head {
            id: document.head.id,
            created_at: document.head.created,
            cwd: document.head.cwd,
        },
        last_line: document.last_line,
        last_activity: document.last_activity,
        file,
        items,
    })
}

/// Removes what is kept of session `id` (a damaged file).
fn forget(listing: &Path, agent: &str, home: &Path, id: &str) {
    if let Some(kept) = path_of(listing, agent, home, id) {
        let _ = std::fs::remove_file(scan_path(&kept));
        let _ = std::fs::remove_file(kept);
    }
}

/// Keeps the session `to` names, its head `head` and conversation `conversation`, without a
/// scan (an agent whose conversation is not folded line by line; [`keep_scan`] keeps one with
/// its scan). Best effort: an error is the caller's to log, never the read's. Then removes kept
/// projections whose session file is gone and the oldest past [`MAX_FILES`].
fn save(to: Target<'_>, head: &Head, conversation: &Conversation) -> std::io::Result<()> {
    let (Some(file), Some(document)) = (
        path_of(to.listing, to.agent, to.home, to.id),
        document_body(to, head, conversation),
    ) else {
        return Ok(());
    };
    write_scan(&file, None)?;
    write_document(&file, &document)
}

/// The kept file's sealed bytes for the session `to` names: its path, its document (the head)
/// and the conversation's items. `None` when it cannot be kept: a path or a stamp that cannot
/// be written, or over [`MAX_BYTES`].
fn document_body(to: Target<'_>, head: &Head, conversation: &Conversation) -> Option<Vec<u8>> {
    let (stamp, path) = (Stamp::of(to.stamp)?, to.path.to_str()?);
    let document = Document {
        agent: to.agent.to_string(),
        home: to.home.to_string_lossy().into_owned(),
        id: to.id.to_string(),
        stamp,
        head: KeptHead {
            id: head.id.clone(),
            created: head.created_at,
            cwd: head.cwd.clone(),
        },
        last_line: conversation.last_line,
        last_activity: conversation.last_activity,
    };
    let items: Vec<KeptItemRef<'_>> = conversation.items.iter().map(KeptItem::of).collect();
    let text: usize = conversation.items.iter().map(|i| i.text.len() + 32).sum();
    let mut body = Vec::with_capacity(MAGIC.len() + 4096 + text + text / 8 + 17);
    body.extend_from_slice(MAGIC.as_bytes());
    serde_json::to_writer(&mut body, path).ok()?;
    body.push(b'\n');
    serde_json::to_writer(&mut body, &document).ok()?;
    body.push(b'\n');
    // Encoded where they go: the buffer was sized for them.
    if !super::agent::save_state_into(&items, &mut body) || body.len() + 17 > MAX_BYTES {
        return None;
    }
    seal(&mut body, MAGIC);
    Some(body)
}

/// Writes the sealed scan `body` beside the kept file `file`, or removes the one there when
/// there is none (the scan before its document: a document is never newer than the scan beside
/// it, and a scan is used only with the document of its stamp). First makes `index/`,
/// `agents/` and `conversations/`, each a plain directory.
fn write_scan(file: &Path, body: Option<&[u8]>) -> std::io::Result<()> {
    let dir = file
        .parent()
        .ok_or_else(|| std::io::Error::other("a kept conversation without a directory"))?;
    if let Some(agents) = dir.parent() {
        super::persist::ensure_plain_dir(agents)?;
    }
    super::persist::ensure_plain_dir(dir)?;
    let scan = scan_path(file);
    match body {
        Some(body) => crate::session::files::write_replacing(&scan, body),
        None => {
            let _ = std::fs::remove_file(&scan);
            Ok(())
        }
    }
}

/// Writes the kept file `file` (after [`write_scan`]), then prunes the kept files beside it.
fn write_document(file: &Path, document: &[u8]) -> std::io::Result<()> {
    crate::session::files::write_replacing(file, document)?;
    if let Some(dir) = file.parent() {
        prune(dir, file);
    }
    Ok(())
}

/// The longest path line read (a JSON string of a path: Linux paths stop at 4 KiB).
const MAX_PATH_LINE: usize = 16 << 10;

/// The session file's path from the start of a kept file's body, and the rest after its line.
fn path_line(body: &[u8]) -> Option<(String, &[u8])> {
    let end = memchr::memchr(b'\n', &body[..body.len().min(MAX_PATH_LINE)])?;
    let path: String = serde_json::from_slice(&body[..end]).ok()?;
    Some((path, &body[end + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation(words: &[&str]) -> Conversation {
        Conversation {
            items: words
                .iter()
                .enumerate()
                .map(|(n, w)| Item {
                    kind: [ItemKind::User, ItemKind::Assistant, ItemKind::Summary][n % 3],
                    text: w.to_string(),
                    time: n as i64,
                })
                .collect(),
            last_line: Some(words.len() as u64),
            last_activity: Some(7),
        }
    }

    fn head() -> Head {
        Head {
            id: "s".into(),
            created_at: 5,
            cwd: Some("/w \u{1b}".into()),
        }
    }

    /// Keeps `words` as session `id` of the home `home`, its file `session`.
    fn keep(listing: &Path, home: &Path, id: &str, session: &Path, words: &[&str]) {
        keep_with(listing, home, id, session, words, false);
    }

    /// [`keep`], with a Claude Code conversation scan that stopped after the first line.
    fn keep_with(
        listing: &Path,
        home: &Path,
        id: &str,
        session: &Path,
        words: &[&str],
        with_scan: bool,
    ) {
        let conversation = conversation(words);
        let head = head();
        let stamp = stamp_of(session).unwrap();
        let to = Target {
            listing,
            agent: "claude",
            home,
            id,
            path: session,
            stamp,
        };
        save(to, &head, &conversation).unwrap();
        if with_scan {
            let state = crate::session::external::agent::save_state(
                &super::super::claude::ConversationScan::default(),
            );
            let body = scan_file::scan_body(Stamp::of(stamp).unwrap(), 2, 1, |out| {
                out.extend_from_slice(&state);
                true
            });
            write_scan(
                &path_of(listing, "claude", home, id).unwrap(),
                body.as_deref(),
            )
            .unwrap();
        }
    }

    #[test]
    fn a_kept_session_comes_back_exactly_for_its_agent_home_and_id_only() {
        let dir = tempfile::tempdir().unwrap();
        let listing = dir.path().join("index/agents/claude-0.json");
        let home = dir.path().join("home");
        let session = dir.path().join("s.jsonl");
        std::fs::write(&session, "x\n").unwrap();
        let words = ["q \u{1b}[31m", "a\n\"b\"", "summary"];
        keep(&listing, &home, "claude:s", &session, &words);
        let loaded = load(&listing, "claude", &home, "claude:s").unwrap();
        assert_eq!(loaded.path, session);
        assert_eq!(
            loaded.stamp,
            Stamp::of(stamp_of(&session).unwrap()).unwrap()
        );
        assert_eq!(loaded.head, head());
        assert_eq!(loaded.conversation(), Some(conversation(&words)));
        for (agent, home, id) in [
            ("codex", home.as_path(), "claude:s"),
            ("claude", dir.path(), "claude:s"),
            ("claude", home.as_path(), "claude:t"),
        ] {
            assert_eq!(
                load(&listing, agent, home, id),
                Err(Miss::Absent),
                "{agent} {home:?} {id}"
            );
        }
    }

    /// A kept file of [`super::super::persist::MAP_FROM`] bytes or more is mapped, comes back
    /// exactly as a small one does, and a byte changed anywhere in it is damage.
    #[test]
    fn a_large_kept_session_is_mapped_and_comes_back_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let listing = dir.path().join("index/agents/claude-0.json");
        let session = dir.path().join("s.jsonl");
        std::fs::write(&session, "x\n").unwrap();
        let texts: Vec<String> = (0..2000)
            .map(|n| format!("reply {n} {}", "é".repeat(20)))
            .collect();
        let words: Vec<&str> = texts.iter().map(String::as_str).collect();
        keep(&listing, dir.path(), "claude:s", &session, &words);
        let kept = path_of(&listing, "claude", dir.path(), "claude:s").unwrap();
        let good = std::fs::read(&kept).unwrap();
        assert!(
            good.len() as u64 >= super::super::persist::MAP_FROM,
            "{}",
            good.len()
        );
        let loaded = load(&listing, "claude", dir.path(), "claude:s").unwrap();
        assert!(matches!(
            loaded.file,
            super::super::persist::Whole::Mapped(_)
        ));
        assert_eq!(loaded.conversation(), Some(conversation(&words)));
        for at in [MAGIC.len() + 2, good.len() / 2, good.len() - 20] {
            let mut bytes = good.clone();
            bytes[at] ^= 0x01;
            std::fs::write(&kept, &bytes).unwrap();
            match load(&listing, "claude", dir.path(), "claude:s") {
                Err(Miss::Damaged(reason)) => assert!(reason.contains("checksum"), "{reason}"),
                other => panic!("byte {at} changed: {other:?}"),
            }
        }
    }

    #[test]
    fn damage_is_named_and_a_path_line_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let listing = dir.path().join("agents/claude-0.json");
        let session = dir.path().join("s.jsonl");
        std::fs::write(&session, "x\n").unwrap();
        keep(&listing, dir.path(), "claude:s", &session, &["a"]);
        let kept = path_of(&listing, "claude", dir.path(), "claude:s").unwrap();
        let good = std::fs::read(&kept).unwrap();
        let cases: [(&[u8], &str); 4] = [
            (b"", "not this version"),
            (&good[..good.len() - 3], "checksum"),
            (&good[..MAGIC.len() + 4], "truncated"),
            (b"dsh-refs agent conversation 0\n{}", "not this version"),
        ];
        for (bytes, why) in cases {
            std::fs::write(&kept, bytes).unwrap();
            match load(&listing, "claude", dir.path(), "claude:s") {
                Err(Miss::Damaged(reason)) => assert!(reason.contains(why), "{reason} / {why}"),
                other => panic!("{why}: {other:?}"),
            }
        }
        // A path line with no end within the bound is no path.
        let long = vec![b'"'; MAX_PATH_LINE + 10];
        assert_eq!(path_line(&long), None);
        assert_eq!(
            path_line(b"\"/a\"\nrest"),
            Some(("/a".to_string(), &b"rest"[..]))
        );
    }

    #[test]
    fn at_most_max_files_are_kept_the_oldest_going_first() {
        let dir = tempfile::tempdir().unwrap();
        let listing = dir.path().join("agents/claude-0.json");
        let session = dir.path().join("s.jsonl");
        std::fs::write(&session, "x\n").unwrap();
        let ids: Vec<String> = (0..MAX_FILES + 3).map(|n| format!("claude:{n}")).collect();
        for (n, id) in ids.iter().enumerate() {
            keep(&listing, dir.path(), id, &session, &["a"]);
            // Distinct write times, oldest first.
            let kept = path_of(&listing, "claude", dir.path(), id).unwrap();
            let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000 + n as u64);
            let file = std::fs::File::options().append(true).open(&kept).unwrap();
            file.set_modified(at).unwrap();
        }
        let count = std::fs::read_dir(dir_beside(&listing).unwrap())
            .unwrap()
            .count();
        assert_eq!(count, MAX_FILES);
        for (n, id) in ids.iter().enumerate() {
            let kept = path_of(&listing, "claude", dir.path(), id)
                .unwrap()
                .exists();
            assert_eq!(kept, n >= 3, "session {n}");
        }
    }

    /// A bulk reader keeps while fewer than [`MAX_FILES`] are kept, else only a session more
    /// recent than the least recent kept; a reference's use ranks its document now.
    #[test]
    fn a_bulk_read_keeps_only_with_room_or_above_the_lowest_rank() {
        let dir = tempfile::tempdir().unwrap();
        let listing = dir.path().join("agents/claude-0.json");
        let session = dir.path().join("s.jsonl");
        std::fs::write(&session, "x\n").unwrap();
        let secs = |n: u64| SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(n);
        let stamp_at = |n: u64| {
            let file = std::fs::File::options()
                .append(true)
                .open(&session)
                .unwrap();
            file.set_modified(secs(n)).unwrap();
            stamp_of(&session).unwrap()
        };
        // Nothing kept yet: room.
        assert!(room_for(
            &listing,
            "claude",
            dir.path(),
            "claude:new",
            stamp_at(1)
        ));
        for n in 0..MAX_FILES as u64 {
            let id = format!("claude:{n}");
            keep(&listing, dir.path(), &id, &session, &["a"]);
            touch(&listing, "claude", dir.path(), &id, secs(1_000 + n));
            let room = room_for(&listing, "claude", dir.path(), "claude:new", stamp_at(1));
            assert_eq!(room, n + 1 < MAX_FILES as u64, "{} kept", n + 1);
        }
        // Full: only a session more recent than the lowest rank (1,000 s) is kept.
        for (at, room) in [(999, false), (1_000, false), (1_001, true), (5_000, true)] {
            let stamp = stamp_at(at);
            assert_eq!(
                room_for(&listing, "claude", dir.path(), "claude:new", stamp),
                room,
                "{at}"
            );
        }
        // A session already kept is not counted against itself: the others leave room.
        assert!(room_for(
            &listing,
            "claude",
            dir.path(),
            "claude:0",
            stamp_at(1)
        ));
        let kept_mtime = |id: &str| {
            let file = path_of(&listing, "claude", dir.path(), id).unwrap();
            std::fs::metadata(file).unwrap().modified().unwrap()
        };
        touch(&listing, "claude", dir.path(), "claude:0", secs(9_000));
        assert_eq!(kept_mtime("claude:0"), secs(9_000));
        // A future mtime ranks as now at most.
        assert!(rank_of(stamp_at(u64::from(u32::MAX) * 4)) <= SystemTime::now());
        // Not through a symlink.
        let target = dir.path().join("target");
        std::fs::write(&target, "t").unwrap();
        let kept = path_of(&listing, "claude", dir.path(), "claude:1").unwrap();
        std::fs::remove_file(&kept).unwrap();
        std::os::unix::fs::symlink(&target, &kept).unwrap();
        let before = std::fs::metadata(&target).unwrap().modified().unwrap();
        touch(&listing, "claude", dir.path(), "claude:1", secs(7));
        assert_eq!(
            std::fs::metadata(&target).unwrap().modified().unwrap(),
            before
        );
    }

    #[test]
    fn only_an_unchanged_file_under_the_homes_sessions_directory_is_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let listing = dir.path().join("index/agents/claude-0.json");
        let home = dir.path().join("home");
        let inside = home.join("projects/-w/s.jsonl");
        std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
        let outside = dir.path().join("s.jsonl");
        for file in [&inside, &outside] {
            std::fs::write(file, "x\n").unwrap();
        }
        let agent = ExternalAgent::Claude;
        keep(&listing, &home, "claude:in", &inside, &["a"]);
        keep(&listing, &home, "claude:out", &outside, &["a"]);
        let is = |id: &str| match kept(&listing, agent, &home, id) {
            Found::Nothing => "nothing",
            Found::Same(..) => "same",
            Found::Grown(..) => "grown",
        };
        assert_eq!(is("claude:in"), "same");
        assert_eq!(is("claude:out"), "nothing", "outside the home");
        // Grown, in place: without a kept scan it is read whole; with one, it goes on.
        keep_with(&listing, &home, "claude:scan", &inside, &["a"], true);
        std::fs::write(&inside, "x\ny\n").unwrap();
        assert_eq!(is("claude:in"), "nothing");
        assert_eq!(is("claude:scan"), "grown");
        // Shorter than when it was kept, or another file in its place: read whole.
        std::fs::write(&inside, "x").unwrap();
        assert_eq!(is("claude:scan"), "nothing");
        keep_with(&listing, &home, "claude:scan", &inside, &["a"], true);
        let staged = inside.with_extension("tmp");
        std::fs::write(&staged, "x\ny\n").unwrap();
        std::fs::rename(&staged, &inside).unwrap();
        assert_eq!(is("claude:scan"), "nothing");
    }
}
