"""What the A/B timing scripts of this directory share (`mcp-first-list.py`,
`popup-first-frame.py`): a private scratch directory with HOME and XDG_CACHE_HOME in it, and
runs that alternate the binaries compared, the order reversed every other run.
"""
import contextlib
import os
import shutil
import tempfile
import time

# The agents' own variables, unset so that nothing reaches a real home.
UNSET = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "DSH_HOME", "TMUX")


@contextlib.contextmanager
def scratch(prefix):
    """A temporary directory with `home/`, `cache/` and `work/` in it, and an environment whose
    HOME and XDG_CACHE_HOME point there; removed when the block ends."""
    root = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    env = dict(os.environ, HOME=f"{root}/home", XDG_CACHE_HOME=f"{root}/cache")
    for key in UNSET:
        env.pop(key, None)
    for name in ("home", "cache", "work"):
        os.makedirs(f"{root}/{name}")
    try:
        yield root, env
    finally:
        shutil.rmtree(root, ignore_errors=True)


def alternate(runs, subjects, run_one, pause=0.0):
    """`run_one(run, name, binary, dsh_home)` for each of `runs` runs and each subject
    (`NAME=BIN:DSH_HOME`, split), the order reversed every other run; answers each subject's
    results in run order."""
    pairs = [s.split("=", 1) for s in subjects]
    results = {name: [] for name, _ in pairs}
    for run in range(runs):
        for name, spec in pairs if run % 2 == 0 else pairs[::-1]:
            binary, dsh = spec.split(":")
            results[name].append(run_one(run, name, binary, dsh))
            if pause:
                time.sleep(pause)
    return results
