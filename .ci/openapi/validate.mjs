// Validates OpenAPI documents with swagger-parser (structure against the
// official 3.1 schema, plus $ref resolution). Usage: node validate.mjs FILE...
import SwaggerParser from "@apidevtools/swagger-parser";

let failed = false;
for (const file of process.argv.slice(2)) {
  try {
    const api = await SwaggerParser.validate(file);
    console.log(`${file}: valid OpenAPI ${api.openapi}, ${Object.keys(api.paths).length} paths`);
  } catch (err) {
    console.error(`${file}: INVALID: ${err.message}`);
    failed = true;
  }
}
process.exit(failed ? 1 : 0);
