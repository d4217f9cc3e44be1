#!/usr/bin/env bash
# Captures the GitHub Copilot CLI fixture home (tests/data/fixtures/copilot-cli) from the real
# CLI (@github/copilot 1.0.102), run offline (COPILOT_OFFLINE, a BYOK provider) on loopback
# against mock_chat.py. Needs node, npm and tmux; nothing leaves the machine.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cap=${1:-/tmp/copilot-cap}
mkdir -p "$cap/home" "$cap/cphome" "$cap/work/alpha" "$cap/work/beta"
export HOME="$cap/home" npm_config_cache="$cap/home/.npm"
[ -x "$cap/tools/node_modules/.bin/copilot" ] ||
  npm i --prefix "$cap/tools" @github/copilot@1.0.102 >/dev/null
copilot="$cap/tools/node_modules/.bin/copilot"
python3 "$here/mock_chat.py" 18451 "$cap/mock.log" & mock=$!
trap 'kill $mock; tmux kill-session -t copilot-cap 2>/dev/null || true' EXIT
sleep 1
export COPILOT_OFFLINE=true COPILOT_PROVIDER_BASE_URL=http://127.0.0.1:18451/v1 \
  COPILOT_PROVIDER_API_KEY=dummy COPILOT_MODEL=mock-model COPILOT_HOME="$cap/cphome"
run() { "$copilot" --allow-all-tools --disable-client-telemetry --no-auto-update "$@"; }
newest() { ls -t "$COPILOT_HOME/session-state" | grep -v '^\.' | head -1; }
# CA: a tool call, then resumed for a second, non-ASCII turn.
(cd "$cap/work/alpha" && echo "NOTES-FILE-CONTENT hello" > notes.txt &&
  run -p "CA-T1 please run a TOOL and tell me" && sleep 1 &&
  run --resume="$(newest)" -p "CA-T2 second question é ✓ 日本語")
sleep 1
# CB: one turn in a session the person named with -n.
(cd "$cap/work/beta" && run -n "CB Named Session ✓" -p "CB-T1 plain question 🚀")
sleep 1
# CC: interactive, two turns, /compact, a turn after it.
tmux new-session -d -s copilot-cap -x 160 -y 45 -c "$cap/work/beta" \
  "env HOME=$HOME COPILOT_OFFLINE=true COPILOT_PROVIDER_BASE_URL=$COPILOT_PROVIDER_BASE_URL COPILOT_PROVIDER_API_KEY=dummy COPILOT_MODEL=mock-model COPILOT_HOME=$COPILOT_HOME $copilot --allow-all-tools --disable-client-telemetry --no-auto-update"
sleep 12
send() { tmux send-keys -t copilot-cap -l "$1"; sleep 0.7; tmux send-keys -t copilot-cap Enter; sleep "${2:-5}"; }
# The first screen asks whether to trust the folder: Enter accepts it (and is ignored when
# it does not ask).
tmux send-keys -t copilot-cap Enter; sleep 3
send "CC-T1 first question before compaction"
send "CC-T2 second question before compaction"
send "/compact" 10
send "CC-T3 after compaction"
tmux capture-pane -p -t copilot-cap > "$cap/pane.txt"
send "/exit" 4
tmux kill-session -t copilot-cap 2>/dev/null || true
sleep 1
# CR: interactive, two turns, /rename, /undo of the second turn (the picker's newest turn,
# then "Conversation only": Copilot rewrites events.jsonl without it), a turn after it.
tmux new-session -d -s copilot-cap -x 160 -y 45 -c "$cap/work/alpha" \
  "env HOME=$HOME COPILOT_OFFLINE=true COPILOT_PROVIDER_BASE_URL=$COPILOT_PROVIDER_BASE_URL COPILOT_PROVIDER_API_KEY=dummy COPILOT_MODEL=mock-model COPILOT_HOME=$COPILOT_HOME $copilot --allow-all-tools --disable-client-telemetry --no-auto-update"
sleep 12
tmux send-keys -t copilot-cap Enter; sleep 3
send "CR-T1 first turn to keep"
send "CR-T2 second turn to rewind"
send "/rename CR Renamed in the TUI ✓" 3
send "/undo" 4
tmux send-keys -t copilot-cap Enter; sleep 3
tmux send-keys -t copilot-cap Enter; sleep 4
# The rewind puts the undone prompt back in the input: clear it first.
tmux send-keys -t copilot-cap C-u; sleep 1
send "CR-T3 after the rewind"
tmux capture-pane -p -t copilot-cap > "$cap/pane-rewind.txt"
send "/exit" 4
out="$here/../../fixtures/copilot-cli"
rm -rf "$out/session-state" && mkdir -p "$out"
# The sessions only: events.jsonl and workspace.yaml of each (the shared session-store.db,
# logs and per-session scratch directories are not read).
(cd "$COPILOT_HOME" && find session-state -mindepth 2 -maxdepth 2 -type f \
  \( -name events.jsonl -o -name workspace.yaml \) -exec cp --parents {} "$out" \;)
