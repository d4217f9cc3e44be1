#!/usr/bin/env bash
# Real Claude Code in tmux picks a session with `@dsh-refs:` (issue 36 item 3): Claude Code from
# the npm registry, its model a scripted mock of the Anthropic Messages API on 127.0.0.1
# (tests/data/gen/real-agents/mock_model.py, every request body recorded), `dsh-refs mcp`
# configured by `dsh-refs mcp setup claude --scope project` in a scratch project over a copy of
# the demo home. It types `@dsh-refs:`, checks the menu lists the demo sessions by title, types
# `flaky` (that session comes first), picks it (Down, Enter), sends a question, and checks that
# the request the mock received carries the resource's read text byte for byte.
#
# Usage: tests/hosts/claude_mention.sh DSH_REFS_BINARY [CLAUDE_VERSION [TOOLS_DIR]]
#   CLAUDE_VERSION defaults to `latest`. Needs tmux, npm, python3; ~1 minute.
# Not in CI: it drives a full-screen program by keystrokes and timing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
binary=$(realpath "${1:?usage: claude_mention.sh DSH_REFS_BINARY [CLAUDE_VERSION [TOOLS_DIR]]}")
version=${2:-latest}
work=$(mktemp -d)
tools=${3:-$work/tools}
socket="dsh-refs-claude-$$"
mock_pid=
cleanup() {
  tmux -L "$socket" kill-server 2>/dev/null || true
  [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null
  sleep 1 # Claude Code's last writes under its home
  rm -rf "$work" || { sleep 2; rm -rf "$work"; }
}
trap cleanup EXIT

# shellcheck source=tests/hosts/npm_tools.sh
. "$here/npm_tools.sh"
npm_tools_init "$tools"
npm_tools_add "@anthropic-ai/claude-code@$version"
claude="$tools/packages/node_modules/.bin/claude"
"$claude" --version >/dev/null 2>&1 ||
  (cd "$tools/packages/node_modules/@anthropic-ai/claude-code" && "$NODE22" install.cjs >/dev/null)
echo "Claude Code $("$claude" --version | awk '{print $1}')"

cp -r "$repo/assets/demo-home" "$work/dsh"
home="$work/home"
project="$work/project"
mkdir -p "$home" "$project"
python3 "$repo/tests/data/gen/real-agents/mock_model.py" --port-file "$work/port" \
  --log "$work/requests.jsonl" --bodies "$work/bodies.jsonl" 2>"$work/mock.err" &
mock_pid=$!
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")
key=sk-ant-mock-000000000000000000000000
# Onboarding done, the mock key approved, the project trusted and its .mcp.json approved: what
# a person answers once in the dialogs.
python3 - "$home" "$key" "$project" <<'PY'
import json, sys
home, key, project = sys.argv[1:]
json.dump({"hasCompletedOnboarding": True, "numStartups": 1, "theme": "dark",
           "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
           "projects": {project: {"hasTrustDialogAccepted": True,
                                  "hasCompletedProjectOnboarding": True,
                                  "enabledMcpjsonServers": ["dsh-refs"]}}},
          open(f"{home}/.claude.json", "w"))
PY
(cd "$project" && HOME=$home "$binary" mcp setup claude --scope project)

cat >"$work/claude.sh" <<EOF
cd "$project" && exec env -i PATH="$(dirname "$NODE22"):/usr/bin:/bin" HOME="$home" \
  TERM=xterm-256color LANG=C.UTF-8 DSH_HOME="$work/dsh" \
  ANTHROPIC_BASE_URL="http://127.0.0.1:$port" ANTHROPIC_API_KEY="$key" \
  DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1 \
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 CLAUDE_CODE_DISABLE_TERMINAL_TITLE=1 "$claude"
EOF
tmux -L "$socket" new-session -d -s cc -x 200 -y 50 "bash $work/claude.sh"
screen() { tmux -L "$socket" capture-pane -p -t cc; }
wait_for() { # PATTERN [SECONDS]: until the screen shows PATTERN
  for _ in $(seq $((${2:-20} * 4))); do screen | grep -q -E -- "$1" && return 0; sleep 0.25; done
  echo "claude_mention: waited for /$1/; the screen:" >&2
  screen >&2
  exit 1
}
keys() { tmux -L "$socket" send-keys -t cc "$@"; }

wait_for 'auto mode|shift\+tab|❯' 30
# The menu lists resources once the server has connected, which Claude Code does in the
# background after the prompt shows: type, and type again if no menu came.
for attempt in 1 2 3 4 5 6; do
  keys C-u
  keys -l '@dsh-refs:'
  sleep 3
  screen | grep -q 'dsh-refs:dsh-session:.*Fix the flaky tokenizer test' && break
  [ "$attempt" = 6 ] && wait_for 'dsh-refs:dsh-session:.*Fix the flaky tokenizer test' 1
done
echo "menu after @dsh-refs: :"
screen | grep -E 'dsh-refs:dsh-session:' | sed 's/^ */  /'
keys -l 'flaky'
sleep 1
first=$(screen | grep -E 'dsh-refs:dsh-session:' | head -1)
case $first in
  *"Fix the flaky tokenizer test"*) ;;
  *) echo "after 'flaky' the first entry is: $first" >&2; exit 1 ;;
esac
# Claude Code 2.1.332 highlights no entry until an arrow key; Enter then inserts its URI.
keys Down
sleep 0.5
keys Enter
wait_for '@dsh-refs:dsh-session:[A-Za-z0-9_-]{20,}'
uri=$(screen | grep -o -E '@dsh-refs:dsh-session:[A-Za-z0-9_-]+' | tail -1 | sed 's/^@dsh-refs://')
keys -l 'what did we find?'
sleep 0.5
keys Enter
wait_for 'reply to @dsh-refs:dsh-session:' 60
screen | grep -E 'Read MCP resource|reply to' | sed 's/^ */  /'

# The read text, from the same server as a host gets it (initialize, resources/read). A server
# just started labels a session by its id until its indexing pass has caught up (it then sends
# list_changed), so the read is repeated until it gives the label Claude Code's server gave.
python3 - "$binary" "$uri" "$work" <<'PY'
import json, os, subprocess, sys, time
binary, uri, work = sys.argv[1:]
bodies = [json.loads(line)["body"] for line in open(f"{work}/bodies.jsonl")]
asked = [b for b in bodies if any("what did we find?" in json.dumps(m) for m in b.get("messages", []))]
assert asked, "the mock received no request with the question"
def texts(message):
    content = message["content"]
    if isinstance(content, str):
        return [content]
    return [block.get("text", "") for block in content if isinstance(block, dict)]
sent = [(m["role"], t) for m in asked[-1]["messages"] for t in texts(m)]
env = dict(os.environ, HOME=f"{work}/home", DSH_HOME=f"{work}/dsh")
server = subprocess.Popen([binary, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          env=env, text=True, cwd=f"{work}/project")
def call(id_, method, params):
    server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}) + "\n")
    server.stdin.flush()
    while True:
        reply = json.loads(server.stdout.readline())
        if reply.get("id") == id_:
            return reply["result"]
call(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "claude_mention.sh", "version": "1"}})
server.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
carried = []
for attempt in range(40):
    text = call(2 + attempt, "resources/read", {"uri": uri})["contents"][0]["text"]
    carried = [(role, t) for role, t in sent if text in t]
    if carried:
        break
    time.sleep(0.25)
server.stdin.close()
server.wait(timeout=10)
assert carried, "the request with the question does not carry the resource's read text"
role, whole = carried[0]
print(f"the model's request carries the read text ({len(text)} bytes) byte for byte, "
      f"in a {role}-role message, after {whole[:whole.index(text)]!r}")
PY
echo "claude_mention.sh: ok"
