#!/usr/bin/env python3
"""The release manifests agree with Cargo.toml and with each other.

server.json is validated against the MCP registry's published schema (vendored in .ci/schemas/,
see its README; `jsonschema` comes from PyPI, pinned in .ci/run). The Claude Code plugin and
the Gemini CLI extension have no published schema: the real hosts load them in
tests/hosts/hosts.sh. Then the facts the hosts and the registry read: every manifest's version is the crate's, server.json's name is the `mcp-name:`
line of README.md and the npm launcher's `mcpName`, its package is this crate on crates.io, and
every manifest starts the server as `dsh-refs mcp`; every public address (homepage, repository,
the registry name's owner, the Homebrew tap) is derived from Cargo.toml's `repository`.
"""
import copy
import hashlib
import json
import re
import sys
import tomllib

import jsonschema

cargo = tomllib.load(open("Cargo.toml", "rb"))["package"]
version = cargo["version"]
errors = []


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def check(cond, message):
    if not cond:
        errors.append(message)


if len(cargo["description"]) > 100:
    errors.append("Cargo.toml description is longer than 100 characters")
server = load("server.json")
# The MCP registry's schema, as vendored (its hash is the one .ci/schemas/README.md names).
SCHEMA = ".ci/schemas/server.schema.json"
SCHEMA_SHA256 = "3fba09590c99f61735d234822279f4223fab9e300c0a81e81c91ab62a4114de0"
with open(SCHEMA, "rb") as f:
    raw = f.read()
check(hashlib.sha256(raw).hexdigest() == SCHEMA_SHA256, f"{SCHEMA} is not the vendored file")
schema = json.loads(raw)
validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
for error in validator.iter_errors(server):
    errors.append(f"server.json{error.json_path[1:]}: {error.message} (registry schema)")
check(server.get("$schema") == schema["$id"], f"server.json $schema is not {schema['$id']}")
# The validator refuses what the registry refuses, so its silence above means something.
broken = copy.deepcopy(server)
broken["packages"][0].pop("transport")
broken["description"] = "x" * 101
check(len(list(validator.iter_errors(broken))) == 2, "the registry schema accepted a broken server.json")
readme = open("README.md", encoding="utf-8").read()
names = re.findall(r"mcp-name:\s*(\S+)", readme)
check(names == [server["name"]], f"README.md mcp-name {names} is not server.json's {server['name']}")
check(len(server["description"]) <= 100, "server.json description is longer than 100 characters")
check(server["version"] == version, "server.json version is not Cargo.toml's")
(package,) = server["packages"]
check(package["registryType"] == "cargo" and package["identifier"] == cargo["name"],
      "server.json's package is not this crate")
check(package["version"] == version, "server.json package version is not Cargo.toml's")
check([a.get("value") for a in package.get("packageArguments", [])] == ["mcp"],
      "server.json does not start `dsh-refs mcp`")
launcher = load("npm/dsh-refs/package.json")
check(launcher["version"] == version, "npm launcher version is not Cargo.toml's")
check(launcher.get("mcpName") == server["name"], "npm launcher mcpName is not server.json's name")
check(all(v == version for v in launcher["optionalDependencies"].values()),
      "npm platform packages are not pinned to the launcher's version")
plugin = load(".claude-plugin/plugin.json")
check(plugin["version"] == version, ".claude-plugin/plugin.json version is not Cargo.toml's")
gemini = load("gemini-extension.json")
check(gemini["version"] == version, "gemini-extension.json version is not Cargo.toml's")
for path, servers in ((".mcp.json", load(".mcp.json")["mcpServers"]),
                      ("gemini-extension.json", gemini["mcpServers"])):
    entry = servers.get("dsh-refs", {})
    check(entry.get("command") == "dsh-refs" and entry.get("args") == ["mcp"],
          f"{path} does not start `dsh-refs mcp`")
# Every public address comes from Cargo.toml's `repository` (README, "Release addresses").
repository = cargo["repository"]
match = re.fullmatch(r"https://github\.com/([A-Za-z0-9-]+)/([A-Za-z0-9._-]+)", repository)
check(match is not None, f"Cargo.toml repository {repository} is not https://github.com/OWNER/NAME")
owner = match.group(1) if match else ""
check(cargo.get("homepage") == repository, "Cargo.toml homepage is not its repository")
check(server["name"] == f"io.github.{owner}/dsh-refs",
      f"server.json name is not io.github.{owner}/dsh-refs (the repository's owner)")
check(server["repository"] == {"url": repository, "source": "github"},
      "server.json repository is not Cargo.toml's")
check(launcher.get("homepage") == repository, "npm launcher homepage is not Cargo.toml's repository")
check(launcher.get("repository") == {"type": "git", "url": f"git+{repository}.git"},
      "npm launcher repository is not Cargo.toml's")
check(plugin.get("homepage") == repository and plugin.get("repository") == repository,
      ".claude-plugin/plugin.json homepage/repository is not Cargo.toml's repository")
dist = tomllib.load(open("dist-workspace.toml", "rb"))["dist"]
check(dist.get("tap") == f"{owner}/homebrew-tap", f"dist's tap is not {owner}/homebrew-tap")
binstall = cargo["metadata"]["binstall"]["pkg-url"]
check(binstall.startswith("{ repo }/"), "binstall's pkg-url does not start from { repo }")
if errors:
    sys.exit("\n".join(errors))
print(f"manifests: version {version}, {server['name']} and {repository} agree")
