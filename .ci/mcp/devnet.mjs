// What the clients in this directory share: the devnet's payer account
// and chain, read from the devnet's description at {RPC origin}/devnet.json
// (as ../interop/batch-client.mjs does), and failure reporting.
import { createPublicClient, defineChain, getAddress, http } from "viem";
import { mnemonicToAccount } from "viem/accounts";

// fail reports a failure on stderr and exits 1.
export function fail(who, msg) {
  process.stderr.write(`${who}: ${msg}\n`);
  process.exit(1);
}

// onCrash makes any uncaught error a failure of who.
export function onCrash(who) {
  process.on("uncaughtException", e => fail(who, e?.stack ?? String(e)));
  process.on("unhandledRejection", e => fail(who, e?.stack ?? String(e)));
}

// devnetPayer is the devnet's payer account (viem, from the description's
// mnemonic), its chain and a public client of rpcUrl.
export async function devnetPayer(who, rpcUrl) {
  const res = await fetch(new URL(rpcUrl).origin + "/devnet.json");
  if (!res.ok) {
    fail(who, `GET /devnet.json: ${res.status} ${await res.text()}`);
  }
  const desc = await res.json();
  const role = desc.accounts.find(a => a.role === "payer") ?? fail(who, "/devnet.json has no payer account");
  const account = mnemonicToAccount(desc.mnemonic, { addressIndex: role.index });
  if (account.address !== getAddress(role.address)) {
    fail(who, `payer ${account.address} is not /devnet.json's ${role.address}`);
  }
  const chain = defineChain({
    id: desc.chainId,
    name: "Tollgate devnet",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  return { account, chain, desc, publicClient: createPublicClient({ chain, transport: http(rpcUrl) }) };
}
