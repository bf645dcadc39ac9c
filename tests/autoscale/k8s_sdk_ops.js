#!/usr/bin/env node
// The kubernetes actuator's operations done with the official client,
// @kubernetes/client-node, against k8s_contract_server.js: the reference the
// actuator's requests are compared with (kubernetes_actuator_integration_test.cc).
//
//   node k8s_sdk_ops.js --server http://127.0.0.1:PORT --token T --namespace default
//        --name web --replicas 5
//
// Read (readNamespacedDeploymentScale + readNamespacedDeployment), then
// replaceNamespacedDeploymentScale with the resourceVersion read. Prints one
// JSON line with what it read.
'use strict';
const k8s = require('@kubernetes/client-node');

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].slice(2)] = process.argv[i + 1];

async function main() {
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'test', server: args.server, skipTLSVerify: true }],
    users: [{ name: 'test', token: args.token }],
    contexts: [{ name: 'test', cluster: 'test', user: 'test' }],
    currentContext: 'test',
  });
  const apps = kc.makeApiClient(k8s.AppsV1Api);
  const name = args.name;
  const namespace = args.namespace;
  const scale = await apps.readNamespacedDeploymentScale({ name, namespace });
  const deployment = await apps.readNamespacedDeployment({ name, namespace });
  await apps.replaceNamespacedDeploymentScale({
    name,
    namespace,
    body: {
      apiVersion: 'autoscaling/v1',
      kind: 'Scale',
      metadata: { name, namespace, resourceVersion: scale.metadata.resourceVersion },
      spec: { replicas: Number(args.replicas) },
    },
  });
  process.stdout.write(JSON.stringify({
    replicas: scale.spec.replicas,
    ready: deployment.status.readyReplicas,
    resourceVersion: scale.metadata.resourceVersion,
  }) + '\n');
}

main().catch((e) => {
  process.stderr.write(`k8s_sdk_ops: ${e.stack || e}\n`);
  process.exit(1);
});
