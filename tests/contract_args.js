// The command line of the contract servers (tests/autoscale/*_contract_server.js,
// tests/monitor/logs_ingestion_server.js): "--name value" pairs, and "--flag"
// alone (followed by another option or nothing) as true.
'use strict';
module.exports = function parseArgs(argv) {
  const args = {};
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) continue;
    const next = argv[i + 1];
    if (next === undefined || next.startsWith('--')) args[a.slice(2)] = true;
    else args[a.slice(2)] = argv[++i];
  }
  return args;
};
