#!/usr/bin/env python3
"""The lock file needs no Rust newer than the crate's `rust-version`.

Reads `cargo metadata --format-version 1 --locked` and compares every locked package's
`rust_version` with this crate's; exits 1 naming each package that needs a newer Rust.
"""
import json
import subprocess
import sys


def parse(version):
    parts = [int(x) for x in version.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


meta = json.loads(
    subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked"],
        check=True, capture_output=True, text=True,
    ).stdout
)
root = next(p for p in meta["packages"] if p["name"] == "dsh-session-references")
if not root.get("rust_version"):
    sys.exit("Cargo.toml declares no rust-version")
msrv = parse(root["rust_version"])
newer = [
    f'{p["name"]} {p["version"]} needs Rust {p["rust_version"]}'
    for p in meta["packages"]
    if p.get("rust_version") and parse(p["rust_version"]) > msrv
]
if newer:
    sys.exit(f'rust-version is {root["rust_version"]}, but the lock file has:\n  ' + "\n  ".join(newer))
highest = max(parse(p["rust_version"]) for p in meta["packages"] if p.get("rust_version"))
print(f'rust-version {root["rust_version"]}: {len(meta["packages"])} locked packages, highest needs {".".join(map(str, highest))}')
