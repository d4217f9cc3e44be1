//! The Linux watcher: inotify, driven directly, with a map of watches sized for 100,000
//! sessions.
//!
//! Purpose: the `notify` crate's recursive watcher keeps two absolute paths per watched
//! directory (about 450 bytes each: 45 MB at 100,000 sessions, a third of a warm MCP server's
//! memory). The store's layout is fixed and shallow (`sessions/<project>/<session>/<log>`), so
//! this watcher adds one watch per directory down to the session directories only, and keeps
//! per watch the index of its project and where the session directory's name is in one buffer
//! of names (about 60 bytes a directory, the name included).
//!
//! Invariant: every event is handed to [`super::touched`] as the path and kind `notify` would
//! have reported, so the meaning of events is decided (and unit-tested) in one place. A
//! directory created or moved in under a watched one is watched before its meaning is
//! reported, and its own session directories with it; what changed in it before its watch
//! existed is what the full pass that a new directory asks for finds. A watch that cannot be
//! added later (the `max_user_watches` limit) is reported as an error, which the indexer takes
//! as its cue to drop the watcher and poll.
//!
//! Proof: `tests/discovery/watch.rs` (an append and a new session found under an indexer that
//! polls once an hour; a watch limit of 2 makes the start fail) and the tests below (a session
//! directory made after the start, a removed log, the thread ending when dropped).

use super::Touched;
use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};
use notify::event::{CreateKind, DataChange, ModifyKind, RemoveKind, RenameMode};
use notify::EventKind;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What each directory watch asks the kernel for.
const MASK: WatchMask = WatchMask::CREATE
    .union(WatchMask::DELETE)
    .union(WatchMask::MOVED_FROM)
    .union(WatchMask::MOVED_TO)
    .union(WatchMask::MODIFY)
    .union(WatchMask::DELETE_SELF)
    .union(WatchMask::ONLYDIR);

/// A running watcher; dropping it stops its thread (and the kernel's watches with its file
/// descriptor).
pub struct Watcher {
    stop: Arc<AtomicBool>,
    watches: Watches,
    root: WatchDescriptor,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Removing a watch queues an `IN_IGNORED` event, which wakes the thread's blocking
        // read; it sees `stop` and ends. (A root already gone ended the thread before.)
        let _ = self.watches.remove(self.root.clone());
    }
}

/// One watched directory: the sessions directory, a project directory or a session directory.
#[derive(Debug)]
enum Node {
    Root,
    /// An index into [`Tree::projects`].
    Project(u32),
    /// A session directory: its project, and where its name is in [`Tree::names`].
    Session {
        project: u32,
        at: u32,
        len: u32,
    },
}

/// The watches and what each one is.
struct Tree {
    root: PathBuf,
    watches: Watches,
    nodes: HashMap<i32, Node>,
    /// Project directory names, by the index nodes hold (a removed project keeps its slot).
    projects: Vec<Box<OsStr>>,
    /// The session directories' names, one after another (one allocation instead of one a
    /// directory); names of removed watches stay until [`Tree::compact`] drops them.
    names: Vec<u8>,
    /// Bytes of `names` no node refers to any more.
    garbage: usize,
}

impl Tree {
    /// The directory a node watches, relative parts joined to the root.
    fn path_of(&self, node: &Node) -> PathBuf {
        match node {
            Node::Root => self.root.clone(),
            Node::Project(p) => self.root.join(&*self.projects[*p as usize]),
            Node::Session { project, at, len } => {
                let mut path = self.root.join(&*self.projects[*project as usize]);
                path.push(self.name(*at, *len));
                path
            }
        }
    }

    fn name(&self, at: u32, len: u32) -> &OsStr {
        use std::os::unix::ffi::OsStrExt;
        OsStr::from_bytes(&self.names[at as usize..(at + len) as usize])
    }

    /// A watch is gone (`IN_IGNORED`): forgets its node; whether it was the root's.
    fn forget(&mut self, id: i32) -> bool {
        match self.nodes.remove(&id) {
            Some(Node::Root) => true,
            Some(Node::Session { len, .. }) => {
                self.garbage += len as usize;
                if self.garbage > self.names.len() / 2 && self.garbage > 1 << 20 {
                    self.compact();
                }
                false
            }
            _ => false,
        }
    }

    /// Rewrites `names` with only the names nodes still refer to.
    fn compact(&mut self) {
        let mut names = Vec::with_capacity(self.names.len() - self.garbage);
        for node in self.nodes.values_mut() {
            if let Node::Session { at, len, .. } = node {
                let start = names.len() as u32;
                names.extend_from_slice(&self.names[*at as usize..(*at + *len) as usize]);
                *at = start;
            }
        }
        self.names = names;
        self.garbage = 0;
    }

    fn add(&mut self, path: &Path, node: Node) -> std::io::Result<()> {
        let wd = self.watches.add(path, MASK)?;
        self.nodes.insert(wd.get_watch_descriptor_id(), node);
        Ok(())
    }

    /// Watches the project directory `name` and every session directory in it.
    fn add_project(&mut self, name: &OsStr) -> std::io::Result<()> {
        let index = self.projects.len() as u32;
        self.projects.push(name.into());
        let dir = self.root.join(name);
        match self.add(&dir, Node::Project(index)) {
            Ok(()) => {}
            // Gone again, or not a directory: nothing to watch.
            Err(e) if vanished(&e) => return Ok(()),
            Err(e) => return Err(e),
        }
        let sessions = subdirectories(&dir);
        // Room for this project's names at once (growth by doubling left a third unused).
        self.names
            .reserve_exact(sessions.iter().map(|s| s.len()).sum::<usize>());
        for session in sessions {
            self.add_session(index, &session)?;
        }
        Ok(())
    }

    fn add_session(&mut self, project: u32, name: &OsStr) -> std::io::Result<()> {
        use std::os::unix::ffi::OsStrExt;
        let mut dir = self.root.join(&*self.projects[project as usize]);
        dir.push(name);
        let bytes = name.as_bytes();
        let (Ok(at), Ok(len)) = (u32::try_from(self.names.len()), u32::try_from(bytes.len()))
        else {
            return Err(std::io::Error::other(
                "too many session directories to watch",
            ));
        };
        let wd = match self.watches.add(&dir, MASK) {
            Ok(wd) => wd,
            Err(e) if vanished(&e) => return Ok(()),
            Err(e) => return Err(e),
        };
        self.names.extend_from_slice(bytes);
        let replaced = self.nodes.insert(
            wd.get_watch_descriptor_id(),
            Node::Session { project, at, len },
        );
        if let Some(Node::Session { len, .. }) = replaced {
            self.garbage += len as usize;
        }
        Ok(())
    }
}

/// A watch that could not be added because its directory is gone or is no directory: not an
/// error of the watcher.
fn vanished(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT | libc::ENOTDIR | libc::EACCES)
    )
}

fn subdirectories(dir: &Path) -> Vec<OsString> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name())
        .collect()
}

fn describe(e: &std::io::Error) -> String {
    if e.raw_os_error() == Some(libc::ENOSPC) {
        format!("the inotify watch limit (fs.inotify.max_user_watches) is reached ({e})")
    } else {
        format!("inotify: {e}")
    }
}

/// Watches `sessions_dir` (which exists) and the directories below it, down to the session
/// directories, on this thread; then reads events on a thread of its own and hands their
/// meaning to `report`.
pub fn start(
    sessions_dir: &Path,
    report: impl Fn(Result<Vec<Touched>, String>) + Send + 'static,
) -> Result<Watcher, String> {
    let mut inotify = Inotify::init().map_err(|e| describe(&e))?;
    let mut tree = Tree {
        root: sessions_dir.to_path_buf(),
        watches: inotify.watches(),
        nodes: HashMap::new(),
        projects: Vec::new(),
        names: Vec::new(),
        garbage: 0,
    };
    let root = tree
        .watches
        .add(sessions_dir, MASK)
        .map_err(|e| describe(&e))?;
    tree.nodes
        .insert(root.get_watch_descriptor_id(), Node::Root);
    for project in subdirectories(sessions_dir) {
        tree.add_project(&project).map_err(|e| describe(&e))?;
    }
    tree.nodes.shrink_to_fit();
    tree.names.shrink_to_fit();
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = Watcher {
        stop: stop.clone(),
        watches: inotify.watches(),
        root,
    };
    std::thread::Builder::new()
        .name("dsh-discovery-inotify".into())
        .spawn(move || read_events(&mut inotify, &mut tree, &stop, &report))
        .map_err(|e| format!("cannot start the watcher's thread: {e}"))?;
    Ok(watcher)
}

/// The watcher's thread: reads events until `stop` is set, the root is gone or reading fails.
fn read_events(
    inotify: &mut Inotify,
    tree: &mut Tree,
    stop: &AtomicBool,
    report: &dyn Fn(Result<Vec<Touched>, String>),
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let events = match inotify.read_events_blocking(&mut buffer) {
            Ok(events) => events,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                if !stop.load(Ordering::SeqCst) {
                    report(Err(describe(&e)));
                }
                return;
            }
        };
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let mut seen = Vec::new();
        let mut failed = None;
        let mut root_gone = false;
        for event in events {
            if event.mask.contains(EventMask::Q_OVERFLOW) {
                seen.push(Touched::Listing);
                continue;
            }
            let id = event.wd.get_watch_descriptor_id();
            if event.mask.contains(EventMask::IGNORED) {
                root_gone |= tree.forget(id);
                continue;
            }
            let Some(node) = tree.nodes.get(&id) else {
                continue;
            };
            let dir = tree.path_of(node);
            let (path, kind) = match event.name {
                Some(name) => (dir.join(name), kind_of(event.mask)),
                // The watched directory itself was removed.
                None if event.mask.contains(EventMask::DELETE_SELF) => {
                    (dir, EventKind::Remove(RemoveKind::Folder))
                }
                None => continue,
            };
            // A directory made or moved in is watched before its news is handed on.
            let new_dir = event.mask.contains(EventMask::ISDIR)
                && event
                    .mask
                    .intersects(EventMask::CREATE | EventMask::MOVED_TO);
            if let (true, Some(name)) = (new_dir, event.name) {
                let added = match *node {
                    Node::Root => tree.add_project(name),
                    Node::Project(project) => tree.add_session(project, name),
                    Node::Session { .. } => Ok(()),
                };
                if let Err(e) = added {
                    failed.get_or_insert_with(|| describe(&e));
                }
            }
            seen.extend(super::touched(&tree.root, &kind, &path));
        }
        if !seen.is_empty() {
            report(Ok(seen));
        }
        if let Some(e) = failed {
            report(Err(e));
            return;
        }
        if root_gone {
            report(Ok(vec![Touched::Listing]));
            if !stop.load(Ordering::SeqCst) {
                report(Err("the sessions directory was removed".into()));
            }
            return;
        }
    }
}

/// The `notify` kind of an inotify event on a name in a watched directory.
fn kind_of(mask: EventMask) -> EventKind {
    let dir = mask.contains(EventMask::ISDIR);
    if mask.contains(EventMask::CREATE) {
        EventKind::Create(if dir {
            CreateKind::Folder
        } else {
            CreateKind::File
        })
    } else if mask.contains(EventMask::DELETE) {
        EventKind::Remove(if dir {
            RemoveKind::Folder
        } else {
            RemoveKind::File
        })
    } else if mask.contains(EventMask::MOVED_FROM) {
        EventKind::Modify(ModifyKind::Name(RenameMode::From))
    } else if mask.contains(EventMask::MOVED_TO) {
        EventKind::Modify(ModifyKind::Name(RenameMode::To))
    } else if mask.contains(EventMask::MODIFY) {
        EventKind::Modify(ModifyKind::Data(DataChange::Any))
    } else {
        EventKind::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    fn started(root: &Path) -> (Watcher, mpsc::Receiver<Result<Vec<Touched>, String>>) {
        let (tx, rx) = mpsc::channel();
        let tx = std::sync::Mutex::new(tx);
        let watcher = start(root, move |seen| {
            let _ = tx.lock().map(|tx| tx.send(seen));
        })
        .expect("inotify starts");
        (watcher, rx)
    }

    /// Waits for `want` among the reported meanings.
    fn wait_for(rx: &mpsc::Receiver<Result<Vec<Touched>, String>>, want: &Touched) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match rx.recv_timeout(left) {
                Ok(Ok(seen)) if seen.contains(want) => return,
                Ok(Err(e)) => panic!("watcher error: {e}"),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        panic!("{want:?} was not reported");
    }

    #[test]
    fn new_directories_are_watched_and_their_logs_reported() {
        let home = tempfile::tempdir().unwrap();
        let root = home.path().join("sessions");
        std::fs::create_dir_all(root.join("p1").join("s1")).unwrap();
        std::fs::write(root.join("p1/s1/session.jsonl"), "{}\n").unwrap();
        let (watcher, rx) = started(&root);
        // An append to a log that was there at the start.
        std::fs::OpenOptions::new()
            .append(true)
            .open(root.join("p1/s1/session.jsonl"))
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"{}\n"))
            .unwrap();
        wait_for(&rx, &Touched::Session("s1".into()));
        // A project and a session made after the start: both watched, the log reported.
        std::fs::create_dir(root.join("p2")).unwrap();
        wait_for(&rx, &Touched::Listing);
        std::fs::create_dir(root.join("p2/s2")).unwrap();
        wait_for(&rx, &Touched::Listing);
        std::fs::write(root.join("p2/s2/session.jsonl"), "{}\n").unwrap();
        wait_for(&rx, &Touched::Session("s2".into()));
        // A removed log asks for a listing.
        std::fs::remove_file(root.join("p1/s1/session.jsonl")).unwrap();
        wait_for(&rx, &Touched::Listing);
        drop(watcher);
        // The thread ends once dropped: the channel closes (the callback, its sender, is gone).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                _ if std::time::Instant::now() > deadline => panic!("the thread did not end"),
                _ => {}
            }
        }
    }

    #[test]
    fn a_removed_sessions_directory_ends_the_watcher_with_an_error() {
        let home = tempfile::tempdir().unwrap();
        let root = home.path().join("sessions");
        std::fs::create_dir_all(root.join("p1")).unwrap();
        let (_watcher, rx) = started(&root);
        std::fs::remove_dir_all(&root).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            match rx.recv_timeout(Duration::from_secs(10)) {
                Ok(Err(e)) => {
                    assert!(e.contains("removed"), "{e}");
                    break;
                }
                Ok(Ok(_)) if std::time::Instant::now() < deadline => {}
                other => panic!("no error reported: {other:?}"),
            }
        }
    }
}
