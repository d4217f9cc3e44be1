#!/usr/bin/env bash
# Captures the opencode fixture (tests/data/fixtures/opencode) from the real opencode, run on
# loopback against ../qwen/mock_chat.py (OpenAI-compatible). Needs node and npm (opencode-ai
# ships its binary in a registry package); nothing leaves the machine.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cap=${1:-/tmp/oc-cap}
rm -rf "$cap/home" "$cap/config" "$cap/data" "$cap/state" "$cap/cache" "$cap/work"
mkdir -p "$cap/home" "$cap/config/opencode" "$cap/data" "$cap/state" "$cap/cache" \
  "$cap/work/alpha" "$cap/work/beta" "$cap/tools"
[ -x "$cap/tools/node_modules/.bin/opencode" ] || npm i --prefix "$cap/tools" opencode-ai@1.18.33 >/dev/null
O="$cap/tools/node_modules/.bin/opencode"
python3 "$here/../qwen/mock_chat.py" 18434 "$cap/mock.log" & mock=$!
trap 'kill $mock' EXIT
sleep 1
cat > "$cap/config/opencode/opencode.json" <<'J'
{"$schema":"https://opencode.ai/config.json","provider":{"mock":{"npm":"@ai-sdk/openai-compatible","name":"Mock","options":{"baseURL":"http://127.0.0.1:18434/v1","apiKey":"dummy"},"models":{"mock-model":{"name":"Mock model"}}}},"model":"mock/mock-model","small_model":"mock/mock-model","autoupdate":false,"share":"disabled"}
J
export HOME="$cap/home" XDG_CONFIG_HOME="$cap/config" XDG_DATA_HOME="$cap/data" \
  XDG_STATE_HOME="$cap/state" XDG_CACHE_HOME="$cap/cache" OPENCODE_DISABLE_AUTOUPDATE=1
cd "$cap/work/alpha" && git init -q . && echo "NOTES-FILE-CONTENT hello" > notes.txt
"$O" run "OA-T1 please run a TOOL and tell me"
"$O" run --continue "OA-T2 second question é ✓"
cd "$cap/work/beta"
"$O" run --title "ON named by flag ✓" "ON-T1 named session question"
"$O" run "OB-T1 plain question 🚀"
# Fold the log into the database once, as SQLite's auto-checkpoint does in a long-lived home,
# then write one more session, which lives only in the log.
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()" \
  "$cap/data/opencode/opencode.db"
cd "$cap/work/alpha" && "$O" run "OW-T1 only in the log"
out="$here/../../fixtures/opencode"
mkdir -p "$out"
cp "$cap/data/opencode/opencode.db" "$cap/data/opencode/opencode.db-wal" "$cap/data/opencode/opencode.db-shm" "$out/"
