// The MCP Inspector's CLI (@modelcontextprotocol/inspector-cli 1.0.3)
// lists a devnet Tollgate's tools over Streamable HTTP:
//
//   node inspector.mjs URL
//     runs `mcp-inspector-cli --cli URL --transport http --method
//     tools/list` (URL is the MCP endpoint, {base}/mcp) and prints one JSON
//     line: {"client", "tools": [{name, inputSchema, outputSchema}]}.
//
// The CLI reads its own package.json to name itself, testing
// fs.existsSync("../package.json") against the working directory but
// importing the path relative to its module: run from a directory without
// a package.json above it, it fails with "Cannot find module
// .../node_modules/@modelcontextprotocol/package.json". It runs here from
// node_modules, whose parent (this directory) has one. It writes a
// deprecation notice on stderr, the JSON answer on stdout.
import { execFile } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const [url] = process.argv.slice(2);
if (!url) {
  process.stderr.write("usage: node inspector.mjs URL\n");
  process.exit(2);
}
const modules = join(dirname(fileURLToPath(import.meta.url)), "node_modules");
const cli = join(modules, "@modelcontextprotocol", "inspector-cli", "build", "cli.js");
execFile(process.execPath, [cli, "--cli", url, "--transport", "http", "--method", "tools/list"], { cwd: modules, maxBuffer: 64 << 20 },
  (err, stdout, stderr) => {
    let out;
    try {
      out = JSON.parse(stdout);
    } catch {
      // reported below
    }
    if (err || !Array.isArray(out?.tools)) {
      process.stderr.write(`inspector: ${err ?? "no tools in the answer"}\nstdout: ${stdout.slice(0, 3000)}\nstderr: ${stderr}\n`);
      process.exit(1);
    }
    console.log(JSON.stringify({
      client: "@modelcontextprotocol/inspector-cli@1.0.3",
      tools: out.tools.map(t => ({ name: t.name, inputSchema: t.inputSchema, outputSchema: t.outputSchema })),
    }));
  });
