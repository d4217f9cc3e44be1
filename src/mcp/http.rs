//! `dsh-refs mcp --http [ADDR:]PORT`: the same server over Streamable HTTP (SPEC §10), endpoint
//! `/mcp`, for a remote dev box or a team.
//!
//! Purpose: `rmcp`'s Streamable HTTP service carries both eras (legacy sessions with their GET
//! stream, stateless 2026-07-28 requests); this file puts a bearer token in front of it, keeps
//! it on loopback unless told otherwise, and hands every connection its own [`Server`] view of
//! the one home (one index, one indexer, one service).
//!
//! Invariant: no request reaches the MCP service without `Authorization: Bearer <token>` equal
//! to the configured token (401 otherwise, compared in constant time); a request whose `Origin`
//! is not the server's own gets 403 even with the token, one whose `Host` is not the server's
//! 403 (`rmcp`'s DNS-rebinding checks, given our lists); the token is never printed (a
//! generated one goes to a 0600 file under the home, whose path is printed); a client that
//! goes away mid-stream ends only its own streams; every POST that names an id gets a JSON-RPC
//! answer by that id (a body `rmcp` would mistype or refuse with bare text is answered here,
//! as the stdio wire answers it), and no answer carries a raw control back (handler errors are
//! escaped where they are made, a method name we do not serve before `rmcp` could echo it).
//! Proof: `tests/mcp/http.rs` over loopback with a real HTTP client (both eras, several clients,
//! a client dropped mid-stream, every refusal, every malformed request).

use super::server::Server;
use super::wire;
use super::{Options, ServeError};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use std::future::IntoFuture;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The environment variable that holds the token.
pub const TOKEN_ENV: &str = "DSH_REFS_MCP_TOKEN";
/// The generated token's file, under the dsh home.
pub const TOKEN_FILE: &str = "mcp-http-token";
/// The endpoint.
pub const ENDPOINT: &str = "/mcp";
/// How long open connections may take to close once the server is told to stop.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// The shortest token accepted from the environment or a file.
pub const MIN_TOKEN_CHARS: usize = 32;

/// Where the bearer token comes from.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// `[ADDR:]PORT` as given.
    pub listen: String,
    /// `--token-file PATH`.
    pub token_file: Option<PathBuf>,
}

/// Parses `[ADDR:]PORT` (`8080`, `127.0.0.1:8080`, `[::1]:8080`, `localhost:8080`); a bare port
/// binds loopback.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    let text = text.trim();
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    if let Some(port) = text.strip_prefix("localhost:") {
        if let Ok(port) = port.parse::<u16>() {
            return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
        }
    }
    Err(format!(
        "--http {text:?}: expected PORT or ADDR:PORT (an IP address, [IPv6]:PORT or localhost:PORT)"
    ))
}

/// The token and, when it was generated or read from a file, that file.
pub fn token(home: &Path, token_file: Option<&Path>) -> Result<(String, Option<PathBuf>), String> {
    if let Ok(value) = std::env::var(TOKEN_ENV) {
        let value = value.trim().to_string();
        if !value.is_empty() {
            check_token(&value, TOKEN_ENV)?;
            return Ok((value, None));
        }
    }
    if let Some(path) = token_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--token-file {}: {e}", path.display()))?;
        let value = text.trim().to_string();
        check_token(&value, &path.display().to_string())?;
        return Ok((value, Some(path.to_path_buf())));
    }
    let path = home.join(TOKEN_FILE);
    Ok((generated(&path)?, Some(path)))
}

fn check_token(value: &str, from: &str) -> Result<(), String> {
    if value.chars().count() < MIN_TOKEN_CHARS || value.chars().any(|c| c.is_control()) {
        return Err(format!(
            "the token from {from} must be at least {MIN_TOKEN_CHARS} characters, on one line"
        ));
    }
    Ok(())
}

/// The token in `path`, kept when the file is the owner's alone and holds a valid one, else a
/// new one (64 random hex digits) written there with mode 0600.
fn generated(path: &Path) -> Result<String, String> {
    if let Some(kept) = kept_token(path) {
        return Ok(kept);
    }
    let value = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let write = || -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let _ = std::fs::remove_file(path);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(path)?;
        std::io::Write::write_all(&mut file, format!("{value}\n").as_bytes())?;
        file.sync_all()
    };
    write().map_err(|e| format!("cannot write the token to {}: {e}", path.display()))?;
    Ok(value)
}

fn kept_token(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if meta.mode() & 0o077 != 0 {
            return None;
        }
    }
    let value = std::fs::read_to_string(path).ok()?.trim().to_string();
    check_token(&value, "").ok()?;
    Some(value)
}

/// Whether two byte strings are equal, in time that depends only on their lengths.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Refuses (401) a request without the bearer token; passes it on otherwise.
async fn authorize(State(token): State<Arc<String>>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        });
    match given {
        Some(given) if same(given.as_bytes(), token.as_bytes()) => next.run(request).await,
        _ => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "a bearer token is required (Authorization: Bearer <token>)\n",
        )
            .into_response(),
    }
}

/// A JSON-RPC answer of our own, as an `application/json` body.
fn json_answer(status: StatusCode, answer: &serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        answer.to_string(),
    )
        .into_response()
}

/// Lets through to `rmcp` only a POST body that the stdio wire would hand it ([`wire::admit`]);
/// answers every other body here, as JSON-RPC by its id: invalid params (HTTP 200) for a
/// served method whose params `rmcp` would mistype as an unknown method, an invalid request or
/// a parse error (HTTP 400) for a body it would refuse with a bare text. A request for a
/// method we do not serve whose name needs escaping is answered "method not found" here, its
/// name spelled visibly (`rmcp` echoes a method name raw). Other methods (GET, DELETE) pass.
async fn admit_http(request: Request, next: Next) -> Response {
    if request.method() != axum::http::Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, wire::MAX_LINE_BYTES).await {
        Ok(bytes) => bytes,
        Err(_) => {
            let answer = wire::error(
                serde_json::Value::Null,
                wire::INVALID_REQUEST,
                format!(
                    "the request is longer than {} bytes, or its body failed",
                    wire::MAX_LINE_BYTES
                ),
            );
            return json_answer(StatusCode::PAYLOAD_TOO_LARGE, &answer);
        }
    };
    match wire::admit(&bytes) {
        wire::Admit::Reply(answer) => {
            let status = if answer["error"]["code"] == wire::INVALID_PARAMS {
                StatusCode::OK
            } else {
                StatusCode::BAD_REQUEST
            };
            json_answer(status, &answer)
        }
        wire::Admit::Skip => {
            let answer = wire::error(
                serde_json::Value::Null,
                wire::PARSE_ERROR,
                "the body is not a JSON-RPC message".into(),
            );
            json_answer(StatusCode::BAD_REQUEST, &answer)
        }
        wire::Admit::Message(message) => {
            if let rmcp::service::RxJsonRpcMessage::<rmcp::RoleServer>::Request(request) =
                message.as_ref()
            {
                if let rmcp::model::ClientRequest::CustomRequest(custom) = &request.request {
                    let shown = crate::escape::escape_line(&custom.method);
                    if matches!(shown, std::borrow::Cow::Owned(_)) {
                        let answer = wire::error(
                            serde_json::to_value(&request.id).unwrap_or_default(),
                            wire::METHOD_NOT_FOUND,
                            format!("method not found: {shown}"),
                        );
                        return json_answer(StatusCode::OK, &answer);
                    }
                }
            }
            next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                .await
        }
    }
}

/// The hosts (any port) and origins (this port) a request may name: loopback, and the bound
/// address when it is a specific one.
fn allowed(addr: SocketAddr) -> (Vec<String>, Vec<String>) {
    let mut hosts = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    let ip = addr.ip();
    if !ip.is_unspecified() && !ip.is_loopback() {
        hosts.push(ip.to_string());
    }
    let port = addr.port();
    let origins = hosts
        .iter()
        .map(|h| match h.parse::<IpAddr>() {
            Ok(IpAddr::V6(_)) => format!("http://[{h}]:{port}"),
            _ => format!("http://{h}:{port}"),
        })
        .collect();
    (hosts, origins)
}

/// Serves `/mcp` on `listener` until `stop` is cancelled.
pub async fn serve_http(
    options: Options,
    listener: tokio::net::TcpListener,
    token: String,
    stop: CancellationToken,
) -> Result<(), ServeError> {
    let addr = listener
        .local_addr()
        .map_err(|e| ServeError::Service(e.to_string()))?;
    let server = Server::new(&options)?;
    let anyway = {
        let server = server.clone();
        tokio::spawn(async move {
            tokio::time::sleep(super::server::BACKGROUND_ANYWAY).await;
            server.start_background();
        })
    };
    let (hosts, origins) = allowed(addr);
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_cancellation_token(stop.child_token());
    let service = StreamableHttpService::new(
        move || Ok(server.for_connection(CancellationToken::new())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new()
        .route_service(ENDPOINT, service)
        .layer(axum::middleware::from_fn(admit_http))
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(token),
            authorize,
        ));
    let stopped = stop.clone();
    let serving = axum::serve(listener, router)
        .with_graceful_shutdown(async move { stopped.cancelled().await })
        .into_future();
    // Open event streams end with rmcp's token; a client that holds its connection open anyway
    // does not keep the server from exiting.
    let result = tokio::select! {
        result = serving => result,
        () = async {
            stop.cancelled().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => {
            tracing::info!("connections still open after the grace period; exiting");
            Ok(())
        }
    };
    anyway.abort();
    result.map_err(|e| ServeError::Service(e.to_string()))
}

/// `dsh-refs mcp --http`: binds, says where (and where the token is) on stderr, serves until
/// SIGINT or SIGTERM; returns the exit code.
pub fn run_http(options: Options, http: &HttpOptions) -> i32 {
    let fail = |message: String| {
        tracing::error!(%message, "dsh-refs mcp --http");
        eprintln!("dsh-refs: {}", crate::escape::diagnostic(&message));
        1
    };
    let addr = match parse_listen(&http.listen) {
        Ok(addr) => addr,
        Err(message) => return fail(message),
    };
    let (token, file) = match token(options.workspace.home(), http.token_file.as_deref()) {
        Ok(found) => found,
        Err(message) => return fail(message),
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => return fail(format!("could not start the async runtime: {e}")),
    };
    let result = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| ServeError::Service(format!("cannot listen on {addr}: {e}")))?;
        let bound = listener
            .local_addr()
            .map_err(|e| ServeError::Service(e.to_string()))?;
        if bound.ip().is_unspecified() {
            eprintln!(
                "dsh-refs: warning: listening on every interface; reach it through an SSH tunnel or a TLS reverse proxy instead (see the README)"
            );
        }
        eprintln!("dsh-refs: MCP over HTTP at http://{bound}{ENDPOINT}");
        match &file {
            Some(path) => eprintln!("dsh-refs: bearer token in {}", path.display()),
            None => eprintln!("dsh-refs: bearer token from ${TOKEN_ENV}"),
        }
        let stop = CancellationToken::new();
        let signalled = stop.clone();
        tokio::spawn(async move {
            shutdown_signal().await;
            signalled.cancel();
        });
        serve_http(options, listener, token, stop).await
    });
    runtime.shutdown_timeout(Duration::from_millis(100));
    match result {
        Ok(()) => 0,
        Err(error) => fail(error.to_string()),
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_port_binds_loopback_and_addresses_are_taken_as_given() {
        assert_eq!(parse_listen("8080").unwrap().to_string(), "127.0.0.1:8080");
        assert_eq!(
            parse_listen("localhost:9").unwrap().to_string(),
            "127.0.0.1:9"
        );
        assert_eq!(parse_listen("[::1]:80").unwrap().to_string(), "[::1]:80");
        assert_eq!(
            parse_listen("10.0.0.2:7000").unwrap().to_string(),
            "10.0.0.2:7000"
        );
        for bad in ["", "x", "70000", "example.com:80", "1.2.3.4"] {
            assert!(parse_listen(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
        assert!(!same(b"", b"a"));
    }

    #[test]
    fn origins_are_the_servers_own() {
        let (hosts, origins) = allowed("127.0.0.1:4000".parse().unwrap());
        assert_eq!(hosts, ["localhost", "127.0.0.1", "::1"]);
        assert!(origins.contains(&"http://127.0.0.1:4000".to_string()));
        assert!(origins.contains(&"http://[::1]:4000".to_string()));
        let (hosts, _) = allowed("10.1.2.3:4000".parse().unwrap());
        assert!(hosts.contains(&"10.1.2.3".to_string()));
    }
}
