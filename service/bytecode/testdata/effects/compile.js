// Compiles the renamed-power catalogue (Catalogue.sol, Immutable.sol) with
// every solc release in package.json, optimizer off and on, and via-IR on
// 0.8, into one fixture per setting: <release>-<setting>.json holding each
// contract's ABI, runtime code and immutable references (and, for
// 0.8-optimized, which the devnet tests deploy, its creation code).
// Usage, from this directory: npm ci && node compile.js
const fs = require("fs");
const path = require("path");

const releases = [
  { pkg: "solc-0.5", tag: "0.5", ctor: "public", virtual: "", override: "", sender: "msg.sender", maxuint: "uint256(-1)", immutables: false, fallback: "function() external" },
  { pkg: "solc-0.6", tag: "0.6", ctor: "public", virtual: "virtual", override: "override", sender: "msg.sender", maxuint: "type(uint256).max", immutables: true, fallback: "fallback() external" },
  { pkg: "solc-0.7", tag: "0.7", ctor: "", virtual: "virtual", override: "override", sender: "msg.sender", maxuint: "type(uint256).max", immutables: true, fallback: "fallback() external" },
  { pkg: "solc-0.8", tag: "0.8", ctor: "", virtual: "virtual", override: "override", sender: "payable(msg.sender)", maxuint: "type(uint256).max", immutables: true, viaIR: true, fallback: "fallback() external" },
];

function source(file, r) {
  return fs
    .readFileSync(path.join(__dirname, file), "utf8")
    .replace(/\bCTOR\b/g, r.ctor)
    .replace(/\bVIRTUAL\b/g, r.virtual)
    .replace(/\bOVERRIDE\b/g, r.override)
    .replace(/\bSENDER\b/g, r.sender)
    .replace(/\bMAXUINT\b/g, r.maxuint)
    .replace(/\bFALLBACK\b/g, r.fallback);
}

for (const r of releases) {
  const solc = require(r.pkg);
  const sources = { "Catalogue.sol": { content: source("Catalogue.sol", r) } };
  if (r.immutables) sources["Immutable.sol"] = { content: source("Immutable.sol", r) };
  if (r.viaIR) sources["UUPS.sol"] = { content: fs.readFileSync(path.join(__dirname, "UUPS.sol"), "utf8") };
  const settings = [
    ["plain", { optimizer: { enabled: false } }],
    ["optimized", { optimizer: { enabled: true, runs: 200 } }],
  ];
  if (r.viaIR) settings.push(["viair", { optimizer: { enabled: true, runs: 200 }, viaIR: true }]);
  for (const [name, extra] of settings) {
    const input = {
      language: "Solidity",
      sources,
      settings: {
        ...extra,
        outputSelection: {
          "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object", "evm.deployedBytecode.immutableReferences"] },
        },
      },
    };
    const findImports = (p) => {
      try {
        return { contents: fs.readFileSync(path.join(__dirname, "node_modules", p), "utf8") };
      } catch (e) {
        return { error: "not found: " + p };
      }
    };
    const out = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
    const errors = (out.errors || []).filter((e) => e.severity === "error");
    for (const e of errors) console.error(e.formattedMessage);
    if (errors.length) process.exit(1);
    const file = `${r.tag}-${name}.json`;
    const contracts = {};
    for (const [unit, cs] of Object.entries(out.contracts)) {
      if (!sources[unit]) continue; // the libraries it imports
      for (const [cname, c] of Object.entries(cs)) {
        if (cname === "Base" || cname === "IGuard") continue;
        contracts[cname] = {
          abi: c.abi,
          // Creation code for the build the devnet tests deploy only.
          ...(file === "0.8-optimized.json" ? { bytecode: "0x" + c.evm.bytecode.object } : {}),
          deployedBytecode: "0x" + c.evm.deployedBytecode.object,
          immutableReferences: c.evm.deployedBytecode.immutableReferences || {},
        };
      }
    }
    const fixture = { compiler: "solc " + solc.version(), settings: input.settings, contracts };
    fs.writeFileSync(path.join(__dirname, file), JSON.stringify(fixture) + "\n");
    console.log(`${file}: ${Object.keys(contracts).length} contracts`);
  }
}
