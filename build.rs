//! Embeds `assets/demo-home` into the binary, so `dsh-refs --demo` works from any directory,
//! sets `partial_faces` when a face's feature is off, and links the binary at a fixed address
//! on Linux with glibc ([`fixed_address_binary`]).

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    fixed_address_binary();
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

/// Links `dsh-refs` (the binary only: not the library, tests, examples or build scripts) as a
/// fixed-address executable on Linux with glibc, instead of a position-independent one.
///
/// Why: a position-independent `dsh-refs` carries 32,340 relative relocations that the dynamic
/// loader applies at every start, each write a copy-on-write fault on a page of read-only data;
/// a one-shot command (`prepare`, `candidates`, `sessions`) pays them every time. Linked at a
/// fixed address, the linker resolves them once: `dsh-refs --version` 1.69 → 1.35 ms and 336
/// → 183 page faults; `prepare` of a kept 10 MB Codex session 3.2 → 2.7 ms (BENCHMARKS.md,
/// stop 50). What it costs: the executable's own image is no longer placed at a random address
/// (its libraries, heap, stack and mappings still are). The code is still compiled
/// position-independent; only the final link differs. Elsewhere (macOS requires
/// position-independent executables, Windows has no such relocations at start) nothing changes.
fn fixed_address_binary() {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu" {
        println!("cargo::rustc-link-arg-bins=-no-pie");
    }
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
