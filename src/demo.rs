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
    std::fs::create_dir(home)?;
    for (relative, bytes) in DEMO_HOME {
        let path = home.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, bytes)?;
    }
    Ok(())
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
pub fn install_user_demo_home() -> std::io::Result<PathBuf> {
    let Some(home) = user_demo_home() else {
        return install_demo_home();
    };
    if home.join(INSTALLED_MARK).is_file() {
        return Ok(home);
    }
    let parent = home.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let staging = parent.join(format!("demo-home.installing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    install_into(&staging)?;
    std::fs::write(staging.join(INSTALLED_MARK), env!("CARGO_PKG_VERSION"))?;
    if home.exists() && !home.join(INSTALLED_MARK).is_file() {
        // A leftover of an install that never finished (the rename is the last step, so this
        // holds no sessions of a finished install): set it aside rather than mix the two.
        let aside = parent.join(format!("demo-home.incomplete-{}", std::process::id()));
        std::fs::rename(&home, &aside)?;
    }
    match std::fs::rename(&staging, &home) {
        Ok(()) => Ok(home),
        // Another process installed it first: use theirs.
        Err(_) if home.join(INSTALLED_MARK).is_file() => {
            let _ = std::fs::remove_dir_all(&staging);
            Ok(home)
        }
        Err(e) => Err(e),
    }
}
