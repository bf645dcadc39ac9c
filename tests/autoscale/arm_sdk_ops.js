#!/usr/bin/env node
// The vmss actuator's operations done with Microsoft's own client,
// @azure/arm-compute, against arm_contract_server.js: the reference the
// actuator's requests are compared with (vmss_actuator_integration_test.cc).
//
//   node arm_sdk_ops.js --endpoint http://127.0.0.1:PORT --subscription S
//        --resource-group RG --name N --token T --capacity 5 --delete 0,3
//
// Read (Get + VMs List with $expand=instanceView), scale out
// (beginUpdateAndWait {sku:{capacity}} with ifMatch = the ETag read), scale in
// (beginDeleteInstancesAndWait {instanceIds}). Prints one JSON line with what
// it read.
'use strict';
const { ComputeManagementClient } = require('@azure/arm-compute');

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].slice(2)] = process.argv[i + 1];

// A TokenCredential with a fixed token. The SDK's bearerTokenAuthenticationPolicy
// refuses http:// URLs outright, so it is replaced by one that sets the same
// header (Authorization: Bearer <token>) on the loopback test server.
const credential = { getToken: async () => ({ token: args.token, expiresOnTimestamp: Date.now() + 3600e3 }) };

async function main() {
  const client = new ComputeManagementClient(credential, args.subscription, {
    endpoint: args.endpoint,
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
  const rg = args['resource-group'];
  const name = args.name;
  const poll = { updateIntervalInMs: 10 };

  // The ETag comes back as a response header and as the body's etag.
  let etagHeader;
  const vmss = await client.virtualMachineScaleSets.get(rg, name, {
    onResponse: (r) => { etagHeader = r.headers.get('etag'); },
  });
  const vms = [];
  for await (const vm of client.virtualMachineScaleSetVMs.list(rg, name, { expand: 'instanceView' })) {
    vms.push(vm.instanceId);
  }
  await client.virtualMachineScaleSets.beginUpdateAndWait(
    rg, name, { sku: { capacity: Number(args.capacity) } },
    { ...poll, ifMatch: etagHeader || vmss.etag });
  await client.virtualMachineScaleSets.beginDeleteInstancesAndWait(
    rg, name, { instanceIds: args.delete.split(',') }, poll);
  process.stdout.write(JSON.stringify({ capacity: vmss.sku.capacity, etag: etagHeader, instances: vms }) + '\n');
}

main().catch((e) => {
  process.stderr.write(`arm_sdk_ops: ${e.stack || e}\n`);
  process.exit(1);
});
