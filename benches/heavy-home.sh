#!/usr/bin/env bash
# Heavy homes of other agents (issue 35): generates a Claude Code + Codex home shaped like a
# heavy user's (examples/make_heavy_home.rs) into a temporary directory, then measures against
# `cat` in the same run:
#   (a) cat of every session file;
#   (b) `dsh-refs sessions` over both homes: cold (no dsh state: a new dsh home and cache dir
#       before each run), warm (a new process, the state of the previous one kept), and after
#       appending one line to 5 sessions before each run; and a new `dsh-refs mcp`'s first
#       `resources/list` (with titles, never bare ids);
#   (c) `dsh-refs prepare` of a reference to the largest Claude Code session (state kept; the
#       first read, with the listing kept but nothing kept of that session; the first read
#       after a discovery pass (`search`) over a new index; cold; and with a record appended
#       before each run) vs cat of that one file, and of the largest Codex rollout (state
#       kept; first read) vs cat of that one;
# with the peak RSS of each (GNU time), and checks that nothing under the agent homes changed
# (a `find -printf '%p %s %T@'` listing before and after, the appends excepted).
#
#   benches/heavy-home.sh [--scale F] [--claude N] [--codex N] [--seed S] [--runs N] [--keep]
#
# Defaults: --scale 0.25 (~0.6 GB; 1.0 is ~2.2 GB and wants ~6 GB free), 2000 + 2000
# sessions, seed 1, 5 runs per measurement. The home goes under $HEAVY_TMP (default /tmp),
# never under /root or $HOME, and is deleted at the end unless --keep. Needs hyperfine
# (`apt-get install hyperfine`), GNU time and python3. Honours $CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

scale=0.25 claude=2000 codex=2000 seed=1 runs=5 keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --scale) scale=$2; shift 2 ;;
    --claude) claude=$2; shift 2 ;;
    --codex) codex=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "usage: $0 [--scale F] [--claude N] [--codex N] [--seed S] [--runs N] [--keep]" >&2; exit 2 ;;
  esac
done
for tool in hyperfine /usr/bin/time python3; do
  command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install hyperfine time python3)" >&2; exit 2; }
done

target=${CARGO_TARGET_DIR:-target}
cargo build --release --bin dsh-refs --example make_heavy_home
bin=$(realpath "$target/release/dsh-refs")
gen=$(realpath "$target/release/examples/make_heavy_home")

tmp_root=${HEAVY_TMP:-/tmp}
work=$(mktemp -d "$tmp_root/heavy-home.XXXXXX")
case "$work/" in
  /root/*|"$HOME"/*) echo "refusing to generate under $work (inside /root or \$HOME)" >&2; rmdir "$work"; exit 2 ;;
esac
cleanup() { if [ "$keep" = 1 ]; then echo "kept: $work"; else rm -rf "$work"; fi; }
trap cleanup EXIT

agents=$work/agents       # the generated agent homes: claude/ and codex/
dsh=$work/dsh             # dsh-refs' own home (empty: no dsh sessions)
results=$work/results
mkdir -p "$dsh" "$results" "$work/home" "$work/cache"
# Nothing may reach a real home: the agents' own variables off, HOME and the cache dir private.
unset CLAUDE_CONFIG_DIR CODEX_HOME QWEN_HOME GEMINI_CLI_HOME DSH_HOME
export HOME=$work/home XDG_CACHE_HOME=$work/cache XDG_DATA_HOME=$work/home/.local/share

echo "== generate (--scale $scale, $claude Claude Code + $codex Codex sessions, seed $seed) into $agents"
"$gen" --out "$agents" --claude "$claude" --codex "$codex" --seed "$seed" --scale "$scale" | tee "$results/gen.txt"
# The generated gigabytes on disk before anything is timed, so that their write-back does not
# run beside the timings.
sync
largest_id=$(sed -n 's/^largest_claude=\([^ ]*\) .*/\1/p' "$results/gen.txt")
largest_path=$(sed -n 's/^largest_claude=[^ ]* [0-9]* //p' "$results/gen.txt")
# The smallest Claude session: its prepare is the fixed cost (start, listing, resolving).
smallest_path=$(find "$agents/claude" -name '*.jsonl' -printf '%s %p\n' | sort -n | sed -n '1s/^[0-9]* //p')
smallest_id=$(basename "$smallest_path" .jsonl)

find "$agents" -type f -name '*.jsonl' -print0 | sort -z >"$work/files"
nfiles=$(tr -cd '\0' <"$work/files" | wc -c)
bytes=$(du -sb --apparent-size "$agents" | cut -f1)
echo "files: $nfiles, $((bytes / 1000000)) MB; largest Claude session: $largest_id ($(stat -c %s "$largest_path") B)"
snapshot() { find "$agents" -printf '%p %s %T@\n' | sort; }

refs="$bin --home $dsh --sources claude,codex --claude-home $agents/claude --codex-home $agents/codex"
fresh="rm -rf $dsh $work/cache && mkdir -p $dsh $work/cache"

# A reference to the largest Claude session, then a dsh session id to prepare "as".
mention=$($refs mention format "claude:$largest_id")
printf '%s what was done here?\n' "$mention" >"$work/prepare-input"
cat >"$work/prepare.sh" <<EOF
#!/bin/sh
exec $refs prepare --as heavy-bench-agent <"$work/prepare-input"
EOF
printf '%s what was done here?\n' "$($refs mention format "claude:$smallest_id")" >"$work/prepare-small-input"
cat >"$work/prepare-small.sh" <<EOF
#!/bin/sh
exec $refs prepare --as heavy-bench-agent <"$work/prepare-small-input"
EOF
cat >"$work/cat-largest.sh" <<EOF
#!/bin/sh
exec cat "$largest_path"
EOF
cat >"$work/cat-all.sh" <<EOF
#!/bin/sh
exec xargs -0 -a "$work/files" cat
EOF
chmod +x "$work"/*.sh

# Five sessions that grow between runs: three Claude (a title appended), two Codex (a rename).
mapfile -t grow_claude < <(find "$agents/claude" -name '*.jsonl' | sort | sed -n '10p;200p;400p')
mapfile -t grow_codex < <(find "$agents/codex/sessions" -name '*.jsonl' | sort | sed -n '10p;300p')
{
  echo '#!/bin/sh'
  echo 'n=$(date +%s%N)'
  for f in "${grow_claude[@]}"; do
    id=$(basename "$f" .jsonl)
    printf '%s\n' "printf '{\"type\":\"custom-title\",\"customTitle\":\"grown %s\",\"sessionId\":\"$id\"}\\n' \"\$n\" >>'$f'"
  done
  for f in "${grow_codex[@]}"; do
    id=$(basename "$f" .jsonl | sed 's/^rollout-.\{19\}-//')
    printf '%s\n' "printf '{\"timestamp\":\"2026-11-30T00:00:00.000Z\",\"type\":\"event_msg\",\"payload\":{\"type\":\"thread_name_updated\",\"thread_id\":\"$id\",\"thread_name\":\"grown %s\"}}\\n' \"\$n\" >>'$f'"
  done
} >"$work/append.sh"
chmod +x "$work/append.sh"

hf() { # name, then hyperfine arguments
  local name=$1; shift
  echo "  $name"
  hyperfine -N --style basic --export-json "$results/$name.json" "$@" 2>&1 | grep -E '^ *(Time|Range)' || true
}
rss() { # name, then the command: peak RSS in KiB of one run
  local name=$1; shift
  /usr/bin/time -f '%M' -o "$results/$name.rss" "$@" >/dev/null 2>"$results/$name.err" || {
    echo "   $name failed:"; cat "$results/$name.err"; }
}

echo "== (a) cat of all $nfiles files"
"$work/cat-all.sh" >/dev/null   # into the page cache
hf cat-all --warmup 2 --runs "$runs" "$work/cat-all.sh"
rss cat-all "$work/cat-all.sh"

before=$(snapshot)
echo "== (b) dsh-refs sessions, cold (a new dsh home and cache dir before each run)"
hf sessions-cold --runs "$runs" --prepare "sh -c '$fresh'" "$refs sessions"
sh -c "$fresh"; rss sessions-cold $refs sessions
echo "== (b) dsh-refs sessions, warm (a new process; the previous one's state kept)"
hf sessions-warm --warmup 1 --runs "$runs" "$refs sessions"
rss sessions-warm $refs sessions
$refs sessions --json >"$results/sessions.json"
after=$(snapshot)
if [ "$before" = "$after" ]; then echo "   agent homes unchanged by listing: ok"; else
  echo "   AGENT HOMES CHANGED by listing:"; diff <(echo "$before") <(echo "$after") | sed -n 1,10p || true; fi

echo "== (b) dsh-refs mcp: a new server's first resources/list (initialize, list, end of input)"
cat >"$work/mcp-in.txt" <<'END'
{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"heavy-bench","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"resources/list"}
END
# The server answers what it was sent and exits at the end of its input: the time to its exit
# bounds the time to its first list.
hf mcp-list --warmup 1 --runs "$runs" "sh -c '$refs mcp <$work/mcp-in.txt >$work/mcp-out.txt 2>/dev/null'"
rss mcp-list sh -c "$refs mcp <$work/mcp-in.txt >$work/mcp-out.txt"
python3 - "$work/mcp-out.txt" <<'END'
import json, re, sys
answers = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
listed = next(a for a in answers if a.get("id") == 2)["result"]["resources"]
bare = [r["name"] for r in listed if re.fullmatch(r"(\w+:)?[0-9a-f-]{36}", r["name"])]
print(f"   first resources/list: {len(listed)} sessions, {len(bare)} named by a bare id")
END

echo "== (b) dsh-refs sessions after appending a line to 5 sessions before each run"
hf sessions-append --warmup 1 --runs "$runs" --prepare "$work/append.sh" "$refs sessions"
"$work/append.sh"; rss sessions-append $refs sessions
grown=$($refs sessions | grep -c 'grown ' || true)
echo "   sessions listed with an appended title: $grown of 5"

before=$(snapshot)
echo "== (c) prepare of the largest Claude session vs cat of that file"
"$work/cat-largest.sh" >/dev/null
hf cat-largest --warmup 2 --runs "$runs" "$work/cat-largest.sh"
rss cat-largest "$work/cat-largest.sh"
"$work/prepare.sh" >"$results/prepare.out"
hf prepare-warm --warmup 1 --runs "$runs" "$work/prepare.sh"
rss prepare-warm "$work/prepare.sh"
# The first read of the session in a process whose listing is kept but that kept nothing of
# this session yet (what the first reference to a heavy session costs).
forget_kept="rm -rf $dsh/index/agents/conversations"
# `prepare` with `before` run before each run (name, what, before): timed, its peak RSS, and its
# output compared with the one from what was kept.
prepare_after() {
  local name=$1 what=$2 before=$3
  hf "$name" --runs "$runs" --prepare "sh -c '$before'" "$work/prepare.sh"
  sh -c "$before"; rss "$name" "$work/prepare.sh"
  sh -c "$before"; "$work/prepare.sh" >"$results/$name.out"
  if cmp -s "$results/prepare.out" "$results/$name.out"; then
    echo "   prepare $what = prepare from what was kept: ok"
  else echo "   PREPARE $what DIFFERS from prepare from what was kept"; fi
}
prepare_after prepare-first "from the file" "$forget_kept"
# The first reference after a discovery pass (what the TUI's and the MCP server's indexer do
# in the background): the pass reads every session anyway and keeps the heavy ones it may.
prepare_after prepare-indexed "after a discovery pass" \
  "rm -rf $dsh/index/discovery-* $dsh/index/agents/conversations && $refs search diff >/dev/null"
# The largest Codex rollout the same way: its state kept, and its first read.
largest_codex=$(find "$agents/codex/sessions" -name '*.jsonl' -printf '%s %p\n' | sort -n | sed -n '$s/^[0-9]* //p')
codex_own=$(basename "$largest_codex" .jsonl | sed 's/^rollout-.\{19\}-//')
printf '%s what was done here?\n' "$($refs mention format "codex:$codex_own")" >"$work/prepare-codex-input"
printf '#!/bin/sh\nexec %s prepare --as heavy-bench-agent <"%s"\n' "$refs" "$work/prepare-codex-input" >"$work/prepare-codex.sh"
printf '#!/bin/sh\nexec cat "%s"\n' "$largest_codex" >"$work/cat-codex.sh"
chmod +x "$work/prepare-codex.sh" "$work/cat-codex.sh"
echo "  (the largest Codex rollout: $(stat -c %s "$largest_codex") B)"
"$work/cat-codex.sh" >/dev/null
hf cat-codex --warmup 2 --runs "$runs" "$work/cat-codex.sh"
rss cat-codex "$work/cat-codex.sh"
"$work/prepare-codex.sh" >"$results/prepare-codex.out"
hf prepare-codex-warm --warmup 1 --runs "$runs" "$work/prepare-codex.sh"
rss prepare-codex-warm "$work/prepare-codex.sh"
hf prepare-codex-first --runs "$runs" --prepare "sh -c '$forget_kept'" "$work/prepare-codex.sh"
sh -c "$forget_kept"; rss prepare-codex-first "$work/prepare-codex.sh"
sh -c "$forget_kept"; "$work/prepare-codex.sh" >"$results/prepare-codex-first.out"
if cmp -s "$results/prepare-codex.out" "$results/prepare-codex-first.out"; then
  echo "   Codex prepare from the file = prepare from what was kept: ok"
else echo "   CODEX PREPARE FROM THE FILE DIFFERS from prepare from what was kept"; fi
hf prepare-cold --runs "$runs" --prepare "sh -c '$fresh'" "$work/prepare.sh"
sh -c "$fresh"; rss prepare-cold "$work/prepare.sh"
echo "  (the fixed cost: prepare of the smallest Claude session, $(stat -c %s "$smallest_path") B, state kept)"
"$work/prepare-small.sh" >/dev/null
hf prepare-smallest --warmup 1 --runs "$runs" "$work/prepare-small.sh"
rss prepare-smallest "$work/prepare-small.sh"
after=$(snapshot)
if [ "$before" = "$after" ]; then echo "   agent homes unchanged by prepare: ok"; else
  echo "   AGENT HOMES CHANGED by prepare:"; diff <(echo "$before") <(echo "$after") | sed -n 1,10p || true; fi
echo "   prepare output: $(wc -c <"$results/prepare.out") B, $(grep -c . "$results/prepare.out") lines"
# The session being worked in: a record appended before each run (after the check above, as
# these appends change the home); the kept scan reads only what was appended.
largest_own=$(basename "$largest_path" .jsonl)
cat >"$work/append-largest.sh" <<END
#!/bin/sh
printf '{"type":"custom-title","customTitle":"grown %s","sessionId":"$largest_own"}\\n' "\$(date +%s%N)" >>'$largest_path'
END
chmod +x "$work/append-largest.sh"
hf prepare-grown --warmup 1 --runs "$runs" --prepare "$work/append-largest.sh" "$work/prepare.sh"
"$work/append-largest.sh"; rss prepare-grown "$work/prepare.sh"

echo "== summary (mean of $runs runs; cpu = user + sys; ratio = mean / mean of its cat)"
python3 - "$results" "$nfiles" "$bytes" <<'EOF'
import json, os, sys
res, nfiles, nbytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def load(name):
    r = json.load(open(os.path.join(res, name + ".json")))["results"][0]
    rss_file = os.path.join(res, name + ".rss")
    rss = open(rss_file).read().split()[-1] if os.path.exists(rss_file) else "?"
    return r["mean"], r["stddev"] or 0.0, r["user"] + r["system"], rss
rows = [("cat all files", "cat-all", "cat-all"),
        ("sessions cold", "sessions-cold", "cat-all"),
        ("sessions warm", "sessions-warm", "cat-all"),
        ("sessions after 5 appends", "sessions-append", "cat-all"),
        ("mcp first resources/list", "mcp-list", "cat-all"),
        ("cat largest Claude file", "cat-largest", "cat-largest"),
        ("prepare largest (state kept)", "prepare-warm", "cat-largest"),
        ("prepare largest (first read)", "prepare-first", "cat-largest"),
        ("prepare largest (after a pass)", "prepare-indexed", "cat-largest"),
        ("prepare largest (appended to)", "prepare-grown", "cat-largest"),
        ("prepare largest (cold)", "prepare-cold", "cat-largest"),
        ("prepare smallest (state kept)", "prepare-smallest", "cat-largest"),
        ("cat largest Codex file", "cat-codex", "cat-codex"),
        ("prepare Codex (state kept)", "prepare-codex-warm", "cat-codex"),
        ("prepare Codex (first read)", "prepare-codex-first", "cat-codex")]
print(f"home: {nfiles} files, {nbytes/1e6:.0f} MB")
print(f"| {'operation':30} | {'mean s':>8} | {'± s':>6} | {'cpu s':>7} | {'× cat':>6} | {'cpu × cat':>9} | {'peak RSS MiB':>12} |")
print(f"|{'-'*32}|{'-'*10}|{'-'*8}|{'-'*9}|{'-'*8}|{'-'*11}|{'-'*14}|")
for label, name, base in rows:
    m, sd, cpu, rss = load(name)
    bm, _, bcpu, _ = load(base)
    rss_mib = f"{int(rss)/1024:.0f}" if rss.isdigit() else rss
    print(f"| {label:30} | {m:8.3f} | {sd:6.3f} | {cpu:7.3f} | {m/bm:6.2f} | {cpu/bcpu:9.2f} | {rss_mib:>12} |")
big, _, big_cpu, _ = load("prepare-warm")
small, _, small_cpu, _ = load("prepare-smallest")
cat_big, _, cat_big_cpu, _ = load("cat-largest")
print(f"prepare largest minus the fixed cost (prepare smallest): {big - small:.3f} s = "
      f"{(big - small) / cat_big:.2f}x cat of that file (cpu {(big_cpu - small_cpu) / cat_big_cpu:.2f}x)")
EOF
