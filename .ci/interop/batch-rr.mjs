// The official batch-settlement client of @x402/evm 2.27.0, unmodified,
// paying through a load balancer in front of servers that may refuse it
// (issue 32: servers with separate books; deploy/separate_test.go). Unlike
// batch-client.mjs it does not stop at the first refusal: it reports
// every call, and the test judges them against the chain.
//
//   node batch-rr.mjs calls  URL RPC_URL STATE_DIR ACCOUNT CALLS CONCURRENCY
//     CALLS paid GETs of URL's /candles, at most CONCURRENCY at a time, each
//     with @x402/fetch's wrapFetchWithPayment over an x402Client that speaks
//     only batch-settlement. Call i asks for the i-th of the ten candle
//     resources (two products, five granularities), so that calls in
//     flight together never ask for the same resource. The payer is
//     account ACCOUNT of /devnet.json's mnemonic; the channel's records
//     are kept in STATE_DIR (FileClientChannelStorage), so that several
//     runs pay one channel.
//   node batch-rr.mjs refund URL RPC_URL STATE_DIR ACCOUNT
//     The cooperative refund of the rest, scheme.refund(URL/candles).
//
// Prints one JSON line: the payer, the channel id, the price, and for
// each call (or the refund) the final answer's status, the reason of a
// 402 (PAYMENT-REQUIRED's error, or the JSON body's), the decoded
// PAYMENT-RESPONSE, the payload types the client sent for it, and any
// exception. It exits 1 only when it cannot run at all.
import { createPublicClient, defineChain, getAddress, http } from "viem";
import { mnemonicToAccount } from "viem/accounts";
import { x402Client } from "@x402/core/client";
import { toClientEvmSigner } from "@x402/evm";
import { BatchSettlementEvmScheme, computeChannelId } from "@x402/evm/batch-settlement/client";
import { FileClientChannelStorage } from "@x402/evm/batch-settlement/client/file-storage";
import { wrapFetchWithPayment } from "@x402/fetch";

const network = "eip155:8453";
const scheme = "batch-settlement";

function fail(msg) {
  process.stderr.write(`batch-rr: ${msg}\n`);
  process.exit(1);
}

process.on("uncaughtException", e => fail(e?.stack ?? String(e)));
process.on("unhandledRejection", e => fail(e?.stack ?? String(e)));

function decode(header) {
  if (!header) {
    return null;
  }
  try {
    return JSON.parse(Buffer.from(header, "base64").toString());
  } catch (e) {
    return { undecodable: e.message, header };
  }
}

// outcome is what the test needs of an answer: status, reason, settlement.
async function outcome(res) {
  const body = await res.text().catch(e => `(body unreadable: ${e.message})`);
  const out = { status: res.status, settle: decode(res.headers.get("PAYMENT-RESPONSE")) };
  if (res.status !== 200) {
    let reason = decode(res.headers.get("PAYMENT-REQUIRED"))?.error;
    if (!reason) {
      try {
        reason = JSON.parse(body).error;
      } catch {
        // not JSON: the body below says what it was
      }
    }
    out.reason = reason ?? "";
    out.body = body.slice(0, 500);
  }
  return out;
}

const [mode, base, rpcUrl, stateDir, accountArg, callsArg, concArg] = process.argv.slice(2);
const usage = "usage: node batch-rr.mjs calls URL RPC_URL STATE_DIR ACCOUNT CALLS CONCURRENCY | refund URL RPC_URL STATE_DIR ACCOUNT";
if (!["calls", "refund"].includes(mode) || !base || !rpcUrl || !stateDir || !/^[0-9]+$/.test(accountArg ?? "") ||
    (mode === "calls" && (!/^[1-9][0-9]*$/.test(callsArg ?? "") || !/^[1-9][0-9]*$/.test(concArg ?? "")))) {
  fail(usage);
}

const descRes = await fetch(new URL(rpcUrl).origin + "/devnet.json");
if (!descRes.ok) {
  fail(`GET /devnet.json: ${descRes.status} ${await descRes.text()}`);
}
const desc = await descRes.json();
const account = mnemonicToAccount(desc.mnemonic, { addressIndex: Number(accountArg) });
const chain = defineChain({
  id: desc.chainId,
  name: "Tollgate devnet",
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [rpcUrl] } },
});
const publicClient = createPublicClient({ chain, transport: http(rpcUrl) });
const batch = new BatchSettlementEvmScheme(toClientEvmSigner(account, publicClient), {
  storage: new FileClientChannelStorage({ directory: stateDir }),
});

const resources = [];
for (const product of ["BTC-USD", "ETH-USD"]) {
  for (const granularity of [300, 900, 3600, 21600, 86400]) {
    resources.push(`/candles?product=${product}&granularity=${granularity}`);
  }
}
const urlOf = i => new URL(resources[i % resources.length], base).toString();

// The batch entry of the route's 402, as any client sees it.
const probe = await fetch(urlOf(0));
const required = decode(probe.headers.get("PAYMENT-REQUIRED"));
const entry = required?.accepts?.find(a => a.scheme === scheme && a.network === network);
if (probe.status !== 402 || !entry) {
  fail(`unpaid GET ${urlOf(0)}: ${probe.status}, no ${scheme} entry on ${network} in ${JSON.stringify(required)}`);
}
const channelId = computeChannelId(batch.buildChannelConfig(entry), network).toLowerCase();
const head = { payer: getAddress(account.address), channelId, price: entry.amount };

if (mode === "refund") {
  // The refund's own fetch is observed: its last answer is the outcome.
  let last = null;
  const observe = async (input, init) => {
    const res = await fetch(input, init);
    last = { sent: decode(new Headers(init?.headers).get("PAYMENT-SIGNATURE"))?.payload?.type ?? null, res: res.clone() };
    return res;
  };
  const out = { sent: [] };
  try {
    out.refund = await batch.refund(urlOf(0), { fetch: observe });
  } catch (e) {
    out.error = e?.message ?? String(e);
  }
  if (last) {
    Object.assign(out, await outcome(last.res));
    out.sent = last.sent ? [last.sent] : [];
  }
  console.log(JSON.stringify({ ...head, refund: out }));
  process.exit(0);
}

// calls: one x402Client for every call, as one program would have; each
// call's inner fetch records what it sent.
const client = new x402Client().register(network, batch).setSpendControls({ allowedAssets: true });
const total = Number(callsArg);
const results = new Array(total);
let next = 0;
async function worker() {
  while (next < total) {
    const i = next++;
    const rec = { i, url: urlOf(i), sent: [] };
    const observe = async request => {
      const t = decode(request.headers.get("PAYMENT-SIGNATURE"))?.payload?.type;
      if (t) {
        rec.sent.push(t);
      }
      return fetch(request);
    };
    try {
      Object.assign(rec, await outcome(await wrapFetchWithPayment(observe, client)(rec.url)));
    } catch (e) {
      rec.status = 0;
      rec.error = e?.message ?? String(e);
    }
    results[i] = rec;
  }
}
await Promise.all(Array.from({ length: Number(concArg) }, worker));
console.log(JSON.stringify({ ...head, calls: results }));
