#!/usr/bin/env node
// A VM scale set as Azure Resource Manager serves it (Microsoft.Compute REST:
// "Virtual Machine Scale Sets - Get / Update / Delete Instances",
// "Virtual Machine Scale Set VMs - List", ARM async operations), on 127.0.0.1,
// for the vmss actuator's tests. Every request is appended to --record as one
// JSON line {op, method, path, query, headers, body}, so a test can compare
// what Gantry sent with what Microsoft's SDK sends for the same operation.
//
//   node arm_contract_server.js --record FILE [--token T] [--capacity 3]
//        [--protected 1,2] [--page-size 2] [--throttle N] [--retry-after S]
//        [--polls N] [--conflict] [--fail-delete] [--state S]
//
// Prints "listening <port>" once it accepts connections.
//   --token       the bearer token to accept (others get 401 AuthenticationFailed)
//   --capacity    instances at start (ids 0..N-1)
//   --protected   instance ids with protectionPolicy.protectFromScaleIn
//   --page-size   instances per page of the VM list (then nextLink)
//   --throttle    answer the first N requests with 429 + Retry-After
//   --polls       operation polls answered InProgress before Succeeded
//   --conflict    the scale set changes (new ETag) just before the first PATCH arrives
//   --fail-delete the delete operation ends Failed
//   --state S     the scale set's provisioningState at start (e.g. Updating)
'use strict';
const http = require('http');
const fs = require('fs');

const args = require('../contract_args')(process.argv);
const token = args.token || 'test-token';
const pageSize = Number(args['page-size'] || 100);
let throttle = Number(args.throttle || 0);
const retryAfter = String(args['retry-after'] || '2');
const pollsBeforeDone = Number(args.polls || 1);
const protectedIds = new Set(String(args.protected || '').split(',').filter((s) => s));
let conflictPending = Boolean(args.conflict);

const state = {
  capacity: Number(args.capacity || 3),
  etagN: 1,
  provisioningState: String(args.state || 'Succeeded'),
  nextId: 0,
  instances: new Map(), // id -> {provisioningState, power, created}
  ops: new Map(), // op id -> {polls, done: fn, fail}
  opSeq: 0,
};
for (let i = 0; i < state.capacity; i++) addInstance('Succeeded');

function addInstance(provisioningState) {
  const id = String(state.nextId++);
  state.instances.set(id, {
    provisioningState,
    power: provisioningState === 'Succeeded' ? 'running' : 'starting',
    created: new Date(Date.UTC(2026, 0, 1, 0, Number(id))).toISOString(),
  });
  return id;
}

function etag() {
  return `"${state.etagN}"`;
}

let port = 0;
const base = () => `http://127.0.0.1:${port}`;

function record(entry) {
  if (args.record) fs.appendFileSync(args.record, JSON.stringify(entry) + '\n');
}

function send(res, status, body, headers = {}) {
  const text = body === undefined ? '' : JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(text),
    'x-ms-request-id': `req-${Math.random().toString(16).slice(2)}`,
    ...headers,
  });
  res.end(text);
}

function armError(code, message) {
  return { error: { code, message } };
}

function vmssBody(sub, rg, name) {
  return {
    name,
    id: `/subscriptions/${sub}/resourceGroups/${rg}/providers/Microsoft.Compute/virtualMachineScaleSets/${name}`,
    type: 'Microsoft.Compute/virtualMachineScaleSets',
    location: 'eastus',
    etag: etag(),
    sku: { name: 'Standard_ND96isr_H100_v5', tier: 'Standard', capacity: state.capacity },
    properties: {
      provisioningState: state.provisioningState,
      orchestrationMode: 'Uniform',
      upgradePolicy: { mode: 'Manual' },
      scaleInPolicy: { rules: ['Default'] },
    },
  };
}

function vmBody(sub, rg, name, id, expand) {
  const vm = state.instances.get(id);
  const props = {
    latestModelApplied: true,
    provisioningState: vm.provisioningState,
    timeCreated: vm.created,
    osProfile: { computerName: `${name}${id.padStart(6, '0')}`, adminUsername: 'azureuser' },
    protectionPolicy: { protectFromScaleIn: protectedIds.has(id), protectFromScaleSetActions: false },
  };
  if (expand === 'instanceView') {
    props.instanceView = {
      statuses: [
        { code: `ProvisioningState/${vm.provisioningState.toLowerCase()}`, level: 'Info' },
        { code: `PowerState/${vm.power}`, level: 'Info' },
      ],
    };
  }
  return {
    name: `${name}_${id}`,
    id: `/subscriptions/${sub}/resourceGroups/${rg}/providers/Microsoft.Compute/virtualMachineScaleSets/${name}/virtualMachines/${id}`,
    type: 'Microsoft.Compute/virtualMachineScaleSets/virtualMachines',
    instanceId: id,
    location: 'eastus',
    sku: { name: 'Standard_ND96isr_H100_v5', tier: 'Standard' },
    properties: props,
  };
}

// Starts an async operation that completes after `pollsBeforeDone` polls.
function startOperation(sub, apiVersion, done, fail) {
  const id = `op-${++state.opSeq}`;
  state.ops.set(id, { polls: 0, done, fail, status: 'InProgress' });
  const url = `${base()}/subscriptions/${sub}/providers/Microsoft.Compute/locations/eastus/operations/${id}?api-version=${apiVersion}`;
  return {
    'Azure-AsyncOperation': url,
    Location: `${url}&monitor=true`,
  };
}

const vmssPath = /^\/subscriptions\/([^/]+)\/resourceGroups\/([^/]+)\/providers\/Microsoft\.Compute\/virtualMachineScaleSets\/([^/]+)(\/virtualMachines|\/delete)?$/i;
const opPath = /^\/subscriptions\/([^/]+)\/providers\/Microsoft\.Compute\/locations\/([^/]+)\/operations\/([^/]+)$/i;

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks).toString('utf8');
    const url = new URL(req.url, base());
    const query = Object.fromEntries(url.searchParams.entries());
    let body = null;
    if (raw.length > 0) {
      try {
        body = JSON.parse(raw);
      } catch (e) {
        body = raw;
      }
    }
    const path = decodeURIComponent(url.pathname);
    const m = vmssPath.exec(path);
    const o = opPath.exec(path);
    let op = 'unknown';
    if (m && !m[4] && req.method === 'GET') op = 'get_vmss';
    else if (m && !m[4] && req.method === 'PATCH') op = 'update_vmss';
    else if (m && m[4] === '/virtualMachines' && req.method === 'GET') op = 'list_vms';
    else if (m && m[4] === '/delete' && req.method === 'POST') op = 'delete_instances';
    else if (o && req.method === 'GET') op = 'poll_operation';
    record({ op, method: req.method, path, query, headers: req.headers, body });

    if (req.headers.authorization !== `Bearer ${token}`) {
      return send(res, 401, armError('AuthenticationFailed',
        "Authentication failed. The 'Authorization' header is missing or invalid."),
      { 'WWW-Authenticate': 'Bearer authorization_uri="https://login.microsoftonline.com/x"' });
    }
    if (throttle > 0) {
      throttle--;
      return send(res, 429, armError('TooManyRequests',
        'The request is being throttled as the limit has been reached for operation type.'),
      { 'Retry-After': retryAfter });
    }
    const apiVersion = query['api-version'];
    if (!apiVersion) {
      return send(res, 400, armError('MissingApiVersionParameter',
        "The api-version query parameter (?api-version=) is required for all requests."));
    }

    if (o && req.method === 'GET') {
      const opState = state.ops.get(o[3]);
      if (!opState) return send(res, 404, armError('NotFound', `operation ${o[3]} not found`));
      if (opState.status === 'InProgress') {
        opState.polls++;
        if (opState.polls > pollsBeforeDone) {
          if (opState.fail) {
            opState.status = 'Failed';
          } else {
            opState.status = 'Succeeded';
            opState.done();
          }
        }
      }
      const monitor = query.monitor === 'true';
      if (monitor) {
        // The Location form: 202 while running, 200 when done.
        if (opState.status === 'InProgress') return send(res, 202, undefined, { 'Retry-After': '0', Location: `${base()}${req.url}` });
        return send(res, 200, undefined);
      }
      const answer = { name: o[3], status: opState.status, startTime: '2026-01-01T00:00:00Z' };
      if (opState.status === 'Failed') {
        answer.error = { code: 'OperationNotAllowed', message: 'Deleting the instances failed (injected).' };
      }
      return send(res, 200, answer);
    }
    if (!m) return send(res, 404, armError('InvalidResourceType', `no route for ${path}`));
    const [, sub, rg, name, sub2] = m;

    if (!sub2 && req.method === 'GET') {
      return send(res, 200, vmssBody(sub, rg, name), { ETag: etag() });
    }
    if (!sub2 && req.method === 'PATCH') {
      if (conflictPending) {
        conflictPending = false;
        state.etagN++; // someone else changed the scale set
      }
      const ifMatch = req.headers['if-match'];
      if (ifMatch !== undefined && ifMatch !== '*' && ifMatch !== etag()) {
        return send(res, 412, armError('PreconditionFailed',
          `The specified precondition 'If-Match = ${ifMatch}' failed. Current ETag is ${etag()}.`));
      }
      if (!body || typeof body !== 'object') {
        return send(res, 400, armError('InvalidRequestContent', 'The request content was invalid.'));
      }
      const capacity = body.sku && body.sku.capacity;
      if (capacity !== undefined) {
        if (!Number.isInteger(capacity) || capacity < 0) {
          return send(res, 400, armError('InvalidParameter', `sku.capacity ${capacity} is not valid.`));
        }
        const added = [];
        while (state.instances.size < capacity) added.push(addInstance('Creating'));
        state.capacity = capacity;
      }
      state.etagN++;
      state.provisioningState = 'Updating';
      const headers = startOperation(sub, apiVersion, () => {
        for (const vm of state.instances.values()) {
          if (vm.provisioningState === 'Creating') {
            vm.provisioningState = 'Succeeded';
            vm.power = 'running';
          }
        }
        state.provisioningState = 'Succeeded';
        state.etagN++;
      });
      delete headers.Location;
      return send(res, 200, vmssBody(sub, rg, name), { ...headers, ETag: etag() });
    }
    if (sub2 === '/virtualMachines' && req.method === 'GET') {
      const ids = [...state.instances.keys()];
      const skip = Number(query.$skiptoken || 0);
      const page = ids.slice(skip, skip + pageSize).map((id) => vmBody(sub, rg, name, id, query.$expand));
      const out = { value: page };
      if (skip + pageSize < ids.length) {
        const next = new URL(`${base()}${url.pathname}`);
        for (const [k, v] of url.searchParams.entries()) if (k !== '$skiptoken') next.searchParams.set(k, v);
        next.searchParams.set('$skiptoken', String(skip + pageSize));
        out.nextLink = next.toString();
      }
      return send(res, 200, out);
    }
    if (sub2 === '/delete' && req.method === 'POST') {
      const ids = body && Array.isArray(body.instanceIds) ? body.instanceIds : null;
      if (!ids || ids.length === 0) {
        return send(res, 400, armError('InvalidParameter', 'instanceIds must be a non-empty list.'));
      }
      for (const id of ids) {
        if (!state.instances.has(String(id))) {
          return send(res, 400, armError('InvalidParameter', `Instance ID ${id} is not valid for scale set ${name}.`));
        }
      }
      for (const id of ids) state.instances.get(String(id)).provisioningState = 'Deleting';
      state.provisioningState = 'Updating';
      const headers = startOperation(sub, apiVersion, () => {
        for (const id of ids) state.instances.delete(String(id));
        state.capacity = state.instances.size;
        state.provisioningState = 'Succeeded';
        state.etagN++;
      }, Boolean(args['fail-delete']));
      return send(res, 202, undefined, headers);
    }
    return send(res, 405, armError('MethodNotAllowed', `${req.method} ${path}`));
  });
});

server.listen(Number(args.port || 0), '127.0.0.1', () => {
  port = server.address().port;
  process.stdout.write(`listening ${port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
