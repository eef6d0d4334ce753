// Extracts ClankerToken v3.1 and v4 (ABI and creation code) from the
// published clanker-sdk, for the rug check's launchpad tests: launchpad
// tokens with no owner powers must PASS.
// Usage, from this directory: npm ci && node extract.mjs clanker.json
import fs from "fs";
const src = fs.readFileSync("node_modules/clanker-sdk/dist/legacyFeeClaims/index.js", "utf8");
const pick = (name) => {
  const i = src.indexOf(`var ${name} = `);
  if (i < 0) throw new Error(name);
  const start = i + `var ${name} = `.length;
  // an array literal or a string literal, up to the statement's end
  let depth = 0, j = start, inStr = false, q = "";
  for (; j < src.length; j++) {
    const c = src[j];
    if (inStr) { if (c === "\\") { j++; continue; } if (c === q) inStr = false; continue; }
    if (c === '"' || c === "'") { inStr = true; q = c; continue; }
    if (c === "[" || c === "{") depth++;
    if (c === "]" || c === "}") depth--;
    if (c === ";" && depth === 0) break;
  }
  return Function(`return (${src.slice(start, j)});`)();
};
const version = JSON.parse(fs.readFileSync("node_modules/clanker-sdk/package.json", "utf8")).version;
const out = { source: `clanker-sdk ${version} (npm), dist/legacyFeeClaims/index.js`, contracts: {} };
for (const [name, abi, code] of [["ClankerToken_v3_1", "ClankerToken_v3_1_abi", "ClankerToken_v3_1_bytecode"], ["ClankerToken_v4", "ClankerToken_v4_abi", "ClankerToken_v4_bytecode"]]) {
  out.contracts[name] = { abi: pick(abi), bytecode: pick(code) };
}
fs.writeFileSync(process.argv[2], JSON.stringify(out) + "\n");
for (const [n, c] of Object.entries(out.contracts)) console.log(n, c.bytecode.length / 2 - 1, JSON.stringify(c.abi.find((e) => e.type === "constructor").inputs.map((i) => i.type + " " + i.name)));
