// Compiles the devnet contracts with the solc-js pinned in package.json and
// writes one JSON artifact per contract: {compiler, abi, bytecode,
// deployedBytecode}. Usage: node compile.js OUT_DIR SOURCE.sol|PREBUILT.json...
// Imports ("@openzeppelin/contracts/...") resolve in node_modules, pinned by
// package-lock.json; only the contracts of the named sources are written,
// not those of their imports. A .json argument is an artifact an npm
// package ships already compiled, deployed as the package built it (its
// bytecode is what the real deployments run, and other contracts may pin
// its hash): it is rewritten into the same shape. Three shapes are read:
// solc's standard output (Uniswap V2's build/*.json; v2-periphery's omit
// the metadata, so the compiler version is read from the code's CBOR
// trailer, as for Hardhat's), Hardhat's
// artifacts/**/*.json (Uniswap V3, PancakeSwap V3; the compiler version is
// read from the code's CBOR trailer) and Foundry's out/**/*.json (Uniswap
// V4). Output is deterministic for the same compiler, settings and
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

// hex0x gives code as 0x-prefixed hex.
const hex0x = (code) => (code.startsWith("0x") ? code : "0x" + code);

// cborSolc reads the compiler version solc appends to runtime code: a CBOR
// map whose length is the code's last two bytes, its "solc" entry three
// bytes (major, minor, patch).
function cborSolc(code) {
  const b = Buffer.from(code.replace(/^0x/, ""), "hex");
  const len = b.readUInt16BE(b.length - 2);
  const m = b.subarray(b.length - 2 - len, b.length - 2);
  const at = m.indexOf(Buffer.from("64736f6c63", "hex")); // text(4) "solc"
  if (at < 0 || m[at + 5] !== 0x43) throw new Error("no solc version in the code's metadata");
  return [...m.subarray(at + 6, at + 9)].join(".");
}

function prebuiltArtifact(f) {
  const b = JSON.parse(fs.readFileSync(f, "utf8"));
  if (b.evm) {
    // solc's standard output (v2-periphery's build/*.json without metadata)
    const compiler = b.metadata ? JSON.parse(b.metadata).compiler.version : cborSolc(b.evm.deployedBytecode.object);
    return { compiler, abi: b.abi, bytecode: b.evm.bytecode.object,
      deployed: b.evm.deployedBytecode.object, links: b.evm.bytecode.linkReferences };
  }
  if (typeof b.bytecode === "object") {
    // Foundry
    return { compiler: b.metadata.compiler.version, abi: b.abi, bytecode: b.bytecode.object, deployed: b.deployedBytecode.object,
      links: b.bytecode.linkReferences };
  }
  // Hardhat
  return { compiler: cborSolc(b.deployedBytecode), abi: b.abi, bytecode: b.bytecode, deployed: b.deployedBytecode, links: b.linkReferences };
}

for (const f of prebuilt) {
  const a = prebuiltArtifact(f);
  if (a.links && Object.keys(a.links).length) {
    console.error(`${f}: needs library linking, which the devnet does not do`);
    process.exit(1);
  }
  write(path.basename(f, ".json"), {
    compiler: "solc " + a.compiler,
    source: f.slice(f.indexOf("node_modules/") + "node_modules/".length),
    abi: a.abi,
    bytecode: hex0x(a.bytecode),
    deployedBytecode: hex0x(a.deployed),
  });
}

if (!files.length) process.exit(0); // prebuilt artifacts only
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
