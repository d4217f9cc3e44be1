//! Issue 36 item 2: `dsh-refs mcp --http` over loopback with a real HTTP client (reqwest): the
//! bearer token and where it comes from, the Origin and Host refusals, both protocol eras, old
//! sessions' GET stream, several clients at once and a client dropped mid-stream.

use super::server::{demo_home, new_session};
use serde_json::{json, Value};
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_dsh-refs");
const MODERN: &str = "2026-07-28";
const ACCEPT: &str = "application/json, text/event-stream";

/// The server as started by a person: its URL, the token and the stderr it printed.
struct Http {
    child: Child,
    url: String,
    stderr: Vec<String>,
}

impl Http {
    /// `dsh-refs --home HOME --sources dsh mcp --http 127.0.0.1:0 ARGS…` with `env`.
    fn start(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Http {
        let mut command = Command::new(BIN);
        command
            .arg("--home")
            .arg(home)
            .args(["--sources", "dsh", "mcp", "--http", "127.0.0.1:0"])
            .args(args)
            .env_remove("RUST_LOG")
            .env_remove("DSH_REFS_MCP_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().unwrap();
        let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stderr.lines() {
                let Ok(line) = line else { return };
                let _ = tx.send(line);
            }
        });
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !seen.iter().any(|l: &String| l.contains("bearer token")) {
            let line = lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| panic!("the server said where it listens: {seen:?}"));
            seen.push(line);
        }
        let url = seen
            .iter()
            .find_map(|l| l.split("MCP over HTTP at ").nth(1))
            .expect("the URL on stderr")
            .to_string();
        Http {
            child,
            url,
            stderr: seen,
        }
    }

    fn port(&self) -> u16 {
        let rest = self.url.trim_start_matches("http://127.0.0.1:");
        rest.trim_end_matches("/mcp").parse().unwrap()
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// One client of the server: its token, and a legacy session's id once it has one.
#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    url: String,
    token: String,
    session: Option<String>,
}

/// The JSON-RPC messages of a response body (JSON, or the `data:` lines of an SSE stream).
fn messages(content_type: &str, body: &str) -> Vec<Value> {
    if content_type.starts_with("application/json") {
        return vec![serde_json::from_str(body).expect("a JSON body")];
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| serde_json::from_str(d).expect("JSON in each SSE data line"))
        .collect()
}

impl Client {
    fn new(server: &Http, token: &str) -> Client {
        Client {
            http: http_client(),
            url: server.url.clone(),
            token: token.to_string(),
            session: None,
        }
    }

    /// A POST of `body` with the headers a client of `body`'s era sends.
    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("Accept", ACCEPT)
            .json(body);
        if let Some(session) = &self.session {
            request = request
                .header("Mcp-Session-Id", session)
                .header("MCP-Protocol-Version", "2025-11-25");
        }
        let method = body["method"].as_str().unwrap_or_default();
        if body["params"]["_meta"].is_object() {
            request = request
                .header("MCP-Protocol-Version", MODERN)
                .header("Mcp-Method", method);
            let name = match method {
                "resources/read" => body["params"]["uri"].as_str(),
                "prompts/get" => body["params"]["name"].as_str(),
                _ => None,
            };
            if let Some(name) = name {
                request = request.header("Mcp-Name", name);
            }
        }
        request
    }

    /// The answer to a request (status, and the message carrying its id).
    async fn call(&self, body: Value) -> (u16, Value) {
        let response = self.post(&body).send().await.unwrap();
        let status = response.status().as_u16();
        let content_type = header(&response, "content-type");
        let text = response.text().await.unwrap();
        let answer = messages(&content_type, &text)
            .into_iter()
            .find(|m| m["id"] == body["id"])
            .unwrap_or_else(|| panic!("no answer to {body} in {text:?}"));
        (status, answer)
    }

    async fn modern(&self, id: i64, method: &str, mut params: Value) -> Value {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        let (status, answer) = self
            .call(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        assert_eq!(status, 200, "{method}: {answer}");
        answer
    }

    /// A legacy session: `initialize` (its session id kept) and `notifications/initialized`.
    async fn initialize(&mut self) {
        let body = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"http-test","version":"1"}}});
        let response = self.post(&body).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200);
        self.session = Some(header(&response, "mcp-session-id"));
        let content_type = header(&response, "content-type");
        let text = response.text().await.unwrap();
        let init = &messages(&content_type, &text)[0];
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
        let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
        let response = self.post(&note).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 202);
    }

    async fn legacy(&self, id: i64, method: &str, params: Value) -> Value {
        let (status, answer) = self
            .call(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        assert_eq!(status, 200, "{method}: {answer}");
        answer
    }

    /// The session's GET stream (server-to-client messages of a legacy session).
    async fn get_stream(&self) -> reqwest::Response {
        let response = self
            .http
            .get(&self.url)
            .bearer_auth(&self.token)
            .header("Accept", "text/event-stream")
            .header("Mcp-Session-Id", self.session.as_deref().unwrap())
            .header("MCP-Protocol-Version", "2025-11-25")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        response
    }
}

fn header(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// Reads `stream` until a message `wanted` accepts arrives (within 30 s).
async fn until(stream: &mut reqwest::Response, wanted: impl Fn(&Value) -> bool) -> Value {
    let mut buffer = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let chunk = tokio::time::timeout(left, stream.chunk())
            .await
            .unwrap_or_else(|_| panic!("nothing wanted within 30 s: {buffer:?}"))
            .unwrap()
            .expect("the stream stays open");
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            for message in messages("text/event-stream", &event) {
                if wanted(&message) {
                    return message;
                }
            }
        }
    }
}

fn is_list_changed(v: &Value) -> bool {
    v["method"] == "notifications/resources/list_changed"
}

/// Every request needs the token (401 without, with a wrong one or another scheme); a generated
/// token is at least 32 characters in a 0600 file under the home whose path (not the token) is
/// printed; a foreign Origin is 403 even with the token, the server's own is served; a foreign
/// Host is refused; SIGTERM ends the server with exit code 0 while clients hold streams open.
#[test]
fn a_request_needs_the_token_and_the_servers_own_origin_and_host() {
    let (_dir, home) = demo_home();
    let mut server = Http::start(&home, &[], &[]);
    let file = home.join("mcp-http-token");
    let token = std::fs::read_to_string(&file).unwrap().trim().to_string();
    assert!(token.len() >= 32, "{token}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let said = server.stderr.join("\n");
    assert!(said.contains(&file.display().to_string()), "{said}");
    assert!(!said.contains(&token), "the token is never printed");
    let port = server.port();
    runtime().block_on(async {
        let client = Client::new(&server, &token);
        let discover = json!({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {}}}});
        let plain = client
            .http
            .post(&client.url)
            .header("Accept", ACCEPT)
            .json(&discover);
        assert_eq!(plain.send().await.unwrap().status().as_u16(), 401);
        let wrong = Client::new(&server, &format!("{token}x"));
        assert_eq!(
            wrong
                .post(&discover)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16(),
            401
        );
        let basic = client
            .http
            .post(&client.url)
            .header("Authorization", format!("Basic {token}"))
            .json(&discover);
        assert_eq!(basic.send().await.unwrap().status().as_u16(), 401);
        let get = client
            .http
            .get(&client.url)
            .header("Accept", "text/event-stream");
        assert_eq!(get.send().await.unwrap().status().as_u16(), 401);
        // The token alone: served.
        assert!(client.modern(1, "server/discover", json!({})).await["result"].is_object());
        for (origin, status) in [
            ("http://evil.example", 403),
            ("https://127.0.0.1.evil.example", 403),
            (&format!("http://localhost:{}", port + 1), 403),
            (&format!("http://127.0.0.1:{port}"), 200),
            (&format!("http://localhost:{port}"), 200),
        ] {
            let request = client.post(&discover).header("Origin", origin);
            let got = request.send().await.unwrap().status().as_u16();
            assert_eq!(got, status, "Origin {origin}");
        }
        let request = client.post(&discover).header("Host", "evil.example");
        let got = request.send().await.unwrap().status().as_u16();
        assert!((400..500).contains(&got), "a foreign Host: {got}");
    });
    // Clients that hold streams open (a session's GET stream, a subscription) while the server
    // is told to stop.
    let rt = runtime();
    let held = rt.block_on(async {
        let mut old = Client::new(&server, &token);
        old.initialize().await;
        let get = old.get_stream().await;
        let listen = json!({"jsonrpc":"2.0","id":"s","method":"subscriptions/listen","params":{
            "notifications": {"resourcesListChanged": true},
            "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                      "io.modelcontextprotocol/clientCapabilities": {}}}});
        let mut sub = Client::new(&server, &token)
            .post(&listen)
            .send()
            .await
            .unwrap();
        until(&mut sub, |m| m["method"].as_str().is_some()).await;
        (get, sub)
    });
    let status = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let ended = Instant::now();
    let code = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status.code();
        }
        assert!(ended.elapsed() < Duration::from_secs(5), "ends on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(0));
    drop(held);
    drop(rt);
    // A second start keeps the token file's token (hosts configured with it keep working).
    let again = Http::start(&home, &[], &[]);
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), token);
    drop(again);
}

/// The token comes from `DSH_REFS_MCP_TOKEN`, else `--token-file` (then no file is generated);
/// a short one is refused at start.
#[test]
fn the_token_comes_from_the_environment_or_a_file() {
    let (dir, home) = demo_home();
    let from_env = "e".repeat(40);
    let server = Http::start(&home, &[], &[("DSH_REFS_MCP_TOKEN", &from_env)]);
    assert!(server.stderr.join("\n").contains("DSH_REFS_MCP_TOKEN"));
    assert!(!home.join("mcp-http-token").exists());
    let path = dir.path().join("token");
    let from_file = "f".repeat(48);
    std::fs::write(&path, format!("{from_file}\n")).unwrap();
    let path_text = path.to_str().unwrap();
    let other = Http::start(&home, &["--token-file", path_text], &[]);
    runtime().block_on(async {
        for (server, good, bad) in [
            (&server, &from_env, &from_file),
            (&other, &from_file, &from_env),
        ] {
            let ok = Client::new(server, good);
            assert!(ok.modern(1, "server/discover", json!({})).await["result"].is_object());
            let refused = Client::new(server, bad);
            let body = json!({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}});
            let status = refused.post(&body).send().await.unwrap().status();
            assert_eq!(status.as_u16(), 401);
        }
    });
    assert!(!home.join("mcp-http-token").exists());
    let out = Command::new(BIN)
        .arg("--home")
        .arg(&home)
        .args(["--sources", "dsh", "mcp", "--http", "127.0.0.1:0"])
        .env("DSH_REFS_MCP_TOKEN", "short")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("short\n"));
}

/// Both eras over HTTP: a 2026-07-28 client lists (briefly cacheable), reads (not cacheable),
/// gets -32602 with `data.uri` for an unknown session and `list_changed` on its
/// `subscriptions/listen` stream, tagged; a 2025-11-25 session lists, reads, gets -32002 and
/// `list_changed` on its GET stream.
#[test]
fn both_eras_over_http_and_each_gets_list_changed_its_way() {
    let (_dir, home) = demo_home();
    let server = Http::start(&home, &[], &[]);
    let token = std::fs::read_to_string(home.join("mcp-http-token")).unwrap();
    runtime().block_on(async {
        let modern = Client::new(&server, token.trim());
        let listed = modern.modern(1, "resources/list", json!({})).await;
        assert_eq!(listed["result"]["ttlMs"], 1000, "{listed}");
        assert_eq!(listed["result"]["resultType"], "complete");
        let resources = listed["result"]["resources"].as_array().unwrap().clone();
        assert_eq!(resources.len(), 8);
        let uri = resources[0]["uri"].as_str().unwrap();
        let read = modern
            .modern(2, "resources/read", json!({ "uri": uri }))
            .await;
        assert_eq!(read["result"]["ttlMs"], 0, "{read}");
        assert!(read["result"]["contents"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("## Referenced sessions"));
        let missing = dsh_session_references::reference::encode_session_reference_uri("none");
        let (_, answer) = modern
            .call(
                json!({"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri": missing,
                "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                          "io.modelcontextprotocol/clientCapabilities": {}}}}),
            )
            .await;
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        assert_eq!(answer["error"]["data"]["uri"], missing.as_str());

        let mut old = Client::new(&server, token.trim());
        old.initialize().await;
        let listed = old.legacy(1, "resources/list", json!({})).await;
        assert!(listed["result"].get("ttlMs").is_none(), "{listed}");
        assert_eq!(listed["result"]["resources"].as_array().unwrap().len(), 8);
        let read = old.legacy(2, "resources/read", json!({ "uri": uri })).await;
        assert!(read["result"]["contents"][0]["text"].is_string());
        let answer = old
            .legacy(3, "resources/read", json!({ "uri": missing }))
            .await;
        assert_eq!(answer["error"]["code"], -32002, "{answer}");
        let mut get = old.get_stream().await;

        let listen = json!({"jsonrpc":"2.0","id":"sub","method":"subscriptions/listen","params":{
            "notifications": {"resourcesListChanged": true},
            "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                      "io.modelcontextprotocol/clientCapabilities": {}}}});
        let mut sub = modern.post(&listen).send().await.unwrap();
        assert_eq!(sub.status().as_u16(), 200);
        let ack = until(&mut sub, |m| m["method"].as_str().is_some()).await;
        assert_eq!(
            ack["method"], "notifications/subscriptions/acknowledged",
            "{ack}"
        );

        new_session(&home, "fresh-over-http", "/p", "a question asked remotely");
        let changed = until(&mut sub, is_list_changed).await;
        assert_eq!(
            changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            "sub"
        );
        let changed = until(&mut get, is_list_changed).await;
        assert!(changed["params"]["_meta"].is_null(), "untagged: {changed}");
        let listed = old.legacy(4, "resources/list", json!({})).await;
        let fresh =
            dsh_session_references::reference::encode_session_reference_uri("fresh-over-http");
        assert!(listed["result"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["uri"] == fresh.as_str()));
    });
}

/// Several clients at once are served alike, and clients that vanish mid-stream (a GET stream,
/// a `subscriptions/listen` stream, a request in flight) hurt neither the server nor the others.
#[test]
fn several_clients_at_once_and_one_dropped_mid_stream_hurts_nobody() {
    let (_dir, home) = demo_home();
    let mut server = Http::start(&home, &[], &[]);
    let token = std::fs::read_to_string(home.join("mcp-http-token")).unwrap();
    let token = token.trim().to_string();
    runtime().block_on(async {
        // Clients that go away mid-stream.
        {
            let mut gone = Client::new(&server, &token);
            gone.initialize().await;
            let mut get = gone.get_stream().await;
            let listen = json!({"jsonrpc":"2.0","id":"s","method":"subscriptions/listen","params":{
                "notifications": {"resourcesListChanged": true},
                "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                          "io.modelcontextprotocol/clientCapabilities": {}}}});
            let stateless = Client::new(&server, &token);
            let mut sub = stateless.post(&listen).send().await.unwrap();
            let ack = until(&mut sub, |m| m["method"].as_str().is_some()).await;
            assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
            let _ = tokio::time::timeout(Duration::from_millis(200), get.chunk()).await;
            let half = stateless.modern(9, "resources/list", json!({}));
            let _ = tokio::time::timeout(Duration::from_millis(1), half).await;
            drop((get, sub, gone, stateless));
        }
        let mut tasks = Vec::new();
        for n in 0..6 {
            let mut client = Client::new(&server, &token);
            tasks.push(tokio::spawn(async move {
                if n % 2 == 0 {
                    client.initialize().await;
                    let listed = client.legacy(1, "resources/list", json!({})).await;
                    let uris: Vec<String> = listed["result"]["resources"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|r| r["uri"].as_str().unwrap().to_string())
                        .collect();
                    for (i, uri) in uris.iter().enumerate() {
                        let read = client
                            .legacy(10 + i as i64, "resources/read", json!({ "uri": uri }))
                            .await;
                        assert!(read["result"]["contents"][0]["text"].is_string());
                    }
                    uris
                } else {
                    let listed = client.modern(1, "resources/list", json!({})).await;
                    let uris: Vec<String> = listed["result"]["resources"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|r| r["uri"].as_str().unwrap().to_string())
                        .collect();
                    for (i, uri) in uris.iter().enumerate() {
                        let read = client
                            .modern(10 + i as i64, "resources/read", json!({ "uri": uri }))
                            .await;
                        assert!(read["result"]["contents"][0]["text"].is_string());
                    }
                    uris
                }
            }));
        }
        let mut lists = Vec::new();
        for task in tasks {
            lists.push(task.await.expect("every client is served"));
        }
        assert!(lists.iter().all(|l| l.len() == 8 && *l == lists[0]));
    });
    assert!(server.child.try_wait().unwrap().is_none(), "still serving");
}

/// A raw POST of `body` (bytes as given) with a 2026-07-28 client's headers, `method` in
/// `Mcp-Method`: the status and the body's text.
async fn post_raw(client: &Client, body: Vec<u8>, method: &str) -> (u16, String) {
    let response = client
        .http
        .post(&client.url)
        .bearer_auth(&client.token)
        .header("Accept", ACCEPT)
        .header("Content-Type", "application/json")
        .header("MCP-Protocol-Version", MODERN)
        .header("Mcp-Method", method)
        .body(body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// Issue 32 item 2 and 3 over HTTP: every request that names an id gets its answer by that id
/// with the code JSON-RPC gives it (a wrongly typed or missing `uri` of `resources/read` is
/// invalid params, never "method not found"; a lone surrogate likewise; nesting past the bound
/// is an invalid request; broken JSON a parse error in a JSON-RPC body, never a bare HTTP text);
/// nothing an answer carries back holds a raw control; and the server serves on afterwards.
#[test]
fn every_http_request_gets_its_json_rpc_answer_without_raw_controls() {
    let (_dir, home) = demo_home();
    let server = Http::start(&home, &[], &[]);
    let token = std::fs::read_to_string(home.join("mcp-http-token")).unwrap();
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
    let raw_controls = |text: &str| {
        text.chars()
            .any(|c| (c.is_control() && c != '\n') || ('\u{202a}'..='\u{202e}').contains(&c))
    };
    runtime().block_on(async {
        let client = Client::new(&server, token.trim());
        let cases: [(&str, String, i64); 6] = [
            ("resources/read", format!(r#"{{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{{"uri":5,{meta}}}}}"#), -32602),
            ("resources/read", format!(r#"{{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{{"uri":null,{meta}}}}}"#), -32602),
            ("resources/read", format!(r#"{{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{{{meta}}}}}"#), -32602),
            ("resources/read", format!(r#"{{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{{"uri":["a"],{meta}}}}}"#), -32602),
            ("prompts/get", format!(r#"{{"jsonrpc":"2.0","id":5,"method":"prompts/get","params":{{"name":"reference","arguments":{{"session":"\ud800"}},{meta}}}}}"#), -32602),
            ("resources/list", format!(r#"{{"jsonrpc":"2.0","id":6,"method":"resources/list","params":{}{}}}"#, "[".repeat(5000), "]".repeat(5000)), -32600),
        ];
        for (method, body, code) in cases {
            let (status, text) = post_raw(&client, body.clone().into_bytes(), method).await;
            let answer = messages("text/event-stream", &format!("data: {text}"))
                .into_iter()
                .next()
                .unwrap_or_else(|| panic!("{body:.80}: status {status}, body {text:?}"));
            let id: Value = serde_json::from_str::<Value>(&body[..body.find(",\"method\"").unwrap()].replacen("{\"jsonrpc\":\"2.0\",\"id\":", "", 1)).unwrap();
            assert_eq!(answer["id"], id, "{body:.80}: {text}");
            assert_eq!(answer["error"]["code"], code, "{body:.80}: {text}");
        }
        // Broken JSON: a JSON-RPC parse error, in a JSON body.
        let (status, text) =
            post_raw(&client, br#"{"jsonrpc":"2.0","id":7,"method":"resources/li"#.to_vec(), "resources/list").await;
        assert_eq!(status, 400, "{text}");
        let answer: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("a JSON-RPC body: {text:?}"));
        assert_eq!(answer["error"]["code"], -32700, "{text}");
        // A method name full of controls, and a URI full of them (a legacy session, which needs
        // no Mcp-Name header): the answers spell them out.
        let evil = "\u{1b}]0;pwned\u{7}\u{202e}\u{1b}[2J\u{9b}31m";
        let body = json!({"jsonrpc":"2.0","id":8,"method":evil,"params":{"_meta":{
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {}}}});
        let (_, text) = post_raw(&client, body.to_string().into_bytes(), "x").await;
        let decoded: Vec<Value> = messages("text/event-stream", &format!("data: {text}"));
        assert!(!decoded.is_empty() && !raw_controls(&decoded[0].to_string()) && !raw_controls(decoded[0]["error"]["message"].as_str().unwrap_or("")), "{text}");
        let mut old = Client::new(&server, token.trim());
        old.initialize().await;
        for (id, uri) in [(9, format!("dsh-session:{evil}")), (10, format!("dsh-session:{}", dsh_session_references::reference::encode_session_reference_uri(evil).trim_start_matches("dsh-session:")))] {
            let answer = old.legacy(id, "resources/read", json!({ "uri": uri })).await;
            let message = answer["error"]["message"].as_str().unwrap_or_default();
            let inner = answer["error"]["data"]["message"].as_str().unwrap_or_default();
            assert!(answer["error"].is_object(), "{answer}");
            assert!(!raw_controls(message) && !raw_controls(inner), "{answer}");
        }
        // Still serving.
        let listed = client.modern(11, "resources/list", json!({})).await;
        assert_eq!(listed["result"]["resources"].as_array().unwrap().len(), 8);
    });
}

/// A plain HTTP client. reqwest is built without a crypto provider (the crate installs ring's
/// when it makes its own clients); a test process installs it the same way before building one.
fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}
