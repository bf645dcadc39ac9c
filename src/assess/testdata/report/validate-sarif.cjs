// Validates SARIF files against the SARIF 2.1.0 JSON schema (the rtm.5 text
// that json.schemastore.org serves as sarif-2.1.0.json, shipped in the npm
// package @microsoft/jest-sarif) with ajv 6, which reads draft-04 schemas.
// Both are pinned in package-lock.json (scripts/install-deps.sh installs them).
// Usage: node validate-sarif.cjs <repo root> file.sarif...; exit 0 when every
// file is valid, 1 with the schema errors otherwise, 2 when a tool is missing.
'use strict';
const fs = require('fs');
const path = require('path');
const root = process.argv[2];
let Ajv, schema, draft4;
try {
  Ajv = require(path.join(root, 'node_modules/ajv'));
  draft4 = require(path.join(root, 'node_modules/ajv/lib/refs/json-schema-draft-04.json'));
  schema = require(path.join(root, 'node_modules/@microsoft/jest-sarif/lib/schemas/sarif-2.1.0-rtm.5.json'));
} catch (e) {
  console.error('validate-sarif: ' + e.message + ' (run scripts/install-deps.sh)');
  process.exit(2);
}
const ajv = new Ajv({schemaId: 'id', allErrors: true, meta: false, jsonPointers: true});
ajv.addMetaSchema(draft4);
const validate = ajv.compile(schema);
let bad = 0;
for (const file of process.argv.slice(3)) {
  const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
  if (validate(doc)) {
    console.log(file + ': valid');
  } else {
    bad++;
    for (const e of validate.errors) console.log(file + ': ' + e.dataPath + ' ' + e.message);
  }
}
process.exit(bad ? 1 : 0);
