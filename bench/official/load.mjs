// Load for bench/official (issue 20, item 9): the official batch-settlement
// client of @x402/evm 2.27.0 (@x402/fetch wrapFetchWithPayment over an
// x402Client that speaks only batch-settlement on eip155:8453), one per
// payer key, paying one server's route concurrently, each payer on its own
// channel and its calls one after another (concurrent calls on one channel
// get channel_busy, docs/batch-settlement.md §4.1).
//
//   node load.mjs CONFIG.json
//     {"url": "http://…/regime", "rpcUrl": "http://…", "keys": ["0x…", …],
//      "deposit": "ATOMIC", "depositsAtOnce": K, "mode": "fetch" | "direct"}
//
// First every payer makes its channel's first call, which deposits
// DEPOSIT (the client's depositStrategy) and waits for its block, K
// payers at a time; then one JSON line {"ready": true, …} on stdout. Each line "go N" on stdin
// then makes N voucher calls per payer, all payers at once, and answers
// one JSON line: every call's latency in microseconds, the round's wall
// time, and the failures. The process ends when stdin closes.
//
// mode "fetch" is what an application using the official client does:
// wrapFetchWithPayment sends the request unpaid, reads the 402, signs a
// voucher and sends it again, so a call is two HTTP requests. mode
// "direct" signs the voucher against the 402 the payer read once and sends
// it at once, one request per call: the official client's own payload
// (x402Client.createPaymentPayload) and bookkeeping (x402HTTPClient
// .processPaymentResult), without the unpaid request.
//
// A call counts as good only if it answers 200 with a JSON body and a
// successful PAYMENT-RESPONSE charging one price with no transaction (a
// voucher, not a second deposit). Setup failures exit 1 with the reason.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { createPublicClient, defineChain, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { x402Client, x402HTTPClient } from "@x402/core/client";
import { toClientEvmSigner } from "@x402/evm";
import { BatchSettlementEvmScheme } from "@x402/evm/batch-settlement/client";
import { wrapFetchWithPayment } from "@x402/fetch";

const network = "eip155:8453";

function fail(msg) {
  process.stderr.write(`load: ${msg}\n`);
  process.exit(1);
}
process.on("uncaughtException", e => fail(e?.stack ?? String(e)));
process.on("unhandledRejection", e => fail(e?.stack ?? String(e)));

const cfgPath = process.argv[2] ?? fail("usage: node load.mjs CONFIG.json");
const cfg = JSON.parse(readFileSync(cfgPath, "utf8"));
if (!cfg.url || !cfg.rpcUrl || !Array.isArray(cfg.keys) || !/^[1-9][0-9]*$/.test(cfg.deposit ?? "") || !["fetch", "direct"].includes(cfg.mode)) {
  fail(`bad config ${cfgPath}`);
}

function decode(header) {
  if (!header) {
    return null;
  }
  try {
    return JSON.parse(Buffer.from(header, "base64").toString());
  } catch {
    return null;
  }
}

const descRes = await fetch(new URL(cfg.rpcUrl).origin + "/devnet.json");
if (!descRes.ok) {
  fail(`GET /devnet.json: ${descRes.status}`);
}
const desc = await descRes.json();
const chain = defineChain({
  id: desc.chainId,
  name: "Tollgate devnet",
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [cfg.rpcUrl] } },
});
const publicClient = createPublicClient({ chain, transport: http(cfg.rpcUrl), pollingInterval: 100 });

// The 402 of the route, as any client reads it.
async function paymentRequired() {
  const res = await fetch(cfg.url);
  const body = await res.text();
  if (res.status !== 402) {
    fail(`unpaid GET ${cfg.url}: want 402, got ${res.status} ${body.slice(0, 300)}`);
  }
  const required = decode(res.headers.get("PAYMENT-REQUIRED"));
  const entry = required?.accepts?.find(a => a.scheme === "batch-settlement" && a.network === network);
  if (!entry) {
    fail(`the 402 of ${cfg.url} offers no batch-settlement on ${network}`);
  }
  return required;
}
const required = await paymentRequired();
const price = BigInt(required.accepts.find(a => a.scheme === "batch-settlement" && a.network === network).amount);

// One official client per payer.
const payers = cfg.keys.map(key => {
  const account = privateKeyToAccount(key);
  const scheme = new BatchSettlementEvmScheme(toClientEvmSigner(account, publicClient), { depositStrategy: () => cfg.deposit });
  const client = new x402Client().register(network, scheme).setSpendControls({ allowedAssets: true });
  const httpClient = new x402HTTPClient(client);
  const p = { address: account.address, client, httpClient, requests: 0, unpaid: 0 };
  p.fetchPay = wrapFetchWithPayment(req => {
    p.requests++;
    if (!req.headers.get("PAYMENT-SIGNATURE")) {
      p.unpaid++;
    }
    return fetch(req);
  }, client);
  return p;
});

// check returns why res is not a good paid answer, or "" when it is; it
// reads the body.
async function check(res, wantDeposit) {
  const settle = decode(res.headers.get("PAYMENT-RESPONSE"));
  const body = await res.text();
  if (res.status !== 200) {
    const pr = decode(res.headers.get("PAYMENT-REQUIRED"));
    return `status ${res.status} ${pr?.error ?? ""} ${settle ? JSON.stringify(settle).slice(0, 200) : ""} ${body.slice(0, 200)}`.trim();
  }
  try {
    JSON.parse(body);
  } catch {
    return `body not JSON: ${body.slice(0, 200)}`;
  }
  if (!settle?.success) {
    return `PAYMENT-RESPONSE not a success: ${JSON.stringify(settle)?.slice(0, 300)}`;
  }
  if (BigInt(settle.extra?.chargedAmount ?? "-1") !== price) {
    return `chargedAmount ${settle.extra?.chargedAmount}, want ${price}`;
  }
  if (!wantDeposit && settle.transaction) {
    return `a voucher call sent a transaction ${settle.transaction} (a second deposit?)`;
  }
  if (wantDeposit && !settle.transaction) {
    return "the first call deposited nothing";
  }
  return "";
}

// call makes p's next paid call and returns "" or why it failed.
async function call(p, wantDeposit) {
  if (cfg.mode === "fetch" || wantDeposit) {
    return check(await p.fetchPay(cfg.url), wantDeposit);
  }
  const payload = await p.client.createPaymentPayload(required);
  p.requests++;
  const res = await fetch(cfg.url, { headers: p.httpClient.encodePaymentSignatureHeader(payload) });
  const why = await check(res, false);
  await p.httpClient.processPaymentResult(payload, name => res.headers.get(name), res.status);
  return why;
}

// The deposits: every channel's first call, depositsAtOnce at a time.
const t0 = performance.now();
const depositMs = [];
const queue = [...payers];
await Promise.all(
  Array.from({ length: Math.max(1, Math.min(cfg.depositsAtOnce ?? payers.length, payers.length)) }, async () => {
    for (let p; (p = queue.shift()); ) {
      const t = performance.now();
      const why = await call(p, true);
      if (why) {
        fail(`${p.address}: deposit call: ${why}`);
      }
      depositMs.push(Math.round(performance.now() - t));
    }
  }),
);
console.log(JSON.stringify({ ready: true, payers: payers.length, price: price.toString(), depositMs, depositWallMs: Math.round(performance.now() - t0) }));

for await (const line of createInterface({ input: process.stdin })) {
  const m = /^go ([1-9][0-9]*)$/.exec(line.trim());
  if (!m) {
    fail(`unknown command ${JSON.stringify(line)}`);
  }
  const n = Number(m[1]);
  const before = payers.map(p => [p.requests, p.unpaid]);
  const latUs = [];
  const errors = [];
  const start = performance.now();
  await Promise.all(
    payers.map(async p => {
      for (let i = 0; i < n; i++) {
        const t = performance.now();
        let why;
        try {
          why = await call(p, false);
        } catch (e) {
          why = `threw: ${e?.message ?? e}`;
        }
        latUs.push(Math.round((performance.now() - t) * 1000));
        if (why) {
          errors.push(`${p.address} call ${i + 1}: ${why}`);
        }
      }
    }),
  );
  const wallMs = performance.now() - start;
  const requests = payers.reduce((s, p, i) => s + p.requests - before[i][0], 0);
  const unpaid = payers.reduce((s, p, i) => s + p.unpaid - before[i][1], 0);
  console.log(JSON.stringify({ calls: latUs.length, wallMs, requests, unpaid, failed: errors.length, errors: errors.slice(0, 5), latUs }));
}
