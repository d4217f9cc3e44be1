#!/usr/bin/env bash
# Captures tests/data/fixtures/opencode from the real opencode (npm `opencode-ai`, its native
# binary from the registry's platform package), run on loopback against mock_openai.py through a
# custom `@ai-sdk/openai-compatible` provider (bundled in the binary: nothing is downloaded at run
# time). Headless turns use `opencode run`; the compaction and the rename are typed into the TUI
# in a private tmux server. Needs node/npm (only for the install), python3, git and tmux.
#
# Usage: capture.sh [CAPTURE_DIR] [OPENCODE_BIN]   (default /tmp/oc-fixture, installs 1.18.33)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cap=${1:-/tmp/oc-fixture}
port=18473
rm -rf "$cap"
mkdir -p "$cap/home" "$cap/config/opencode" "$cap/data" "$cap/state" "$cap/cache" \
  "$cap/work/alpha" "$cap/work/beta" "$cap/tools"
O=${2:-}
if [ -z "$O" ]; then
  npm i --prefix "$cap/tools" opencode-ai@1.18.33 >/dev/null
  O="$cap/tools/node_modules/.bin/opencode"
fi
"$O" --version

python3 "$here/mock_openai.py" "$port" "$cap/mock.log" & mock=$!
tmux_sock="oc-fixture-$$"
cleanup() { kill "$mock" 2>/dev/null || true; tmux -L "$tmux_sock" kill-server 2>/dev/null || true; }
trap cleanup EXIT
sleep 1

cat > "$cap/config/opencode/opencode.json" <<J
{"\$schema":"https://opencode.ai/config.json",
 "provider":{"mock":{"npm":"@ai-sdk/openai-compatible","name":"Mock",
   "options":{"baseURL":"http://127.0.0.1:$port/v1","apiKey":"none"},
   "models":{"mock-model":{"name":"Mock model"}}}},
 "model":"mock/mock-model","small_model":"mock/mock-model","autoupdate":false,"share":"disabled"}
J
export HOME="$cap/home" XDG_CONFIG_HOME="$cap/config" XDG_DATA_HOME="$cap/data" \
  XDG_STATE_HOME="$cap/state" XDG_CACHE_HOME="$cap/cache" OPENCODE_DISABLE_AUTOUPDATE=1
run() { timeout 180 "$O" run "$@" >>"$cap/run.log" 2>&1; }

# alpha (a git repository): a tool call with reasoning, then a resumed turn.
cd "$cap/work/alpha" && git init -q . && echo "NOTES-FILE-CONTENT hello" > notes.txt
run "OA-T1 please run a TOOL and tell me"
run --continue "OA-T2 second question é ✓"

# beta (no repository): a title given by flag, emoji, a sub-agent (a child session).
cd "$cap/work/beta"
run --title "ON named by flag ✓" "ON-T1 named session question"
run "OB-T1 plain question 🚀"
run "OK-T1 ask an AGENT please"

# The TUI in beta: two turns (one with a tool), /compact, a turn after it, /rename.
T() { tmux -L "$tmux_sock" "$@"; }
T new-session -d -s oc -x 160 -y 45 \
  "env HOME=$HOME XDG_CONFIG_HOME=$XDG_CONFIG_HOME XDG_DATA_HOME=$XDG_DATA_HOME XDG_STATE_HOME=$XDG_STATE_HOME XDG_CACHE_HOME=$XDG_CACHE_HOME OPENCODE_DISABLE_AUTOUPDATE=1 $O"
wait_for() {
  for _ in $(seq 1 120); do
    T capture-pane -p -t oc | grep -qF -- "$1" && return 0
    sleep 0.5
  done
  echo "the TUI never showed: $1" >&2
  T capture-pane -p -t oc >&2
  exit 1
}
type_line() { T send-keys -t oc -l -- "$1"; sleep 0.7; T send-keys -t oc Enter; }
wait_for "Ask anything"
type_line "OC-T1 first question before compaction, naïve ✓"
wait_for "OC-T1-ANSWER"
type_line "OC-T2 second question with a TOOL please"
wait_for "OC-T2-ANSWER"
type_line "/compact"
wait_for "OC-SUMMARY"
type_line '"OC-T3 typed in quotes" after compaction'
wait_for "OC-T3-ANSWER"
type_line "/rename"
wait_for "Rename Session"
T send-keys -t oc C-u
sleep 0.5
type_line "OC Renamed Session ✓"
wait_for "OC Renamed Session"
sleep 1
type_line "/exit"
for _ in $(seq 1 40); do T has-session -t oc 2>/dev/null || break; sleep 0.5; done

# Fold the log into the database once (what SQLite's auto-checkpoint does in a long-lived home),
# then write one more session, which lives only in opencode.db-wal (the mock gives it no title,
# so it keeps opencode's default).
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()" \
  "$cap/data/opencode/opencode.db"
cd "$cap/work/alpha"
run 'OW-T1 only in the log, NOTITLE, say "hi" ✓'

out="$here/../../fixtures/opencode"
mkdir -p "$out"
for f in opencode.db opencode.db-wal opencode.db-shm; do cp "$cap/data/opencode/$f" "$out/$f"; done
echo "captured into $out"
