// The official @x402/fetch client with @x402/extensions' payment
// identifier pays a devnet Tollgate once for a purchase whose answer was
// lost (issue 33, item 3): the client keeps one id for the purchase
// (appendPaymentIdentifierToExtensions in an onBeforePaymentCreation
// hook), its first paid answer is dropped on the way back, and its retry
// signs a new payment with the same id. Then the id is reused for another
// request. Once with exact (@x402/evm's ExactEvmScheme), once with
// batch-settlement (BatchSettlementEvmScheme, after a first call that
// opens the channel).
//
//   node payment-id.mjs BASE_URL RPC_URL STATE_DIR
//
// Prints one JSON line; the test that runs it
// (cmd/tollgate/identifier_interop_test.go) checks the chain and the
// ledger. Any failure exits 1 with the reason on stderr.
import { x402Client } from "@x402/core/client";
import { toClientEvmSigner } from "@x402/evm";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { BatchSettlementEvmScheme } from "@x402/evm/batch-settlement/client";
import { FileClientChannelStorage } from "@x402/evm/batch-settlement/client/file-storage";
import { appendPaymentIdentifierToExtensions, generatePaymentId } from "@x402/extensions/payment-identifier";
import { wrapFetchWithPayment } from "@x402/fetch";
import { decode, devnetPayer } from "./devnet.mjs";

const network = "eip155:8453";

function fail(msg) {
  process.stderr.write(`payment-id: ${msg}\n`);
  process.exit(1);
}

process.on("uncaughtException", e => fail(e?.stack ?? String(e)));
process.on("unhandledRejection", e => fail(e?.stack ?? String(e)));

const [base, rpcUrl, stateDir] = process.argv.slice(2);
if (!base || !rpcUrl || !stateDir) {
  fail("usage: node payment-id.mjs BASE_URL RPC_URL STATE_DIR");
}

const { account, publicClient } = await devnetPayer(rpcUrl, fail);

// purchase is one client speaking one scheme, whose payments carry the
// id of the current purchase.
function purchase(scheme) {
  const p = { id: null, sent: [] };
  const client = new x402Client().register(network, scheme).setSpendControls({ allowedAssets: true });
  client.onBeforePaymentCreation(async ({ paymentRequired }) => {
    if (p.id) {
      if (!paymentRequired.extensions?.["payment-identifier"]) {
        fail(`the 402 does not offer payment-identifier: ${JSON.stringify(paymentRequired.extensions)}`);
      }
      appendPaymentIdentifierToExtensions(paymentRequired.extensions, p.id);
    }
  });
  // Every paid request is recorded; with drop set, its answer is lost.
  const inner = async request => {
    const sig = decode(request.headers.get("PAYMENT-SIGNATURE"));
    const res = await fetch(request);
    if (sig) {
      p.sent.push(sig);
      if (p.drop) {
        p.drop = false;
        await res.arrayBuffer();
        throw new Error("the answer was lost on the way back");
      }
    }
    return res;
  };
  p.fetch = wrapFetchWithPayment(inner, client);
  return p;
}

async function answer(res) {
  const body = await res.text();
  return { status: res.status, body, settlement: decode(res.headers.get("PAYMENT-RESPONSE")) };
}

// lostThenRetried buys url with a new id: the first paid answer is lost,
// the retry signs a new payment with the same id.
async function lostThenRetried(p, url) {
  p.id = generatePaymentId();
  p.drop = true;
  const lost = await p.fetch(url).then(() => null, e => String(e?.cause?.message ?? e?.message ?? e));
  if (!lost) {
    fail(`the first call of ${url} was not lost`);
  }
  const first = p.sent[p.sent.length - 1];
  const retry = await answer(await p.fetch(url));
  const again = p.sent[p.sent.length - 1];
  if (JSON.stringify(again.payload) === JSON.stringify(first.payload) && again.payload?.authorization) {
    fail("the exact retry sent the same authorization: want a new one");
  }
  return { id: p.id, lost, firstPayload: first.payload, retryPayload: again.payload, retry };
}

// exact.
const exact = purchase(new ExactEvmScheme(account));
const exactRun = await lostThenRetried(exact, base + "/regime");
const exactConflict = await answer(await exact.fetch(base + "/candles?product=BTC-USD"));

// batch-settlement: a first call opens the channel, then the lost one.
const batch = purchase(new BatchSettlementEvmScheme(toClientEvmSigner(account, publicClient), {
  storage: new FileClientChannelStorage({ directory: stateDir }),
}));
const opening = await answer(await batch.fetch(base + "/regime"));
if (opening.status !== 200) {
  fail(`the batch-settlement opening call: ${JSON.stringify(opening)}`);
}
const batchRun = await lostThenRetried(batch, base + "/regime");
const batchConflict = await answer(await batch.fetch(base + "/candles?product=BTC-USD"));
batch.id = null;
const next = await answer(await batch.fetch(base + "/regime"));

console.log(JSON.stringify({
  payer: account.address,
  exact: { ...exactRun, conflict: exactConflict },
  batch: { opening, ...batchRun, conflict: batchConflict, next },
}));
