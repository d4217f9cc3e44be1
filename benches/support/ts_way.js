// The "TypeScript way" the issue compares `prepare` with: read each log whole, `JSON.parse` every
// line, fold the surface (a compaction resets it; surface ops append or replace), keep the
// conversation (user and assistant messages).
const fs = require("fs");
const files = process.argv.slice(2);
const started = process.hrtime.bigint();
let kept = 0;
for (const file of files) {
  const lines = fs.readFileSync(file, "utf8").split("\n");
  let surface = [];
  for (const line of lines) {
    if (!line) continue;
    const record = JSON.parse(line);
    if (record.type === "session") continue;
    if (record.type === "compaction" || record.surfaceOp === "reset") surface = [];
    if (record.type === "user/message" || record.type === "assistant/message") surface.push(record.data);
  }
  kept += surface.length;
}
const ms = Number(process.hrtime.bigint() - started) / 1e6;
console.log(`${files.length} logs, ${kept} messages kept, ${ms.toFixed(0)} ms`);
