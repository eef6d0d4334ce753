// What the interop scripts share about a devnet Tollgate: its payer
// account (from the devnet's /devnet.json) and the decoding of x402
// headers.
import { createPublicClient, defineChain, getAddress, http } from "viem";
import { mnemonicToAccount } from "viem/accounts";

// decode reads a base64 JSON header, null when absent.
export function decode(header) {
  return header ? JSON.parse(Buffer.from(header, "base64").toString()) : null;
}

// devnetPayer is the devnet's payer account behind rpcUrl, with a public
// client of the chain; fail reports a problem and exits.
export async function devnetPayer(rpcUrl, fail) {
  const res = await fetch(new URL(rpcUrl).origin + "/devnet.json");
  if (!res.ok) {
    fail(`GET /devnet.json: ${res.status} ${await res.text()}`);
  }
  const desc = await res.json();
  const payerRole = desc.accounts.find(a => a.role === "payer") ?? fail("/devnet.json has no payer account");
  const account = mnemonicToAccount(desc.mnemonic, { addressIndex: payerRole.index });
  if (account.address !== getAddress(payerRole.address)) {
    fail(`payer ${account.address} is not /devnet.json's ${payerRole.address}`);
  }
  const chain = defineChain({
    id: desc.chainId,
    name: "Tollgate devnet",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  return { account, publicClient: createPublicClient({ chain, transport: http(rpcUrl) }) };
}
