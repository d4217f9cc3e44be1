//! Embeds `assets/demo-home` into the binary, so `dsh-refs --demo` works from any directory,
//! and sets `partial_faces` when a face's feature is off.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    // One cfg for "built without every face": the rooms whose parts serve only the faces allow
    // dead code under it, instead of each spelling the feature list out.
    println!("cargo::rustc-check-cfg=cfg(partial_faces)");
    let faces = ["OPENAI", "DISCOVERY", "TUI", "MCP", "CLI"];
    if faces
        .iter()
        .any(|f| std::env::var_os(format!("CARGO_FEATURE_{f}")).is_none())
    {
        println!("cargo::rustc-cfg=partial_faces");
    }
    // Only the `tui` feature embeds the demo home (`src/demo.rs`).
    if std::env::var_os("CARGO_FEATURE_TUI").is_none() {
        return;
    }
    let root = Path::new("assets/demo-home");
    println!("cargo:rerun-if-changed=assets/demo-home");
    let mut files = Vec::new();
    collect(root, root, &mut files);
    files.sort();
    // The manifest directory of this build, read when the script runs: `env!` would bake in
    // the directory the script was first compiled in, and a target shared between two clones
    // would embed the other clone's files.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let mut out = String::from("/// Files of the bundled demo home: (path relative to the home, contents).\npub static DEMO_HOME: &[(&str, &[u8])] = &[\n");
    for rel in &files {
        let abs = Path::new(&manifest).join(root).join(rel);
        println!("cargo:rerun-if-changed={}", abs.display());
        writeln!(
            out,
            "    ({rel:?}, include_bytes!({:?})),",
            abs.display().to_string()
        )
        .unwrap();
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("demo_home.rs");
    std::fs::write(dest, out).unwrap();
}

fn collect(root: &Path, dir: &Path, files: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        println!("cargo:rerun-if-changed={}", path.display());
        if path.is_dir() {
            collect(root, &path, files);
        } else if let Ok(rel) = path.strip_prefix(root) {
            files.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}
