// Checks Tollgate's discovery with the official @x402/extensions bazaar
// code, as a facilitator cataloging a payment would run it: for every paid
// resource listed in /.well-known/x402, the unpaid 402's PAYMENT-REQUIRED
// bazaar extension must validate (info against its schema, and the spec's
// rules), and extraction from the v2 header and from the v1 body must give
// the operation's method, route and parameters; for every MCP tool it
// lists, the same of an unpaid tool call's PaymentRequired. Throws on the first
// problem; writes only to stderr (pay.mjs's stdout is its report).
//   node bazaar.mjs BASE_URL
import {
  validateDiscoveryExtension,
  validateDiscoveryExtensionSpec,
  extractDiscoveryInfo,
} from "@x402/extensions/bazaar";

// A path value for each parameter schema the protos use.
function pathValue(schema) {
  if (schema.pattern === "^0x[0-9a-fA-F]{40}$") return "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
  throw new Error(`no example value for path parameter schema ${JSON.stringify(schema)}`);
}

export async function checkDiscovery(base) {
  const wk = await (await fetch(base + "/.well-known/x402")).json();
  if (!wk.items?.length) throw new Error("/.well-known/x402 lists no paid resource");
  for (const item of wk.items) {
    let path = decodeURI(new URL(item.resource).pathname);
    for (const [name, schema] of Object.entries(item.input.pathParams?.properties ?? {})) {
      path = path.replace(`{${name}}`, pathValue(schema));
    }
    const res = await fetch(base + path);
    if (res.status !== 402) throw new Error(`${path}: status ${res.status}, want 402`);
    const required = JSON.parse(Buffer.from(res.headers.get("PAYMENT-REQUIRED"), "base64").toString());
    const v1 = await res.json();
    const ext = required.extensions?.bazaar;
    for (const [what, r] of [["info vs schema", validateDiscoveryExtension(ext)], ["spec", validateDiscoveryExtensionSpec(ext)]]) {
      if (!r.valid) throw new Error(`${path}: bazaar extension invalid (${what}): ${r.errors.join("; ")}`);
    }
    const v2 = extractDiscoveryInfo(
      { x402Version: 2, resource: required.resource, accepted: required.accepts[0], payload: {}, extensions: required.extensions },
      required.accepts[0],
    );
    const wantQuery = Object.keys(item.input.queryParams.properties).sort().join(",");
    if (!v2 || v2.method !== "GET" || (v2.routeTemplate ?? "") !== item.routeTemplate ||
        Object.keys(v2.discoveryInfo.input.queryParams ?? {}).sort().join(",") !== wantQuery) {
      throw new Error(`${path}: v2 extraction gave ${JSON.stringify(v2 && { method: v2.method, routeTemplate: v2.routeTemplate, input: v2.discoveryInfo.input })}`);
    }
    const v1Info = extractDiscoveryInfo({ x402Version: 1, scheme: "exact", network: v1.accepts[0].network, payload: {} }, v1.accepts[0]);
    if (!v1Info || v1Info.method !== "GET" || Object.keys(v1Info.discoveryInfo.input.queryParams ?? {}).sort().join(",") !== wantQuery) {
      throw new Error(`${path}: v1 extraction gave ${JSON.stringify(v1Info && v1Info.discoveryInfo)}`);
    }
  }
  console.error(`bazaar: ${wk.items.length} paid resources validate and extract with @x402/extensions`);
  await checkTools(base, wk);
}

// checkTools does the same for the MCP form: for every tool listed in
// /.well-known/x402, the PaymentRequired of an unpaid call at POST /mcp
// (one JSON-RPC request, no session) carries a bazaar extension that
// validates, and extraction gives the tool's name and input schema.
async function checkTools(base, wk) {
  if (!wk.mcp || !wk.tools?.length) throw new Error("/.well-known/x402 names no MCP endpoint or tool");
  let id = 0;
  for (const item of wk.tools) {
    const tool = item.input.toolName;
    const args = {};
    for (const name of item.input.inputSchema.required ?? []) {
      args[name] = pathValue(item.input.inputSchema.properties[name]);
    }
    const res = await fetch(wk.mcp, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18" },
      body: JSON.stringify({ jsonrpc: "2.0", id: ++id, method: "tools/call", params: { name: tool, arguments: args } }),
    });
    const reply = await res.json();
    const required = reply.result?.structuredContent;
    if (!reply.result?.isError || required?.x402Version !== 2) throw new Error(`${tool}: unpaid call gave ${JSON.stringify(reply).slice(0, 500)}`);
    const ext = required.extensions?.bazaar;
    for (const [what, r] of [["info vs schema", validateDiscoveryExtension(ext)], ["spec", validateDiscoveryExtensionSpec(ext)]]) {
      if (!r.valid) throw new Error(`${tool}: bazaar extension invalid (${what}): ${r.errors.join("; ")}`);
    }
    const info = extractDiscoveryInfo(
      { x402Version: 2, resource: required.resource, accepted: required.accepts[0], payload: {}, extensions: required.extensions },
      required.accepts[0],
    );
    if (!info || info.toolName !== tool || info.discoveryInfo.input.type !== "mcp" ||
        JSON.stringify(info.discoveryInfo.input.inputSchema) !== JSON.stringify(ext.info.input.inputSchema) ||
        required.resource.url !== `mcp://tool/${tool}` || item.resource !== required.resource.url) {
      throw new Error(`${tool}: extraction gave ${JSON.stringify(info && { toolName: info.toolName, input: info.discoveryInfo.input })}`);
    }
  }
  console.error(`bazaar: ${wk.tools.length} MCP tools validate and extract with @x402/extensions`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await checkDiscovery(process.argv[2]);
}
