// The official MCP TypeScript SDK client (@modelcontextprotocol/sdk
// 1.32.2: Client over StreamableHTTPClientTransport) pays a devnet
// Tollgate's POST /mcp over x402's MCP transport (specs/transports-v2/
// mcp.md, the tool-result binding), with payloads built by the official
// x402 packages (@x402/core 2.27.0 x402Client; @x402/evm 2.27.0 exact and
// batch-settlement client schemes), from the devnet's payer account (its
// key from {RPC origin}/devnet.json). The SDK client validates every
// structuredContent against the tool's outputSchema, the PaymentRequired
// of an isError result too: nothing here turns that off.
//
//   node mcp-client.mjs exact URL RPC_URL [TOOL [ARGS_JSON]]
//     URL is the MCP endpoint ({base}/mcp). tools/list must list exactly
//     the paid operations of {base}/tollgate, each with an inputSchema
//     naming the REST parameters, an outputSchema and a description
//     carrying its price. A call with an argument outside the schema must
//     be a plain isError result, no PaymentRequired. TOOL (default
//     candles, ARGS_JSON default {"product":"BTC-USD"}) unpaid must give
//     the PaymentRequired (structuredContent = content[0].text =
//     _meta["x402/error"], resource mcp://tool/TOOL, exact and
//     batch-settlement on eip155:8453, bazaar input type mcp); then it is
//     paid with exact, the PaymentPayload object in _meta["x402/payment"],
//     and the result must carry the REST body as structuredContent (and
//     as content[0].text) and a successful SettleResponse from the payer
//     in _meta["x402/payment-response"]. Prints one JSON line a step:
//     {"step":"tools"|"invalid"|"required"|"paid", ...}.
//
//   node mcp-client.mjs batch URL RPC_URL STATE_DIR CALLS [rewind]
//     CALLS paid calls of candles {"product":"BTC-USD"} over one
//     batch-settlement channel: each call unpaid, then paid with the
//     payload the x402Client builds (a deposit first, vouchers after),
//     each SettleResponse handed back to the client as @x402/fetch does
//     with PAYMENT-RESPONSE (x402Client.handlePaymentResponse, which runs
//     the scheme's onPaymentResponse hook), each charging one price. With
//     "rewind", the client's record of the channel is then set two prices
//     back and one more call made: the server must refuse the voucher with
//     a corrective PaymentRequired, the client recover from it (the same
//     hook) and the retry be paid. The channel records live in STATE_DIR
//     (the client's file storage). Prints the tools line as above, then one
//     line {"step":"batch", ...}: the batch entry, the channel, the payload
//     types sent, the deposits seen, the corrective PaymentRequired's
//     batch entry extra (channelState, voucherState) after the rewind.
//
// Any failure exits 1 with the reason and what was received on stderr.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { x402Client } from "@x402/core/client";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { toClientEvmSigner } from "@x402/evm";
import { BatchSettlementEvmScheme, computeChannelId } from "@x402/evm/batch-settlement/client";
import { FileClientChannelStorage } from "@x402/evm/batch-settlement/client/file-storage";
import { devnetPayer, fail as failAs, onCrash } from "./devnet.mjs";

const who = "mcp-client";
const fail = msg => failAs(who, msg);
onCrash(who);

const network = "eip155:8453";
const meta = {
  payment: "x402/payment",
  response: "x402/payment-response",
  error: "x402/error",
};

const [mode, url, rpcUrl, ...rest] = process.argv.slice(2);
if (!["exact", "batch"].includes(mode) || !url || !rpcUrl || (mode === "batch" && !/^[1-9][0-9]*$/.test(rest[1] ?? ""))) {
  fail("usage: node mcp-client.mjs exact URL RPC_URL [TOOL [ARGS_JSON]] | batch URL RPC_URL STATE_DIR CALLS [rewind]");
}
const base = url.replace(/\/mcp\/?$/, "");
const show = v => JSON.stringify(v)?.slice(0, 3000);
const print = v => console.log(JSON.stringify(v));

const { account, publicClient } = await devnetPayer(who, rpcUrl);

const mcp = new Client({ name: "tollgate-mcp-interop", version: "1.0.0" });
await mcp.connect(new StreamableHTTPClientTransport(new URL(url)));

// The paid operations, as REST describes them.
const project = await (await fetch(base + "/tollgate")).json();
const ops = new Map(project.paid.map(op => [op.name, op]));

// tools/list: one tool per paid operation. It also makes the SDK client
// cache each tool's outputSchema validator, which callTool then applies.
const { tools } = await mcp.listTools();
{
  const names = tools.map(t => t.name).sort();
  const want = [...ops.keys()].sort();
  if (names.join() !== want.join()) {
    fail(`tools/list names ${names}; want the paid operations ${want}`);
  }
  for (const t of tools) {
    const op = ops.get(t.name);
    const props = t.inputSchema?.properties ?? {};
    const req = t.inputSchema?.required ?? [];
    const problems = [];
    if (t.inputSchema?.type !== "object") problems.push("inputSchema is not an object schema");
    if (!t.outputSchema || t.outputSchema.type !== "object") problems.push("no object outputSchema");
    if (!t.description?.includes(op.priceUsd)) problems.push(`the description does not carry the price ${op.priceUsd}`);
    for (const p of op.parameters ?? []) {
      if (!(p.name in props)) problems.push(`inputSchema lacks the REST parameter ${p.name}`);
      if (p.required && !req.includes(p.name)) problems.push(`inputSchema does not require ${p.name}`);
    }
    for (const name of Object.keys(props)) {
      if (!(op.parameters ?? []).some(p => p.name === name)) problems.push(`inputSchema has ${name}, no REST parameter`);
    }
    if (problems.length) {
      fail(`tool ${t.name}: ${problems.join("; ")}: ${show(t)}`);
    }
  }
  print({ step: "tools", tools: tools.map(t => ({ name: t.name, price: ops.get(t.name).priceUsd, inputSchema: t.inputSchema, description: t.description })) });
}
const toolOf = name => tools.find(t => t.name === name) ?? fail(`no tool ${name} in tools/list`);

// checkArgs checks a call's arguments against the tool's inputSchema.
function checkArgs(name, args) {
  const s = toolOf(name).inputSchema;
  for (const [k, v] of Object.entries(args)) {
    const p = s.properties?.[k] ?? fail(`${name}: argument ${k} is not in its inputSchema ${show(s)}`);
    if (p.enum && !p.enum.includes(v)) fail(`${name}: ${k}=${show(v)} is not one of its inputSchema's ${show(p.enum)}`);
  }
  for (const k of s.required ?? []) {
    if (!(k in args)) fail(`${name}: required argument ${k} missing from ${show(args)}`);
  }
}

const isRequired = v => v && typeof v === "object" && v.x402Version === 2 && Array.isArray(v.accepts);

// textJSON is content[0].text of a result as JSON, or a failure.
function textJSON(res, what) {
  const text = res.content?.[0]?.type === "text" ? res.content[0].text : fail(`${what}: content[0] is no text: ${show(res)}`);
  try {
    return JSON.parse(text);
  } catch {
    fail(`${what}: content[0].text is not JSON: ${text.slice(0, 500)}`);
  }
}

const same = (a, b) => JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(b));
function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === "object") return Object.fromEntries(Object.keys(v).sort().map(k => [k, sortKeys(v[k])]));
  return v;
}

// unpaid calls name without payment; the answer must be the contract's
// PaymentRequired.
async function unpaid(name, args) {
  const res = await mcp.callTool({ name, arguments: args });
  const pr = res.structuredContent;
  const what = `unpaid ${name} ${show(args)}`;
  if (!res.isError || !isRequired(pr)) {
    fail(`${what}: want isError with a PaymentRequired as structuredContent, got ${show(res)}`);
  }
  const problems = [];
  if (!same(textJSON(res, what), pr)) problems.push("content[0].text is not structuredContent");
  if (!same(res._meta?.[meta.error], pr)) problems.push(`_meta["${meta.error}"] is not structuredContent`);
  if (typeof pr.error !== "string" || !pr.error) problems.push("no error");
  if (pr.resource?.url !== `mcp://tool/${name}`) problems.push(`resource.url ${pr.resource?.url}, want mcp://tool/${name}`);
  for (const scheme of ["exact", "batch-settlement"]) {
    if (!pr.accepts.some(a => a.scheme === scheme && a.network === network)) problems.push(`no ${scheme} entry on ${network}`);
  }
  if (pr.extensions?.bazaar?.info?.input?.type !== "mcp") problems.push("extensions.bazaar.info.input.type is not mcp");
  const price = BigInt(Math.round(Number(ops.get(name).priceUsd) * 1e6)).toString();
  for (const a of pr.accepts) {
    if (a.amount !== price) problems.push(`${a.scheme} amount ${a.amount}, want ${price}`);
  }
  if (problems.length) {
    fail(`${what}: ${problems.join("; ")}: ${show(res)}`);
  }
  return pr;
}

// paidCall retries name with payload in _meta["x402/payment"] and hands
// the outcome back to the x402 client as @x402/fetch does with an HTTP
// answer (x402HTTPClient.processPaymentResult): the SettleResponse from
// _meta["x402/payment-response"], or, without one, the PaymentRequired of
// a refusal. It returns the result and whether the client recovered
// (a corrective PaymentRequired: sign again and retry once).
async function paidCall(x402, name, args, payload) {
  const res = await mcp.callTool({ name, arguments: args, _meta: { [meta.payment]: payload } });
  const settleResponse = res._meta?.[meta.response];
  const paymentRequired = !settleResponse && res.isError && isRequired(res.structuredContent) ? res.structuredContent : undefined;
  const r = await x402.handlePaymentResponse({
    paymentPayload: payload,
    requirements: payload.accepted,
    ...(settleResponse ? { settleResponse } : {}),
    ...(paymentRequired ? { paymentRequired } : {}),
  });
  return { res, settleResponse, paymentRequired, recovered: r?.recovered === true };
}

// checkPaid checks a paid result: the REST body as structuredContent and
// text, a successful SettleResponse from the payer.
function checkPaid(what, res, settle) {
  const problems = [];
  if (res.isError) problems.push("isError");
  if (!res.structuredContent || typeof res.structuredContent !== "object") problems.push("no structuredContent");
  else if (!same(textJSON(res, what), res.structuredContent)) problems.push("content[0].text is not structuredContent");
  if (!settle?.success) problems.push(`_meta["${meta.response}"] is no successful SettleResponse`);
  if (settle?.network !== network) problems.push(`settled on ${settle?.network}, want ${network}`);
  if (settle?.payer?.toLowerCase() !== account.address.toLowerCase()) problems.push(`payer ${settle?.payer}, want ${account.address}`);
  if (problems.length) {
    fail(`${what}: ${problems.join("; ")}: ${show(res)}`);
  }
}

if (mode === "exact") {
  const name = rest[0] ?? "candles";
  const args = rest[1] ? JSON.parse(rest[1]) : { product: "BTC-USD" };
  checkArgs(name, args);

  // Invalid arguments: a plain tool error, no PaymentRequired. The value
  // is outside the enum or pattern of the first such property, or of an
  // unknown name when there is none.
  {
    const s = toolOf("candles").inputSchema;
    const [k] = Object.entries(s.properties).find(([, p]) => p.enum || p.pattern) ?? ["no_such_argument"];
    const bad = { [k]: "NOT-A-VALUE" };
    let res;
    try {
      res = await mcp.callTool({ name: "candles", arguments: bad });
    } catch (e) {
      fail(`candles ${show(bad)}: want an isError tool result, got a JSON-RPC error: ${e?.message ?? e}`);
    }
    if (!res.isError || isRequired(res.structuredContent) || res._meta?.[meta.error] || res._meta?.[meta.response]) {
      fail(`candles ${show(bad)}: want a plain isError result without PaymentRequired, got ${show(res)}`);
    }
    print({ step: "invalid", tool: "candles", arguments: bad, result: res });
  }

  const pr = await unpaid(name, args);
  print({ step: "required", tool: name, arguments: args, paymentRequired: pr });

  // exact only: the x402Client then picks the exact entry. The devnet
  // token is not one of @x402/evm's default assets: allow it.
  const x402 = new x402Client().register("eip155:*", new ExactEvmScheme(account)).setSpendControls({ allowedAssets: true });
  const payload = await x402.createPaymentPayload(pr);
  if (payload.accepted?.scheme !== "exact") {
    fail(`the x402 client picked ${show(payload.accepted)}, want the exact entry`);
  }
  const { res, settleResponse } = await paidCall(x402, name, args, payload);
  checkPaid(`paid ${name} ${show(args)}`, res, settleResponse);
  if (!/^0x[0-9a-fA-F]{64}$/.test(settleResponse.transaction ?? "")) {
    fail(`paid ${name}: settlement transaction ${settleResponse.transaction} is no transaction hash`);
  }
  print({
    step: "paid", tool: name, arguments: args, payer: account.address, accepted: payload.accepted,
    structuredContent: res.structuredContent, paymentResponse: settleResponse,
  });
  await mcp.close();
  process.exit(0);
}

// batch
const [stateDir, callsArg, rewindArg] = rest;
const calls = Number(callsArg);
const name = "candles";
const args = { product: "BTC-USD" };
checkArgs(name, args);
const storage = new FileClientChannelStorage({ directory: stateDir });
const batch = new BatchSettlementEvmScheme(toClientEvmSigner(account, publicClient), { storage });
// batch-settlement only, so the client picks it although exact is
// offered too; the devnet token allowed as above.
const x402 = new x402Client().register(network, batch).setSpendControls({ allowedAssets: true });

const first = await unpaid(name, args);
const entry = first.accepts.find(a => a.scheme === "batch-settlement" && a.network === network);
const channelId = computeChannelId(batch.buildChannelConfig(entry), network).toLowerCase();
const price = BigInt(entry.amount);

const sent = {}; // payload type -> count
const deposits = [];
let charged = 0n; // by this run
let startCharged; // the channel's charged total before it
let last;
let correctives = 0;

// call makes one paid call: unpaid, pay, and after a corrective
// PaymentRequired that the client recovered from, sign again and retry
// once (as @x402/fetch does). Returns the paid SettleResponse.
async function call(i) {
  const pr = await unpaid(name, args);
  let payload = await x402.createPaymentPayload(pr);
  const count = p => { const t = p.payload?.type ?? "?"; sent[t] = (sent[t] ?? 0) + 1; };
  count(payload);
  let out = await paidCall(x402, name, args, payload);
  let refused;
  if (out.recovered) {
    refused = out.paymentRequired;
    correctives++;
    payload = await x402.createPaymentPayload(pr);
    count(payload);
    out = await paidCall(x402, name, args, payload);
  }
  checkPaid(`call ${i} (sent ${show(payload)})`, out.res, out.settleResponse);
  const settle = out.settleResponse;
  const st = settle.extra?.channelState;
  charged += BigInt(settle.extra?.chargedAmount ?? "0");
  // A channel this run did not open started at what the server had
  // charged before the first call.
  startCharged ??= BigInt(st?.chargedCumulativeAmount ?? "0") - charged;
  if (BigInt(settle.extra?.chargedAmount ?? "-1") !== price || st?.channelId?.toLowerCase() !== channelId || st?.chargedCumulativeAmount !== (startCharged + charged).toString()) {
    fail(`call ${i}: ${meta.response} ${show(settle)}; want chargedAmount ${price}, channel ${channelId}, chargedCumulativeAmount ${startCharged + charged}`);
  }
  if (settle.transaction) {
    deposits.push({ call: i, transaction: settle.transaction, amount: settle.amount });
  }
  last = settle;
  return { settle, refused };
}

const t0 = performance.now();
for (let i = 1; i <= calls; i++) {
  await call(i);
}
const wallMs = Math.round(performance.now() - t0);

let rewind = null;
if (rewindArg === "rewind") {
  // The client's record of the channel two prices behind the server's:
  // its next voucher is one price short of the server's charged total,
  // which the server must refuse with a corrective PaymentRequired
  // carrying the channel's state. (One price behind would re-sign the
  // last voucher, byte for byte: the server answers a resent voucher from
  // its last answer, uncharged, docs/batch-settlement.md §10.)
  const ctx = await storage.get(channelId) ?? fail(`no record of channel ${channelId} in ${stateDir}`);
  await storage.set(channelId, { ...ctx, chargedCumulativeAmount: (BigInt(ctx.chargedCumulativeAmount) - 2n * price).toString() });
  const before = correctives;
  const sentBefore = { ...sent };
  const { settle, refused } = await call(calls + 1);
  if (correctives !== before + 1) {
    fail(`after the rewind: ${correctives - before} corrective PaymentRequired, want 1 (sent ${show(sent)}, before ${show(sentBefore)})`);
  }
  const corrective = refused.accepts.find(a => a.scheme === "batch-settlement");
  rewind = { call: calls + 1, error: refused.error, corrective: corrective?.extra, paymentResponse: settle };
}

print({
  step: "batch",
  payer: account.address,
  channelId,
  requirements: entry,
  calls: calls + (rewind ? 1 : 0),
  charged: charged.toString(),
  startCharged: startCharged.toString(),
  sent,
  correctives,
  deposits,
  rewind,
  lastChannelState: last.extra.channelState,
  wallMs,
});
await mcp.close();
process.exit(0);
