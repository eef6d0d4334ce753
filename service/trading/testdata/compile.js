// Compiles the fixed-trap catalogue (Traps.sol) with the solc-js pinned for
// the devnet (devnet/contracts/node_modules/solc) and its settings
// (optimizer on, 200 runs, cancun, no metadata hash, so a control that
// differs from its trap only in its constructor has the same runtime
// code) into traps.json: each contract's ABI, creation code, runtime code
// and immutable references. Abstract contracts and interfaces are left out.
// Usage, from this directory: node compile.js
const fs = require("fs");
const path = require("path");
const solc = require(path.join(__dirname, "../../../devnet/contracts/node_modules/solc"));

const settings = {
  optimizer: { enabled: true, runs: 200 },
  evmVersion: "cancun",
  metadata: { bytecodeHash: "none" },
  outputSelection: {
    "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object", "evm.deployedBytecode.immutableReferences"] },
  },
};
const sources = { "Traps.sol": { content: fs.readFileSync(path.join(__dirname, "Traps.sol"), "utf8") } };
const out = JSON.parse(solc.compile(JSON.stringify({ language: "Solidity", sources, settings })));
for (const e of out.errors || []) console.error(e.formattedMessage);
if ((out.errors || []).some((e) => e.severity === "error")) process.exit(1);

const contracts = {};
for (const [name, c] of Object.entries(out.contracts["Traps.sol"])) {
  if (!c.evm.bytecode.object) continue; // abstract contracts and interfaces
  contracts[name] = {
    abi: c.abi,
    bytecode: "0x" + c.evm.bytecode.object,
    deployedBytecode: "0x" + c.evm.deployedBytecode.object,
    immutableReferences: c.evm.deployedBytecode.immutableReferences || {},
  };
  console.log(`${name}: ${c.evm.deployedBytecode.object.length / 2} bytes deployed`);
}
const fixture = { compiler: "solc " + solc.version(), settings, contracts };
fs.writeFileSync(path.join(__dirname, "traps.json"), JSON.stringify(fixture, null, 1) + "\n");
