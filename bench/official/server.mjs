// The official x402 batch-settlement server, unmodified, for the side by
// side measurement of bench/official (issue 20, item 9): @x402/express
// 2.27.0's paymentMiddleware over an x402ResourceServer with the
// batch-settlement server scheme of @x402/evm (its default in-memory
// channel storage), and the official facilitator in process
// (x402Facilitator + @x402/evm/batch-settlement/facilitator), paying gas
// from a gas account the devnet hands out and signing claims and refunds
// with a throwaway receiverAuthorizer key (docs/batch-settlement.md §4.2).
// One paid route, GET PATH, priced in the devnet token, answering a small
// fixed JSON body shaped like Tollgate's /regime.
//
//   node server.mjs RPC_URL LISTEN PATH PRICE MIN_DEPOSIT
//     RPC_URL  the devnet's JSON-RPC URL (it serves /devnet.json and
//              /devnet/gas-account beside it)
//     LISTEN   host:port to listen on (port 0: any free port)
//     PATH     the paid route, e.g. /regime
//     PRICE    its price in atomic units of the token (50000 = 0.05 USD)
//     MIN_DEPOSIT  the deposit announced to clients (extra.minDeposit), atomic
//
// When listening it prints one JSON line on stdout ({"url", "payTo",
// "receiverAuthorizer", "gas"}) and serves until stdin closes or it gets
// SIGTERM or SIGINT. Any failure exits 1 with the reason on stderr.
import express from "express";
import { createWalletClient, defineChain, getAddress, http, publicActions } from "viem";
import { generatePrivateKey, mnemonicToAccount, privateKeyToAccount } from "viem/accounts";
import { x402Facilitator } from "@x402/core/facilitator";
import { toFacilitatorEvmSigner } from "@x402/evm";
import { BatchSettlementEvmScheme as FacilitatorScheme } from "@x402/evm/batch-settlement/facilitator";
import { BatchSettlementEvmScheme as ServerScheme } from "@x402/evm/batch-settlement/server";
import { paymentMiddleware, x402ResourceServer } from "@x402/express";

const network = "eip155:8453";
const withdrawDelay = 3600; // as Tollgate's default --batch-withdraw-delay: both trust mirrored state 5 min

function fail(msg) {
  process.stderr.write(`official-server: ${msg}\n`);
  process.exit(1);
}
process.on("uncaughtException", e => fail(e?.stack ?? String(e)));
process.on("unhandledRejection", e => fail(e?.stack ?? String(e)));

const [rpcUrl, listen, path, priceArg, minDeposit] = process.argv.slice(2);
const atomic = /^[1-9][0-9]*$/;
if (!rpcUrl || !/^[^:]+:[0-9]+$/.test(listen ?? "") || !path?.startsWith("/") || !atomic.test(priceArg ?? "") || !atomic.test(minDeposit ?? "")) {
  fail("usage: node server.mjs RPC_URL HOST:PORT PATH PRICE_ATOMIC MIN_DEPOSIT_ATOMIC");
}
const origin = new URL(rpcUrl).origin;

async function devnet(method, p) {
  const res = await fetch(origin + p, { method });
  if (!res.ok) {
    fail(`${method} ${p}: ${res.status} ${await res.text()}`);
  }
  return res.json();
}

const desc = await devnet("GET", "/devnet.json");
if (desc.chainId !== 8453 || !desc.batchSettlement) {
  fail(`${origin} is not a devnet with the batch-settlement escrow: ${JSON.stringify(desc).slice(0, 300)}`);
}
const payToRole = desc.accounts.find(a => a.role === "payTo") ?? fail("/devnet.json has no payTo account");
const payTo = getAddress(payToRole.address);
const chain = defineChain({
  id: desc.chainId,
  name: "Tollgate devnet",
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [rpcUrl] } },
});

// The facilitator: gas from an account of its own, a receiverAuthorizer
// key only this process holds.
const gas = await devnet("POST", "/devnet/gas-account");
const relayer = mnemonicToAccount(desc.mnemonic, { addressIndex: gas.index });
if (relayer.address !== getAddress(gas.address)) {
  fail(`gas account ${gas.address} is not #${gas.index} of the devnet mnemonic`);
}
const wallet = createWalletClient({ account: relayer, chain, transport: http(rpcUrl), pollingInterval: 100 }).extend(publicActions);
const authorizer = privateKeyToAccount(generatePrivateKey());
const facilitator = new x402Facilitator().register(
  network,
  new FacilitatorScheme(toFacilitatorEvmSigner({ ...wallet, address: relayer.address }, { confirmationTimeoutMs: 60_000 }), authorizer),
);
// In process: what HTTPFacilitatorClient would ask over /verify, /settle
// and /supported, without the HTTP hop.
const facilitatorClient = {
  verify: (payload, requirements) => facilitator.verify(payload, requirements),
  settle: (payload, requirements) => facilitator.settle(payload, requirements),
  getSupported: async () => facilitator.getSupported(),
};

const resourceServer = new x402ResourceServer(facilitatorClient).register(network, new ServerScheme(payTo, { withdrawDelay }));
const routes = {
  [`GET ${path}`]: {
    accepts: {
      scheme: "batch-settlement",
      network,
      payTo,
      price: { amount: priceArg, asset: getAddress(desc.token.address), extra: { name: desc.token.name, version: desc.token.version, minDeposit } },
      maxTimeoutSeconds: 300,
    },
    description: "ETH regime (bench: a fixed answer)",
    mimeType: "application/json",
  },
};

const app = express();
app.disable("x-powered-by");
app.get("/health", (_req, res) => res.json({ status: "ok" }));
app.use(paymentMiddleware(routes, resourceServer));
app.get(path, (_req, res) =>
  res.json({ regime: "RANGE", price: 3012.44, ema10: 3008.91, ema30: 3001.37, rsi14: 51.2, asOf: new Date().toISOString(), source: "devnet-synthetic" }),
);

const [host, port] = [listen.slice(0, listen.lastIndexOf(":")), Number(listen.slice(listen.lastIndexOf(":") + 1))];
const server = app.listen(port, host, err => {
  if (err) {
    fail(`listen ${listen}: ${err.message}`);
  }
  const addr = server.address();
  console.log(JSON.stringify({ url: `http://${host}:${addr.port}`, payTo, receiverAuthorizer: authorizer.address, gas: relayer.address }));
});
server.keepAliveTimeout = 60_000;

function stop() {
  server.close(() => process.exit(0));
  server.closeAllConnections?.();
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
process.stdin.on("end", stop);
process.stdin.on("error", stop);
process.stdin.resume();
