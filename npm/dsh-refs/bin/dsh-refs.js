#!/usr/bin/env node
// The npm launcher: finds the platform package npm installed beside it (an optional dependency
// whose `os`/`cpu` match this machine) and runs its dsh-refs binary with the same arguments,
// standard streams and exit status.
"use strict";
const { spawn } = require("node:child_process");
const path = require("node:path");

const key = `${process.platform}-${process.arch}`;
const pkg = `@dsh-session-references/${key}`;
const exe = process.platform === "win32" ? "dsh-refs.exe" : "dsh-refs";
let binary;
try {
  binary = path.join(path.dirname(require.resolve(`${pkg}/package.json`)), "bin", exe);
} catch {
  process.stderr.write(
    `dsh-refs: no binary for ${key}: the optional package ${pkg} is not installed ` +
      "(reinstall without --no-optional / --omit=optional, or use cargo install dsh-session-references)\n",
  );
  process.exit(1);
}

const child = spawn(binary, process.argv.slice(2), { stdio: "inherit", windowsHide: true });
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => child.kill(signal));
}
child.on("error", (err) => {
  process.stderr.write(`dsh-refs: cannot run ${binary}: ${err.message}\n`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else {
    process.exit(code ?? 1);
  }
});
