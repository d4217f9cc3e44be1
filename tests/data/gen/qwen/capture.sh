#!/usr/bin/env bash
# Captures the Qwen Code fixture home (tests/data/fixtures/qwen-code) from the real CLI, run on
# loopback against mock_chat.py. Needs node and npm; nothing leaves the machine.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cap=${1:-/tmp/qwen-cap}
npm i --prefix "$cap/tools" @qwen-code/qwen-code@0.24.4 >/dev/null
qwen="$cap/tools/node_modules/.bin/qwen"
python3 "$here/mock_chat.py" 18431 "$cap/mock.log" & mock=$!
trap 'kill $mock; tmux kill-session -t qwen-cap 2>/dev/null || true' EXIT
sleep 1
mkdir -p "$cap/home" "$cap/work/alpha" "$cap/work/beta"
export HOME="$cap/home" OPENAI_BASE_URL=http://127.0.0.1:18431/v1 OPENAI_API_KEY=dummy \
  OPENAI_MODEL=mock-model QWEN_CODE_SUPPRESS_YOLO_WARNING=1
# QA: a tool call, then a resumed second turn; QB: one turn, non-ASCII.
(cd "$cap/work/alpha" && git init -q . && echo "NOTES-FILE-CONTENT hello" > notes.txt &&
  "$qwen" -p "QA-T1 please run a TOOL and tell me" --yolo --auth-type openai &&
  "$qwen" -p "QA-T2 second question é ✓" --continue --yolo --auth-type openai)
(cd "$cap/work/beta" && "$qwen" -p "QB-T1 plain question 🚀" --yolo --auth-type openai)
# QC/QN: interactive, two turns, /compress, a turn after it, /rename.
tmux new-session -d -s qwen-cap -x 160 -y 45 -c "$cap/work/beta" \
  "env HOME=$HOME OPENAI_BASE_URL=$OPENAI_BASE_URL OPENAI_API_KEY=dummy OPENAI_MODEL=mock-model $qwen --auth-type openai --yolo"
sleep 12
send() { tmux send-keys -t qwen-cap -l "$1"; sleep 0.5; tmux send-keys -t qwen-cap Enter; sleep "${2:-5}"; }
send "QC-T1 first question before compression"
send "QC-T2 second question before compression"
send "/compress" 10
send "QC-T3 after compression"
send "/rename QN Renamed Session ✓" 4
send "/quit" 4
out="$here/../../fixtures/qwen-code"
rm -rf "$out/projects" && mkdir -p "$out"
(cd "$HOME/.qwen" && find projects -path '*/chats/*' -type f -exec cp --parents {} "$out" \;)
