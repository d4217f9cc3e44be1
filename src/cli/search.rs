//! `dsh-refs search QUERY [--json] [--limit N]`: discovery search from the command line (SPEC §8).
//!
//! Brings the index of the home up to date on this thread (a first run indexes every session),
//! then searches. The JSON answer is one object with keys in this order: `query`, `total` (how
//! many sessions matched), `hits` (best first, at most `--limit`), each hit as
//! [`crate::discovery::Hit`] documents. Everything printed comes from logs, so it reaches the
//! terminal escaped (SPEC §5.2).

use crate::discovery::{listed_ids, Hit, IndexError, SearchQuery};
use crate::escape;
use crate::host::Workspace;
use crate::session::clock::now_ms;
use serde::Serialize;
use std::io::Write;

/// Default number of hits printed.
pub const DEFAULT_LIMIT: usize = 20;

/// `dsh-refs search`: the query and how to print the hits (SPEC §8).
#[derive(Debug, Clone, clap::Args)]
pub struct SearchArgs {
    /// Words from the title, the first prompt, the conversation, the cwd or the id's start.
    pub query: String,
    /// Print a JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// At most N hits.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_LIMIT as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: u64,
    /// Leave this session out (the agent's own).
    #[arg(long = "as", value_name = "ID")]
    pub agent: Option<String>,
    /// Rank sessions of this cwd higher (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
}

#[derive(Serialize)]
struct Answer<'a> {
    query: &'a str,
    total: usize,
    hits: &'a [Hit],
}

/// Runs the command; returns the exit code.
pub fn run(workspace: &Workspace, args: &SearchArgs) -> i32 {
    let discovery = workspace.discovery();
    // The index is a cache: when it cannot be brought up to date (busy, a full disk, a path it
    // cannot be made at), the listing answers instead, and stderr says so once.
    let indexed = discovery.refresh_blocking();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("dsh-refs: {}", escape::diagnostic(&e.to_string()));
            return 1;
        }
    };
    let listing = match runtime.block_on(discovery.query().list_sessions()) {
        Ok(listing) => listing,
        Err(e) => {
            eprintln!("dsh-refs: {}", escape::diagnostic(&e.to_string()));
            return 1;
        }
    };
    let cwd = args.cwd.clone().or_else(|| {
        std::env::current_dir()
            .ok()
            .map(|d| d.to_string_lossy().into_owned())
    });
    let query = SearchQuery {
        text: args.query.clone(),
        agent: args.agent.clone(),
        cwd,
        limit: usize::try_from(args.limit).unwrap_or(usize::MAX),
        now_ms: now_ms(),
        snippets: true,
    };
    let found =
        indexed.and_then(|_| discovery.search_blocking(&query, Some(&listed_ids(&listing))));
    let found = match found {
        Err(e @ (IndexError::Sql { .. } | IndexError::Io { .. })) => {
            eprintln!(
                "dsh-refs: {}",
                escape::diagnostic(&crate::discovery::unavailable_note(&e))
            );
            runtime.block_on(discovery.search_listing(&query, &listing))
        }
        other => other,
    };
    let result = match found {
        Ok(result) => result,
        Err(e) => {
            eprintln!("dsh-refs: {}", escape::diagnostic(&e.to_string()));
            return 1;
        }
    };
    let out = if args.json {
        let answer = Answer {
            query: &args.query,
            total: result.total,
            hits: &result.hits,
        };
        let mut out =
            escape::json_for_terminal(serde_json::to_string(&answer).expect("hits serialize"));
        out.push('\n');
        out
    } else {
        table(&args.query, &result.hits, result.total, query.now_ms)
    };
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(out.as_bytes())
        .and_then(|_| stdout.flush());
    0
}

fn table(query: &str, hits: &[Hit], total: usize, now: i64) -> String {
    let visible = |t: &str| escape::escape_line(t).into_owned();
    if hits.is_empty() {
        return format!("no sessions match {}\n", visible(&format!("{query:?}")));
    }
    let mut out = String::new();
    for hit in hits {
        let title = hit
            .title
            .as_deref()
            .or(hit.first_prompt.as_deref())
            .map(visible)
            .unwrap_or_else(|| "(untitled)".into());
        let matched: Vec<&str> = hit.matched.iter().map(|f| f.name()).collect();
        out.push_str(&format!(
            "{}  {}  {} msgs  {}  [{}]\n",
            visible(&hit.id),
            // The one age format of every face.
            crate::host::format_age(hit.last_activity, now),
            hit.messages,
            title,
            matched.join(", ")
        ));
        let cwd = hit.cwd.as_deref().map(visible).unwrap_or("(no cwd)".into());
        out.push_str(&format!("    {cwd}\n"));
        if let Some(snippet) = &hit.snippet {
            out.push_str(&format!("    “{}”\n", visible(snippet)));
        }
    }
    if total > hits.len() {
        out.push_str(&format!(
            "{} of {total} shown; --limit N for more\n",
            hits.len()
        ));
    }
    out
}
