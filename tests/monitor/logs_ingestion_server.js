#!/usr/bin/env node
// The Azure Monitor Logs Ingestion API as its REST reference describes it
// ("Logs Ingestion - Upload": POST {endpoint}/dataCollectionRules/{ruleId}/
// streams/{stream}?api-version=2023-01-01, a JSON array body, optionally
// Content-Encoding: gzip; 204 on success, 413 over the call limit, 429 with
// Retry-After when throttled), on 127.0.0.1, for the monitor module's tests.
// It also takes custom metrics (POST {resourceId}/metrics, as
// {region}.monitoring.azure.com does; recorded with op "metrics").
// Every request is appended to --record as one JSON line
//   {op, method, path, query, headers, raw_bytes, body, records}
// (body: the decoded JSON array; records: its length), so a test can check
// what Gantry sent and compare it with what Microsoft's SDK sends.
//
//   node logs_ingestion_server.js --record FILE [--token T] [--fail 429,503]
//        [--retry-after S] [--max-bytes N] [--status N]
//
// Prints "listening <port>" once it accepts connections.
//   --token        the bearer token to accept (others get 401)
//   --fail         statuses for the first requests, in order (then success)
//   --retry-after  the Retry-After (seconds) sent with 429 and 503
//   --max-bytes    answer 413 when the body as sent is larger than this
//   --status       the success status (default 204)
'use strict';
const http = require('http');
const fs = require('fs');
const zlib = require('zlib');

const args = require('../contract_args')(process.argv);
const token = args.token || 'test-token';
const fail = String(args.fail || '').split(',').filter((s) => s).map(Number);
const retryAfter = String(args['retry-after'] || '0');
const maxBytes = Number(args['max-bytes'] || 1000000);
const okStatus = Number(args.status || 204);

function record(entry) {
  if (args.record) fs.appendFileSync(args.record, JSON.stringify(entry) + '\n');
}

function reply(res, status, body, headers) {
  const text = body === undefined ? '' : JSON.stringify(body);
  res.writeHead(status, Object.assign({ 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) }, headers || {}));
  res.end(text);
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks);
    const url = new URL(req.url, 'http://127.0.0.1');
    const query = {};
    for (const [k, v] of url.searchParams) query[k] = v;
    const up = /^\/dataCollectionRules\/([^/]+)\/streams\/([^/]+)$/.exec(url.pathname);
    const metrics = /^\/subscriptions\/.+\/metrics$/.test(url.pathname);
    const m = up || metrics;
    const entry = {
      op: up ? 'upload' : metrics ? 'metrics' : 'unknown', method: req.method, path: decodeURIComponent(url.pathname),
      query, headers: req.headers, raw_bytes: raw.length, body: null, records: 0,
    };
    let decoded = raw;
    try {
      if (req.headers['content-encoding'] === 'gzip') decoded = zlib.gunzipSync(raw);
      entry.body = JSON.parse(decoded.toString('utf8'));
      entry.records = Array.isArray(entry.body) ? entry.body.length : 0;
    } catch (e) {
      entry.error = String(e);
    }
    record(entry);
    if (!m || req.method !== 'POST') return reply(res, 404, { error: { code: 'NotFound', message: 'no such route' } });
    if (req.headers.authorization !== `Bearer ${token}`) {
      return reply(res, 401, { error: { code: 'InvalidToken', message: 'bad bearer token' } });
    }
    if (!query['api-version'] && !metrics) return reply(res, 400, { error: { code: 'MissingApiVersionParameter', message: 'api-version' } });
    if (fail.length > 0) {
      const st = fail.shift();
      return reply(res, st, { error: { code: 'Injected', message: `status ${st}` } }, st === 429 || st === 503 ? { 'Retry-After': retryAfter } : {});
    }
    if (raw.length > maxBytes) {
      return reply(res, 413, { error: { code: 'ContentLengthLimitExceeded', message: `over ${maxBytes} bytes` } });
    }
    if (metrics) {
      const b = entry.body && entry.body.data && entry.body.data.baseData;
      if (!b || !entry.body.time || !Array.isArray(b.series)) {
        return reply(res, 400, { error: { code: 'BadRequest', message: 'not a custom metric' } });
      }
      return reply(res, 200, {});
    }
    if (entry.error || !Array.isArray(entry.body)) {
      return reply(res, 400, { error: { code: 'InvalidContentType', message: 'body is not a JSON array' } });
    }
    res.writeHead(okStatus, { 'Content-Length': 0 });
    res.end();
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`listening ${server.address().port}\n`));
