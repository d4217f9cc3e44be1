//! The bundled demo home (`assets/demo-home`, embedded at build time by `build.rs`).

use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/demo_home.rs"));

/// Copies the demo home into a fresh directory under the system temp dir and returns it.
pub fn install_demo_home() -> std::io::Result<PathBuf> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let home = std::env::temp_dir().join(format!("dsh-refs-demo-{}-{stamp}", std::process::id()));
    install_into(&home)?;
    Ok(home)
}

/// Writes the demo home's files under `home` (which must not exist yet).
pub fn install_into(home: &Path) -> std::io::Result<()> {
    std::fs::create_dir(home).map_err(at(home))?;
    for (relative, bytes) in DEMO_HOME {
        let path = home.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(at(parent))?;
        }
        std::fs::write(&path, bytes).map_err(at(&path))?;
    }
    Ok(())
}

/// An error that names the path it happened at.
fn at(path: &Path) -> impl FnOnce(std::io::Error) -> std::io::Error + '_ {
    move |e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// The per-user demo home: `$XDG_CACHE_HOME/dsh-refs/demo-home`, else `~/.cache/dsh-refs/
/// demo-home` (`None` when neither variable is set).
pub fn user_demo_home() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(cache.join("dsh-refs").join("demo-home"))
}

/// Marks a demo home as completely installed (written last).
const INSTALLED_MARK: &str = ".dsh-refs-demo";

/// The demo home `dsh-refs --demo` opens: one per user, installed once and reused, so the
/// sessions written in a demo can be found and resumed later. Installed into a sibling
/// directory first and renamed into place, so an interrupted or concurrent install never leaves
/// a half-copied home behind. Falls back to a fresh temporary copy when no cache directory is
/// known.
///
/// A symbolic link at the demo home's path is followed only when it leads to a directory; a
/// dangling or looping one is an error naming the path (nothing is written through it). The
/// staging copy (`demo-home.installing-<pid>`) is removed on every path out of here but the
/// rename that makes it the home, and copies left by a killed install are removed on the next.
pub fn install_user_demo_home() -> std::io::Result<PathBuf> {
    let Some(home) = user_demo_home() else {
        return install_demo_home();
    };
    refuse_broken_link(&home)?;
    if home.join(INSTALLED_MARK).is_file() {
        return Ok(home);
    }
    let parent = home.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(at(parent))?;
    remove_abandoned_copies(parent);
    let staging = Staging(parent.join(format!("{STAGING_PREFIX}{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&staging.0);
    install_into(&staging.0)?;
    let mark = staging.0.join(INSTALLED_MARK);
    std::fs::write(&mark, env!("CARGO_PKG_VERSION")).map_err(at(&mark))?;
    // Checked again: the path may have changed while the copy was written.
    refuse_broken_link(&home)?;
    if std::fs::symlink_metadata(&home).is_ok() && !home.join(INSTALLED_MARK).is_file() {
        // A leftover of an install that never finished (the rename is the last step, so this
        // holds no sessions of a finished install): set it aside rather than mix the two.
        let aside = parent.join(format!("demo-home.incomplete-{}", std::process::id()));
        std::fs::rename(&home, &aside).map_err(at(&home))?;
    }
    match std::fs::rename(&staging.0, &home) {
        Ok(()) => {
            std::mem::forget(staging);
            Ok(home)
        }
        // Another process installed it first: use theirs (the guard removes ours).
        Err(_) if home.join(INSTALLED_MARK).is_file() => Ok(home),
        Err(e) => Err(std::io::Error::new(
            e.kind(),
            format!("{}: {e}", home.display()),
        )),
    }
}

/// The staging directory's name before the installing process's id.
const STAGING_PREFIX: &str = "demo-home.installing-";

/// A staging copy, removed when dropped (every error path) unless forgotten after its rename.
struct Staging(PathBuf);

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An error when `home` is a symbolic link that does not lead to a directory (dangling,
/// looping, or to a file): following it could only fail half-way or write somewhere else.
fn refuse_broken_link(home: &Path) -> std::io::Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(home) else {
        return Ok(());
    };
    if !meta.file_type().is_symlink() {
        return Ok(());
    }
    let target = std::fs::read_link(home)
        .map(|t| t.display().to_string())
        .unwrap_or_else(|_| "?".into());
    let why = match std::fs::metadata(home) {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => format!("leads to {target}, which is not a directory"),
        #[cfg(unix)]
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            format!("loops (it leads to {target}, and on round again)")
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            format!("is dangling ({target} does not exist)")
        }
        Err(e) => format!("leads to {target}, which cannot be opened: {e}"),
    };
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!(
            "the demo home {} is a symbolic link that {why}; remove it (or point it at a \
             directory) and run again",
            home.display()
        ),
    ))
}

/// Removes the staging copies of installs whose process is gone (killed mid-copy).
fn remove_abandoned_copies(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(STAGING_PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !process_alive(pid) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Whether a process with this id runs, from `/proc` (where there is none: assumed so, and its
/// copy kept).
fn process_alive(pid: u32) -> bool {
    let proc = Path::new("/proc");
    !proc.join("self").exists() || proc.join(pid.to_string()).exists()
}
