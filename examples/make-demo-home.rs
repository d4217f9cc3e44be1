//! Regenerates the bundled demo home (`assets/demo-home/sessions/`) from the scripts in
//! `assets/demo-script/`, with the crate's own session writer.
//!
//! ```sh
//! cargo run --example make-demo-home            # rewrite assets/demo-home/sessions
//! cargo run --example make-demo-home -- --check # only verify the files on disk are current
//! ```
//!
//! Both modes generate into a fresh temporary home, read every log back and check it (lines,
//! seqs, directory, a seq-based surface fold with provenance; see `make_demo_home/verify.rs`).
//! `--check` then compares that output with the files on disk byte for byte and fails listing
//! every difference; without it the sessions directory is replaced by the output.

#[path = "make_demo_home/mod.rs"]
mod make_demo_home;

use make_demo_home::{check_home, differences, generate, DEMO_HOME, SCRIPT_DIR};
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let check_only = match args.as_slice() {
        [] => false,
        [flag] if flag == "--check" => true,
        _ => {
            eprintln!("usage: make-demo-home [--check]");
            return ExitCode::from(2);
        }
    };
    match run(check_only) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("make-demo-home: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(check_only: bool) -> Result<(), String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scripts = root.join(SCRIPT_DIR);
    let target = root.join(DEMO_HOME).join("sessions");
    let scratch = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let home = scratch.path().join("home");
    generate(&scripts, &home)?;
    let checked = check_home(&home)?;
    println!(
        "{:<46} {:<32} {:>6} {:>8} {:>9}",
        "id", "title", "events", "surface", "replaces"
    );
    for log in &checked {
        println!(
            "{:<46} {:<32.32} {:>6} {:>8} {:>9}",
            log.header.id,
            log.title.as_deref().unwrap_or("(none)"),
            log.events.len(),
            log.surface.len(),
            log.replacements.len()
        );
    }
    let generated = home.join("sessions");
    if check_only {
        let diffs = differences(&generated, &target)?;
        if diffs.is_empty() {
            println!("{} is up to date", target.display());
            return Ok(());
        }
        for diff in &diffs {
            eprintln!("  {diff}");
        }
        return Err(format!(
            "{} differs from what the scripts give; run `cargo run --example make-demo-home`",
            target.display()
        ));
    }
    if target.exists() {
        std::fs::remove_dir_all(&target).map_err(|e| format!("{}: {e}", target.display()))?;
    }
    copy_tree(&generated, &target)?;
    let diffs = differences(&generated, &target)?;
    if !diffs.is_empty() {
        return Err(format!(
            "copy to {} incomplete: {diffs:?}",
            target.display()
        ));
    }
    println!("wrote {} sessions to {}", checked.len(), target.display());
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    for entry in std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
        let path = entry
            .map_err(|e| format!("{}: {e}", from.display()))?
            .path();
        let Some(name) = path.file_name() else {
            continue;
        };
        if path.is_dir() {
            copy_tree(&path, &to.join(name))?;
        } else {
            std::fs::copy(&path, to.join(name)).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(())
}
