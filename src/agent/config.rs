//! Which model the agent talks to (SPEC §7): `<home>/config.toml`, flags and environment,
//! resolved into either the offline model or one OpenAI-compatible provider.
//!
//! Invariant: resolution is pure. It sees the config file's text, the flags and an environment
//! lookup function, and returns settings or an error that names what is wrong (the file, the
//! key, the missing variable). The API key's *value* is held in [`ApiKey`], whose `Debug` and
//! `Display` never show it, so no diagnostic built from these types can leak it.
//!
//! Precedence, highest first: flags (`--provider`, `--model`, `--base-url`), environment
//! (`DSH_PROVIDER`, `DSH_MODEL`, `DSH_BASE_URL`), the `[provider]` table, the preset's defaults.
//! With nothing configured, a set `DEEPSEEK_API_KEY` selects the `deepseek` preset (dsh's own
//! provider); otherwise the offline model runs. `--demo` ignores everything but an explicit
//! `--provider` flag.
//!
//! Proof: the unit tests below cover each precedence level, each preset, the missing-key error
//! and the key's redaction.

use serde::Deserialize;
use std::fmt;
use std::time::Duration;

/// A preset only fills in the base URL, the key variable and a default model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// The name `--provider`, `DSH_PROVIDER` and `kind` take; also the recorded provider name.
    pub name: &'static str,
    /// The API root; requests go to `{base_url}/chat/completions`.
    pub base_url: &'static str,
    /// `None`: a local server that needs no key.
    pub api_key_env: Option<&'static str>,
    /// `None`: the user must name a model.
    pub model: Option<&'static str>,
}

/// The presets, by name. `openai-compatible` has no defaults: everything comes from config.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "deepseek",
        base_url: "https://api.deepseek.com",
        api_key_env: Some("DEEPSEEK_API_KEY"),
        model: Some("deepseek-v4-flash"),
    },
    Preset {
        name: "openai",
        base_url: "https://api.openai.com/v1",
        api_key_env: Some("OPENAI_API_KEY"),
        model: Some("gpt-4.1-mini"),
    },
    Preset {
        name: "openrouter",
        base_url: "https://openrouter.ai/api/v1",
        api_key_env: Some("OPENROUTER_API_KEY"),
        model: Some("deepseek/deepseek-v4-flash"),
    },
    Preset {
        name: "ollama",
        base_url: "http://127.0.0.1:11434/v1",
        api_key_env: None,
        model: Some("llama3.2"),
    },
    Preset {
        name: "llama-cpp",
        base_url: "http://127.0.0.1:8080/v1",
        api_key_env: None,
        model: Some("default"),
    },
    Preset {
        name: "vllm",
        base_url: "http://127.0.0.1:8000/v1",
        api_key_env: None,
        model: None,
    },
];

/// The generic kind: no defaults.
pub const OPENAI_COMPATIBLE: &str = "openai-compatible";
/// The kind that selects the offline model: no network, no key.
pub const OFFLINE: &str = "offline";

/// The preset called `name`; `None` for an unknown name and for `offline` and `openai-compatible`.
pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// An API key. Never printed: `Debug` and `Display` show `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key's value, as read from its environment variable.
    pub fn new(value: impl Into<String>) -> ApiKey {
        ApiKey(value.into())
    }
    /// The secret itself, for the `Authorization` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// `text` with every occurrence of the key replaced (server messages may echo it).
    pub fn redact(&self, text: &str) -> String {
        if self.0.len() < 4 {
            return text.to_string();
        }
        text.replace(&self.0, "***")
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Everything the OpenAI-compatible provider needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderSettings {
    /// Recorded as `source.provider` and `request/header.config.provider`.
    pub provider: String,
    /// The API root without a trailing `/`; requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// The model name, sent as `model` and recorded as `source.model`.
    pub model: String,
    /// The variable the key came from (named in errors), if any.
    pub api_key_env: Option<String>,
    /// The key, sent as `Authorization: Bearer …`; `None` for a server that needs none.
    pub api_key: Option<ApiKey>,
    /// Sent as `reasoning_effort` (for `deepseek`, `off` disables thinking instead); `None`: not
    /// sent.
    pub reasoning_effort: Option<String>,
    /// Sent as `max_tokens`; `None`: the server's default.
    pub max_tokens: Option<u64>,
    /// The longest wait for the connection to be made (default 10 s).
    pub connect_timeout: Duration,
    /// No byte from the server for this long ends the request.
    pub idle_timeout: Duration,
    /// Retries of 429 and 5xx answers (not counting the first attempt).
    pub max_retries: u32,
    /// First backoff; doubled per retry unless the server sends `Retry-After`.
    pub retry_base: Duration,
    /// The most bytes one answer's stream may carry (a runaway server cannot exhaust memory).
    pub max_stream_bytes: u64,
}

/// Default of [`ProviderSettings::max_stream_bytes`]: far above any real answer (a
/// 20,000-token answer is about 3 MiB of events).
pub const MAX_STREAM_BYTES: u64 = 64 * 1024 * 1024;

impl ProviderSettings {
    /// `provider/model`, for the status line.
    pub fn label(&self) -> String {
        format!("{}/{}", self.provider, self.model)
    }
}

/// The outcome of resolution.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelChoice {
    /// The offline model (`kind = "offline"`, `--demo`, or nothing configured).
    Offline,
    /// An OpenAI-compatible provider with these settings.
    Remote(Box<ProviderSettings>),
}

/// The `[provider]` table of `<home>/config.toml`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProviderTable {
    /// A preset name, `openai-compatible` or `offline`.
    pub kind: Option<String>,
    /// Recorded provider name for `openai-compatible` (default: the kind).
    pub name: Option<String>,
    /// The API root (`http://` or `https://`); overrides the preset's.
    pub base_url: Option<String>,
    /// The model name; overrides the preset's default.
    pub model: Option<String>,
    /// The environment variable that holds the key; overrides the preset's. The key itself never
    /// goes in the file.
    pub api_key_env: Option<String>,
    /// Passed through as `reasoning_effort` (e.g. `low`, `high`; `off` turns DeepSeek's thinking
    /// off).
    pub reasoning_effort: Option<String>,
    /// The most tokens an answer may have, sent as `max_tokens`.
    pub max_tokens: Option<u64>,
    /// Seconds to wait for the connection, in (0, 86400]; default 10.
    pub connect_timeout_secs: Option<f64>,
    /// Seconds without a byte from the server before the request ends, in (0, 86400]; default 120.
    pub idle_timeout_secs: Option<f64>,
    /// Retries of 429 and 5xx answers; default 3, at most 10.
    pub max_retries: Option<u32>,
    /// Send the API key over plain `http://` to a host that is not this machine (default: refused).
    pub allow_insecure_http: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
struct ConfigFile {
    provider: Option<ProviderTable>,
}

/// One key or a list of keys, as `[keys]` accepts them.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
enum KeyList {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
struct KeysFile {
    keys: Option<std::collections::BTreeMap<String, KeyList>>,
}

/// The `[keys]` table of `config.toml` text: action name → keys, in name order. The TUI checks
/// the names and spellings; this only reads them.
pub fn parse_keys(file: &str, text: &str) -> Result<Vec<(String, Vec<String>)>, ConfigError> {
    let parsed: KeysFile = toml::from_str(text).map_err(|e| ConfigError::File {
        file: file.to_string(),
        message: e.message().to_string(),
    })?;
    Ok(parsed
        .keys
        .unwrap_or_default()
        .into_iter()
        .map(|(action, keys)| {
            let keys = match keys {
                KeyList::One(key) => vec![key],
                KeyList::Many(keys) => keys,
            };
            (action, keys)
        })
        .collect())
}

/// Reads the `[keys]` table of `<home>/config.toml` (absent file or table: no overrides).
/// Blocking, like [`load`].
pub fn load_keys(home: &std::path::Path) -> Result<Vec<(String, Vec<String>)>, ConfigError> {
    let path = home.join("config.toml");
    let file = path.display().to_string();
    match read_config_file(&path)? {
        Some(text) => parse_keys(&file, &text),
        None => Ok(Vec::new()),
    }
}

/// The `[tui]` table of `config.toml`: how the TUI uses the terminal.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TuiTable {
    /// `true`: draw inline at the bottom of the normal screen, the conversation written into
    /// the terminal's scrollback (as `--inline`); `false` or absent: the alternate screen.
    pub inline: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
struct TuiFile {
    tui: Option<TuiTable>,
}

/// The `[tui]` table of `config.toml` text (absent: the defaults). Other tables are not read
/// here; an unknown key of `[tui]` is an error naming it.
pub fn parse_tui(file: &str, text: &str) -> Result<TuiTable, ConfigError> {
    let parsed: TuiFile = toml::from_str(text).map_err(|e| ConfigError::File {
        file: file.to_string(),
        message: e.message().to_string(),
    })?;
    Ok(parsed.tui.unwrap_or_default())
}

/// Reads the `[tui]` table of `<home>/config.toml` (absent file or table: the defaults).
/// Blocking, like [`load`].
pub fn load_tui(home: &std::path::Path) -> Result<TuiTable, ConfigError> {
    let path = home.join("config.toml");
    let file = path.display().to_string();
    match read_config_file(&path)? {
        Some(text) => parse_tui(&file, &text),
        None => Ok(TuiTable::default()),
    }
}

/// The most bytes of `config.toml` read; a longer file is refused, never read whole.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The text of the config file at `path`, `None` when there is none. Opened the way the store
/// opens its markers (`crate::session::files::open_read`): regular files only (a symlink to
/// one is followed) and without blocking, so a FIFO or a device at `config.toml` is an error
/// naming it, never a start-up that waits for ever; at most [`MAX_CONFIG_BYTES`] are read.
pub fn read_config_file(path: &std::path::Path) -> Result<Option<String>, ConfigError> {
    use std::io::Read;
    let error = |message: String| ConfigError::File {
        file: path.display().to_string(),
        message,
    };
    let file = match crate::session::files::open_read(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(error(e.to_string())),
    };
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| error(e.to_string()))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(error(format!(
            "larger than {} KiB; a config file is a few lines",
            MAX_CONFIG_BYTES >> 10
        )));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| error("not UTF-8 text".into()))
}

/// Command-line overrides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelFlags {
    /// `--provider NAME`: a preset, `openai-compatible` or `offline`; wins over `DSH_PROVIDER` and
    /// the file.
    pub provider: Option<String>,
    /// `--model NAME`; wins over `DSH_MODEL`, the file and the preset.
    pub model: Option<String>,
    /// `--base-url URL`; wins over `DSH_BASE_URL`, the file and the preset.
    pub base_url: Option<String>,
    /// `--api-key-env NAME`: the variable that holds the key; wins over the file and the preset.
    pub api_key_env: Option<String>,
    /// `--allow-insecure-http`: the key may go over plain `http://` to another host.
    pub allow_insecure_http: bool,
    /// `--demo`: only an explicit `--provider` leaves the offline model.
    pub demo: bool,
}

/// Why the model configuration cannot be used. Each message names what is wrong: the file, the key
/// or the variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `config.toml` could not be read or is not valid TOML of the expected shape.
    #[error("{file}: {message}")]
    File {
        /// The config file's path, as shown.
        file: String,
        /// The reader's or the TOML parser's message.
        message: String,
    },
    /// The kind names no preset, `openai-compatible` or `offline`.
    #[error("unknown provider \"{0}\" (known: offline, openai-compatible, deepseek, openai, openrouter, ollama, llama-cpp, vllm)")]
    UnknownProvider(String),
    /// The provider's key variable is unset or blank.
    #[error("provider \"{provider}\" needs an API key: the environment variable {var} is not set")]
    MissingKey {
        /// The provider (preset or kind) that needs the key.
        provider: String,
        /// The unset environment variable.
        var: String,
    },
    /// No model from flag, environment, `[provider]` table or preset.
    #[error("provider \"{0}\" has no model: pass --model or set model in the [provider] table")]
    MissingModel(String),
    /// `openai-compatible` with no base URL from flag, environment or table.
    #[error(
        "provider \"{0}\" has no base URL: pass --base-url or set base_url in the [provider] table"
    )]
    MissingBaseUrl(String),
    /// The base URL does not start with `http://` or `https://`.
    #[error("invalid base URL \"{0}\": it must start with http:// or https://")]
    InvalidBaseUrl(String),
    /// A `[provider]` value is out of range (e.g. a timeout).
    #[error("invalid {key}: {message}")]
    Invalid {
        /// The `[provider]` key, e.g. `idle_timeout_secs`.
        key: String,
        /// What is wrong with its value.
        message: String,
    },
    /// The key would go over plain `http://` to a host that is not this machine.
    #[error("refusing to send the API key in {var} over plain http:// to {host}, which is not this machine: use an https:// base URL, or allow it with allow_insecure_http = true in the [provider] table of {file} (or --allow-insecure-http, or DSH_ALLOW_INSECURE_HTTP=1)")]
    InsecureHttp {
        /// The key's variable.
        var: String,
        /// The base URL's host.
        host: String,
        /// The config file's path, as shown.
        file: String,
    },
    /// `--model` or `--base-url` was given but no provider; holds the config file's path.
    #[error("--model and --base-url need a provider: pass --provider (e.g. deepseek) or add a [provider] table to {0}")]
    NoProvider(String),
}

/// Parses `config.toml` text; `file` names it in errors.
pub fn parse_config(file: &str, text: &str) -> Result<Option<ProviderTable>, ConfigError> {
    // A key written in the file is refused with what to do instead (serde would only say the
    // field is unknown).
    if let Ok(table) = text.parse::<toml::Table>() {
        if table
            .get("provider")
            .and_then(toml::Value::as_table)
            .is_some_and(|p| p.contains_key("api_key"))
        {
            return Err(ConfigError::File {
                file: file.to_string(),
                message: "api_key is not read from the config file (a key written in a file \
                          leaks with it): put the key in an environment variable and name the \
                          variable with api_key_env = \"VARIABLE\" in the [provider] table"
                    .into(),
            });
        }
    }
    let parsed: ConfigFile = toml::from_str(text).map_err(|e| ConfigError::File {
        file: file.to_string(),
        message: e.message().to_string(),
    })?;
    Ok(parsed.provider)
}

fn non_blank(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.trim().is_empty())
}

fn seconds(key: &str, value: Option<f64>, default: Duration) -> Result<Duration, ConfigError> {
    match value {
        None => Ok(default),
        Some(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => Ok(Duration::from_secs_f64(s)),
        Some(s) => Err(ConfigError::Invalid {
            key: key.to_string(),
            message: format!("{s} is not a number of seconds between 0 and 86400"),
        }),
    }
}

/// Resolves the model. `config_file` names the file for errors; `table` is its `[provider]`
/// table; `env` looks up environment variables (blank counts as unset).
pub fn resolve(
    config_file: &str,
    table: Option<ProviderTable>,
    flags: &ModelFlags,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ModelChoice, ConfigError> {
    let env = |name: &str| non_blank(env(name));
    let table = if flags.demo { None } else { table };
    let table = table.unwrap_or_default();
    let kind = non_blank(flags.provider.clone())
        .or_else(|| (!flags.demo).then(|| env("DSH_PROVIDER")).flatten())
        .or_else(|| non_blank(table.kind.clone()))
        .or_else(|| {
            (!flags.demo && env("DEEPSEEK_API_KEY").is_some()).then(|| "deepseek".to_string())
        });
    let Some(kind) = kind else {
        if flags.model.is_some() || flags.base_url.is_some() {
            return Err(ConfigError::NoProvider(config_file.to_string()));
        }
        return Ok(ModelChoice::Offline);
    };
    if kind == OFFLINE {
        return Ok(ModelChoice::Offline);
    }
    let preset = match preset(&kind) {
        Some(p) => Some(p),
        None if kind == OPENAI_COMPATIBLE => None,
        None => return Err(ConfigError::UnknownProvider(kind)),
    };
    let pick = |flag: &Option<String>, var: &str, field: &Option<String>| {
        non_blank(flag.clone())
            .or_else(|| (!flags.demo).then(|| env(var)).flatten())
            .or_else(|| non_blank(field.clone()))
    };
    let base_url = pick(&flags.base_url, "DSH_BASE_URL", &table.base_url)
        .or_else(|| preset.map(|p| p.base_url.to_string()))
        .ok_or_else(|| ConfigError::MissingBaseUrl(kind.clone()))?;
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(ConfigError::InvalidBaseUrl(base_url));
    }
    let model = pick(&flags.model, "DSH_MODEL", &table.model)
        .or_else(|| preset.and_then(|p| p.model).map(str::to_string))
        .ok_or_else(|| ConfigError::MissingModel(kind.clone()))?;
    let api_key_env = non_blank(flags.api_key_env.clone())
        .or_else(|| non_blank(table.api_key_env.clone()))
        .or_else(|| preset.and_then(|p| p.api_key_env).map(str::to_string));
    let api_key = match &api_key_env {
        Some(var) => match env(var) {
            Some(value) => Some(ApiKey::new(value.trim().to_string())),
            None => {
                return Err(ConfigError::MissingKey {
                    provider: kind,
                    var: var.clone(),
                })
            }
        },
        None => None,
    };
    if let (Some(var), Some(host)) = (&api_key_env, remote_http_host(&base_url)) {
        let allowed = flags.allow_insecure_http
            || (!flags.demo)
                .then(|| env("DSH_ALLOW_INSECURE_HTTP"))
                .flatten()
                .is_some_and(|v| matches!(v.trim(), "1" | "true" | "yes"))
            || table.allow_insecure_http == Some(true);
        if !allowed {
            return Err(ConfigError::InsecureHttp {
                var: var.clone(),
                host,
                file: config_file.to_string(),
            });
        }
    }
    let provider = match preset {
        Some(p) => p.name.to_string(),
        None => non_blank(table.name.clone()).unwrap_or_else(|| OPENAI_COMPATIBLE.to_string()),
    };
    Ok(ModelChoice::Remote(Box::new(ProviderSettings {
        provider,
        base_url: base_url.trim_end_matches('/').to_string(),
        model,
        api_key_env,
        api_key,
        reasoning_effort: non_blank(table.reasoning_effort.clone()),
        max_tokens: table.max_tokens,
        connect_timeout: seconds(
            "connect_timeout_secs",
            table.connect_timeout_secs,
            Duration::from_secs(10),
        )?,
        idle_timeout: seconds(
            "idle_timeout_secs",
            table.idle_timeout_secs,
            Duration::from_secs(120),
        )?,
        max_retries: table.max_retries.unwrap_or(3).min(10),
        retry_base: Duration::from_millis(500),
        max_stream_bytes: MAX_STREAM_BYTES,
    })))
}

/// The host of a plain `http://` base URL when it is not this machine (loopback addresses and
/// `localhost` are); `None` for `https://` and for loopback.
pub fn remote_http_host(base_url: &str) -> Option<String> {
    let rest = base_url.strip_prefix("http://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or("");
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    let lower = host.to_ascii_lowercase();
    let loopback = lower == "localhost"
        || lower.ends_with(".localhost")
        || lower
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    (!loopback).then(|| host.to_string())
}

/// Reads `<home>/config.toml` (absent is fine) and resolves against the process environment.
/// Blocking: call it before the async runtime starts, or from `spawn_blocking`.
pub fn load(home: &std::path::Path, flags: &ModelFlags) -> Result<ModelChoice, ConfigError> {
    let path = home.join("config.toml");
    let file = path.display().to_string();
    let table = match read_config_file(&path)? {
        Some(text) => parse_config(&file, &text)?,
        None => None,
    };
    resolve(&file, table, flags, &|name| std::env::var(name).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn the_keys_table_takes_one_key_or_a_list_beside_the_provider() {
        let text = "[provider]\nkind = \"offline\"\n[keys]\nsubmit = \"ctrl+s\"\nnewline = [\"enter\", \"ctrl+j\"]\nhelp = []\n";
        assert_eq!(
            parse_keys("c.toml", text).unwrap(),
            vec![
                ("help".to_string(), vec![]),
                (
                    "newline".to_string(),
                    vec!["enter".to_string(), "ctrl+j".to_string()]
                ),
                ("submit".to_string(), vec!["ctrl+s".to_string()]),
            ]
        );
        assert!(parse_config("c.toml", text).unwrap().is_some());
        assert!(parse_keys("c.toml", "").unwrap().is_empty());
        let err = parse_keys("c.toml", "[keys]\nsubmit = 3\n").unwrap_err();
        assert!(err.to_string().starts_with("c.toml: "), "{err}");
    }

    #[test]
    fn the_tui_table_says_inline_beside_the_other_tables() {
        let text =
            "[provider]\nkind = \"offline\"\n[tui]\ninline = true\n[keys]\nsubmit = \"ctrl+s\"\n";
        assert_eq!(parse_tui("c.toml", text).unwrap().inline, Some(true));
        assert!(parse_config("c.toml", text).unwrap().is_some());
        assert_eq!(parse_keys("c.toml", text).unwrap().len(), 1);
        assert_eq!(parse_tui("c.toml", "").unwrap(), TuiTable::default());
        let err = parse_tui("c.toml", "[tui]\ninline = \"yes\"\n").unwrap_err();
        assert!(err.to_string().starts_with("c.toml: "), "{err}");
        let err = parse_tui("c.toml", "[tui]\ninlined = true\n").unwrap_err();
        assert!(err.to_string().contains("inlined"), "{err}");
    }

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn remote(choice: ModelChoice) -> ProviderSettings {
        match choice {
            ModelChoice::Remote(s) => *s,
            ModelChoice::Offline => panic!("expected a remote provider"),
        }
    }

    #[test]
    fn nothing_configured_is_offline() {
        let choice = resolve("c.toml", None, &ModelFlags::default(), &env_of(&[])).unwrap();
        assert_eq!(choice, ModelChoice::Offline);
    }

    #[test]
    fn a_deepseek_key_alone_selects_deepseek() {
        let s = remote(
            resolve(
                "c.toml",
                None,
                &ModelFlags::default(),
                &env_of(&[("DEEPSEEK_API_KEY", "sk-secret")]),
            )
            .unwrap(),
        );
        assert_eq!(s.provider, "deepseek");
        assert_eq!(s.base_url, "https://api.deepseek.com");
        assert_eq!(s.model, "deepseek-v4-flash");
        assert_eq!(s.api_key.as_ref().map(ApiKey::expose), Some("sk-secret"));
        assert!(!format!("{s:?}").contains("sk-secret"));
    }

    #[test]
    fn missing_key_names_the_variable() {
        let flags = ModelFlags {
            provider: Some("openai".into()),
            ..Default::default()
        };
        let err =
            resolve("c.toml", None, &flags, &env_of(&[("OPENAI_API_KEY", "  ")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "provider \"openai\" needs an API key: the environment variable OPENAI_API_KEY is not set"
        );
    }

    #[test]
    fn local_presets_need_no_key() {
        let flags = ModelFlags {
            provider: Some("ollama".into()),
            ..Default::default()
        };
        let s = remote(resolve("c.toml", None, &flags, &env_of(&[])).unwrap());
        assert_eq!(s.base_url, "http://127.0.0.1:11434/v1");
        assert_eq!(s.api_key, None);
        let flags = ModelFlags {
            provider: Some("vllm".into()),
            ..Default::default()
        };
        assert_eq!(
            resolve("c.toml", None, &flags, &env_of(&[])),
            Err(ConfigError::MissingModel("vllm".into()))
        );
    }

    #[test]
    fn flags_beat_env_beat_file_beat_preset() {
        let table = parse_config(
            "c.toml",
            "[provider]\nkind = \"deepseek\"\nmodel = \"file-model\"\nbase_url = \"https://file/\"\nreasoning_effort = \"high\"\nmax_tokens = 99\nidle_timeout_secs = 0.5\n",
        )
        .unwrap();
        let env = env_of(&[("DEEPSEEK_API_KEY", "k"), ("DSH_MODEL", "env-model")]);
        let s = remote(resolve("c.toml", table.clone(), &ModelFlags::default(), &env).unwrap());
        assert_eq!(s.model, "env-model");
        assert_eq!(s.base_url, "https://file");
        assert_eq!(s.reasoning_effort.as_deref(), Some("high"));
        assert_eq!(s.max_tokens, Some(99));
        assert_eq!(s.idle_timeout, Duration::from_millis(500));
        let flags = ModelFlags {
            model: Some("flag-model".into()),
            base_url: Some("https://flag".into()),
            ..Default::default()
        };
        let s = remote(resolve("c.toml", table, &flags, &env).unwrap());
        assert_eq!(
            (s.model.as_str(), s.base_url.as_str()),
            ("flag-model", "https://flag")
        );
    }

    #[test]
    fn demo_stays_offline_unless_a_provider_flag_is_given() {
        let table = parse_config("c.toml", "[provider]\nkind = \"deepseek\"\n").unwrap();
        let env = env_of(&[("DEEPSEEK_API_KEY", "k"), ("DSH_PROVIDER", "openai")]);
        let demo = ModelFlags {
            demo: true,
            ..Default::default()
        };
        assert_eq!(
            resolve("c.toml", table.clone(), &demo, &env).unwrap(),
            ModelChoice::Offline
        );
        let demo = ModelFlags {
            demo: true,
            provider: Some("deepseek".into()),
            ..Default::default()
        };
        assert_eq!(
            remote(resolve("c.toml", table, &demo, &env).unwrap()).provider,
            "deepseek"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_config_that_is_not_a_small_regular_file_is_named_never_waited_on() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("config.toml");
        let status = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success());
        let dir = home.path().to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let keys = load_keys(&dir).map_err(|e| e.to_string());
            let model = load(&dir, &ModelFlags::default()).map_err(|e| e.to_string());
            let _ = tx.send((keys, model));
        });
        let (keys, model) = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("a FIFO config.toml blocked start-up");
        for err in [keys.unwrap_err(), model.unwrap_err()] {
            assert!(
                err.ends_with("config.toml: a FIFO, not a regular file"),
                "{err}"
            );
        }
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        let err = load_keys(home.path()).unwrap_err().to_string();
        assert!(err.contains("a device, not a regular file"), "{err}");
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, vec![b'#'; MAX_CONFIG_BYTES as usize + 1]).unwrap();
        let err = load_keys(home.path()).unwrap_err().to_string();
        assert!(err.contains("larger than 1024 KiB"), "{err}");
        std::fs::write(&path, "[keys]\nsubmit = \"ctrl+s\"\n").unwrap();
        assert_eq!(load_keys(home.path()).unwrap().len(), 1);
    }

    #[test]
    fn bad_input_is_named() {
        let err = parse_config("/h/config.toml", "[provider]\nkind = 3\n").unwrap_err();
        assert!(err.to_string().starts_with("/h/config.toml: "), "{err}");
        let err = parse_config("/h/config.toml", "[provider]\napi_key = \"x\"\n").unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("/h/config.toml: api_key "), "{err}");
        assert!(text.contains("api_key_env = \"VARIABLE\""), "{err}");
        assert!(
            !text.contains("\"x\""),
            "the key itself is never echoed: {err}"
        );
        let flags = ModelFlags {
            provider: Some("gemini".into()),
            ..Default::default()
        };
        assert!(matches!(
            resolve("c.toml", None, &flags, &env_of(&[])),
            Err(ConfigError::UnknownProvider(_))
        ));
        let flags = ModelFlags {
            model: Some("m".into()),
            ..Default::default()
        };
        assert!(matches!(
            resolve("c.toml", None, &flags, &env_of(&[])),
            Err(ConfigError::NoProvider(_))
        ));
        let table = parse_config(
            "c.toml",
            "[provider]\nkind = \"openai-compatible\"\nbase_url = \"ftp://x\"\nmodel = \"m\"\n",
        )
        .unwrap();
        assert!(matches!(
            resolve("c.toml", table, &ModelFlags::default(), &env_of(&[])),
            Err(ConfigError::InvalidBaseUrl(_))
        ));
    }

    #[test]
    fn a_key_over_plain_http_to_another_host_is_refused_unless_allowed() {
        let env = env_of(&[("DEEPSEEK_API_KEY", "k"), ("MY_KEY", "m")]);
        let to = |url: &str| ModelFlags {
            provider: Some("deepseek".into()),
            base_url: Some(url.into()),
            ..Default::default()
        };
        let err =
            resolve("/h/config.toml", None, &to("http://10.1.2.3:8000/v1"), &env).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("DEEPSEEK_API_KEY")
                && text.contains("10.1.2.3")
                && text.contains("allow_insecure_http = true")
                && text.contains("/h/config.toml"),
            "{text}"
        );
        for url in [
            "http://127.0.0.1:9/v1",
            "http://127.8.0.1/v1",
            "http://localhost:11434/v1",
            "http://[::1]:8080/v1",
            "https://example.com/v1",
        ] {
            assert!(resolve("c", None, &to(url), &env).is_ok(), "{url}");
        }
        // A user name cannot disguise the host.
        assert!(resolve("c", None, &to("http://127.0.0.1@evil.example/v1"), &env).is_err());
        // No key: nothing to protect.
        let open = ModelFlags {
            provider: Some("openai-compatible".into()),
            base_url: Some("http://10.1.2.3/v1".into()),
            model: Some("m".into()),
            ..Default::default()
        };
        assert!(resolve("c", None, &open, &env).is_ok());
        // The setting, the flag and the variable allow it.
        let table = parse_config("c", "[provider]\nallow_insecure_http = true\n").unwrap();
        assert!(resolve("c", table, &to("http://10.1.2.3/v1"), &env).is_ok());
        let flagged = ModelFlags {
            allow_insecure_http: true,
            ..to("http://10.1.2.3/v1")
        };
        assert!(resolve("c", None, &flagged, &env).is_ok());
        let allowing = env_of(&[("DEEPSEEK_API_KEY", "k"), ("DSH_ALLOW_INSECURE_HTTP", "1")]);
        assert!(resolve("c", None, &to("http://10.1.2.3/v1"), &allowing).is_ok());
        // --api-key-env names the variable, for openai-compatible too.
        let named = ModelFlags {
            api_key_env: Some("MY_KEY".into()),
            base_url: Some("http://127.0.0.1:9/v1".into()),
            ..open
        };
        let s = remote(resolve("c", None, &named, &env).unwrap());
        assert_eq!(s.api_key_env.as_deref(), Some("MY_KEY"));
        assert_eq!(s.api_key.as_ref().map(ApiKey::expose), Some("m"));
    }

    #[test]
    fn redacts_the_key_from_server_text() {
        let key = ApiKey::new("sk-abcdef");
        assert_eq!(key.redact("bad key sk-abcdef given"), "bad key *** given");
        assert_eq!(format!("{key} {key:?}"), "*** ApiKey(***)");
    }
}
