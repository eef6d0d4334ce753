// Checks the discovery of every paid resource with the official bazaar
// code (bazaar.mjs), then pays one Tollgate resource with each official
// x402 client and prints a JSON line per client: {client, status, body,
// settlement}.
//   node pay.mjs BASE_URL PRIVATE_KEY
import { privateKeyToAccount } from "viem/accounts";
import { wrapFetchWithPayment as wrapV1, decodeXPaymentResponse } from "x402-fetch";
import { x402Client } from "@x402/core/client";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { wrapFetchWithPayment as wrapV2 } from "@x402/fetch";
import { checkDiscovery } from "./bazaar.mjs";

const [base, pk] = process.argv.slice(2);
const account = privateKeyToAccount(pk);
await checkDiscovery(base);

async function report(client, res, header) {
  const body = await res.text();
  const raw = res.headers.get(header);
  const settlement = raw ? JSON.parse(Buffer.from(raw, "base64").toString()) : null;
  console.log(JSON.stringify({ client, status: res.status, body, settlement }));
}

// v1: x402-fetch reads the 402 body and pays with X-PAYMENT on "base" (8453).
const v1 = wrapV1(fetch, account);
await report("x402-fetch@1.2.0", await v1(base + "/regime"), "X-PAYMENT-RESPONSE");

// v2: @x402/fetch reads PAYMENT-REQUIRED and pays with PAYMENT-SIGNATURE;
// the devnet token is not a default asset, so it must be allowed.
const client = new x402Client().register("eip155:*", new ExactEvmScheme(account)).setSpendControls({ allowedAssets: true });
const v2 = wrapV2(fetch, client);
await report("@x402/fetch@2.27.0", await v2(base + "/candles?product=BTC-USD"), "PAYMENT-RESPONSE");
