#!/usr/bin/env node
// Assembles the npm packages into OUT: the launcher (npm/dsh-refs) and the platform package for
// KEY (a key of platforms.json, e.g. linux-x64) carrying BINARY.
//   node npm/assemble.mjs KEY BINARY OUT
import { chmodSync, copyFileSync, cpSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const [key, binary, out] = process.argv.slice(2);
if (!key || !binary || !out) {
  console.error("usage: node npm/assemble.mjs KEY BINARY OUT");
  process.exit(2);
}
const platforms = JSON.parse(readFileSync(join(here, "platforms.json"), "utf8"));
const platform = platforms[key];
if (!platform) {
  console.error(`unknown platform ${key}; known: ${Object.keys(platforms).join(", ")}`);
  process.exit(2);
}
const launcher = JSON.parse(readFileSync(join(here, "dsh-refs", "package.json"), "utf8"));

const launcherDir = join(out, "dsh-refs");
cpSync(join(here, "dsh-refs"), launcherDir, { recursive: true });

const name = `@dsh-session-references/${key}`;
if (!(name in launcher.optionalDependencies)) {
  console.error(`${name} is not among the launcher's optionalDependencies`);
  process.exit(1);
}
const dir = join(out, key);
mkdirSync(join(dir, "bin"), { recursive: true });
copyFileSync(binary, join(dir, "bin", platform.exe));
chmodSync(join(dir, "bin", platform.exe), 0o755);
writeFileSync(
  join(dir, "package.json"),
  JSON.stringify(
    {
      name,
      version: launcher.version,
      description: `The dsh-refs binary for ${platform.target}`,
      license: launcher.license,
      homepage: launcher.homepage,
      repository: launcher.repository,
      os: [platform.os],
      cpu: [platform.cpu],
      files: [`bin/${platform.exe}`],
      preferUnplugged: true,
    },
    null,
    2,
  ) + "\n",
);
console.log(`${launcherDir}\n${dir}`);
