#!/usr/bin/env bash
# The npm packages as a user gets them: assemble the launcher and this platform's package around
# the debug binary, `npm pack` both, install them offline from the tarballs into a temporary
# prefix, and run `dsh-refs --version` and an MCP initialize round-trip through the launcher.
#   .ci/npm.sh BINARY
set -euo pipefail
cd "$(dirname "$0")/.."
binary=$(realpath "$1")
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) key=linux-x64 ;;
  Linux-aarch64) key=linux-arm64 ;;
  Darwin-x86_64) key=darwin-x64 ;;
  Darwin-arm64) key=darwin-arm64 ;;
  *) echo "npm test: no npm platform package for $(uname -s)-$(uname -m)" >&2; exit 1 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
node npm/assemble.mjs "$key" "$binary" "$work/src" >/dev/null
mkdir -p "$work/tgz" "$work/prefix" "$work/cache"
(cd "$work/tgz" && npm pack --silent "$work/src/dsh-refs" "$work/src/$key" >/dev/null)
# --offline with an empty cache: nothing comes from a registry; the optional dependency for this
# platform is satisfied by its tarball, the others are skipped.
npm install --prefix "$work/prefix" --offline --cache "$work/cache" --no-audit --no-fund \
  --loglevel=error "$work"/tgz/*.tgz >/dev/null
launcher="$work/prefix/node_modules/.bin/dsh-refs"
want="dsh-refs $(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
got=$("$launcher" --version)
if [ "$got" != "$want" ]; then
  echo "npm test: dsh-refs --version through the launcher printed '$got', want '$want'" >&2
  exit 1
fi
# The exit status passes through the launcher.
set +e
"$launcher" --no-such-flag >/dev/null 2>&1
status=$?
set -e
if [ "$status" -ne 2 ]; then
  echo "npm test: a bad flag exited $status through the launcher, want clap's 2" >&2
  exit 1
fi
python3 - "$launcher" "$work/home" <<'PY'
import json, os, subprocess, sys
launcher, home = sys.argv[1], sys.argv[2]
os.makedirs(home, exist_ok=True)
request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "npm-test", "version": "0"}}}
proc = subprocess.run([launcher, "--home", home, "mcp"], input=json.dumps(request) + "\n",
                      capture_output=True, text=True, timeout=60)
lines = [l for l in proc.stdout.splitlines() if l.strip()]
if not lines:
    sys.exit(f"npm test: no answer to initialize (exit {proc.returncode}): {proc.stderr[-2000:]}")
answer = json.loads(lines[0])
if answer.get("id") != 1 or "serverInfo" not in answer.get("result", {}):
    sys.exit(f"npm test: unexpected answer to initialize: {lines[0][:2000]}")
print(f"npm test: 3 passed, 0 failed (--version, exit status, mcp initialize from {answer['result']['serverInfo'].get('name')})")
PY
