// The official @x402/fetch client with @x402/extensions' sign-in-with-x
// client hook (createSIWxClientHook) reads again what its wallet bought
// from a devnet Tollgate, without paying (issue 33, item 3):
//
//   1. the payer buys BASE/regime with exact;
//   2. a fresh client of the same wallet, the SIWX hook registered, GETs
//      it again: the hook signs the 402's challenge, the answer comes
//      back without a payment (the client's payment hooks never run);
//   3. the same client GETs BASE/lanes, which the wallet never bought:
//      the sign-in is refused (a 402) and the client pays as usual;
//   4. a client of another wallet, with only the SIWX hook and no money
//      to spend, GETs BASE/regime: refused, and it cannot pay.
//
//   node siwx.mjs BASE_URL RPC_URL
//
// Prints one JSON line; the test that runs it
// (cmd/tollgate/siwx_interop_test.go) checks the chain. Any failure
// exits 1 with the reason on stderr.
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { x402Client, x402HTTPClient } from "@x402/core/client";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { createSIWxClientHook } from "@x402/extensions/sign-in-with-x";
import { wrapFetchWithPayment } from "@x402/fetch";
import { decode, devnetPayer } from "./devnet.mjs";

function fail(msg) {
  process.stderr.write(`siwx: ${msg}\n`);
  process.exit(1);
}

process.on("uncaughtException", e => fail(e?.stack ?? String(e)));
process.on("unhandledRejection", e => fail(e?.stack ?? String(e)));

const [base, rpcUrl] = process.argv.slice(2);
if (!base || !rpcUrl) {
  fail("usage: node siwx.mjs BASE_URL RPC_URL");
}

const { account } = await devnetPayer(rpcUrl, fail);

// client pays as account, the SIWX hook registered when signIn; it
// records every request it sends: with a payment, with a sign-in.
function client(acct, signIn) {
  const c = { payments: 0, signIns: 0 };
  const x = new x402Client().register("eip155:8453", new ExactEvmScheme(acct)).setSpendControls({ allowedAssets: true });
  const http = new x402HTTPClient(x);
  if (signIn) {
    http.onPaymentRequired(createSIWxClientHook(acct));
  }
  const observe = async request => {
    if (request.headers.get("PAYMENT-SIGNATURE")) c.payments++;
    if (request.headers.get("SIGN-IN-WITH-X")) c.signIns++;
    return fetch(request);
  };
  c.fetch = wrapFetchWithPayment(observe, http);
  return c;
}

async function answer(res) {
  const body = await res.text();
  return { status: res.status, body, settlement: decode(res.headers.get("PAYMENT-RESPONSE")), required: decode(res.headers.get("PAYMENT-REQUIRED")) };
}

const buyer = client(account, false);
const bought = await answer(await buyer.fetch(base + "/regime"));
if (bought.status !== 200) {
  fail(`the purchase: ${JSON.stringify(bought)}`);
}

const returning = client(account, true);
const reread = await answer(await returning.fetch(base + "/regime"));
const rereadCounts = { payments: returning.payments, signIns: returning.signIns };
const notBought = await answer(await returning.fetch(base + "/lanes"));
const notBoughtCounts = { payments: returning.payments - rereadCounts.payments, signIns: returning.signIns - rereadCounts.signIns };

// The hook's own headers, sent by hand, to read the refusals' reasons
// (the fetch wrapper pays after a refused sign-in and hides them).
async function hookHeader(acct, url) {
  const res = await fetch(url);
  const paymentRequired = decode(res.headers.get("PAYMENT-REQUIRED"));
  const out = await createSIWxClientHook(acct)({ paymentRequired, requestUrl: url });
  return out?.headers?.["sign-in-with-x"] ?? fail(`the hook wrote no header for ${url}'s 402: ${JSON.stringify(paymentRequired?.extensions)}`);
}
async function signedIn(url, header) {
  return answer(await fetch(url, { headers: { "SIGN-IN-WITH-X": header } }));
}
const strangerAccount = privateKeyToAccount(generatePrivateKey());
const once = await hookHeader(account, base + "/regime");
const refusals = {
  first: await signedIn(base + "/regime", once),
  replayed: await signedIn(base + "/regime", once),
  strangerNoPurchase: await signedIn(base + "/regime", await hookHeader(strangerAccount, base + "/regime")),
  otherRequest: await signedIn(base + "/lanes", await hookHeader(account, base + "/regime")),
};

const stranger = client(strangerAccount, true);
const refused = await stranger.fetch(base + "/regime").then(answer, e => ({ error: String(e?.message ?? e) }));

console.log(JSON.stringify({
  payer: account.address,
  bought, reread, rereadCounts, notBought, notBoughtCounts,
  stranger: { refused, payments: stranger.payments, signIns: stranger.signIns },
  refusals,
}));
