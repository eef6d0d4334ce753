// Compiles the tokens of the precision tests (Votes.sol:
// OpenZeppelin 5's ERC20Votes with ERC20Permit, as the Wizard writes it;
// SafeMoonStyle.sol: the shape of SafeMoon's copies)
// with the solc-js and OpenZeppelin pinned for the devnet
// (devnet/contracts/node_modules), optimizer on, into genuine.json: each
// contract's ABI, creation code, runtime code and immutable references.
// Usage, from this directory: node compile.js
const fs = require("fs");
const path = require("path");
const nm = path.join(__dirname, "../../../../devnet/contracts/node_modules");
const solc = require(path.join(nm, "solc"));

const sources = {};
for (const f of ["Votes.sol", "SafeMoonStyle.sol"]) sources[f] = { content: fs.readFileSync(path.join(__dirname, f), "utf8") };
const settings = {
  optimizer: { enabled: true, runs: 200 },
  evmVersion: "cancun",
  metadata: { bytecodeHash: "none" },
  outputSelection: { "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object", "evm.deployedBytecode.immutableReferences"] } },
};
const findImports = (p) => {
  try {
    return { contents: fs.readFileSync(path.join(nm, p), "utf8") };
  } catch (e) {
    return { error: "not found: " + p };
  }
};
const out = JSON.parse(solc.compile(JSON.stringify({ language: "Solidity", sources, settings }), { import: findImports }));
const errors = (out.errors || []).filter((e) => e.severity === "error");
for (const e of errors) console.error(e.formattedMessage);
if (errors.length) process.exit(1);
const contracts = {};
for (const f of Object.keys(sources)) {
  for (const [name, c] of Object.entries(out.contracts[f])) {
    contracts[name] = { abi: c.abi, bytecode: "0x" + c.evm.bytecode.object, deployedBytecode: "0x" + c.evm.deployedBytecode.object,
      immutableReferences: c.evm.deployedBytecode.immutableReferences };
    console.log(`${name}: ${c.evm.deployedBytecode.object.length / 2} bytes`);
  }
}
const openzeppelin = JSON.parse(fs.readFileSync(path.join(nm, "@openzeppelin/contracts/package.json"), "utf8")).version;
fs.writeFileSync(path.join(__dirname, "genuine.json"),
  JSON.stringify({ compiler: "solc " + solc.version(), openzeppelin, settings, contracts }, null, 1) + "\n");
