#!/usr/bin/env bash
# Captures the Gemini CLI fixture home (tests/data/fixtures/gemini-cli) from the real CLI, run on
# loopback against mock_gemini.py. Needs node, npm and tmux; nothing leaves the machine.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cap=${1:-/tmp/gemini-cap}
rm -rf "$cap/home" "$cap/work"
mkdir -p "$cap/home/.gemini" "$cap/work/alpha" "$cap/work/beta" "$cap/tools"
[ -x "$cap/tools/node_modules/.bin/gemini" ] || npm i --prefix "$cap/tools" @google/gemini-cli@0.61.0 >/dev/null
gemini="$cap/tools/node_modules/.bin/gemini"
python3 "$here/mock_gemini.py" 18433 "$cap/mock.log" & mock=$!
trap 'kill $mock; tmux kill-session -t gemini-cap 2>/dev/null || true' EXIT
sleep 1
# Retention off: its sweep deletes a session together with the stub a resume leaves.
echo '{"general":{"sessionRetention":{"enabled":false}},"security":{"auth":{"selectedType":"gemini-api-key"}},"privacy":{"usageStatisticsEnabled":false}}' \
  > "$cap/home/.gemini/settings.json"
export HOME="$cap/home" GEMINI_API_KEY=dummy GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:18433 \
  GEMINI_CLI_TRUST_WORKSPACE=true
# GA: a tool call, then `--resume latest` a minute later (a stub second file with the same id).
(cd "$cap/work/alpha" && git init -q . && echo "NOTES-FILE-CONTENT hello" > notes.txt &&
  "$gemini" -p "GA-T1 please read notes.txt with a TOOL and tell me" --yolo >/dev/null 2>&1)
sleep 61
(cd "$cap/work/alpha" && "$gemini" -p "GA-T2 second question é ✓" --resume latest --yolo >/dev/null 2>&1)
# GB: one turn, non-ASCII.
(cd "$cap/work/beta" && "$gemini" -p "GB-T1 plain question 🚀" --yolo >/dev/null 2>&1)
# GC: interactive, two prompts, /compress, a prompt after it, /chat save; then a second start in
# the project, which appends a generated summary to the newest other session.
send() { tmux send-keys -t gemini-cap -l "$1"; sleep 0.7; tmux send-keys -t gemini-cap Enter; sleep "${2:-7}"; }
start() {
  tmux new-session -d -s gemini-cap -x 160 -y 45 -c "$cap/work/beta" \
    "env HOME=$HOME GEMINI_API_KEY=dummy GOOGLE_GEMINI_BASE_URL=$GOOGLE_GEMINI_BASE_URL GEMINI_CLI_TRUST_WORKSPACE=true $gemini --yolo"
  sleep 15
}
start
send "GC-T1 first question before compression"
send "GC-T2 second question before compression"
send "/compress" 12
send "GC-T3 after compression"
send "/chat save gn-saved-chat" 5
send "/quit" 4
tmux kill-session -t gemini-cap 2>/dev/null || true
start
send "/quit" 4
out="$here/../../fixtures/gemini-cli"
rm -rf "$out/tmp" "$out/projects.json" && mkdir -p "$out"
cp "$HOME/.gemini/projects.json" "$out/"
(cd "$HOME/.gemini" && find tmp \( -name '.project_root' -o -path '*/chats/*.jsonl' \) -type f \
  -exec cp --parents {} "$out" \;)
