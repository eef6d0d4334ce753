// Conformance of the devnet's batch-settlement contracts (issue 14, item
// 4): the official @x402/evm facilitator, unmodified, deposits, claims,
// settles and refunds a channel against a Tollgate devnet, driven through
// x402Facilitator.verify/settle (what its HTTP /verify and /settle call).
// Payer #0 signs the deposit and vouchers with the official client
// pieces; the facilitator pays gas from a claimed gas account and signs
// claims and refunds with a throwaway receiverAuthorizer key. After every
// step the channel and the token balances are read from the chain and
// compared with exact amounts.
//   node batch-facilitator.mjs RPC_URL   (or TOLLGATE_DEVNET_URL)
// Silent on success but for one summary line on stderr; exits 1 with the
// reason on any failure.
import { createPublicClient, createWalletClient, defineChain, getAddress, http, parseAbi, publicActions, toHex } from "viem";
import { generatePrivateKey, mnemonicToAccount, privateKeyToAccount } from "viem/accounts";
import { x402Facilitator } from "@x402/core/facilitator";
import {
  BATCH_SETTLEMENT_ADDRESS,
  ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
  toClientEvmSigner,
  toFacilitatorEvmSigner,
} from "@x402/evm";
import { BatchSettlementEvmScheme as Facilitator } from "@x402/evm/batch-settlement/facilitator";
import { BatchSettlementEvmScheme as Client, computeChannelId, signVoucher } from "@x402/evm/batch-settlement/client";

const network = "eip155:8453";
const price = 20_000n; // 0.02 USD, 6 decimals
const deposit = 1_000_000n; // D = 50 prices
const withdrawDelay = 900;

// The views we assert on, from the public ABI (docs/batch-settlement.md §1.3).
const escrowAbi = parseAbi([
  "function channels(bytes32) view returns (uint128 balance, uint128 totalClaimed)",
  "function pendingWithdrawals(bytes32) view returns (uint128 amount, uint40 initiatedAt)",
  "function refundNonce(bytes32) view returns (uint256)",
  "function receivers(address, address) view returns (uint128 totalClaimed, uint128 totalSettled)",
]);
const erc20Abi = parseAbi(["function balanceOf(address) view returns (uint256)"]);

function fail(msg) {
  process.stderr.write(`batch-facilitator: ${msg}\n`);
  process.exit(1);
}

// A thrown error (RPC down, a package exception) fails the same way.
process.on("uncaughtException", e => fail(e?.stack ?? String(e)));
process.on("unhandledRejection", e => fail(e?.stack ?? String(e)));

function expect(what, got, want) {
  if (String(got) !== String(want)) {
    fail(`${what}: got ${got}, want ${want}`);
  }
}

function json(v) {
  return JSON.stringify(v, (_, x) => (typeof x === "bigint" ? x.toString() : x));
}

const rpcUrl = process.argv[2] ?? process.env.TOLLGATE_DEVNET_URL;
if (!rpcUrl) {
  fail("usage: node batch-facilitator.mjs RPC_URL (or TOLLGATE_DEVNET_URL)");
}
const origin = new URL(rpcUrl).origin;

async function devnet(method, path) {
  const res = await fetch(origin + path, { method });
  if (!res.ok) {
    fail(`${method} ${path}: ${res.status} ${await res.text()}`);
  }
  return res.json();
}

const desc = await devnet("GET", "/devnet.json");
const bs = desc.batchSettlement;
if (!bs) {
  fail("/devnet.json has no batchSettlement");
}
expect("escrow address (devnet vs @x402/evm)", getAddress(bs.escrow), getAddress(BATCH_SETTLEMENT_ADDRESS));
expect("ERC-3009 collector address (devnet vs @x402/evm)", getAddress(bs.erc3009DepositCollector), getAddress(ERC3009_DEPOSIT_COLLECTOR_ADDRESS));
expect("chain id", desc.chainId, 8453);
const role = r => desc.accounts.find(a => a.role === r) ?? fail(`/devnet.json has no ${r} account`);
const token = getAddress(desc.token.address);
const payer = mnemonicToAccount(desc.mnemonic, { addressIndex: role("payer").index });
const payTo = getAddress(role("payTo").address);
expect("payer address", payer.address, getAddress(role("payer").address));

const chain = defineChain({
  id: desc.chainId,
  name: "Tollgate devnet",
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [rpcUrl] } },
});
// The devnet seals a block per transaction: poll receipts often.
const pollingInterval = 100;
const publicClient = createPublicClient({ chain, transport: http(rpcUrl), pollingInterval });

// Facilitator: gas from an account of our own (nobody else sends from it),
// and a receiverAuthorizer key that only this run holds.
const gas = await devnet("POST", "/devnet/gas-account");
const relayer = mnemonicToAccount(desc.mnemonic, { addressIndex: gas.index });
expect("gas account", relayer.address, getAddress(gas.address));
const wallet = createWalletClient({ account: relayer, chain, transport: http(rpcUrl), pollingInterval }).extend(publicActions);
const authorizer = privateKeyToAccount(generatePrivateKey());
const facilitator = new x402Facilitator().register(
  network,
  new Facilitator(toFacilitatorEvmSigner({ ...wallet, address: relayer.address }, { confirmationTimeoutMs: 30_000 }), authorizer),
);
const kind = facilitator.getSupported().kinds.find(k => k.scheme === "batch-settlement" && k.network === network);
expect("/supported receiverAuthorizer", kind?.extra?.receiverAuthorizer, authorizer.address);

const requirements = {
  scheme: "batch-settlement",
  network,
  asset: token,
  amount: price.toString(),
  payTo,
  maxTimeoutSeconds: 300,
  extra: { receiverAuthorizer: authorizer.address, withdrawDelay, name: desc.token.name, version: desc.token.version },
};
// A fresh salt per run: a new channel even on a devnet used before.
const salt = toHex(crypto.getRandomValues(new Uint8Array(32)));
const clientSigner = toClientEvmSigner(payer, publicClient);
const client = new Client(clientSigner, { salt, depositStrategy: () => deposit.toString() });

function envelope(payload) {
  return { x402Version: 2, resource: { url: "http://tollgate.test/candles" }, accepted: requirements, payload };
}

async function verify(step, payload) {
  const r = await facilitator.verify(envelope(payload), requirements);
  if (!r.isValid) {
    fail(`${step}: verify: ${json(r)}`);
  }
  return r;
}

async function settle(step, payload) {
  const r = await facilitator.settle(envelope(payload), requirements);
  if (!r.success) {
    fail(`${step}: settle: ${json(r)}`);
  }
  const rcpt = await publicClient.getTransactionReceipt({ hash: r.transaction });
  expect(`${step}: receipt status`, rcpt.status, "success");
  return { r, rcpt };
}

const read = (address, abi, functionName, args) => publicClient.readContract({ address, abi, functionName, args });
const escrow = getAddress(BATCH_SETTLEMENT_ADDRESS);

async function snapshot(id) {
  const [[balance, totalClaimed], [pending, initiatedAt], nonce, [rClaimed, rSettled], payerBal, payToBal, escrowBal] =
    await Promise.all([
      read(escrow, escrowAbi, "channels", [id]),
      read(escrow, escrowAbi, "pendingWithdrawals", [id]),
      read(escrow, escrowAbi, "refundNonce", [id]),
      read(escrow, escrowAbi, "receivers", [payTo, token]),
      read(token, erc20Abi, "balanceOf", [payer.address]),
      read(token, erc20Abi, "balanceOf", [payTo]),
      read(token, erc20Abi, "balanceOf", [escrow]),
    ]);
  return { balance, totalClaimed, pending, initiatedAt, nonce, rClaimed, rSettled, payerBal, payToBal, escrowBal };
}

// check compares a snapshot with the start plus the expected changes.
function check(step, s, start, want) {
  expect(`${step}: channel balance`, s.balance, want.balance);
  expect(`${step}: channel totalClaimed`, s.totalClaimed, want.totalClaimed);
  expect(`${step}: refundNonce`, s.nonce, want.nonce);
  expect(`${step}: pending withdrawal`, `${s.pending}/${s.initiatedAt}`, "0/0");
  expect(`${step}: receiver totalClaimed`, s.rClaimed - start.rClaimed, want.claimed);
  expect(`${step}: receiver totalSettled`, s.rSettled - start.rSettled, want.settled);
  expect(`${step}: payer token balance change`, s.payerBal - start.payerBal, want.payer);
  expect(`${step}: payTo token balance change`, s.payToBal - start.payToBal, want.payTo);
  expect(`${step}: escrow token balance change`, s.escrowBal - start.escrowBal, want.escrow);
}

// 1. Deposit: the official client builds the payload (ReceiveWithAuthorization
// to the collector under the token's domain, and a voucher for one price).
const created = await client.createPaymentPayload(2, requirements);
const dep = created.payload;
expect("client payload type", dep.type, "deposit");
expect("client deposit amount", dep.deposit.amount, deposit);
const config = dep.channelConfig;
const id = computeChannelId(config, network);
expect("voucher channel id", dep.voucher.channelId.toLowerCase(), id.toLowerCase());
const start = await snapshot(id);
expect("new channel balance", start.balance, 0n);
if (start.payerBal < deposit) {
  fail(`payer holds ${start.payerBal}, needs ${deposit}`);
}

const v0 = await verify("deposit", dep);
expect("deposit: verify payer", getAddress(v0.payer), payer.address);
expect("deposit: verify pre-deposit balance", v0.extra?.balance, "0");
const { r: depR, rcpt: depRcpt } = await settle("deposit", dep);
expect("deposit: settle amount", depR.amount, deposit);
expect("deposit: settle channelState.balance", depR.extra?.channelState?.balance, deposit);
if (!depRcpt.logs.some(l => getAddress(l.address) === escrow)) {
  fail("deposit: no escrow event in the receipt");
}
check("deposit", await snapshot(id), start, {
  balance: deposit, totalClaimed: 0n, nonce: 0n, claimed: 0n, settled: 0n, payer: -deposit, payTo: 0n, escrow: deposit,
});

// 2. Vouchers for the second and third calls (cumulative 2 and 3 prices).
const vouchers = [dep.voucher];
for (let n = 2n; n <= 3n; n++) {
  const v = await signVoucher(clientSigner, id, (n * price).toString(), network);
  const r = await verify(`voucher ${n}`, { type: "voucher", channelConfig: config, voucher: v });
  expect(`voucher ${n}: verify balance`, r.extra?.balance, deposit);
  expect(`voucher ${n}: verify totalClaimed`, r.extra?.totalClaimed, "0");
  vouchers.push(v);
}
const claimRow = v => ({ voucher: { channel: config, maxClaimableAmount: v.maxClaimableAmount }, signature: v.signature, totalClaimed: v.maxClaimableAmount });

// 3. Claim two prices (claimWithSignature, the facilitator's authorizer signs).
const c1 = 2n * price;
await settle("claim", { type: "claim", claims: [claimRow(vouchers[1])] });
check("claim", await snapshot(id), start, {
  balance: deposit, totalClaimed: c1, nonce: 0n, claimed: c1, settled: 0n, payer: -deposit, payTo: 0n, escrow: deposit,
});

// 4. Settle: sweep the claimed value to payTo (the facilitator's fixed 120000 gas).
const { r: setR } = await settle("settle", { type: "settle", receiver: payTo, token });
expect("settle: amount", setR.amount, c1);
check("settle", await snapshot(id), start, {
  balance: deposit, totalClaimed: c1, nonce: 0n, claimed: c1, settled: c1, payer: -deposit, payTo: c1, escrow: deposit - c1,
});
const again = await facilitator.settle(envelope({ type: "settle", receiver: payTo, token }), requirements);
expect("settle again: errorReason", again.success ? "success" : again.errorReason, "invalid_batch_settlement_evm_nothing_to_settle");

// 5. Cooperative refund of the rest: the third voucher is claimed in the
// same multicall (claimWithSignature + refundWithSignature).
const charged = 3n * price; // C
const zero = await signVoucher(clientSigner, id, charged.toString(), network);
const refund = { type: "refund", channelConfig: config, voucher: zero };
await verify("refund", refund);
const { r: refR } = await settle("refund", {
  ...refund, amount: deposit.toString(), refundNonce: "0", claims: [claimRow(vouchers[2])],
});
expect("refund: amount", refR.amount, deposit - charged);
expect("refund: channelState", json(refR.extra?.channelState), json({
  channelId: id, balance: charged.toString(), totalClaimed: charged.toString(), withdrawRequestedAt: 0, refundNonce: "1",
}));
check("refund", await snapshot(id), start, {
  balance: charged, totalClaimed: charged, nonce: 1n, claimed: charged, settled: c1, payer: -charged, payTo: c1, escrow: charged - c1,
});

// 6. Settle the price claimed with the refund: payTo has C, the payer paid
// exactly C, the escrow holds nothing more of this channel.
const { r: set2 } = await settle("final settle", { type: "settle", receiver: payTo, token });
expect("final settle: amount", set2.amount, charged - c1);
const end = await snapshot(id);
check("final settle", end, start, {
  balance: charged, totalClaimed: charged, nonce: 1n, claimed: charged, settled: charged, payer: -charged, payTo: charged, escrow: 0n,
});
expect("refundable after refund", end.balance - end.totalClaimed, 0n);

process.stderr.write(
  `batch-facilitator: @x402/evm facilitator on ${origin}: deposit ${deposit}, claimed ${charged} (${c1} + ${charged - c1} in the refund multicall), ` +
    `settled ${charged} to payTo, refunded ${deposit - charged} to the payer, channel ${id} drained\n`,
);
