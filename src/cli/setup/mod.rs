//! `dsh-refs mcp setup HOST`: writes one host's MCP configuration so that it starts this binary
//! (`ABSOLUTE-PATH mcp`), shows the change, and takes it out again with `--remove`.
//!
//! Invariant: only the `dsh-refs` entry of the host's server table changes (it is ours and is
//! written whole); every other byte of the file stays: JSON files are edited as text
//! (`jsonc`: comments, order and trailing commas kept), Codex's TOML through `toml_edit`
//! (comments and order kept, our table's other keys such as `env` kept too). A file is replaced
//! atomically (a temporary file beside it, then a rename), keeps its permissions, and a symlink
//! is followed to the file it names. `--dry-run` shows the same change and writes nothing.
//!
//! Proof: `jsonc`'s unit tests and `tests/cli/mcp_setup.rs` (every host and scope in a
//! temporary HOME, comments kept, a dry run, a removal back to the original bytes).

mod jsonc;

use clap::{Args, ValueEnum};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The name of our entry in every host's server table.
pub const ENTRY: &str = "dsh-refs";

/// A host `mcp setup` configures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Host {
    /// Claude Code: `~/.claude.json` (user) or `.mcp.json` (project).
    Claude,
    /// Gemini CLI: `~/.gemini/settings.json` or `.gemini/settings.json`.
    Gemini,
    /// opencode: `~/.config/opencode/opencode.json` or `opencode.json`.
    Opencode,
    /// VS Code: the user profile's `mcp.json` or `.vscode/mcp.json`.
    Vscode,
    /// Zed: `~/.config/zed/settings.json` or `.zed/settings.json`.
    Zed,
    /// Codex: `~/.codex/config.toml` (user only).
    Codex,
    /// Qwen Code: `~/.qwen/settings.json` or `.qwen/settings.json`.
    Qwen,
}

/// Which of the host's configuration files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scope {
    /// The user's configuration: every project.
    User,
    /// The project's configuration, in the project directory.
    Project,
}

/// `dsh-refs mcp setup HOST [--scope user|project] [--dry-run] [--remove]`.
#[derive(Debug, Args, Clone)]
pub struct SetupArgs {
    /// The host whose configuration is written.
    #[arg(value_enum)]
    pub host: Host,
    /// user: the host's user configuration (every project); project: the project directory's.
    #[arg(long, value_enum, default_value = "user")]
    pub scope: Scope,
    /// Show the change and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Take the dsh-refs entry out instead of writing it.
    #[arg(long)]
    pub remove: bool,
    /// The program the host starts (default: this binary's absolute path).
    #[arg(long, value_name = "PATH")]
    pub command: Option<PathBuf>,
    /// The project directory for `--scope project` (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
}

impl Host {
    fn name(self) -> &'static str {
        match self {
            Host::Claude => "claude",
            Host::Gemini => "gemini",
            Host::Opencode => "opencode",
            Host::Vscode => "vscode",
            Host::Zed => "zed",
            Host::Codex => "codex",
            Host::Qwen => "qwen",
        }
    }
}

/// Where a host keeps its servers and how our entry looks there.
struct Target {
    path: PathBuf,
    kind: Kind,
}

enum Kind {
    /// A JSON (with comments) file: the entry `ENTRY` of the object `container`.
    Json {
        container: &'static str,
        entry: Value,
    },
    /// Codex's `config.toml`: the table `[mcp_servers.dsh-refs]`.
    CodexToml { command: String },
}

fn env_dir(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn user_home() -> Result<PathBuf, String> {
    env_dir("HOME")
        .or_else(|| env_dir("USERPROFILE"))
        .ok_or_else(|| "no home directory (HOME is not set)".to_string())
}

/// `$XDG_CONFIG_HOME`, else `~/.config` (opencode and Zed use it on macOS too).
fn xdg_config(home: &Path) -> PathBuf {
    env_dir("XDG_CONFIG_HOME").unwrap_or_else(|| home.join(".config"))
}

/// `name.json`, or `name.jsonc` when only that one exists.
fn json_or_jsonc(dir: &Path, name: &str) -> PathBuf {
    let json = dir.join(format!("{name}.json"));
    let jsonc = dir.join(format!("{name}.jsonc"));
    if !json.exists() && jsonc.exists() {
        jsonc
    } else {
        json
    }
}

fn target(host: Host, scope: Scope, project: &Path, command: &str) -> Result<Target, String> {
    let home = user_home;
    let stdio = json!({"type": "stdio", "command": command, "args": ["mcp"]});
    let plain = json!({"command": command, "args": ["mcp"]});
    let json = |path: PathBuf, container: &'static str, entry: Value| Target {
        path,
        kind: Kind::Json { container, entry },
    };
    Ok(match (host, scope) {
        (Host::Claude, Scope::User) => {
            let dir = env_dir("CLAUDE_CONFIG_DIR").map_or_else(home, Ok)?;
            json(dir.join(".claude.json"), "mcpServers", stdio)
        }
        (Host::Claude, Scope::Project) => json(project.join(".mcp.json"), "mcpServers", stdio),
        (Host::Gemini, Scope::User) => json(
            home()?.join(".gemini").join("settings.json"),
            "mcpServers",
            plain,
        ),
        (Host::Gemini, Scope::Project) => json(
            project.join(".gemini").join("settings.json"),
            "mcpServers",
            plain,
        ),
        (Host::Qwen, Scope::User) => json(
            home()?.join(".qwen").join("settings.json"),
            "mcpServers",
            plain,
        ),
        (Host::Qwen, Scope::Project) => json(
            project.join(".qwen").join("settings.json"),
            "mcpServers",
            plain,
        ),
        (Host::Opencode, scope) => {
            let dir = match scope {
                Scope::User => xdg_config(&home()?).join("opencode"),
                Scope::Project => project.to_path_buf(),
            };
            let entry = json!({"type": "local", "command": [command, "mcp"], "enabled": true});
            json(json_or_jsonc(&dir, "opencode"), "mcp", entry)
        }
        (Host::Vscode, Scope::User) => json(vscode_user_dir()?.join("mcp.json"), "servers", stdio),
        (Host::Vscode, Scope::Project) => {
            json(project.join(".vscode").join("mcp.json"), "servers", stdio)
        }
        (Host::Zed, Scope::User) => {
            let dir = if cfg!(windows) {
                env_dir("APPDATA").ok_or("APPDATA is not set")?.join("Zed")
            } else {
                xdg_config(&home()?).join("zed")
            };
            json(dir.join("settings.json"), "context_servers", plain)
        }
        (Host::Zed, Scope::Project) => json(
            project.join(".zed").join("settings.json"),
            "context_servers",
            plain,
        ),
        (Host::Codex, Scope::User) => Target {
            path: env_dir("CODEX_HOME")
                .map_or_else(|| home().map(|h| h.join(".codex")), Ok)?
                .join("config.toml"),
            kind: Kind::CodexToml {
                command: command.to_string(),
            },
        },
        (Host::Codex, Scope::Project) => {
            return Err(
                "codex reads MCP servers from the user configuration: use --scope user".into(),
            )
        }
    })
}

/// VS Code's user profile folder (`Code/User`).
fn vscode_user_dir() -> Result<PathBuf, String> {
    let base = if cfg!(windows) {
        env_dir("APPDATA").ok_or("APPDATA is not set")?
    } else if cfg!(target_os = "macos") {
        user_home()?.join("Library").join("Application Support")
    } else {
        xdg_config(&user_home()?)
    };
    Ok(base.join("Code").join("User"))
}

/// Codex's `config.toml` with `[mcp_servers.dsh-refs]` set (`Some`) or removed (`None`).
fn edit_toml(text: &str, command: Option<&str>) -> Result<Option<String>, String> {
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| format!("not TOML: {e}"))?;
    let root = doc.as_table_mut();
    match command {
        Some(command) => {
            if !root.contains_key("mcp_servers") {
                let mut servers = toml_edit::Table::new();
                servers.set_implicit(true);
                root.insert("mcp_servers", toml_edit::Item::Table(servers));
            }
            let servers = root["mcp_servers"]
                .as_table_like_mut()
                .ok_or("`mcp_servers` is not a table")?;
            let args = toml_edit::Array::from_iter(["mcp"]);
            match servers.get_mut(ENTRY).and_then(|e| e.as_table_like_mut()) {
                Some(entry) => {
                    entry.insert("command", toml_edit::value(command));
                    entry.insert("args", toml_edit::value(args));
                }
                None => {
                    let mut entry = toml_edit::Table::new();
                    entry.insert("command", toml_edit::value(command));
                    entry.insert("args", toml_edit::value(args));
                    servers.insert(ENTRY, toml_edit::Item::Table(entry));
                }
            }
        }
        None => {
            let Some(servers) = root
                .get_mut("mcp_servers")
                .and_then(|s| s.as_table_like_mut())
            else {
                return Ok(None);
            };
            if servers.remove(ENTRY).is_none() {
                return Ok(None);
            }
        }
    }
    Ok(Some(doc.to_string()))
}

/// The lines that differ between `before` and `after`, with up to two lines of context, each
/// prefixed `-`, `+` or a space (the edits are local, so one hunk says it).
pub fn changed_lines(before: &str, after: &str) -> String {
    let a: Vec<&str> = before.lines().collect();
    let b: Vec<&str> = after.lines().collect();
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let mut out = String::new();
    let context_start = prefix.saturating_sub(2);
    out.push_str(&format!("@@ line {} @@\n", context_start + 1));
    for line in &a[context_start..prefix] {
        out.push_str(&format!("  {line}\n"));
    }
    for line in &a[prefix..a.len() - suffix] {
        out.push_str(&format!("- {line}\n"));
    }
    for line in &b[prefix..b.len() - suffix] {
        out.push_str(&format!("+ {line}\n"));
    }
    for line in a[a.len() - suffix..].iter().take(2) {
        out.push_str(&format!("  {line}\n"));
    }
    out
}

/// The file's new text, or `None` when there is nothing to do.
fn edited(target: &Target, before: &str, remove: bool) -> Result<Option<String>, String> {
    match (&target.kind, remove) {
        (Kind::Json { container, entry }, false) => jsonc::set(before, container, ENTRY, entry)
            .map(Some)
            .map_err(|e| e.to_string()),
        (Kind::Json { container, .. }, true) => {
            jsonc::remove(before, container, ENTRY).map_err(|e| e.to_string())
        }
        (Kind::CodexToml { command }, false) => edit_toml(before, Some(command)),
        (Kind::CodexToml { .. }, true) => edit_toml(before, None),
    }
}

/// Writes `text` to `path` atomically, keeping the old file's permissions.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let temporary = dir.join(format!(".{name}.dsh-refs-{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&temporary)?;
        if let Ok(meta) = std::fs::metadata(path) {
            file.set_permissions(meta.permissions())?;
        }
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result
}

/// The absolute path of the program the host should start.
fn command_path(args: &SetupArgs) -> Result<String, String> {
    let path = match &args.command {
        Some(path) => std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))?,
        None => std::env::current_exe()
            .and_then(|p| p.canonicalize())
            .map_err(|e| format!("cannot tell where this binary is: {e}"))?,
    };
    path.into_os_string()
        .into_string()
        .map_err(|p| format!("the path {} is not UTF-8", PathBuf::from(p).display()))
}

/// Runs `dsh-refs mcp setup`; the exit code (0, or 1 with the reason on stderr).
pub fn run(args: &SetupArgs) -> i32 {
    match setup(args, &mut std::io::stdout().lock()) {
        Ok(()) => 0,
        Err(message) => {
            eprintln!("dsh-refs: mcp setup {}: {message}", args.host.name());
            1
        }
    }
}

fn setup(args: &SetupArgs, out: &mut dyn std::io::Write) -> Result<(), String> {
    let project = match &args.project {
        Some(dir) => std::path::absolute(dir).map_err(|e| format!("{}: {e}", dir.display()))?,
        None => std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?,
    };
    let command = command_path(args)?;
    let target = target(args.host, args.scope, &project, &command)?;
    // A symlinked configuration (dotfiles) is edited where it points.
    let path = std::fs::canonicalize(&target.path).unwrap_or_else(|_| target.path.clone());
    let before = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let shown = path.display();
    let after = edited(&target, &before, args.remove).map_err(|e| format!("{shown}: {e}"))?;
    let report = |out: &mut dyn std::io::Write, text: String| {
        out.write_all(text.as_bytes())
            .map_err(|e| format!("cannot write to stdout: {e}"))
    };
    let after = match after {
        Some(after) if after != before => after,
        _ => {
            let what = if args.remove {
                format!("{shown}: no {ENTRY} entry, nothing to remove\n")
            } else {
                format!("{shown}: already starts {command} mcp, unchanged\n")
            };
            return report(out, what);
        }
    };
    let verb = match (args.dry_run, args.remove) {
        (false, false) => "wrote",
        (false, true) => "removed",
        (true, false) => "would write (dry run)",
        (true, true) => "would remove (dry run)",
    };
    let scope = match args.scope {
        Scope::User => "user",
        Scope::Project => "project",
    };
    let mut text = format!(
        "{} ({scope}): {verb} the {ENTRY} entry in {shown}\n",
        args.host.name()
    );
    text.push_str(&changed_lines(&before, &after));
    if !args.dry_run {
        write_atomically(&path, &after).map_err(|e| format!("{shown}: {e}"))?;
    }
    report(out, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_toml_keeps_comments_order_and_our_other_keys() {
        let original = "# mine\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\" # theirs\n";
        let added = edit_toml(original, Some("/bin/dsh-refs")).unwrap().unwrap();
        assert!(added.starts_with(original), "{added}");
        assert!(
            added.ends_with(
                "[mcp_servers.dsh-refs]\ncommand = \"/bin/dsh-refs\"\nargs = [\"mcp\"]\n"
            ),
            "{added}"
        );
        let with_env = added.replace(
            "args = [\"mcp\"]\n",
            "args = [\"old\"]\nenv = { A = \"1\" }\n",
        );
        let again = edit_toml(&with_env, Some("/bin/dsh-refs"))
            .unwrap()
            .unwrap();
        assert!(again.contains("args = [\"mcp\"]") && again.contains("env = { A = \"1\" }"));
        let removed = edit_toml(&added, None).unwrap().unwrap();
        assert_eq!(removed, original);
        assert!(edit_toml(original, None).unwrap().is_none());
        let fresh = edit_toml("", Some("/bin/dsh-refs")).unwrap().unwrap();
        assert_eq!(
            fresh,
            "[mcp_servers.dsh-refs]\ncommand = \"/bin/dsh-refs\"\nargs = [\"mcp\"]\n"
        );
    }

    #[test]
    fn changed_lines_show_one_hunk() {
        let shown = changed_lines("a\nb\nc\nd\n", "a\nb\nX\nc\nd\n");
        assert_eq!(shown, "@@ line 1 @@\n  a\n  b\n+ X\n  c\n  d\n");
    }
}
