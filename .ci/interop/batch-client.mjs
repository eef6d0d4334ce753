// The official batch-settlement client of @x402/evm 2.27.0, unmodified,
// pays a devnet Tollgate (issue 14, item 5; docs/batch-settlement.md
// §4.1): @x402/fetch's wrapFetchWithPayment over an x402Client that speaks
// only batch-settlement on eip155:8453, with payer #0 of the devnet behind
// toClientEvmSigner(account, publicClient). Two steps, run as two
// processes that share the client's channel records (its file storage):
//
//   node batch-client.mjs pay    URL RPC_URL STATE_DIR CALLS
//     CALLS sequential paid GETs of URL. Each answer must be a 200 with a
//     JSON body and a successful PAYMENT-RESPONSE whose charged amounts
//     follow the price. Prints one JSON line: the 402's batch entry, the
//     channel id, the payload types sent, the deposits seen, wall time.
//   node batch-client.mjs refund URL RPC_URL STATE_DIR
//     The cooperative refund of the rest, scheme.refund(URL). Prints one
//     JSON line with the refund's PAYMENT-RESPONSE.
//
// The test that runs it (cmd/tollgate/batch_client_test.go) checks the
// chain. Any failure exits 1 with the reason, the decoded PAYMENT-REQUIRED
// and PAYMENT-RESPONSE, and the body on stderr.
import { x402Client } from "@x402/core/client";
import { toClientEvmSigner } from "@x402/evm";
import { BatchSettlementEvmScheme, computeChannelId } from "@x402/evm/batch-settlement/client";
import { FileClientChannelStorage } from "@x402/evm/batch-settlement/client/file-storage";
import { wrapFetchWithPayment } from "@x402/fetch";
import { devnetPayer } from "./devnet.mjs";

const network = "eip155:8453";
const scheme = "batch-settlement";

function fail(msg) {
  process.stderr.write(`batch-client: ${msg}\n`);
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
    return `undecodable (${e.message}): ${header}`;
  }
}

// describe renders an answer for a failure message.
async function describe(res) {
  const body = await res.text().catch(e => `(body unreadable: ${e.message})`);
  return JSON.stringify({
    status: res.status,
    paymentRequired: decode(res.headers.get("PAYMENT-REQUIRED")),
    paymentResponse: decode(res.headers.get("PAYMENT-RESPONSE")),
    body: body.slice(0, 2000),
  });
}

const [mode, url, rpcUrl, stateDir, callsArg] = process.argv.slice(2);
if (!["pay", "refund"].includes(mode) || !url || !rpcUrl || !stateDir || (mode === "pay" && !/^[1-9][0-9]*$/.test(callsArg ?? ""))) {
  fail("usage: node batch-client.mjs pay URL RPC_URL STATE_DIR CALLS | refund URL RPC_URL STATE_DIR");
}

// The payer: the devnet's payer account, from its description. The
// public client gives the signer readContract: the client reads its
// channel on first use and recovers from a corrective 402 (§4.1).
const { account, publicClient } = await devnetPayer(rpcUrl, fail);
const batch = new BatchSettlementEvmScheme(toClientEvmSigner(account, publicClient), {
  storage: new FileClientChannelStorage({ directory: stateDir }),
});

// The batch entry of the route's 402, as any client sees it.
async function batchEntry() {
  const res = await fetch(url);
  if (res.status !== 402) {
    fail(`unpaid GET ${url}: want a 402, got ${await describe(res)}`);
  }
  const required = decode(res.headers.get("PAYMENT-REQUIRED"));
  const entry = required?.accepts?.find(a => a.scheme === scheme && a.network === network);
  if (!entry) {
    fail(`the 402 of ${url} offers no ${scheme} on ${network}: ${JSON.stringify(required)}`);
  }
  return entry;
}

const entry = await batchEntry();
const channelId = computeChannelId(batch.buildChannelConfig(entry), network).toLowerCase();

if (mode === "refund") {
  const refund = await batch.refund(url).catch(e => fail(`scheme.refund(${url}): ${e?.stack ?? e}`));
  if (!refund?.success) {
    fail(`refund: ${JSON.stringify(refund)}`);
  }
  console.log(JSON.stringify({ payer: account.address, channelId, refund }));
  process.exit(0);
}

// pay: the official client, registered for batch-settlement only, so it
// picks the batch entry even though exact is offered too. The devnet token
// is not one of the package's default assets: allow it (§4.1). The inner
// fetch only records what the wrapper sends and gets.
const calls = Number(callsArg);
const sent = {}; // payload type -> count
let unpaid = 0;
let lastSent = null; // the last PAYMENT-SIGNATURE, decoded, for failures
const observe = async request => {
  const sig = decode(request.headers.get("PAYMENT-SIGNATURE"));
  if (sig) {
    lastSent = sig;
    const t = sig.payload?.type ?? "?";
    sent[t] = (sent[t] ?? 0) + 1;
  } else {
    unpaid++;
  }
  return fetch(request);
};
const client = new x402Client().register(network, batch).setSpendControls({ allowedAssets: true });
const fetchPay = wrapFetchWithPayment(observe, client);

const price = BigInt(entry.amount);
const deposits = [];
let charged = 0n;
let last;
const t0 = performance.now();
for (let i = 1; i <= calls; i++) {
  const res = await fetchPay(url);
  const settle = decode(res.headers.get("PAYMENT-RESPONSE"));
  if (res.status !== 200 || settle === null || typeof settle !== "object") {
    fail(`call ${i}: ${await describe(res)}\nafter sending PAYMENT-SIGNATURE ${JSON.stringify(lastSent)}`);
  }
  const body = await res.text();
  try {
    JSON.parse(body);
  } catch {
    fail(`call ${i}: the body is not JSON: ${body.slice(0, 500)}`);
  }
  const st = settle.extra?.channelState;
  charged += BigInt(settle.extra?.chargedAmount ?? "0");
  if (!settle.success || settle.network !== network || BigInt(settle.extra?.chargedAmount ?? "-1") !== price ||
      st?.channelId?.toLowerCase() !== channelId || st?.chargedCumulativeAmount !== charged.toString()) {
    fail(`call ${i}: PAYMENT-RESPONSE ${JSON.stringify(settle)}; want success, chargedAmount ${price}, channel ${channelId}, chargedCumulativeAmount ${charged}`);
  }
  if (settle.transaction) {
    deposits.push({ call: i, transaction: settle.transaction, amount: settle.amount });
  }
  last = settle;
}
const wallMs = Math.round(performance.now() - t0);

console.log(JSON.stringify({
  payer: account.address,
  channelId,
  requirements: entry,
  calls,
  charged: charged.toString(),
  sent,
  unpaid,
  deposits,
  lastChannelState: last.extra.channelState,
  wallMs,
}));
