# shellcheck shell=bash
# Sourced by the host scripts in this folder: Node 22 and pinned npm packages, all from the npm
# registry, in a private folder with a private HOME and npm cache (nothing is written under the
# caller's HOME).
#
#   npm_tools_init DIR     sets TOOLS=DIR, HOME=DIR/home, npm_config_cache=DIR/npm-cache and
#                          installs Node 22 (the npm package `node`) into DIR/node22; NODE22 is
#                          its binary, first on PATH.
#   npm_tools_add SPEC...  installs npm packages into DIR/packages with Node 22 (pinned specs).

NODE_SPEC=node@22.23.3

npm_tools_init() {
  TOOLS=$1
  mkdir -p "$TOOLS/home" "$TOOLS/npm-cache" "$TOOLS/node22" "$TOOLS/packages"
  export HOME="$TOOLS/home" npm_config_cache="$TOOLS/npm-cache"
  export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
  if [ ! -x "$TOOLS/node22/node_modules/node/bin/node" ]; then
    npm install --prefix "$TOOLS/node22" "$NODE_SPEC" >"$TOOLS/node22.log" 2>&1 ||
      { cat "$TOOLS/node22.log" >&2; return 1; }
  fi
  NODE22="$TOOLS/node22/node_modules/node/bin/node"
  # The package's launcher is a copy of the platform package's binary; with install scripts
  # off (npm 11's default) it may be missing, so fall back to the platform package itself.
  if ! "$NODE22" --version >/dev/null 2>&1; then
    NODE22=$(find "$TOOLS/node22/node_modules" -path '*/node-*/bin/node' -type f | head -1)
  fi
  case $("$NODE22" --version) in
    v22.*) ;;
    *) echo "Node 22 from the npm package $NODE_SPEC did not install" >&2; return 1 ;;
  esac
  PATH="$(dirname "$NODE22"):$PATH"
  export PATH NODE22
}

npm_tools_add() {
  npm install --prefix "$TOOLS/packages" "$@" >>"$TOOLS/packages.log" 2>&1 ||
    { cat "$TOOLS/packages.log" >&2; return 1; }
}

# A free TCP port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
