//! The `dsh-refs` command line (SPEC §6): the clap definitions here, the command
//! implementations beside them (`sessions`, `reference` for `uri`/`mention`/`candidates`/
//! `prepare`, `exec`).
//!
//! This is the top layer of the library: it may use every room below (session, reference,
//! agent, tui), and none of them uses it (`tests/architecture.rs`). It is built with the `cli`
//! feature (on by default).

use crate::host::{Settings, Workspace};
use crate::session::external::SourceChoice;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

pub mod docs;
pub mod exec;
pub(crate) mod exec_refs;
pub mod lifecycle;
pub mod reference;
pub mod search;
pub mod sessions;
pub mod setup;

/// The `dsh-refs` command line: global options, the TUI's options and an optional subcommand.
#[derive(Debug, Parser)]
#[command(
    name = "dsh-refs",
    version,
    about = "Cross-session references for a terminal coding agent"
)]
pub struct Cli {
    /// Home directory holding `sessions/` (else $DSH_HOME, else ~/.dsh).
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Which other agents' sessions are listed and referenced (SPEC §9).
    #[command(flatten)]
    pub sources: SourceArgs,
    /// Which model answers (SPEC §7).
    #[command(flatten)]
    pub model: ModelArgs,
    /// Options of the TUI (no subcommand).
    #[command(flatten)]
    pub tui: TuiArgs,
    /// The subcommand; `None` opens the TUI.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Why the command line could not set up what it runs with; the text is the message for the
/// user (paths and system messages escaped: they may hold control characters).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// `--demo`: the demo home could not be installed.
    #[error("could not install the demo home: {}", crate::escape::diagnostic(&.0.to_string()))]
    DemoHome(#[source] std::io::Error),
    /// The diagnostics log could not be opened (the program runs without it).
    #[error(
        "running without the diagnostics log {}: {source}",
        .path.to_string_lossy().escape_debug()
    )]
    DiagnosticsLog {
        /// `<home>/logs/dsh-refs.log`.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl Cli {
    /// The one resolution of the home and source flags that every subcommand and the TUI use
    /// (so none reads or writes another home than the one the flags name): the workspace they
    /// all receive ([`Workspace`], the composition root). Installs the demo home on first use
    /// with `--demo`.
    pub fn resolve(&self) -> Result<Workspace, StartError> {
        let demo_home = if self.tui.demo {
            Some(crate::demo::install_user_demo_home().map_err(StartError::DemoHome)?)
        } else {
            None
        };
        Ok(Workspace::open(&self.settings(demo_home)))
    }

    /// The global flags as the workspace reads them.
    fn settings(&self, demo_home: Option<PathBuf>) -> Settings {
        Settings {
            home: self.home.clone(),
            demo_home,
            sources: self.sources.sources.clone(),
            agent_homes: self.sources.agent_homes(),
        }
    }
}

/// Which sessions are listed and referenced besides (or instead of) dsh's own (SPEC §9).
#[derive(Debug, Args, Clone, Default)]
pub struct SourceArgs {
    /// Claude Code's home, holding `projects/` (else $CLAUDE_CONFIG_DIR, else ~/.claude).
    #[arg(long, global = true, value_name = "DIR")]
    pub claude_home: Option<PathBuf>,
    /// Codex's home, holding `sessions/` (else $CODEX_HOME, else ~/.codex).
    #[arg(long, global = true, value_name = "DIR")]
    pub codex_home: Option<PathBuf>,
    /// Qwen Code's runtime directory, holding `projects/` (else $QWEN_RUNTIME_DIR, else
    /// $QWEN_HOME, else ~/.qwen).
    #[arg(long, global = true, value_name = "DIR")]
    pub qwen_home: Option<PathBuf>,
    /// Gemini CLI's home, holding `tmp/` (else $GEMINI_CLI_HOME/.gemini, else ~/.gemini).
    #[arg(long, global = true, value_name = "DIR")]
    pub gemini_home: Option<PathBuf>,
    /// opencode's data directory, holding `opencode.db` (else $XDG_DATA_HOME/opencode, else
    /// ~/.local/share/opencode).
    #[arg(long, global = true, value_name = "DIR")]
    pub opencode_home: Option<PathBuf>,
    /// GitHub Copilot CLI's home, holding `session-state/` (else $COPILOT_HOME, else
    /// ~/.copilot).
    #[arg(long, global = true, value_name = "DIR")]
    pub copilot_home: Option<PathBuf>,
    /// Comma-separated sources to list: dsh, claude, codex, qwen, gemini, opencode, copilot
    /// (default: every one that exists).
    #[arg(long, global = true, value_name = "LIST", value_parser = parse_sources)]
    pub sources: Option<SourceChoice>,
}

impl SourceArgs {
    /// The agent homes these flags name, each with its agent's name (the rest come from the
    /// environment or the defaults).
    pub fn agent_homes(&self) -> Vec<(&'static str, PathBuf)> {
        [
            ("claude", &self.claude_home),
            ("codex", &self.codex_home),
            ("qwen", &self.qwen_home),
            ("gemini", &self.gemini_home),
            ("opencode", &self.opencode_home),
            ("copilot", &self.copilot_home),
        ]
        .into_iter()
        .filter_map(|(name, home)| home.clone().map(|home| (name, home)))
        .collect()
    }
}

fn parse_sources(text: &str) -> Result<SourceChoice, String> {
    SourceChoice::parse(text).map_err(|e| e.to_string())
}

/// Options of the TUI (no subcommand).
#[derive(Debug, Args, Clone, Default)]
pub struct TuiArgs {
    /// Continue the session with this id (or a unique prefix of it) instead of starting a new
    /// one; with no id, or words that start no id, pick it in the finder (without a terminal:
    /// list the recent sessions, or those the words find).
    #[arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "")]
    pub resume: Option<String>,
    /// Continue the session of the current directory that was active last.
    #[arg(long = "continue", short = 'c', conflicts_with = "resume")]
    pub continue_last: bool,
    /// Use the bundled demo home, installed once per user under the cache directory
    /// ($XDG_CACHE_HOME/dsh-refs/demo-home, else ~/.cache/dsh-refs/demo-home) and reused;
    /// every subcommand honours it instead of --home.
    #[arg(long, global = true)]
    pub demo: bool,
    /// Delay between words streamed by the offline model, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 15)]
    pub offline_delay_ms: u64,
    /// Leave the mouse to the terminal (its own selection and copy); the wheel no longer
    /// scrolls the transcript (PgUp/PgDn do).
    #[arg(long)]
    pub no_mouse: bool,
    /// Draw at the bottom of the normal screen instead of the alternate screen: every finished
    /// message is written into the terminal's scrollback, where it stays after quitting (the
    /// default with inline = true in the [tui] table of config.toml).
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(long, conflicts_with = "no_inline")]
    pub inline: bool,
    /// Use the alternate screen (the whole window, gone after quitting) even when config.toml
    /// says inline = true.
    #[arg(long)]
    pub no_inline: bool,
    /// Log encoding for new sessions (default: the home's existing encoding, else zstd). A home
    /// has one encoding: asking for the other one than its logs have is an error.
    #[arg(long, value_enum, global = true)]
    pub compression: Option<Compression>,
}

/// Which model to talk to (SPEC §7); overrides `<home>/config.toml` and the environment.
#[derive(Debug, Args, Clone, Default)]
pub struct ModelArgs {
    /// Provider: deepseek, openai, openrouter, ollama, llama-cpp, vllm, openai-compatible or
    /// offline (else $DSH_PROVIDER, else [provider].kind in <home>/config.toml).
    // The text above is the `--help` line, kept as the user reads it there.
    #[allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]
    #[arg(long, global = true, value_name = "NAME")]
    pub provider: Option<String>,
    /// Model name (else $DSH_MODEL, else the config, else the provider's default).
    #[arg(long, global = true, value_name = "MODEL")]
    pub model: Option<String>,
    /// Base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:11434/v1 (else
    /// $DSH_BASE_URL, else the config, else the provider's default).
    #[arg(long, global = true, value_name = "URL")]
    pub base_url: Option<String>,
    /// The environment variable that holds the API key (else api_key_env in the config, else
    /// the provider's own, e.g. DEEPSEEK_API_KEY); the key itself never goes on the command line.
    #[arg(long, global = true, value_name = "NAME")]
    pub api_key_env: Option<String>,
    /// Allow sending the API key over plain http:// to a host that is not this machine (else
    /// $DSH_ALLOW_INSECURE_HTTP=1, else allow_insecure_http = true in the config).
    #[arg(long, global = true)]
    pub allow_insecure_http: bool,
}

impl ModelArgs {
    /// These flags for model resolution; `demo` is whether `--demo` was given.
    pub fn flags(&self, demo: bool) -> crate::agent::config::ModelFlags {
        crate::agent::config::ModelFlags {
            provider: self.provider.clone(),
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            api_key_env: self.api_key_env.clone(),
            allow_insecure_http: self.allow_insecure_http,
            demo,
        }
    }
}

/// `--compression`: the log encoding of new sessions.
// The variants' docs are for hosts. `help = None` keeps them out of `--help`: clap would show
// them as per-value help, which switches every command's `--help` to the long layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Compression {
    /// Plain `session.jsonl`.
    #[value(help = None::<&'static str>)]
    None,
    /// zstd-compressed `session.jsonl.zstd`.
    #[value(help = None::<&'static str>)]
    Zstd,
}

/// The subcommands (SPEC §6).
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one turn without the TUI and stream the answer to stdout.
    Exec(ExecArgs),
    /// Find sessions by title, first prompt, conversation text, cwd or id prefix (SPEC §8).
    Search(search::SearchArgs),
    /// List sessions, newest first.
    Sessions {
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Encode or decode `dsh-session:` URIs.
    #[command(subcommand)]
    Uri(UriCommand),
    /// Format or parse `@[label](dsh-session:…)` mentions.
    #[command(subcommand)]
    Mention(MentionCommand),
    /// List mention candidates for an agent session.
    Candidates {
        /// The agent's own session id.
        #[arg(long = "as", value_name = "ID")]
        agent: String,
        /// The agent's cwd (default: the header cwd of session ID, if stored).
        #[arg(long, value_name = "DIR")]
        cwd: Option<String>,
        /// Keep sessions whose id or cwd contains this text, case-insensitively (empty: all).
        #[arg(long, default_value = "")]
        query: String,
        /// At most N candidates (default: the service's candidate_limit, 50); N must be at least 1.
        #[arg(long, value_name = "N")]
        limit: Option<i64>,
    },
    /// Serve session references to other agents over MCP on stdin/stdout (SPEC §10).
    ///
    /// `dsh-refs mcp setup HOST` writes a host's configuration to start it instead.
    #[cfg(feature = "mcp")]
    #[command(args_conflicts_with_subcommands = true)]
    Mcp(McpArgs),
    /// Print a shell completion script for SHELL to stdout.
    Completions {
        /// The shell: bash, elvish, fish, powershell or zsh.
        shell: clap_complete::Shell,
    },
    /// Print the dsh-refs(1) man page (roff) to stdout.
    Man,
    /// Parse a message and prepare its session-reference context.
    Prepare {
        /// The agent's own session id.
        #[arg(long = "as", value_name = "ID")]
        agent: String,
        /// The agent's cwd (default: the header cwd of session ID, if stored).
        #[arg(long, value_name = "DIR")]
        cwd: Option<String>,
        /// At most N references per message, 1 to 3 (default 3).
        #[arg(long, value_name = "N")]
        max_references: Option<i64>,
        /// At most N bytes of snapshot per referenced session (default 65536).
        #[arg(long, value_name = "N")]
        max_reference_bytes: Option<i64>,
        /// The message (read from stdin when absent).
        text: Option<String>,
    },
}

/// `dsh-refs exec [--resume ID] [--ref ID|PREFIX|WORD]… [--json] PROMPT`.
#[derive(Debug, Args, Clone)]
pub struct ExecArgs {
    /// Continue this session instead of starting a new one.
    #[arg(long, value_name = "ID")]
    pub resume: Option<String>,
    /// Reference this session (an id, a unique prefix of one, or a word to search for); may be
    /// repeated. `@ID` and `@PREFIX` in the prompt work too.
    #[arg(long = "ref", value_name = "ID|PREFIX|WORD")]
    pub refs: Vec<String>,
    /// Print one JSON event per line instead of the plain answer.
    #[arg(long)]
    pub json: bool,
    /// Delay between words streamed by the offline model, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub offline_delay_ms: u64,
    /// Attach this file (any regular file, inside the working directory or not); repeat for
    /// more. `@path` in the prompt argument attaches only files under the working directory.
    #[arg(long = "attach", value_name = "PATH")]
    pub attach: Vec<String>,
    /// The prompt; `-` reads it from stdin. `@[label](dsh-session:…)` mentions are prepared;
    /// `@path` tokens of the argument (not of stdin) attach files under the working directory.
    pub prompt: String,
}

/// `dsh-refs mcp`: a stdio MCP server for Claude Code, Gemini CLI, opencode, VS Code, Zed and
/// Codex (SPEC §10).
#[cfg(feature = "mcp")]
#[derive(Debug, Args, Clone)]
pub struct McpArgs {
    /// The project directory whose sessions are listed first (default: the current directory,
    /// which hosts set to the project).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
    /// At most N sessions are listed as resources.
    #[arg(long, value_name = "N", default_value_t = crate::mcp::DEFAULT_MAX_RESOURCES, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_resources: u64,
    /// What is offered: resources (listed sessions a host shows under `@`, and which some hosts
    /// let the model read), prompts (the `reference` prompt, which only the person invokes).
    /// `prompts` alone lists nothing.
    #[arg(long, value_name = "LIST", default_value = "resources,prompts", value_parser = parse_expose)]
    pub expose: crate::mcp::Expose,
    /// At most N bytes of snapshot per read (default 65536).
    #[arg(long, value_name = "N")]
    pub max_reference_bytes: Option<i64>,
    /// Serve Streamable HTTP at path /mcp on PORT instead of stdio (at ADDR:PORT when an
    /// address is given, else on 127.0.0.1; reach it from elsewhere through an SSH tunnel or a TLS reverse proxy).
    #[arg(long, value_name = "[ADDR:]PORT")]
    pub http: Option<String>,
    /// With --http: the bearer token is the first line of PATH (else $DSH_REFS_MCP_TOKEN, else
    /// a generated one in the dsh home's mcp-http-token file).
    #[arg(long, value_name = "PATH", requires = "http")]
    pub token_file: Option<std::path::PathBuf>,
    /// `setup HOST`: write the host's configuration instead of serving.
    #[command(subcommand)]
    pub action: Option<McpAction>,
}

/// What `dsh-refs mcp` does instead of serving.
#[cfg(feature = "mcp")]
#[derive(Debug, Subcommand, Clone)]
pub enum McpAction {
    /// Write HOST's MCP configuration to start this binary (`ABSOLUTE-PATH mcp`), show the
    /// change; `--remove` takes it out. Hosts: claude, gemini, opencode, vscode, zed, codex, qwen.
    Setup(setup::SetupArgs),
}

#[cfg(feature = "mcp")]
fn parse_expose(text: &str) -> Result<crate::mcp::Expose, String> {
    crate::mcp::Expose::parse(text).map_err(|e| e.to_string())
}

/// `dsh-refs uri`: session ids to and from `dsh-session:` URIs (SPEC §2).
#[derive(Debug, Subcommand)]
pub enum UriCommand {
    /// Print the URI of a session id.
    Encode {
        /// The session id.
        id: String,
    },
    /// Print the session id of a URI as a JSON string.
    Decode {
        /// The `dsh-session:` URI.
        uri: String,
    },
}

/// `dsh-refs mention`: `@[label](dsh-session:…)` mentions (SPEC §2).
#[derive(Debug, Subcommand)]
pub enum MentionCommand {
    /// Print `@[label](uri)` for a session id.
    Format {
        /// The session id.
        id: String,
        /// The label shown (default: the id).
        #[arg(long)]
        label: Option<String>,
    },
    /// Parse mentions out of TEXT (stdin when absent).
    Parse {
        /// The text to parse (stdin when absent).
        text: Option<String>,
    },
}

/// Opens (creating it if absent) the diagnostics log `<home>/logs/dsh-refs.log` for appending.
///
/// Only a regular file (or a symlink to one) is used, opened without blocking: a FIFO or a
/// device in its place would stall start-up or swallow writes.
pub fn open_diagnostics_log(home: &std::path::Path) -> Result<std::fs::File, StartError> {
    use crate::session::files::{open_regular, Symlinks};
    let dir = home.join("logs");
    let path = dir.join("dsh-refs.log");
    std::fs::create_dir_all(&dir)
        .and_then(|_| {
            open_regular(
                &path,
                std::fs::OpenOptions::new().create(true).append(true),
                Symlinks::Follow,
            )
        })
        .map_err(|source| StartError::DiagnosticsLog { path, source })
}

#[cfg(all(test, unix))]
mod tests {
    use super::open_diagnostics_log;
    use std::time::Duration;

    /// Runs `open_diagnostics_log` on a thread, failing the test if it does not return.
    fn open_within(home: &std::path::Path) -> Result<std::fs::File, String> {
        let home = home.to_path_buf();
        let (done, answer) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(open_diagnostics_log(&home).map_err(|e| e.to_string()));
        });
        answer
            .recv_timeout(Duration::from_secs(5))
            .expect("opening the diagnostics log returns without blocking")
    }

    #[test]
    fn a_fifo_diagnostics_log_is_refused_without_blocking() {
        let home = tempfile::tempdir().unwrap();
        let logs = home.path().join("logs");
        std::fs::create_dir(&logs).unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(logs.join("dsh-refs.log"))
            .status()
            .unwrap();
        assert!(status.success());
        let err = open_within(home.path()).unwrap_err();
        assert!(
            err.contains("FIFO") && err.contains("dsh-refs.log"),
            "{err}"
        );
        // Held open by a reader, a FIFO still opens without blocking, and is still refused.
        let fifo = logs.join("dsh-refs.log");
        let reader = std::thread::spawn(move || std::fs::File::open(fifo));
        std::thread::sleep(Duration::from_millis(50));
        let err = open_within(home.path()).unwrap_err();
        assert!(err.contains("FIFO"), "{err}");
        let _ = reader;
    }

    #[test]
    fn a_device_link_is_refused_and_a_regular_log_is_created() {
        let home = tempfile::tempdir().unwrap();
        assert!(open_within(home.path()).is_ok());
        assert!(home.path().join("logs/dsh-refs.log").is_file());
        let other = tempfile::tempdir().unwrap();
        std::fs::create_dir(other.path().join("logs")).unwrap();
        std::os::unix::fs::symlink("/dev/null", other.path().join("logs/dsh-refs.log")).unwrap();
        let err = open_within(other.path()).unwrap_err();
        assert!(err.contains("device"), "{err}");
    }
}
