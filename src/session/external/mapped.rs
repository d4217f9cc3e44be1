//! A heavy session file mapped into memory for one whole read, guarded against the file
//! shrinking underneath it.
//!
//! Purpose: a first read of a session of tens of megabytes spent most of its time getting the
//! bytes rather than reading them. `read` copies every byte out of the page cache, and a line
//! of megabytes (a `git diff` stored twice) needs a buffer as long, whose fresh pages the
//! kernel zeroes before the copy fills them. A mapping hands the parser the page cache itself:
//! nothing is copied and nothing zeroed, and a 12 MB line is just a slice.
//!
//! Invariant: a mapped file is read only through [`Mapped::bytes`] while the [`Mapped`] lives,
//! and a file that shrinks meanwhile never ends the process. Reading a mapped page past a
//! file's new end raises `SIGBUS`; the handler installed here, for a fault inside a guarded
//! mapping, puts zeroed pages in place of the rest of the mapping and marks it lost
//! ([`Mapped::intact`] turns false). The faulting read then sees zeros and the caller discards
//! everything read from the mapping and reads the file again by `read`. A fault anywhere else
//! goes on to the handler that was there before (the standard library's, which tells a stack
//! overflow apart), or to the default action: the process ends as it would have without this
//! file. Only Linux maps (elsewhere [`Mapped::of`] gives `None` and the caller reads).
//!
//! What a mapping cannot guard against: another process rewriting bytes in the middle of the
//! file while the read runs. The agents never do that (Claude Code and Codex only append, past
//! the mapped length, and an editor saves by writing a new file and renaming it over, which
//! leaves the mapped inode as it was), so this is accepted and written down here: such a writer
//! could give the parser bytes that change while it looks at them.
//!
//! Memory: pages of a mapped file count toward the process's resident size as they are read.
//! [`Mapped::release`] gives back the pages of a range already read (`MADV_DONTNEED`; they stay
//! in the page cache), so a read in parts holds only the parts in progress.
//!
//! Proof: the tests below (a file truncated under a live mapping reads as zeros and is marked
//! lost, the process lives on, and a later mapping is intact; released pages read back the
//! same) and `lines::tests` (reads through a mapping feed exactly the lines `read` feeds).
//!
//! `unsafe_code` is denied crate-wide and allowed here item by item: the mapping itself, the
//! signal handler and its installation, and the advice that gives pages back.

use std::fs::File;
use std::ops::Range;

thread_local! {
    /// The bytes of files this thread has mapped ([`bytes_mapped_on_this_thread`]).
    static MAPPED_HERE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many bytes of files mappings made on this thread have covered, ever: what a read by
/// mapping takes in, which the kernel's count of bytes read (`rchar`) does not see. Tests that
/// say how much of a file a read took add it to that count.
pub fn bytes_mapped_on_this_thread() -> u64 {
    MAPPED_HERE.with(std::cell::Cell::get)
}

/// A file's first bytes mapped read-only, registered with the `SIGBUS` guard while it lives.
pub struct Mapped {
    #[cfg(target_os = "linux")]
    map: memmap2::Mmap,
    #[cfg(target_os = "linux")]
    slot: usize,
}

impl Mapped {
    /// The first `len` bytes of `file` (a regular file, opened for reading) mapped and guarded;
    /// `None` when they cannot be (not Linux, nothing to map, the guard cannot be installed,
    /// every guard slot taken, or the mapping refused): the caller reads the file instead.
    pub fn of(file: &File, len: usize) -> Option<Mapped> {
        #[cfg(target_os = "linux")]
        {
            let mapped = guard::map(file, len)?;
            MAPPED_HERE.with(|here| here.set(here.get().saturating_add(len as u64)));
            Some(mapped)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (file, len);
            None
        }
    }

    /// The mapped bytes. Pages past the file's end, should it shrink while they are read,
    /// read as zeros (and [`Mapped::intact`] turns false).
    pub fn bytes(&self) -> &[u8] {
        #[cfg(target_os = "linux")]
        {
            &self.map
        }
        #[cfg(not(target_os = "linux"))]
        {
            &[]
        }
    }

    /// Whether every byte read so far was the file's: no page was lost to the file shrinking.
    /// Ask after the reading is done; `false` means whatever was read must be thrown away.
    pub fn intact(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            !guard::lost(self.slot)
        }
        #[cfg(not(target_os = "linux"))]
        {
            true
        }
    }

    /// Gives back the memory of the pages lying wholly within `range` of the bytes (read and
    /// no longer needed). They stay in the page cache, and read the same if read again.
    pub fn release(&self, range: Range<usize>) {
        #[cfg(target_os = "linux")]
        guard::release(&self.map, range);
        #[cfg(not(target_os = "linux"))]
        let _ = range;
    }
}

#[cfg(target_os = "linux")]
impl Drop for Mapped {
    fn drop(&mut self) {
        // The slot goes before the mapping does (the field is dropped after this).
        guard::unregister(self.slot);
    }
}

#[cfg(target_os = "linux")]
mod guard {
    use super::Mapped;
    use std::fs::File;
    use std::ops::Range;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::OnceLock;

    /// How many mappings may be guarded at once (a whole read in parts uses one, whatever its
    /// threads); past that a read goes by `read`.
    const SLOTS: usize = 32;

    /// A guarded mapping's address range (`start == 0`: free; `usize::MAX`: being taken) and
    /// whether a page of it was lost.
    struct Slot {
        start: AtomicUsize,
        end: AtomicUsize,
        lost: AtomicBool,
    }

    #[allow(clippy::declare_interior_mutable_const)] // Only to repeat it into the array.
    const FREE: Slot = Slot {
        start: AtomicUsize::new(0),
        end: AtomicUsize::new(0),
        lost: AtomicBool::new(false),
    };

    /// The mappings the handler answers for. Atomics only: the handler reads them, and a
    /// signal handler may take no lock.
    static GUARDED: [Slot; SLOTS] = [FREE; SLOTS];

    /// The page size, read once when the handler is installed.
    static PAGE: AtomicUsize = AtomicUsize::new(4096);

    /// The `SIGBUS` action before ours, for a fault not in a guarded mapping.
    struct Previous(libc::sigaction);
    // SAFETY: a `sigaction` is plain data (a handler address, a mask and flags), written once
    // before it is shared and only read afterwards.
    #[allow(unsafe_code)]
    unsafe impl Sync for Previous {}
    #[allow(unsafe_code)]
    unsafe impl Send for Previous {}
    static PREVIOUS: OnceLock<Previous> = OnceLock::new();

    /// Installs the handler once for the process; whether it is in place.
    #[allow(unsafe_code)]
    fn installed() -> bool {
        static INSTALLED: OnceLock<bool> = OnceLock::new();
        *INSTALLED.get_or_init(|| {
            // SAFETY: `sysconf`, `sigemptyset` and `sigaction` are given valid pointers to
            // values on this stack; the previous action is stored before ours can run.
            unsafe {
                let page = libc::sysconf(libc::_SC_PAGESIZE);
                if let Ok(page) = usize::try_from(page) {
                    if page.is_power_of_two() {
                        PAGE.store(page, Ordering::Relaxed);
                    }
                }
                let mut previous: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut previous) != 0 {
                    return false;
                }
                if PREVIOUS.set(Previous(previous)).is_err() {
                    return false;
                }
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_sigbus as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) == 0
            }
        })
    }

    /// [`Mapped::of`] on Linux.
    #[allow(unsafe_code)]
    pub(super) fn map(file: &File, len: usize) -> Option<Mapped> {
        if len == 0 || !installed() {
            return None;
        }
        // SAFETY: the mapping is read-only and read only while registered below, so a file
        // that shrinks costs zeros and a mark, never the process (the module's invariant); a
        // file rewritten in place is the accepted limit the module documents.
        let map = unsafe { memmap2::MmapOptions::new().len(len).map(file) }.ok()?;
        let start = map.as_ptr() as usize;
        let end = start + map.len();
        for (at, slot) in GUARDED.iter().enumerate() {
            if slot
                .start
                .compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                slot.lost.store(false, Ordering::Relaxed);
                slot.end.store(end, Ordering::Relaxed);
                slot.start.store(start, Ordering::Release);
                return Some(Mapped { map, slot: at });
            }
        }
        None
    }

    pub(super) fn lost(slot: usize) -> bool {
        GUARDED[slot].lost.load(Ordering::Acquire)
    }

    pub(super) fn unregister(slot: usize) {
        GUARDED[slot].end.store(0, Ordering::Relaxed);
        GUARDED[slot].start.store(0, Ordering::Release);
    }

    /// [`Mapped::release`] on Linux.
    #[allow(unsafe_code)]
    pub(super) fn release(map: &memmap2::Mmap, range: Range<usize>) {
        let page = PAGE.load(Ordering::Relaxed);
        let base = map.as_ptr() as usize;
        // Whole pages only: the first page boundary at or after the start, the last at or
        // before the end (the mapping starts on a page boundary).
        let from = (base + range.start).next_multiple_of(page) - base;
        let to = (base + range.end.min(map.len())) / page * page - base;
        if from < to {
            // SAFETY: `from..to` lies within the mapping. For a read-only file mapping,
            // `MADV_DONTNEED` only drops this process's view of the pages: read again, they
            // come back from the page cache with the same bytes (zeros where the guard put
            // zeros), so no byte the caller may still see changes.
            unsafe {
                map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, from, to - from)
                    .ok();
            }
        }
    }

    /// The `SIGBUS` handler: a fault inside a guarded mapping (its file shrank) gets zeroed
    /// pages from the faulting page to the mapping's end and a mark; any other goes on to the
    /// action before ours.
    #[allow(unsafe_code)]
    extern "C" fn on_sigbus(
        signal: libc::c_int,
        info: *mut libc::siginfo_t,
        context: *mut libc::c_void,
    ) {
        // SAFETY: the kernel passes a valid `siginfo_t` to an `SA_SIGINFO` handler; for
        // `SIGBUS` its address field is the faulting address.
        let addr = unsafe { (*info).si_addr() } as usize;
        let page = PAGE.load(Ordering::Relaxed);
        for slot in &GUARDED {
            let start = slot.start.load(Ordering::Acquire);
            let end = slot.end.load(Ordering::Acquire);
            if start == 0 || start == usize::MAX || addr < start || addr >= end {
                continue;
            }
            let from = addr / page * page;
            let to = end.next_multiple_of(page);
            // SAFETY: `from..to` lies within a mapping this process made and still holds
            // (registered until just before it is unmapped, and no read of it runs then), so
            // replacing those pages touches nothing else. `mmap` is a system call; `errno`,
            // which it may set, is put back for the code the signal interrupted.
            let placed = unsafe {
                let errno = *libc::__errno_location();
                let placed = libc::mmap(
                    from as *mut libc::c_void,
                    to - from,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                );
                *libc::__errno_location() = errno;
                placed
            };
            if placed != libc::MAP_FAILED {
                slot.lost.store(true, Ordering::Release);
                return;
            }
            break;
        }
        forward(signal, info, context);
    }

    /// What would have happened without our handler: the previous handler runs, or (it was the
    /// default or ignored) the default comes back and the faulting access, run again, ends the
    /// process as `SIGBUS` does.
    #[allow(unsafe_code)]
    fn forward(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
        let previous = PREVIOUS.get().map(|p| (p.0.sa_sigaction, p.0.sa_flags));
        match previous {
            Some((handler, flags)) if handler != libc::SIG_DFL && handler != libc::SIG_IGN => {
                // SAFETY: a handler address the process installed for `SIGBUS`, called as its
                // flags say it expects to be called.
                unsafe {
                    if flags & libc::SA_SIGINFO != 0 {
                        let handler: extern "C" fn(
                            libc::c_int,
                            *mut libc::siginfo_t,
                            *mut libc::c_void,
                        ) = std::mem::transmute(handler);
                        handler(signal, info, context);
                    } else {
                        let handler: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
                        handler(signal);
                    }
                }
            }
            _ => {
                // SAFETY: a zeroed `sigaction` with `SIG_DFL` is the default action.
                unsafe {
                    let mut default: libc::sigaction = std::mem::zeroed();
                    default.sa_sigaction = libc::SIG_DFL;
                    libc::sigemptyset(&mut default.sa_mask);
                    libc::sigaction(libc::SIGBUS, &default, std::ptr::null_mut());
                }
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Write;

    /// A file of `len` bytes (`abc…z` over and over), and it opened for reading.
    fn file_of(len: usize) -> (tempfile::TempDir, std::path::PathBuf, File) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut file = File::create(&path).unwrap();
        let bytes: Vec<u8> = (0..len).map(|k| b'a' + (k % 26) as u8).collect();
        file.write_all(&bytes).unwrap();
        let file = File::open(&path).unwrap();
        (dir, path, file)
    }

    /// A file cut to nothing under a live mapping: reading every byte of the mapping does not
    /// end the process, the pages past the new end read as zeros, the mapping says it was
    /// lost; a mapping made afterwards (possibly in the same slot) is intact.
    #[test]
    fn a_file_shrunk_under_its_mapping_reads_zeros_and_is_marked_lost() {
        let len = 1 << 20;
        let (_dir, path, file) = file_of(len);
        let mapped = Mapped::of(&file, len).unwrap();
        assert_eq!(mapped.bytes()[..3], *b"abc");
        assert!(mapped.intact());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(5000)
            .unwrap();
        let bytes = mapped.bytes();
        // Read past the new end (the test would die of SIGBUS without the guard).
        let tail: u64 = bytes[8192..].iter().map(|&b| u64::from(b)).sum();
        assert_eq!(tail, 0);
        assert!(!mapped.intact());
        drop(mapped);
        let again = Mapped::of(&file, 4096).unwrap();
        assert_eq!(again.bytes()[..3], *b"abc");
        assert!(again.intact());
    }

    /// Pages given back read the same bytes again.
    #[test]
    fn released_pages_read_the_same() {
        let len = 3 << 20;
        let (_dir, _path, file) = file_of(len);
        let mapped = Mapped::of(&file, len).unwrap();
        let before: Vec<u8> = mapped.bytes().to_vec();
        mapped.release(100..(2 << 20) + 7);
        mapped.release(0..len);
        assert_eq!(mapped.bytes(), &before[..]);
        assert!(mapped.intact());
    }

    /// Nothing to map is no mapping.
    #[test]
    fn an_empty_range_is_not_mapped() {
        let (_dir, _path, file) = file_of(10);
        assert!(Mapped::of(&file, 0).is_none());
    }
}
