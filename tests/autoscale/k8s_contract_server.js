#!/usr/bin/env node
// The slice of a Kubernetes API server the kubernetes actuator uses: apps/v1
// Deployments and StatefulSets with their `scale` subresource (GET, PUT with
// resourceVersion -> 409 Conflict when stale, PATCH merge-patch), on 127.0.0.1,
// over HTTP or HTTPS. Every request is appended to --record as one JSON line
// {op, method, path, query, headers, body}.
//
//   node k8s_contract_server.js --record FILE [--token T | --token-file F]
//        [--tls-cert C --tls-key K] [--replicas 2] [--ready N] [--conflict]
//        [--namespace default] [--name web]
//
//   --token-file  the accepted token is read from F on every request (rotation)
//   --ready       readyReplicas stays at N (pods not ready yet); default: all ready
//   --conflict    the object is changed (new resourceVersion) just before the first PUT
//   --client-ca   (with --tls-cert) clients authenticate with a certificate signed by
//                 this CA instead of a token, as kubeadm/kind users do
'use strict';
const http = require('http');
const https = require('https');
const fs = require('fs');

const args = require('../contract_args')(process.argv);
const namespace = args.namespace || 'default';
const objects = new Map(); // "deployments/web" -> state
for (const kind of ['deployments', 'statefulsets']) {
  objects.set(`${kind}/${args.name || 'web'}`, {
    replicas: Number(args.replicas || 2),
    resourceVersion: 1000,
    generation: 1,
    uid: `uid-${kind}`,
  });
}
let conflictPending = Boolean(args.conflict);

function expectedToken() {
  if (args['token-file']) return fs.readFileSync(args['token-file'], 'utf8').trim();
  return args.token || 'k8s-test-token';
}

function record(entry) {
  if (args.record) fs.appendFileSync(args.record, JSON.stringify(entry) + '\n');
}

function send(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function statusBody(code, reason, message, details) {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, details, code };
}

function scaleBody(kind, name, o) {
  return {
    kind: 'Scale',
    apiVersion: 'autoscaling/v1',
    metadata: {
      name, namespace, uid: o.uid, resourceVersion: String(o.resourceVersion),
      creationTimestamp: '2026-01-01T00:00:00Z',
    },
    spec: { replicas: o.replicas },
    status: { replicas: o.replicas, selector: `app=${name}` },
  };
}

function objectBody(kind, name, o) {
  const ready = args.ready !== undefined ? Math.min(Number(args.ready), o.replicas) : o.replicas;
  return {
    kind: kind === 'deployments' ? 'Deployment' : 'StatefulSet',
    apiVersion: 'apps/v1',
    metadata: {
      name, namespace, uid: o.uid, resourceVersion: String(o.resourceVersion),
      generation: o.generation, creationTimestamp: '2026-01-01T00:00:00Z',
    },
    spec: {
      replicas: o.replicas,
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'app', image: 'nginx' }] } },
    },
    status: {
      observedGeneration: o.generation,
      replicas: o.replicas,
      updatedReplicas: o.replicas,
      readyReplicas: ready,
      availableReplicas: ready,
    },
  };
}

const route = /^\/apis\/apps\/v1\/namespaces\/([^/]+)\/(deployments|statefulsets)\/([^/]+)(\/scale)?$/;

function handle(req, res) {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks).toString('utf8');
    const url = new URL(req.url, 'http://127.0.0.1');
    const query = Object.fromEntries(url.searchParams.entries());
    let body = null;
    if (raw.length > 0) {
      try { body = JSON.parse(raw); } catch (e) { body = raw; }
    }
    const path = decodeURIComponent(url.pathname);
    const m = route.exec(path);
    let op = 'unknown';
    if (m && m[4] && req.method === 'GET') op = 'read_scale';
    else if (m && m[4] && req.method === 'PUT') op = 'replace_scale';
    else if (m && m[4] && req.method === 'PATCH') op = 'patch_scale';
    else if (m && !m[4] && req.method === 'GET') op = 'read_object';
    record({ op, method: req.method, path, query, headers: req.headers, body });

    const byCert = args['client-ca'] && req.socket.authorized;
    if (!byCert && req.headers.authorization !== `Bearer ${expectedToken()}`) {
      return send(res, 401, statusBody(401, 'Unauthorized', 'Unauthorized'));
    }
    if (!m) return send(res, 404, statusBody(404, 'NotFound', 'the server could not find the requested resource'));
    const [, ns, kind, name, scale] = m;
    const o = ns === namespace ? objects.get(`${kind}/${name}`) : undefined;
    if (!o) {
      return send(res, 404, statusBody(404, 'NotFound', `${kind}.apps "${name}" not found`,
        { name, group: 'apps', kind }));
    }
    if (!scale) {
      if (req.method === 'GET') return send(res, 200, objectBody(kind, name, o));
      return send(res, 405, statusBody(405, 'MethodNotAllowed', `${req.method} not allowed`));
    }
    if (req.method === 'GET') return send(res, 200, scaleBody(kind, name, o));
    let replicas;
    if (req.method === 'PUT') {
      if (conflictPending) {
        conflictPending = false;
        o.resourceVersion++;
      }
      if (!body || body.kind !== 'Scale' || !body.spec || !Number.isInteger(body.spec.replicas)) {
        return send(res, 400, statusBody(400, 'BadRequest', 'body must be an autoscaling/v1 Scale with spec.replicas'));
      }
      const rv = body.metadata && body.metadata.resourceVersion;
      if (rv && rv !== String(o.resourceVersion)) {
        return send(res, 409, statusBody(409, 'Conflict',
          `Operation cannot be fulfilled on ${kind}.apps "${name}": the object has been modified; please apply your changes to the latest version and try again`,
          { name, group: 'apps', kind }));
      }
      replicas = body.spec.replicas;
    } else if (req.method === 'PATCH') {
      const ct = (req.headers['content-type'] || '').split(';')[0];
      if (ct !== 'application/merge-patch+json' && ct !== 'application/strategic-merge-patch+json') {
        return send(res, 415, statusBody(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/merge-patch+json, application/strategic-merge-patch+json`));
      }
      replicas = body && body.spec && body.spec.replicas;
      if (!Number.isInteger(replicas)) return send(res, 422, statusBody(422, 'Invalid', 'spec.replicas must be an integer'));
    } else {
      return send(res, 405, statusBody(405, 'MethodNotAllowed', `${req.method} not allowed`));
    }
    if (replicas < 0) return send(res, 422, statusBody(422, 'Invalid', `spec.replicas: Invalid value: ${replicas}: must be greater than or equal to 0`));
    o.replicas = replicas;
    o.resourceVersion++;
    o.generation++;
    return send(res, 200, scaleBody(kind, name, o));
  });
}

const server = args['tls-cert']
  ? https.createServer({
    cert: fs.readFileSync(args['tls-cert']),
    key: fs.readFileSync(args['tls-key']),
    ...(args['client-ca'] ? { ca: fs.readFileSync(args['client-ca']), requestCert: true, rejectUnauthorized: true } : {}),
  }, handle)
  : http.createServer(handle);
server.listen(Number(args.port || 0), '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
