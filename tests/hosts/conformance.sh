#!/usr/bin/env bash
# `dsh-refs mcp` checked by the official MCP tools (issue 36 item 3), all from the npm registry:
#   1. the MCP conformance suite (@modelcontextprotocol/conformance, Node 22) against
#      `dsh-refs mcp --http` over the demo home: every server scenario runs (`--suite all`);
#      the ones that cannot apply to a server without tools are listed, with the reason, in
#      conformance-baseline.yml, and every other one must pass;
#   2. MCP Inspector's CLI (@modelcontextprotocol/inspector) lists and reads a session in both
#      protocol eras (`--protocol-era legacy`: initialize at 2025-11-25; `modern`: 2026-07-28,
#      whose read result carries the caching hints ttlMs/cacheScope), over stdio and over HTTP.
#
# Usage: tests/hosts/conformance.sh DSH_REFS_BINARY [TOOLS_DIR]
#   TOOLS_DIR (default: a temporary folder) keeps Node 22 and the packages between runs.
# Needs npm (any version), python3 and the network to the npm registry; ~1 minute.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
binary=$(realpath "${1:?usage: conformance.sh DSH_REFS_BINARY [TOOLS_DIR]}")
work=$(mktemp -d)
tools=${2:-$work/tools}
server_pid=
cleanup() {
  local status=$?
  # The server is waited for before its home is removed: its indexer may still be writing
  # (a journal file appearing during `rm -rf` failed a CI run).
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  rm -rf "$work" 2>/dev/null || { sleep 1; rm -rf "$work"; }
  exit "$status"
}
trap cleanup EXIT

CONFORMANCE=@modelcontextprotocol/conformance@0.1.16
INSPECTOR=@modelcontextprotocol/inspector@2.12.0

# shellcheck source=tests/hosts/npm_tools.sh
. "$here/npm_tools.sh"
npm_tools_init "$tools"
npm_tools_add "$CONFORMANCE" "$INSPECTOR"
packages="$tools/packages/node_modules"
suite="$packages/@modelcontextprotocol/conformance"
inspector="$packages/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
echo "Node $("$NODE22" --version), $(cd "$tools/packages" && npm ls --depth=0 2>/dev/null |
  grep -o -E '@modelcontextprotocol/(conformance|inspector)@[^ ]+' | paste -sd' ')"

# A home of our own: the demo home's sessions (never the repository's copy).
cp -r "$repo/assets/demo-home" "$work/dsh"
port=$(free_port)
url="http://127.0.0.1:$port/mcp"
token=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')
DSH_REFS_MCP_TOKEN=$token "$binary" mcp --home "$work/dsh" --http "127.0.0.1:$port" \
  2>"$work/server.err" &
server_pid=$!
for _ in $(seq 100); do grep -q 'MCP over HTTP at' "$work/server.err" && break; sleep 0.1; done
grep -q 'MCP over HTTP at' "$work/server.err" || { cat "$work/server.err" >&2; exit 1; }

# 1. The conformance suite. It has no option for request headers, so bearer.cjs (preloaded)
# adds `Authorization: Bearer <token>` to every request it makes to $url's origin.
echo "== conformance suite against $url"
status=0
DSH_REFS_MCP_URL=$url DSH_REFS_MCP_TOKEN=$token DSH_REFS_TOOL_DIR=$suite \
  "$NODE22" --require "$here/bearer.cjs" "$suite/dist/index.js" server --url "$url" \
  --suite all --expected-failures "$here/conformance-baseline.yml" -o "$work/results" \
  >"$work/conformance.log" 2>&1 || status=$?
sed -n '/=== SUMMARY ===/,$p' "$work/conformance.log"
if [ "$status" -ne 0 ]; then
  echo "conformance suite: exit $status (a scenario outside the baseline failed, or one in it passed)" >&2
  tail -40 "$work/conformance.log" >&2
  exit 1
fi
# A run that reached the server at all: the scenarios that apply passed one by one.
for scenario in server-initialize ping completion-complete resources-list prompts-list \
  server-sse-multiple-streams dns-rebinding-protection; do
  grep -q "✓ $scenario:" "$work/conformance.log" ||
    { echo "conformance: $scenario did not pass" >&2; exit 1; }
done

# 2. MCP Inspector's CLI, both eras, stdio and HTTP.
inspect() { # ERA TRANSPORT METHOD [ARGS...]: the result as JSON on stdout
  local era=$1 transport=$2 method=$3
  shift 3
  local target=("$binary" mcp --home "$work/dsh")
  [ "$transport" = http ] && target=(--header "Authorization: Bearer $token" --server-url "$url")
  timeout 60 "$NODE22" "$inspector" --cli --format json --quiet --protocol-era "$era" \
    --method "$method" "$@" "${target[@]}"
}
for era in legacy modern; do
  for transport in stdio http; do
    listing=$(inspect "$era" "$transport" resources/list)
    uri=$(printf '%s' "$listing" | python3 -c '
import json, sys
resources = json.load(sys.stdin)["result"]["resources"]
assert len(resources) >= 5, resources
print(next(r["uri"] for r in resources if "flaky" in r["name"].lower()))')
    read=$(inspect "$era" "$transport" resources/read --uri "$uri")
    printf '%s' "$read" | ERA=$era URI=$uri python3 -c '
import json, os, sys
result = json.load(sys.stdin)
result = result.get("result", result)
(content,) = result["contents"]
assert content["uri"] == os.environ["URI"], content["uri"]
assert "<referenced-sessions>" in content["text"], content["text"][:200]
# 2026-07-28 results carry caching hints: a read is never cached. 2025-11-25 has none.
if os.environ["ERA"] == "modern":
    assert result.get("ttlMs") == 0 and result.get("cacheScope") == "private", result.keys()
else:
    assert "ttlMs" not in result, result.keys()'
    echo "inspector --protocol-era $era over $transport: listed $(printf '%s' "$listing" |
      grep -o '"uri"' | wc -l) sessions, read $uri"
  done
done
echo "conformance.sh: ok"
