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
