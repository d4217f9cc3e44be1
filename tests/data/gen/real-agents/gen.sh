#!/usr/bin/env bash
# Regenerates tests/data/fixtures/real-agents/ with the real Claude Code and Codex CLIs.
#
# Installs @anthropic-ai/claude-code and @openai/codex from the npm registry into a temporary
# prefix, runs them with a temporary HOME against mock_model.py (ours, on 127.0.0.1 only), with
# telemetry, error reporting and updates off, then copies the sessions they wrote (and Codex's
# session_index.jsonl and state_<n>.sqlite) into the fixture tree with a PROVENANCE.md.
#
# Usage: tests/data/gen/real-agents/gen.sh [CLAUDE_VERSION [CODEX_VERSION]]   (default: latest)
# Needs: node/npm, python3, tmux, sqlite3 (only to show the thread titles). Takes about 3 minutes.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../../.." && pwd)
OUT=${OUT:-"$REPO/tests/data/fixtures/real-agents"}
CLAUDE_SPEC="@anthropic-ai/claude-code@${1:-latest}"
CODEX_SPEC="@openai/codex@${2:-latest}"

# Not under /tmp directly: Codex refuses to put helper binaries in a temporary directory, and a
# short fixed-length root keeps project directory names stable between runs.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/real-agents.XXXXXX")
ROOT=/tmp/ra-fixture
rm -rf "$ROOT"; mkdir -p "$ROOT"
TMUX_SOCK="real-agents-$$"
MOCK_PID=
cleanup() {
  tmux -L "$TMUX_SOCK" kill-server 2>/dev/null || true
  rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$TMUX_SOCK"
  [ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null || true
}
trap cleanup EXIT

echo "== installing $CLAUDE_SPEC $CODEX_SPEC into $WORK/prefix"
npm install --prefix "$WORK/prefix" --no-audit --no-fund "$CLAUDE_SPEC" "$CODEX_SPEC" >"$WORK/npm.log" 2>&1
CLAUDE_BIN="$WORK/prefix/node_modules/.bin/claude"
CODEX_BIN="$WORK/prefix/node_modules/.bin/codex"
# Claude Code's postinstall links the platform package's native binary in place of its stub; run
# it by hand when npm did not (install scripts disabled).
"$CLAUDE_BIN" --version >/dev/null 2>&1 ||
  (cd "$WORK/prefix/node_modules/@anthropic-ai/claude-code" && node install.cjs >>"$WORK/npm.log" 2>&1)

HOME_DIR="$ROOT/home"
P1="$ROOT/project-one"
P2="$ROOT/project-two"
P3="$ROOT/project-three"
mkdir -p "$HOME_DIR" "$P1" "$P2" "$P3"
echo "a notes file" > "$P1/notes.txt"
echo "another notes file" > "$P2/notes.txt"

python3 "$HERE/mock_model.py" --port-file "$WORK/port" --log "$WORK/requests.jsonl" 2>"$WORK/mock.err" &
MOCK_PID=$!
for _ in $(seq 50); do [ -s "$WORK/port" ] && break; sleep 0.1; done
PORT=$(cat "$WORK/port")
KEY=sk-ant-mock-000000000000000000000000

CLAUDE_VERSION=$(HOME="$HOME_DIR" "$CLAUDE_BIN" --version | awk '{print $1}')
CODEX_VERSION=$(HOME="$HOME_DIR" CODEX_HOME="$HOME_DIR/.codex" "$CODEX_BIN" --version | awk '{print $NF}')
echo "== Claude Code $CLAUDE_VERSION, Codex $CODEX_VERSION, mock on 127.0.0.1:$PORT"

# Everything the CLIs see: a clean environment, loopback only, no telemetry or updates.
ENVV=(env -i PATH=/usr/bin:/bin HOME="$HOME_DIR" TERM=xterm-256color LANG=C.UTF-8
  ANTHROPIC_BASE_URL="http://127.0.0.1:$PORT" ANTHROPIC_API_KEY="$KEY"
  DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1 DISABLE_BUG_COMMAND=1
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 CLAUDE_CODE_DISABLE_TERMINAL_TITLE=1
  CODEX_HOME="$HOME_DIR/.codex" MOCK_API_KEY=mock-key NO_UPDATE_NOTIFIER=1)

# Claude Code: onboarding done, the mock key approved, every project trusted.
python3 - "$HOME_DIR" "$KEY" "$P1" "$P2" "$P3" <<'PY'
import json, sys
home, key, *projects = sys.argv[1:]
json.dump({
    "hasCompletedOnboarding": True, "numStartups": 1, "theme": "dark",
    "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
    "bypassPermissionsModeAccepted": True,
    "projects": {p: {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True,
                     "allowedTools": []} for p in projects},
}, open(f"{home}/.claude.json", "w"))
PY
mkdir -p "$HOME_DIR/.claude" "$HOME_DIR/.codex"
cat > "$HOME_DIR/.claude/settings.json" <<JSON
{"permissions": {"allow": ["Bash(echo:*)"]}, "env": {"DISABLE_TELEMETRY": "1"}}
JSON
cat > "$HOME_DIR/.codex/config.toml" <<TOML
model = "mock-model"
model_provider = "mock"
check_for_update_on_startup = false
approval_policy = "never"

[model_providers.mock]
name = "Mock"
base_url = "http://127.0.0.1:$PORT/v1"
wire_api = "responses"
env_key = "MOCK_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[projects."$P1"]
trust_level = "trusted"

[projects."$P2"]
trust_level = "trusted"

[projects."$P3"]
trust_level = "trusted"
TOML

claude() { (cd "$1" && shift && "${ENVV[@]}" timeout 120 "$CLAUDE_BIN" "$@" </dev/null); }
codex() { (cd "$1" && shift && "${ENVV[@]}" timeout 120 "$CODEX_BIN" "$@" </dev/null); }
newest() { ls -t $(find "$1" -name "$2" -type f) | head -1; }
session_of() { basename "$(newest "$HOME_DIR/.claude/projects" '*.jsonl')" .jsonl; }

# tmux: one server of our own; wait_for polls a file for a string.
tm() { tmux -L "$TMUX_SOCK" -f /dev/null "$@"; }
wait_for() { # FILE-GLOB-ROOT PATTERN STRING
  for _ in $(seq 300); do
    if grep -rqsF -- "$3" $(find "$1" -name "$2" -type f 2>/dev/null) 2>/dev/null; then return 0; fi
    sleep 0.2
  done
  echo "timed out waiting for $3"; tm capture-pane -p -t agent || true; return 1
}
# Types a line and presses Enter until the line shows up under ROOT in files named GLOB (a TUI
# that is still busy, or that took the text as a paste, may swallow the first Enter).
type_line() { # TEXT ROOT GLOB [TRACE]
  local trace=${4:-$1}
  tm send-keys -t agent -l -- "$1"; sleep 1
  for _ in 1 2 3 4; do
    tm send-keys -t agent Enter
    for _ in $(seq 25); do
      if grep -rqsF -- "$trace" $(find "$2" -name "$3" -type f 2>/dev/null) 2>/dev/null; then return 0; fi
      sleep 0.2
    done
  done
  echo "the line was not taken: $1"; tm capture-pane -p -t agent || true; return 1
}
# Presses keys with no trace in any file (a dialog), then waits.
keys() { tm send-keys -t agent "$@"; sleep 1.5; }
start_pane() { # DIR COMMAND...
  local dir=$1; shift
  tm new-session -d -s agent -x 200 -y 50 -c "$dir" "${ENVV[@]}" "$@"
  sleep 4
}
stop_pane() { tm kill-session -t agent 2>/dev/null || true; sleep 1; }

SCEN="$WORK/scenarios.md"
: > "$SCEN"
note() { echo "- $*" | tee -a "$SCEN"; }

echo "== Claude Code, print mode: tools and thinking over three turns (-p, --continue, --resume)"
claude "$P1" -p "claude alpha first TOOL THINK" --allowedTools "Bash(echo:*)" >/dev/null
C1=$(session_of)
claude "$P1" -p --continue "claude alpha second THINK" >/dev/null
claude "$P1" -p --resume "$C1" "claude alpha third TOOL" --allowedTools "Bash(echo:*)" >/dev/null
note "claude $C1: \`-p\` with a tool call and thinking, then \`-p --continue\`, then \`-p --resume\` with a tool call (project-one)"

echo "== Claude Code: -n NAME in a second project"
claude "$P2" -n "named by flag" -p "claude beta named prompt" >/dev/null
C2=$(session_of)
note "claude $C2: \`-n 'named by flag' -p\` (project-two: a second project directory)"

echo "== Claude Code, interactive in tmux: /rename, /compact, a turn after"
start_pane "$P3" "$CLAUDE_BIN"
type_line "claude gamma before compact words-gone-after-compact" "$HOME_DIR/.claude/projects" '*.jsonl'
wait_for "$HOME_DIR/.claude/projects" '*.jsonl' "reply to claude gamma before compact"
C3=$(session_of)
# Older builds refuse to compact a single exchange.
type_line "claude gamma second turn" "$HOME_DIR/.claude/projects" "$C3.jsonl"
wait_for "$HOME_DIR/.claude/projects" "$C3.jsonl" "reply to claude gamma second turn"
type_line "/rename renamed interactively" "$HOME_DIR/.claude/projects" "$C3.jsonl" "renamed interactively"
wait_for "$HOME_DIR/.claude/projects" '*.jsonl' "renamed interactively"
type_line "/compact" "$HOME_DIR/.claude/projects" "$C3.jsonl" "compact_boundary"
wait_for "$HOME_DIR/.claude/projects" "$C3.jsonl" "compact_boundary"
sleep 2
type_line "claude gamma after compact" "$HOME_DIR/.claude/projects" '*.jsonl'
wait_for "$HOME_DIR/.claude/projects" "$C3.jsonl" "reply to claude gamma after compact"
sleep 2
stop_pane
note "claude $C3: interactive (tmux): two prompts, \`/rename renamed interactively\`, \`/compact\`, a prompt after (project-three)"

echo "== Claude Code: interactive turns, then -p /compact --resume (preserved segment)"
start_pane "$P1" "$CLAUDE_BIN"
type_line "claude delta one words-removed-by-preserved-compaction" "$HOME_DIR/.claude/projects" '*.jsonl'
wait_for "$HOME_DIR/.claude/projects" '*.jsonl' "reply to claude delta one"
C4=$(session_of)
type_line "claude delta two" "$HOME_DIR/.claude/projects" '*.jsonl'
wait_for "$HOME_DIR/.claude/projects" "$C4.jsonl" "reply to claude delta two"
type_line "claude delta three kept" "$HOME_DIR/.claude/projects" '*.jsonl'
wait_for "$HOME_DIR/.claude/projects" "$C4.jsonl" "reply to claude delta three kept"
sleep 2
stop_pane
claude "$P1" -p /compact --resume "$C4" >/dev/null || true
claude "$P1" -p --resume "$C4" "claude delta after print compact" >/dev/null
note "claude $C4: interactive (tmux) three prompts, then \`-p /compact --resume\`, then \`-p --resume\` (project-one)"

echo "== Codex: exec with a tool call and reasoning, then exec resume --last"
codex "$P1" exec --skip-git-repo-check "codex epsilon first TOOL THINK" >/dev/null 2>&1
X1=$(basename "$(newest "$HOME_DIR/.codex/sessions" 'rollout-*.jsonl')" .jsonl)
codex "$P1" exec --skip-git-repo-check resume --last "codex epsilon second" >/dev/null 2>&1
note "codex ${X1#rollout-}: \`codex exec\` with a tool call and reasoning, then \`codex exec resume --last\` (project-one)"

echo "== Codex TUI in tmux (--no-daemon): /rename, /compact, a turn after"
start_pane "$P2" "$CODEX_BIN" --no-daemon
type_line "codex zeta before compact words-gone-after-codex-compact" "$HOME_DIR/.codex/sessions" 'rollout-*.jsonl'
wait_for "$HOME_DIR/.codex/sessions" 'rollout-*.jsonl' "reply to codex zeta before compact"
X2=$(basename "$(newest "$HOME_DIR/.codex/sessions" 'rollout-*.jsonl')" .jsonl)
tm send-keys -t agent -l -- "/rename"; sleep 1; keys Enter
# The name field opens holding the current name: clear it first.
keys C-u; for _ in $(seq 100); do tm send-keys -t agent BSpace; done; sleep 0.5
tm send-keys -t agent -l -- "zeta renamed"; sleep 1; keys Enter
sleep 1
tm send-keys -t agent -l -- "/compact"; sleep 1; keys Enter
wait_for "$HOME_DIR/.codex/sessions" "$X2.jsonl" '"type":"compacted"'
sleep 2
type_line "codex zeta after compact" "$HOME_DIR/.codex/sessions" 'rollout-*.jsonl'
wait_for "$HOME_DIR/.codex/sessions" "$X2.jsonl" "reply to codex zeta after compact"
sleep 2
tm send-keys -t agent C-c 2>/dev/null || true; sleep 1; tm send-keys -t agent C-c 2>/dev/null || true; sleep 2
stop_pane
note "codex ${X2#rollout-}: TUI \`--no-daemon\` (tmux): a prompt, \`/rename zeta renamed\`, \`/compact\`, a prompt after (project-two)"

echo "== copying into $OUT"
rm -rf "$OUT"
mkdir -p "$OUT/claude" "$OUT/codex"
# Claude: the session files and their subagent folders (not memory/ or todos).
(cd "$HOME_DIR/.claude" && find projects -type f -name '*.jsonl' | while read -r f; do
  mkdir -p "$OUT/claude/$(dirname "$f")"; cp "$f" "$OUT/claude/$f"; done)
# Codex: rollouts, the TUI's session index, and the state database with its WAL (as left).
(cd "$HOME_DIR/.codex" && find sessions -type f -name 'rollout-*.jsonl' | while read -r f; do
  mkdir -p "$OUT/codex/$(dirname "$f")"; cp "$f" "$OUT/codex/$f"; done)
[ -f "$HOME_DIR/.codex/session_index.jsonl" ] && cp "$HOME_DIR/.codex/session_index.jsonl" "$OUT/codex/"
# The state database as Codex left it: the main file and its write-ahead log (Codex has exited,
# so the pair is consistent; the -shm index is rebuilt by any reader and not kept).
for db in "$HOME_DIR"/.codex/state_*.sqlite; do
  cp "$db" "$OUT/codex/"
  [ -f "$db-wal" ] && cp "$db-wal" "$OUT/codex/"
done
{
  echo "# Sessions written by the real CLIs"
  echo
  echo "Generated $(date -u +%Y-%m-%dT%H:%M:%SZ) by \`tests/data/gen/real-agents/gen.sh\`: Claude Code"
  echo "**$CLAUDE_VERSION** (\`$CLAUDE_SPEC\`) and Codex **$CODEX_VERSION** (\`$CODEX_SPEC\`) from the npm registry,"
  echo "run with a temporary HOME ($HOME_DIR) against \`mock_model.py\` on 127.0.0.1 (Messages API"
  echo "SSE for Claude Code via \`ANTHROPIC_BASE_URL\`; Responses API SSE for Codex via a"
  echo "\`model_providers.mock\` entry with \`wire_api = \"responses\"\`), telemetry and updates off."
  echo "Every model answer is the mock's: \"reply to <prompt> (done)\", a Bash/\`exec_command\`"
  echo "\`echo tool-ran\` call for prompts with TOOL, thinking for prompts with THINK, a"
  echo "\"SUMMARY-OF-EARLIER: …\" text for compaction requests. The files are copied unchanged"
  echo "(the state database with its \`-wal\` when Codex left one beside it)."
  echo
  echo "## Scenarios"
  echo
  cat "$SCEN"
  echo
  echo "## Model requests seen by the mock"
  echo
  echo '```'
  python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r=json.loads(l); print(r.get("api","-"), r.get("kind","-"), r.get("model","-"), (r.get("prompt") or "")[:60])' "$WORK/requests.jsonl"
  echo '```'
} > "$OUT/PROVENANCE.md"
echo "== done: $OUT"
