#!/usr/bin/env python3
"""A new `dsh-refs mcp` process's first `resources/list` over heavy agent homes (issue 35 item 4).

    benches/mcp-first-list.py AGENTS RUNS NAME=BIN:DSH_HOME [NAME=BIN:DSH_HOME ...]

AGENTS holds `claude/` and `codex/`; each DSH_HOME should hold a previous process's listing
cache and discovery index. Per run (binaries alternating): spawn `BIN --home DSH_HOME --sources
claude,codex --claude-home AGENTS/claude --codex-home AGENTS/codex mcp`, write `initialize`,
`notifications/initialized` and `resources/list` at once, and time spawn -> the list's answer;
count its resources and how many are named by a bare id (`claude:…`, `codex:…`) instead of a
title. HOME and XDG_CACHE_HOME point into a temporary directory, removed at the end.
"""
import json
import statistics
import subprocess
import sys
import time

import ab_runs

MESSAGES = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "mcp-first-list", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "resources/list", "params": {}},
]


def one(env, cwd, agents, binary, dsh):
    started = time.perf_counter()
    server = subprocess.Popen(
        [binary, "--home", dsh, "--sources", "claude,codex", "--claude-home",
         f"{agents}/claude", "--codex-home", f"{agents}/codex", "mcp"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        cwd=cwd)
    server.stdin.write("".join(json.dumps(m) + "\n" for m in MESSAGES).encode())
    server.stdin.flush()
    answer, took = None, None
    for line in server.stdout:
        message = json.loads(line)
        if message.get("id") == 2:
            took = (time.perf_counter() - started) * 1000
            answer = message
            break
    server.stdin.close()
    server.wait(timeout=10)
    if answer is None:
        return None
    resources = answer["result"]["resources"]
    bare = sum(1 for r in resources if r["name"].startswith(("claude:", "codex:")))
    return took, len(resources), bare


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    agents, runs = sys.argv[1], int(sys.argv[2])
    with ab_runs.scratch("mcp-first-list.") as (root, env):
        results = ab_runs.alternate(
            runs, sys.argv[3:],
            lambda _, __, binary, dsh: one(env, f"{root}/work", agents, binary, dsh),
            pause=0.2)
    for name, got in results.items():
        ok = [g for g in got if g]
        if not ok:
            print(f"{name}: no answer in {len(got)} runs")
            continue
        took = [g[0] for g in ok]
        print(f"{name}: spawn->first resources/list median {statistics.median(took):.0f} ms "
              f"(range {min(took):.0f}-{max(took):.0f}); resources {ok[0][1]}; named by a bare "
              f"id: at most {max(g[2] for g in ok)}; failed {len(got) - len(ok)}")


main()
