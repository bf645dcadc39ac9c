#!/usr/bin/env node
// Uploads records with Microsoft's own client, @azure/monitor-ingestion's
// LogsIngestionClient, to logs_ingestion_server.js: the reference the
// monitor module's requests are compared with (logs_sdk_integration_test.cc).
//
//   node ingestion_sdk_upload.js --endpoint http://127.0.0.1:PORT --rule dcr-... \
//        --stream Custom-X_CL --token T --records FILE
//
// FILE holds one JSON object per line. Exits 0 when the upload succeeded.
'use strict';
const fs = require('fs');
const { LogsIngestionClient } = require('@azure/monitor-ingestion');

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].slice(2)] = process.argv[i + 1];

// A TokenCredential with a fixed token. The SDK's bearerTokenAuthenticationPolicy
// refuses http:// URLs, so it is replaced by one that sets the same header on
// the loopback test server.
const credential = { getToken: async () => ({ token: args.token, expiresOnTimestamp: Date.now() + 3600e3 }) };

async function main() {
  const logs = fs.readFileSync(args.records, 'utf8').split('\n').filter((l) => l).map((l) => JSON.parse(l));
  const client = new LogsIngestionClient(args.endpoint, credential, {
    allowInsecureConnection: true,
    retryOptions: { maxRetries: 0 },
  });
  client.pipeline.removePolicy({ name: 'bearerTokenAuthenticationPolicy' });
  client.pipeline.addPolicy({
    name: 'testBearer',
    sendRequest: async (request, next) => {
      request.headers.set('Authorization', `Bearer ${args.token}`);
      request.allowInsecureConnection = true;
      return next(request);
    },
  });
  await client.upload(args.rule, args.stream, logs);
}

main().catch((e) => {
  process.stderr.write(`ingestion_sdk_upload: ${e.stack || e}\n`);
  process.exit(1);
});
