// Compiles the tests' timelock (Timelock.sol) with the solc-js pinned for
// the devnet (devnet/contracts/node_modules/solc) and the settings of
// service/trading/testdata/compile.js into timelock.json: each contract's
// ABI and creation code.
// Usage, from this directory: node compile.js
const fs = require("fs");
const path = require("path");
const solc = require(path.join(__dirname, "../../../devnet/contracts/node_modules/solc"));

const settings = {
  optimizer: { enabled: true, runs: 200 },
  evmVersion: "cancun",
  metadata: { bytecodeHash: "none" },
  outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
};
const sources = { "Timelock.sol": { content: fs.readFileSync(path.join(__dirname, "Timelock.sol"), "utf8") } };
const out = JSON.parse(solc.compile(JSON.stringify({ language: "Solidity", sources, settings })));
for (const e of out.errors || []) console.error(e.formattedMessage);
if ((out.errors || []).some((e) => e.severity === "error")) process.exit(1);

const contracts = {};
for (const [name, c] of Object.entries(out.contracts["Timelock.sol"])) {
  if (!c.evm.bytecode.object) continue; // interfaces
  contracts[name] = { abi: c.abi, bytecode: "0x" + c.evm.bytecode.object };
}
const fixture = { compiler: "solc " + solc.version(), settings, contracts };
fs.writeFileSync(path.join(__dirname, "timelock.json"), JSON.stringify(fixture, null, 1) + "\n");
