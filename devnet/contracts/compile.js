// Compiles the devnet contracts with the solc-js pinned in package.json and
// writes one JSON artifact per contract: {compiler, abi, bytecode,
// deployedBytecode}. Usage: node compile.js OUT_DIR SOURCE.sol...
// Output is deterministic for the same compiler and settings, so CI can
// recompile and compare with the committed artifacts.
const fs = require("fs");
const path = require("path");
const solc = require("solc");

const [outDir, ...files] = process.argv.slice(2);
const sources = {};
for (const f of files) sources[path.basename(f)] = { content: fs.readFileSync(f, "utf8") };
const input = {
  language: "Solidity",
  sources,
  settings: {
    optimizer: { enabled: true, runs: 200 },
    evmVersion: "cancun",
    metadata: { bytecodeHash: "none" },
    outputSelection: { "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"] } },
  },
};
const out = JSON.parse(solc.compile(JSON.stringify(input)));
const errors = (out.errors || []).filter((e) => e.severity === "error");
for (const e of out.errors || []) console.error(e.formattedMessage);
if (errors.length) process.exit(1);
for (const [file, contracts] of Object.entries(out.contracts)) {
  for (const [name, c] of Object.entries(contracts)) {
    if (!c.evm.bytecode.object) continue; // abstract contracts and interfaces
    const artifact = {
      compiler: "solc " + solc.version(),
      source: file,
      abi: c.abi,
      bytecode: "0x" + c.evm.bytecode.object,
      deployedBytecode: "0x" + c.evm.deployedBytecode.object,
    };
    fs.writeFileSync(path.join(outDir, name + ".json"), JSON.stringify(artifact, null, 1) + "\n");
    console.log(`${name}: ${c.evm.deployedBytecode.object.length / 2} bytes deployed`);
  }
}
