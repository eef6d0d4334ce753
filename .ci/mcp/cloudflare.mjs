// Cloudflare's x402 MCP client (agents 0.32.0, `withX402Client` from
// agents/x402), unmodified, wrapping an MCP TypeScript SDK Client over
// StreamableHTTPClientTransport, pays one tool call of a devnet Tollgate
// with exact, from the devnet's payer account. It reads the requirements
// from the result's _meta["x402/error"] and sends the PaymentPayload as a
// base64 string in _meta["x402/payment"] (not the spec's object).
//
//   node cloudflare.mjs URL RPC_URL [TOOL [ARGS_JSON]]
//     URL is the MCP endpoint ({base}/mcp); TOOL defaults to regime ($0.05,
//     under the client's default cap of 100000 atomic units), ARGS_JSON
//     to {}. The result must be paid: no isError, structuredContent (the
//     REST body, also as content[0].text) and a successful SettleResponse
//     from the payer in _meta["x402/payment-response"]; the requests must
//     show one unpaid call and one paid with a base64 string. Prints one
//     JSON line.
//
// One thing is set around the client, not in it: withX402Client makes its
// own x402Client (@x402/core) and gives no way to set its spend controls,
// whose default admits only the network's default assets (Base's USDC on
// eip155:8453). The devnet's token is another contract, so unaided the
// client drops the only offer and hands back the unpaid result. Every
// x402Client of this process therefore starts with the devnet token in
// spendControls.allowedAssets (what setSpendControls would set), which is
// what a payer of Base's USDC gets by default.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { x402Client } from "@x402/core/client";
import { withX402Client } from "agents/x402";
import { devnetPayer, fail as failAs, onCrash } from "./devnet.mjs";

const who = "cloudflare";
const fail = msg => failAs(who, msg);
onCrash(who);

const network = "eip155:8453";
const [url, rpcUrl, tool = "regime", argsJSON = "{}"] = process.argv.slice(2);
if (!url || !rpcUrl) {
  fail("usage: node cloudflare.mjs URL RPC_URL [TOOL [ARGS_JSON]]");
}
const args = JSON.parse(argsJSON);
const show = v => JSON.stringify(v)?.slice(0, 3000);

const { account, desc } = await devnetPayer(who, rpcUrl);

// The devnet token allowed, in every x402Client's initial spend controls
// (see above); a later setSpendControls still replaces them.
const devnetToken = { network, asset: desc.token.address };
Object.defineProperty(x402Client.prototype, "spendControls", {
  configurable: true,
  get() {
    return this._tollgateSpendControls;
  },
  set(v) {
    const initial = v && typeof v === "object" && Object.keys(v).length === 0;
    this._tollgateSpendControls = initial ? { allowedAssets: [devnetToken] } : v;
  },
});

// What the client sends: each tools/call's _meta["x402/payment"], by type.
const sent = [];
const observe = async (input, init) => {
  try {
    const msgs = [].concat(JSON.parse(init?.body ?? "null") ?? []);
    for (const m of msgs) {
      if (m?.method === "tools/call") {
        const p = m.params?._meta?.["x402/payment"];
        sent.push(p === undefined ? "none" : typeof p);
      }
    }
  } catch {
    // not JSON: not a call
  }
  return fetch(input, init);
};

const mcp = new Client({ name: "tollgate-cloudflare-interop", version: "1.0.0" });
await mcp.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: observe }));
const client = withX402Client(mcp, { account, network });

// The wrapped listTools (it also makes the SDK client cache the output
// schema validators that callTool applies).
const { tools } = await client.listTools({});
if (!tools.some(t => t.name === tool)) {
  fail(`no tool ${tool} in ${tools.map(t => t.name)}`);
}
// withX402Client's callTool takes a confirmation callback first.
let confirmed = null;
const res = await client.callTool(async accepts => {
  confirmed = accepts;
  return true;
}, { name: tool, arguments: args });

const settle = res._meta?.["x402/payment-response"];
const problems = [];
if (res.isError) problems.push("isError");
if (!res.structuredContent || typeof res.structuredContent !== "object") problems.push("no structuredContent");
else if (res.content?.[0]?.text !== undefined && JSON.stringify(JSON.parse(res.content[0].text)) !== JSON.stringify(res.structuredContent)) {
  problems.push("content[0].text is not structuredContent");
}
if (!settle?.success || settle.network !== network || settle.payer?.toLowerCase() !== account.address.toLowerCase()) {
  problems.push(`_meta["x402/payment-response"] is no successful settlement from ${account.address} on ${network}`);
}
if (sent.join() !== "none,string") problems.push(`sent _meta["x402/payment"] as ${sent}, want none then a string`);
if (!confirmed?.some(a => a.scheme === "exact")) problems.push(`the confirmation saw ${show(confirmed)}, no exact entry`);
if (problems.length) {
  fail(`${tool} ${show(args)}: ${problems.join("; ")}: ${show(res)}`);
}
console.log(JSON.stringify({
  client: "agents@0.32.0 withX402Client",
  tool,
  arguments: args,
  payer: account.address,
  sent,
  structuredContent: res.structuredContent,
  paymentResponse: settle,
}));
await mcp.close();
process.exit(0);
