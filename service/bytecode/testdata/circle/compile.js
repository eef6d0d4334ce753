// Compiles Circle's FiatToken v2.2 (the USDC implementation) and its proxy
// from the sources in src/ (circlefin/stablecoin-evm, tag v2.2.0; see
// README.md) with the solc-js that Circle pins (0.6.12) and Circle's
// optimizer settings, and writes fiattoken.json: per contract the ABI, the
// creation and the runtime bytecode, and the link references.
//
// FiatTokenV2_2 calls the external library SignatureChecker, so the compiler
// leaves a placeholder (__$<hash>$__) in its code. The fixture's bytecode has
// every placeholder replaced with LIBRARY_ADDRESS (below); the positions are
// kept under linkReferences / deployedLinkReferences.
//
// Usage, from this directory: npm ci && node compile.js
// (or: node compile.js SRC_DIR OUT_FILE, to compile another copy of the tree)
const fs = require("fs");
const path = require("path");
const solc = require("solc");

const LIBRARY_ADDRESS = "0x000000000000000000000000000000000000c1c1";
const srcDir = path.resolve(process.argv[2] || path.join(__dirname, "src"));
const outFile = path.resolve(process.argv[3] || path.join(__dirname, "fiattoken.json"));

// Source unit names are the paths below src/ ("contracts/v2/FiatTokenV2_2.sol"),
// as in Circle's repository; "@openzeppelin/..." is read from node_modules.
function walk(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(path.join(dir, e.name)) : e.name.endsWith(".sol") ? [path.join(dir, e.name)] : []
  );
}
const sources = {};
for (const f of walk(srcDir).sort()) {
  sources[path.relative(srcDir, f).split(path.sep).join("/")] = { content: fs.readFileSync(f, "utf8") };
}
function findImports(name) {
  if (!name.startsWith("@openzeppelin/contracts/")) return { error: "not found: " + name };
  return { contents: fs.readFileSync(path.join(__dirname, "node_modules", name), "utf8") };
}

// hardhat.config.ts (and truffle-config.js at v2.2.0): solc 0.6.12, optimizer
// on, 10,000,000 runs. evmVersion is solc 0.6.12's default, written out.
// Metadata is left at the default (IPFS hash appended to the runtime code);
// the hash covers the source unit names and so differs from the deployed one.
const settings = {
  optimizer: { enabled: true, runs: 10000000 },
  evmVersion: "istanbul",
  outputSelection: {
    "*": {
      "*": [
        "abi",
        "evm.bytecode.object",
        "evm.bytecode.linkReferences",
        "evm.deployedBytecode.object",
        "evm.deployedBytecode.linkReferences",
      ],
    },
  },
};

const wanted = {
  FiatTokenV2_2: "contracts/v2/FiatTokenV2_2.sol",
  FiatTokenProxy: "contracts/v1/FiatTokenProxy.sol",
  SignatureChecker: "contracts/util/SignatureChecker.sol",
};
const libraries = { "contracts/util/SignatureChecker.sol": { SignatureChecker: LIBRARY_ADDRESS } };

const out = JSON.parse(solc.compile(JSON.stringify({ language: "Solidity", sources, settings }), { import: findImports }));
for (const e of out.errors || []) if (e.severity === "error") console.error(e.formattedMessage);
if ((out.errors || []).some((e) => e.severity === "error")) process.exit(1);

// Replaces each 20-byte placeholder at the positions linkReferences gives.
function link(hex, refs) {
  for (const [file, libs] of Object.entries(refs)) {
    for (const [lib, places] of Object.entries(libs)) {
      const addr = ((libraries[file] || {})[lib] || "").replace(/^0x/, "");
      if (addr.length !== 40) throw new Error(`no address for library ${file}:${lib}`);
      for (const { start, length } of places) {
        const at = 2 * start;
        const placeholder = hex.slice(at, at + 2 * length);
        if (length !== 20 || !/^__\$[0-9a-f]{34}\$__$/.test(placeholder)) {
          throw new Error(`unexpected placeholder ${placeholder} at ${start}`);
        }
        hex = hex.slice(0, at) + addr + hex.slice(at + 2 * length);
      }
    }
  }
  if (hex.includes("__")) throw new Error("unlinked placeholder left");
  return hex;
}

const fixture = {
  source: {
    repository: "circlefin/stablecoin-evm",
    tag: "v2.2.0",
    commit: "405efc100c016ed1a437063b6274b4e24ea7b8b1",
    license: "Apache-2.0 (see LICENSE and README.md)",
  },
  compiler: "solc " + solc.version(),
  settings,
  libraries,
  contracts: {},
};
for (const [name, file] of Object.entries(wanted)) {
  const c = out.contracts[file][name];
  const code = link(c.evm.bytecode.object, c.evm.bytecode.linkReferences);
  const runtime = link(c.evm.deployedBytecode.object, c.evm.deployedBytecode.linkReferences);
  fixture.contracts[name] = {
    source: file,
    abi: c.abi,
    bytecode: "0x" + code,
    deployedBytecode: "0x" + runtime,
    linkReferences: c.evm.bytecode.linkReferences,
    deployedLinkReferences: c.evm.deployedBytecode.linkReferences,
  };
  console.log(`${name}: creation ${code.length / 2} bytes, runtime ${runtime.length / 2} bytes`);
}
fs.writeFileSync(outFile, JSON.stringify(fixture, null, 1) + "\n");
