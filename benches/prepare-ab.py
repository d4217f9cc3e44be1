#!/usr/bin/env python3
"""`dsh-refs prepare` of one heavy session, binaries compared run by run (issue 35 item 3).

    benches/prepare-ab.py AGENTS SESSION MODE RUNS NAME=BIN [NAME=BIN ...]

AGENTS holds `claude/` and `codex/`; SESSION is a reference id (`claude:<id>`, `codex:<id>`).
Each binary gets a dsh home of its own in a temporary directory (its listing made first by a
`sessions` run), so that no binary reads what another kept. MODE says what each run meets:
`first` (what was kept of conversations removed before each run: the first read of the
session), `kept` (nothing changed since the last run) or `grown` (a `custom-title` record
appended to the session's file before each run: the session being worked in; this writes to
AGENTS, so give it a generated home). `cat` of the session's file is timed in the same runs.
Runs alternate the binaries, the order reversed every other run; the median, the quartiles and
the minimum of each are printed, and (but for `grown`, whose title changes) each binary's
output is checked to be the same bytes.
HOME and XDG_CACHE_HOME point into the temporary directory, removed at the end.
"""
import os
import shutil
import statistics
import subprocess
import sys
import time

import ab_runs


def refs(binary, dsh, agents):
    return [binary, "--home", dsh, "--sources", "claude,codex", "--claude-home",
            f"{agents}/claude", "--codex-home", f"{agents}/codex"]


def session_file(agents, session):
    agent, own = session.split(":", 1)
    for top, _, names in os.walk(f"{agents}/{agent}"):
        for name in names:
            if name.endswith(".jsonl") and own in name:
                return os.path.join(top, name)
    sys.exit(f"no file of {session} under {agents}")


def main():
    if len(sys.argv) < 6 or sys.argv[3] not in ("first", "kept", "grown"):
        sys.exit(__doc__)
    agents, session, mode, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    path = session_file(agents, session)
    own = session.split(":", 1)[1]
    with ab_runs.scratch("prepare-ab.") as (root, env):
        subjects, outputs = [], {}
        for spec in sys.argv[5:]:
            name, binary = spec.split("=", 1)
            dsh = f"{root}/work/{name}"
            os.makedirs(dsh)
            subprocess.run(refs(binary, dsh, agents) + ["sessions"], env=env, check=True,
                           stdout=subprocess.DEVNULL)
            mention = subprocess.run(refs(binary, dsh, agents) + ["mention", "format", session],
                                     env=env, check=True, capture_output=True, text=True)
            with open(f"{root}/work/{name}.input", "w") as f:
                f.write(mention.stdout.strip() + " what was done here?\n")
            subjects.append(f"{name}={binary}:{dsh}")
        subjects.append(f"cat=cat:{root}/work")

        def run_one(_run, name, binary, dsh):
            if mode == "first":
                shutil.rmtree(f"{dsh}/index/agents/conversations", ignore_errors=True)
            elif mode == "grown" and name != "cat":
                with open(path, "a") as f:
                    f.write('{"type":"custom-title","customTitle":"grown %d","sessionId":"%s"}\n'
                            % (time.time_ns(), own))
            if name == "cat":
                command, stdin = ["cat", path], subprocess.DEVNULL
            else:
                command = refs(binary, dsh, agents) + ["prepare", "--as", "prepare-ab"]
                stdin = open(f"{root}/work/{name}.input")
            # `cat`'s 60 MB go nowhere, as the bench's `cat` does (a pipe read here would time
            # Python's reading).
            out = subprocess.DEVNULL if name == "cat" else subprocess.PIPE
            started = time.perf_counter()
            done = subprocess.run(command, stdin=stdin, stdout=out, env=env)
            took = (time.perf_counter() - started) * 1000
            if name != "cat":
                stdin.close()
                outputs.setdefault(name, done.stdout)
            return took

        results = ab_runs.alternate(runs, subjects, run_one)
    print(f"{session} ({os.path.getsize(path)} B), mode {mode}, {runs} runs")
    for name, times in results.items():
        times.sort()
        q = len(times) // 4
        print(f"  {name:12} median {statistics.median(times):7.1f} ms   quartiles "
              f"{times[q]:7.1f} {times[-1 - q]:7.1f}   min {times[0]:7.1f}")
    # A grown session's title changes from run to run (its appended `custom-title`).
    if mode != "grown" and len(set(outputs.values())) > 1:
        print("  OUTPUTS DIFFER between the binaries")


if __name__ == "__main__":
    main()
