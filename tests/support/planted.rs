//! A project tree with a planted private key beside it, for the tests proving a file the person
//! did not choose never reaches the model: `<root>/proj` (the cwd, holding `notes.md`),
//! `<root>/secret/id_rsa` (outside the cwd) and `<root>/home` (the dsh home). The root is
//! canonical, so paths compare as the code resolves them.

use std::path::PathBuf;

/// The planted tree; removed when dropped.
pub struct Planted {
    _dir: tempfile::TempDir,
    /// The canonical root holding the three below.
    pub root: PathBuf,
    /// The session's cwd, holding `notes.md`.
    pub cwd: PathBuf,
    /// The key file outside the cwd.
    pub key: PathBuf,
    /// The dsh home.
    pub home: PathBuf,
}

/// Lays the tree out: `notes.md` holds `notes` and the key file holds `key` (each plus a newline).
pub fn planted(notes: &str, key: &str) -> Planted {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let cwd = root.join("proj");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::write(cwd.join("notes.md"), format!("{notes}\n")).unwrap();
    std::fs::create_dir_all(root.join("secret")).unwrap();
    let key_path = root.join("secret/id_rsa");
    std::fs::write(&key_path, format!("{key}\n")).unwrap();
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    Planted {
        _dir: dir,
        root,
        cwd,
        key: key_path,
        home,
    }
}
