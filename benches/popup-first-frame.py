#!/usr/bin/env python3
"""A new process's first `@` popup frame over heavy agent homes (issue 35 item 4), in tmux.

    benches/popup-first-frame.py AGENTS RUNS DELAY_MS NAME=BIN:DSH_HOME [NAME=BIN:DSH_HOME ...]

AGENTS holds `claude/` and `codex/` (examples/make_heavy_home.rs). Each DSH_HOME should already
hold the listing cache and discovery index of a previous process of its BIN (run
`BIN --home DSH_HOME --sources claude,codex --claude-home AGENTS/claude --codex-home AGENTS/codex
sessions`, then `... search x`, before). Per run, the binaries in turn (the order reversed every
other run): a tmux server of its own (140x40, no config) runs `sh -c 'read x <FIFO; date +%s%N
>START; exec BIN --home DSH_HOME --sources claude,codex --claude-home .. --codex-home ..
--compression none'` in an empty cwd; the pane's output is copied to a file (`pipe-pane`, set
before the FIFO lets the program start) that is polled every 0.5 ms (nothing is spawned while
polling, unlike `capture-pane`); `@` is sent as soon as the composer shows ("type @ to
reference" in the output), or DELAY_MS after the start if that is later; the first output after
the `@` holding `session claude` or `session codex` is the first frame with rows, and one
`capture-pane` after it checks that every row is labelled by a title (never `claude:…`/`codex:…`).
Prints each run and, per binary, the median and range of start -> that frame and `@` -> it.

HOME and XDG_CACHE_HOME point into a temporary directory, removed at the end; the agents' own
variables are unset; nothing is written under AGENTS.
"""
import os
import statistics
import subprocess
import sys
import time

import ab_runs


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    agents, runs, delay = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

    with ab_runs.scratch("popup-first-frame.") as (root, env):
        def run_one(r, name, binary, dsh):
            got = one(root, env, agents, f"{name}-{r}", binary, dsh, delay)
            if got:
                print(f"run {r} {name}: composer {got[0]:.0f} @ {got[1]:.0f} frame "
                      f"{got[2]:.0f} ms (after @ {got[2] - got[1]:.0f}) titled={got[3]} "
                      f"rows={got[4]}", flush=True)
            else:
                print(f"run {r} {name}: no frame", flush=True)
            return got

        results = ab_runs.alternate(runs, sys.argv[4:], run_one)
    for name, got in results.items():
        ok = [g for g in got if g]
        if not ok:
            print(f"{name}: no frame in {len(got)} runs")
            continue
        frames = [g[2] for g in ok]
        after = [g[2] - g[1] for g in ok]
        print(f"{name}: start->frame median {statistics.median(frames):.0f} ms (range "
              f"{min(frames):.0f}-{max(frames):.0f}); @->frame median "
              f"{statistics.median(after):.0f} ({min(after):.0f}-{max(after):.0f}); titled "
              f"{sum(g[3] for g in ok)}/{len(ok)}; failed {len(got) - len(ok)}")


def tmux(env, sock, *args, out=False):
    cmd = ["tmux", "-L", sock, "-f", "/dev/null", *args]
    if out:
        return subprocess.run(cmd, capture_output=True, text=True, env=env).stdout
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return ""


def rows_of(screen):
    rows = []
    for line in screen.splitlines():
        for agent in ("claude", "codex"):
            at = line.find(f"session {agent} ")
            if at >= 0:
                rows.append((agent, line[at + len(f"session {agent} "):].strip()))
    return rows


def one(scratch, env, agents, tag, binary, dsh, delay_ms):
    sock = f"pff-{tag}-{os.getpid()}"
    start_file, fifo, raw = (f"{scratch}/{k}-{tag}" for k in ("start", "fifo", "raw"))
    os.mkfifo(fifo)
    open(raw, "wb").close()
    cmd = (f"cd {scratch}/work && sh -c 'read x <{fifo}; date +%s%N >{start_file}; exec "
           f"{binary} --home {dsh} --sources claude,codex --claude-home {agents}/claude "
           f"--codex-home {agents}/codex --compression none'")
    tmux(env, sock, "new-session", "-d", "-s", "p", "-x", "140", "-y", "40", cmd)
    tmux(env, sock, "pipe-pane", "-t", "p", "-o", f"cat >> {raw}")
    with open(fifo, "w") as go:
        go.write("go\n")
    deadline = time.time() + 20
    composer = typed = frame_at = None
    typed_at_byte = 0
    data = b""
    with open(raw, "rb") as out:
        while time.time() < deadline:
            data += out.read()
            now = time.time_ns()
            if composer is None and b"type @ to reference" in data:
                composer = now
            if composer is not None and typed is None and os.path.exists(start_file):
                text = open(start_file).read().strip()
                if text and now - int(text) >= delay_ms * 1_000_000:
                    typed_at_byte = len(data)
                    tmux(env, sock, "send-keys", "-t", "p", "@")
                    typed = time.time_ns()
            if typed is not None:
                tail = data[typed_at_byte:]
                if b"session claude" in tail or b"session codex" in tail:
                    frame_at = now
                    break
            time.sleep(0.0005)
    time.sleep(0.05)
    frame = tmux(env, sock, "capture-pane", "-p", "-t", "p", out=True)
    tmux(env, sock, "kill-server")
    time.sleep(0.3)
    if frame_at is None or composer is None:
        return None
    start = int(open(start_file).read().strip())
    rows = rows_of(frame)
    titled = bool(rows) and all(not label.startswith(f"{agent}:") for agent, label in rows)
    ms = lambda t: (t - start) / 1e6  # noqa: E731
    return ms(composer), ms(typed), ms(frame_at), titled, len(rows)


main()
