//! Opening files of a home that someone else may have replaced with something hostile.
//!
//! Purpose: a log, a pending marker or the diagnostics log is expected to be a regular file, but
//! a home is shared with other programs and users. A FIFO in its place would block `open` (and
//! every read) forever; a symlink to `/dev/zero` would feed a reader without end.
//!
//! Invariant: [`open_regular`] returns only a handle to a regular file, and never blocks in
//! `open` on a FIFO or device.
//!
//! Proof: on Unix the file is opened with `O_NONBLOCK` (a FIFO without a writer opens at once
//! instead of waiting for one; for a regular file the flag changes nothing) and, when symlinks
//! must not be followed, `O_NOFOLLOW`; the *opened* handle's type is then checked with `fstat`,
//! so a file swapped between a check and the open cannot slip through. Elsewhere only the type
//! check is made.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

/// Whether the last path component may be a symlink (to a regular file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Symlinks {
    /// A symlink is followed; its target must be a regular file.
    Follow,
    /// A symlink is refused (`InvalidInput`, "a symbolic link, not a regular file").
    Refuse,
}

/// Opens `path` with `options` (read, append, create… as the caller set them), failing with
/// [`io::ErrorKind::InvalidInput`] and a message naming the file type when it is not a regular
/// file.
pub fn open_regular(
    path: &Path,
    options: &mut OpenOptions,
    symlinks: Symlinks,
) -> io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
        if symlinks == Symlinks::Refuse {
            flags |= libc::O_NOFOLLOW;
        }
        options.custom_flags(flags);
    }
    #[cfg(not(unix))]
    {
        let meta = match symlinks {
            Symlinks::Follow => std::fs::metadata(path),
            Symlinks::Refuse => std::fs::symlink_metadata(path),
        };
        if let Ok(meta) = meta {
            if !meta.is_file() {
                return Err(not_regular(&meta.file_type()));
            }
        }
    }
    let file = match options.open(path) {
        Ok(file) => file,
        // O_NOFOLLOW on a symlink.
        #[cfg(unix)]
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) && symlinks == Symlinks::Refuse => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a symbolic link, not a regular file",
            ))
        }
        // Nothing there: nothing to name (no second path lookup).
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(e),
        // Opening a FIFO for writing without a reader fails (ENXIO): name what is there.
        Err(e) => {
            let meta = match symlinks {
                Symlinks::Follow => std::fs::metadata(path),
                Symlinks::Refuse => std::fs::symlink_metadata(path),
            };
            return Err(match meta {
                Ok(meta) if !meta.is_file() => not_regular(&meta.file_type()),
                _ => e,
            });
        }
    };
    regular(file)
}

/// `file` if it is a regular file, else an error naming what it is (a directory, a FIFO, …).
pub fn regular(file: File) -> io::Result<File> {
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(not_regular(&kind));
    }
    Ok(file)
}

fn not_regular(kind: &std::fs::FileType) -> io::Error {
    let what = if kind.is_dir() {
        "a directory"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else {
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            if kind.is_fifo() {
                "a FIFO"
            } else if kind.is_socket() {
                "a socket"
            } else if kind.is_char_device() || kind.is_block_device() {
                "a device"
            } else {
                "not a regular file"
            }
        }
        #[cfg(not(unix))]
        "not a regular file"
    };
    let message = if what.starts_with("not") {
        what.to_string()
    } else {
        format!("{what}, not a regular file")
    };
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// Opens a regular file for reading (following a symlink to one).
pub fn open_read(path: &Path) -> io::Result<File> {
    open_regular(path, OpenOptions::new().read(true), Symlinks::Follow)
}

/// Reads at most `max` bytes of the regular file at `path`, never following a symlink; `None`
/// when it is absent, not a regular file, unreadable, or longer than `max`.
pub fn read_small(path: &Path, max: usize) -> Option<Vec<u8>> {
    let file = open_regular(path, OpenOptions::new().read(true), Symlinks::Refuse).ok()?;
    read_small_from(&file, max)
}

/// [`read_small`] of a file already opened (and checked) by the caller.
pub fn read_small_from(file: &File, max: usize) -> Option<Vec<u8>> {
    // Sized by the file (plus one byte to see it end), never by `max`: a 512 MB bound must not
    // reserve 512 MB for a 16 MB file.
    let len = file.metadata().map_or(0, |m| m.len());
    let mut bytes = Vec::with_capacity(len.min(max as u64) as usize + 1);
    file.take(max as u64 + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() <= max).then_some(bytes)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .expect("mkfifo runs");
        assert!(status.success());
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        let err = open_read(&fifo).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("FIFO"), "{err}");
        assert_eq!(read_small(&fifo, 40), None);
    }

    #[test]
    fn a_symlink_to_a_device_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(open_read(&link).unwrap_err().to_string().contains("device"));
        assert_eq!(read_small(&link, 40), None);
    }

    #[test]
    fn small_reads_are_bounded_and_refuse_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"12\n").unwrap();
        assert_eq!(read_small(&file, 40).as_deref(), Some(&b"12\n"[..]));
        assert_eq!(read_small(&file, 2), None);
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_small(&link, 40), None);
        assert!(open_read(&link).is_ok());
    }
}
/// Writes `bytes` to `path` through a fresh temporary name beside it, renamed over `path`: a
/// reader sees the old file or the new one, never a part of either. On failure the temporary
/// is removed and `path` is as it was.
pub fn write_replacing(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::other("a path without a directory"))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = dir.join(format!(
        ".{name}.{}.{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
    ));
    let written = (|| {
        use std::io::Write;
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        // Caches of session text: readable by their owner only.
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&temporary)?;
        file.write_all(bytes)?;
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}
