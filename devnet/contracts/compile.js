// Compiles the devnet contracts with the solc-js pinned in package.json and
// writes one JSON artifact per contract: {compiler, abi, bytecode,
// deployedBytecode}. Usage: node compile.js OUT_DIR SOURCE.sol|PREBUILT.json...
// Imports ("@openzeppelin/contracts/...") resolve in node_modules, pinned by
// package-lock.json; only the contracts of the named sources are written,
// not those of their imports. A .json argument is an artifact an npm
// package ships already compiled (Uniswap V2's build/*.json, solc 0.5.16,
// which the pinned 0.8 compiler cannot build): it is rewritten into the
// same shape. Output is deterministic for the same compiler, settings and
// packages, so CI can recompile and compare with the committed artifacts.
const fs = require("fs");
const path = require("path");
const solc = require("solc");

const [outDir, ...args] = process.argv.slice(2);
const files = args.filter((f) => f.endsWith(".sol"));
const prebuilt = args.filter((f) => f.endsWith(".json"));

function write(name, artifact) {
  fs.writeFileSync(path.join(outDir, name + ".json"), JSON.stringify(artifact, null, 1) + "\n");
  console.log(`${name}: ${(artifact.deployedBytecode.length - 2) / 2} bytes deployed`);
}

for (const f of prebuilt) {
  const b = JSON.parse(fs.readFileSync(f, "utf8"));
  const name = path.basename(f, ".json");
  write(name, {
    compiler: "solc " + JSON.parse(b.metadata).compiler.version,
    source: f.slice(f.indexOf("node_modules/") + "node_modules/".length),
    abi: b.abi,
    bytecode: "0x" + b.evm.bytecode.object,
    deployedBytecode: "0x" + b.evm.deployedBytecode.object,
  });
}

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
function findImports(p) {
  try {
    return { contents: fs.readFileSync(path.join(__dirname, "node_modules", p), "utf8") };
  } catch (e) {
    return { error: "not found: " + p };
  }
}
const out = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
const errors = (out.errors || []).filter((e) => e.severity === "error");
for (const e of out.errors || []) console.error(e.formattedMessage);
if (errors.length) process.exit(1);
for (const [file, contracts] of Object.entries(out.contracts || {})) {
  if (!(file in sources)) continue; // an import's contracts: only what the named sources declare
  for (const [name, c] of Object.entries(contracts)) {
    if (!c.evm.bytecode.object) continue; // abstract contracts and interfaces
    write(name, {
      compiler: "solc " + solc.version(),
      source: file,
      abi: c.abi,
      bytecode: "0x" + c.evm.bytecode.object,
      deployedBytecode: "0x" + c.evm.deployedBytecode.object,
    });
  }
}
