//! `dsh-refs mcp setup HOST` (issue 37 item 4): each host's file, in a temporary HOME and
//! project, starts this binary by its absolute path; a file the person wrote keeps its comments,
//! order and other servers, and `--remove` gives its bytes back; `--dry-run` writes nothing.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn setup(home: &Path, project: &Path, args: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_dsh-refs"))
        .args(["mcp", "setup"])
        .args(args)
        .current_dir(project)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("CODEX_HOME")
        .env_remove("CLAUDE_CONFIG_DIR")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn binary() -> String {
    PathBuf::from(env!("CARGO_BIN_EXE_dsh-refs"))
        .canonicalize()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

fn dirs() -> (tempfile::TempDir, tempfile::TempDir) {
    (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap())
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn every_host_and_scope_writes_the_absolute_path() {
    let bin = binary();
    let stdio = json!({"type": "stdio", "command": bin, "args": ["mcp"]});
    let plain = json!({"command": bin, "args": ["mcp"]});
    let local = json!({"type": "local", "command": [bin, "mcp"], "enabled": true});
    // (host, scope, file under HOME or the project, the pointer to our entry, the entry)
    let cases: [(&str, &str, &str, &str, &Value); 13] = [
        (
            "claude",
            "user",
            ".claude.json",
            "/mcpServers/dsh-refs",
            &stdio,
        ),
        (
            "claude",
            "project",
            ".mcp.json",
            "/mcpServers/dsh-refs",
            &stdio,
        ),
        (
            "gemini",
            "user",
            ".gemini/settings.json",
            "/mcpServers/dsh-refs",
            &plain,
        ),
        (
            "gemini",
            "project",
            ".gemini/settings.json",
            "/mcpServers/dsh-refs",
            &plain,
        ),
        (
            "qwen",
            "user",
            ".qwen/settings.json",
            "/mcpServers/dsh-refs",
            &plain,
        ),
        (
            "qwen",
            "project",
            ".qwen/settings.json",
            "/mcpServers/dsh-refs",
            &plain,
        ),
        (
            "opencode",
            "user",
            ".config/opencode/opencode.json",
            "/mcp/dsh-refs",
            &local,
        ),
        (
            "opencode",
            "project",
            "opencode.json",
            "/mcp/dsh-refs",
            &local,
        ),
        (
            "vscode",
            "project",
            ".vscode/mcp.json",
            "/servers/dsh-refs",
            &stdio,
        ),
        (
            "zed",
            "user",
            ".config/zed/settings.json",
            "/context_servers/dsh-refs",
            &plain,
        ),
        (
            "zed",
            "project",
            ".zed/settings.json",
            "/context_servers/dsh-refs",
            &plain,
        ),
        ("codex", "user", ".codex/config.toml", "", &plain),
        (
            "vscode",
            "user",
            if cfg!(target_os = "macos") {
                "Library/Application Support/Code/User/mcp.json"
            } else {
                ".config/Code/User/mcp.json"
            },
            "/servers/dsh-refs",
            &stdio,
        ),
    ];
    for (host, scope, file, pointer, entry) in cases {
        let (home, project) = dirs();
        let run = setup(home.path(), project.path(), &[host, "--scope", scope]);
        assert_eq!(run.code, 0, "{host} {scope}: {}", run.stderr);
        let base = if scope == "user" {
            home.path()
        } else {
            project.path()
        };
        let path = base.join(file);
        assert!(
            run.stdout.contains("wrote the dsh-refs entry"),
            "{}",
            run.stdout
        );
        assert!(run.stdout.contains(&bin), "{host} {scope}: {}", run.stdout);
        if host == "codex" {
            let text = std::fs::read_to_string(&path).unwrap();
            let doc: toml::Table = toml::from_str(&text).unwrap();
            let ours = &doc["mcp_servers"]["dsh-refs"];
            assert_eq!(ours["command"].as_str(), Some(bin.as_str()), "{text}");
            assert_eq!(
                ours["args"],
                toml::Value::Array(vec!["mcp".into()]),
                "{text}"
            );
        } else {
            let written = read_json(&path);
            assert_eq!(
                written.pointer(pointer),
                Some(entry),
                "{host} {scope}: {written}"
            );
        }
        // Again: nothing to change.
        let again = setup(home.path(), project.path(), &[host, "--scope", scope]);
        assert_eq!(again.code, 0, "{}", again.stderr);
        assert!(again.stdout.contains("unchanged"), "{}", again.stdout);
        // Removed: nothing of ours is left.
        let removed = setup(
            home.path(),
            project.path(),
            &[host, "--scope", scope, "--remove"],
        );
        assert_eq!(removed.code, 0, "{}", removed.stderr);
        assert!(!std::fs::read_to_string(&path).unwrap().contains("dsh-refs"));
    }
}

#[test]
fn a_commented_file_keeps_everything_else_and_removal_gives_its_bytes_back() {
    let (home, project) = dirs();
    let path = home.path().join(".config/zed/settings.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let original = "// Zed settings\n{\n  \"theme\": \"One Dark\", // mine\n  \"context_servers\": {\n    /* a server of mine */\n    \"other\": {\"command\": \"other-server\", \"args\": []}\n  },\n  \"vim_mode\": true\n}\n";
    std::fs::write(&path, original).unwrap();
    let run = setup(home.path(), project.path(), &["zed"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(written.starts_with("// Zed settings\n{\n  \"theme\": \"One Dark\", // mine\n  \"context_servers\": {\n    /* a server of mine */\n    \"other\": {\"command\": \"other-server\", \"args\": []},\n    \"dsh-refs\": {\n"), "{written}");
    assert!(
        written.ends_with("    }\n  },\n  \"vim_mode\": true\n}\n"),
        "{written}"
    );
    // What changed is shown: the neighbour's new comma and our lines.
    assert!(
        run.stdout.contains("- ") && run.stdout.contains("+     \"dsh-refs\": {"),
        "{}",
        run.stdout
    );
    let removed = setup(home.path(), project.path(), &["zed", "--remove"]);
    assert_eq!(removed.code, 0, "{}", removed.stderr);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
    let nothing = setup(home.path(), project.path(), &["zed", "--remove"]);
    assert!(
        nothing.stdout.contains("nothing to remove"),
        "{}",
        nothing.stdout
    );
}

#[test]
fn codex_toml_keeps_its_comments_and_removal_gives_its_bytes_back() {
    let (home, project) = dirs();
    let path = home.path().join(".codex/config.toml");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let original =
        "# my Codex\nmodel = \"gpt-5\"\n\n[mcp_servers.other] # theirs\ncommand = \"other\"\n";
    std::fs::write(&path, original).unwrap();
    let run = setup(home.path(), project.path(), &["codex"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(written.starts_with(original), "{written}");
    assert!(written.contains("[mcp_servers.dsh-refs]"), "{written}");
    let removed = setup(home.path(), project.path(), &["codex", "--remove"]);
    assert_eq!(removed.code, 0, "{}", removed.stderr);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
}

#[test]
fn a_dry_run_writes_nothing_and_codex_has_no_project_scope() {
    let (home, project) = dirs();
    let run = setup(
        home.path(),
        project.path(),
        &["claude", "--scope", "project", "--dry-run"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("would write (dry run)"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("+ "), "{}", run.stdout);
    assert!(!project.path().join(".mcp.json").exists());
    let codex = setup(
        home.path(),
        project.path(),
        &["codex", "--scope", "project"],
    );
    assert_eq!(codex.code, 1);
    assert!(codex.stderr.contains("--scope user"), "{}", codex.stderr);
    assert!(std::fs::read_dir(project.path()).unwrap().next().is_none());
    // A file that is not JSON is refused and left alone.
    std::fs::write(project.path().join(".mcp.json"), "{ not json").unwrap();
    let broken = setup(
        home.path(),
        project.path(),
        &["claude", "--scope", "project"],
    );
    assert_eq!(broken.code, 1);
    assert!(broken.stderr.contains("not JSON"), "{}", broken.stderr);
    assert_eq!(
        std::fs::read_to_string(project.path().join(".mcp.json")).unwrap(),
        "{ not json"
    );
}

#[test]
fn the_command_flag_names_another_program() {
    let (home, project) = dirs();
    let run = setup(
        home.path(),
        project.path(),
        &["gemini", "--command", "/opt/dsh/bin/dsh-refs"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let written = read_json(&home.path().join(".gemini/settings.json"));
    assert_eq!(
        written["mcpServers"]["dsh-refs"]["command"],
        "/opt/dsh/bin/dsh-refs"
    );
}
