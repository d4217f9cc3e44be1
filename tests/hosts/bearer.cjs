// Preloaded (`node --require`) into the MCP conformance suite or MCP Inspector, which have no
// option for request headers: every HTTP request they make to $DSH_REFS_MCP_URL's origin
// carries `Authorization: Bearer $DSH_REFS_MCP_TOKEN`. It sets undici's global dispatcher,
// which Node's own fetch and the `undici` package's `request` both use; nothing else is
// changed (Host, Origin and the body go out as the tool wrote them).
"use strict";
const { createRequire } = require("node:module");
const path = require("node:path");

const target = new URL(process.env.DSH_REFS_MCP_URL).origin;
const token = process.env.DSH_REFS_MCP_TOKEN;
// The tool's own copy of undici (resolved from its package), so `request` shares the dispatcher.
const undici = createRequire(path.join(process.env.DSH_REFS_TOOL_DIR, "package.json"))("undici");

function withAuth(headers) {
  const value = `Bearer ${token}`;
  if (headers == null) return { authorization: value };
  if (Array.isArray(headers)) {
    const flat = Array.isArray(headers[0]) ? headers.flat() : headers.slice();
    for (let i = 0; i < flat.length; i += 2) {
      if (String(flat[i]).toLowerCase() === "authorization") return flat;
    }
    return flat.concat(["authorization", value]);
  }
  if (typeof headers[Symbol.iterator] === "function" && !(headers.constructor === Object)) {
    return withAuth([...headers]);
  }
  const has = Object.keys(headers).some((k) => k.toLowerCase() === "authorization");
  return has ? headers : { ...headers, authorization: value };
}

const agent = new undici.Agent().compose((dispatch) => (options, handler) => {
  if (options.origin && new URL(String(options.origin)).origin === target) {
    options = { ...options, headers: withAuth(options.headers) };
  }
  return dispatch(options, handler);
});
undici.setGlobalDispatcher(agent);
