#!/usr/bin/env bash
# The real hosts (pinned, from the npm registry) load what we ship and what we write (issue 37
# item 4):
#   - Claude Code validates .claude-plugin/marketplace.json, .claude-plugin/plugin.json and the
#     plugin's .mcp.json (`claude plugin validate`; a copy with a broken .mcp.json must fail),
#     and, started with `--plugin-dir` on this repository, connects to the plugin's server;
#   - Gemini CLI validates gemini-extension.json (`gemini extensions validate`) and, with the
#     repository linked as an extension, connects to the extension's server;
#   - after `dsh-refs mcp setup claude|gemini|qwen` into a fresh private home, each host's own
#     `mcp list` shows our server connected.
# (server.json has a published schema: .ci/manifests.py validates it against that.)
#
# Usage: tests/hosts/hosts.sh DSH_REFS_BINARY [TOOLS_DIR]   (~1-2 minutes; needs npm, python3)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
binary=$(realpath "${1:?usage: hosts.sh DSH_REFS_BINARY [TOOLS_DIR]}")
work=$(mktemp -d)
tools=${2:-$work/tools}
trap 'rm -rf "$work" 2>/dev/null || { sleep 1; rm -rf "$work"; }' EXIT

CLAUDE=@anthropic-ai/claude-code@2.1.332
GEMINI=@google/gemini-cli@0.61.0
QWEN=@qwen-code/qwen-code@0.24.4

# shellcheck source=tests/hosts/npm_tools.sh
. "$here/npm_tools.sh"
npm_tools_init "$tools"
npm_tools_add "$CLAUDE" "$GEMINI" "$QWEN"
bin="$tools/packages/node_modules/.bin"
# Claude Code's postinstall puts the platform's native binary in place of its launcher stub;
# npm 11 runs no install scripts unless allowed, so run it here.
"$bin/claude" --version >/dev/null 2>&1 ||
  (cd "$tools/packages/node_modules/@anthropic-ai/claude-code" && "$NODE22" install.cjs >/dev/null)
# The manifests start `dsh-refs` from PATH, as an installed one would be.
mkdir -p "$work/bin"
ln -s "$binary" "$work/bin/dsh-refs"
# What every host run sees: a private HOME, no updates, no telemetry (loopback only anyway).
host_env=(env -i PATH="$work/bin:$(dirname "$NODE22"):/usr/bin:/bin" TERM=dumb LANG=C.UTF-8
  DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 NO_UPDATE_NOTIFIER=1 NO_COLOR=1)
run() { # HOME DIR COMMAND...: runs COMMAND in DIR with HOME, output to stdout
  local home=$1 dir=$2
  shift 2
  mkdir -p "$home" "$dir"
  (cd "$dir" && timeout 120 "${host_env[@]}" HOME="$home" "$@" </dev/null 2>&1)
}
expect() { # LABEL PATTERN OUTPUT
  if printf '%s\n' "$2" | grep -q -E -- "$1"; then return 0; fi
  printf 'expected /%s/ in:\n%s\n' "$1" "$2" >&2
  exit 1
}
echo "Claude Code $("$bin/claude" --version | awk '{print $1}'), Gemini CLI $("$bin/gemini" --version)," \
  "Qwen Code $("$bin/qwen" --version), Node $("$NODE22" --version)"
trust_gemini() { # HOME DIR: Gemini CLI starts no MCP server in an untrusted folder
  mkdir -p "$1/.gemini"
  printf '{"%s": "TRUST_FOLDER"}\n' "$2" >"$1/.gemini/trustedFolders.json"
}

echo "== Claude Code: the plugin's manifests"
plugin="$work/plugin"
mkdir -p "$plugin/.claude-plugin"
cp "$repo/.claude-plugin/plugin.json" "$plugin/.claude-plugin/"
cp "$repo/.mcp.json" "$plugin/"
out=$(run "$work/claude-home" "$work" "$bin/claude" plugin validate "$repo/.claude-plugin/marketplace.json") ||
  { printf '%s\n' "$out" >&2; exit 1; }
expect 'Validation passed' "$out"
out=$(run "$work/claude-home" "$work" "$bin/claude" plugin validate "$plugin") ||
  { printf '%s\n' "$out" >&2; exit 1; }
expect 'Validation passed' "$out"
expect 'mcpServers: dsh-refs stdio dsh-refs \["mcp"\]' "$out"
# The same check refuses a plugin whose .mcp.json is wrong, so the pass above means something.
printf '{"mcpServers": {"dsh-refs": {"args": "mcp"}}}\n' >"$plugin/.mcp.json"
if run "$work/claude-home" "$work" "$bin/claude" plugin validate "$plugin" >/dev/null; then
  echo "claude plugin validate accepted a broken .mcp.json" >&2
  exit 1
fi
out=$(run "$work/claude-home" "$work/project" "$bin/claude" --plugin-dir "$repo" mcp list)
expect 'plugin:dsh-refs:dsh-refs: dsh-refs mcp - .*Connected' "$out"
echo "claude plugin validate: marketplace.json, plugin.json + .mcp.json ok; --plugin-dir: connected"

echo "== Gemini CLI: the extension"
out=$(run "$work/gemini-home" "$work" "$bin/gemini" extensions validate "$repo") ||
  { printf '%s\n' "$out" >&2; exit 1; }
expect 'successfully validated' "$out"
trust_gemini "$work/gemini-home" "$work/project"
run "$work/gemini-home" "$work/project" "$bin/gemini" extensions link --consent "$repo" >/dev/null
out=$(run "$work/gemini-home" "$work/project" "$bin/gemini" mcp list)
expect 'dsh-refs \(from dsh-refs\): dsh-refs mcp \(stdio\) - Connected' "$out"
echo "gemini extensions validate + link: connected"

echo "== dsh-refs mcp setup, then the host's own mcp list"
for host in claude gemini qwen; do
  home="$work/setup-$host"
  project="$work/setup-$host-project"
  mkdir -p "$home" "$project"
  (cd "$project" && HOME=$home "$binary" mcp setup "$host" >/dev/null)
  [ "$host" = gemini ] && trust_gemini "$home" "$project"
  out=$(run "$home" "$project" "$bin/$host" mcp list)
  expect "dsh-refs: $binary mcp.* (- .*Connected|Connected)" "$out"
  echo "$host: $(printf '%s\n' "$out" | grep 'dsh-refs:' | sed 's/\x1b\[[0-9;]*m//g')"
done
# Claude Code's project scope: the project's .mcp.json, which Claude Code starts once the person
# has trusted the folder and approved the file's servers (both recorded in ~/.claude.json).
home="$work/setup-claude-project"
project="$work/claude-project"
mkdir -p "$home" "$project"
(cd "$project" && HOME=$home "$binary" mcp setup claude --scope project >/dev/null)
python3 -c 'import json, sys; json.dump({"projects": {sys.argv[2]: {
  "hasTrustDialogAccepted": True, "enabledMcpjsonServers": ["dsh-refs"]}}}, open(sys.argv[1], "w"))' \
  "$home/.claude.json" "$project"
out=$(run "$home" "$project" "$bin/claude" mcp list)
expect "dsh-refs: $binary mcp - .*Connected" "$out"
echo "claude --scope project: $(printf '%s\n' "$out" | grep 'dsh-refs:')"
echo "hosts.sh: ok"
