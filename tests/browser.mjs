// What the headless-Chromium tests share (tests/agent/dashboard_e2e.mjs,
// tests/tour/screenshot.mjs): flag parsing, the ok/FAIL check lines, and a page
// in Debian's chromium (playwright-core) that records console errors, page
// errors and failed requests.
//
//   import { arg, checks, openPage } from '../browser.mjs';
//   const { check, finish } = checks();
//   const { browser, page, errors } = await openPage(chromiumPath);
//   ... check(ok, 'what') ...
//   await browser.close(); finish();   // exits 1 naming the failed checks
import { chromium } from 'playwright-core';

// The value after --name on the command line, or fallback.
export function arg(name, fallback) {
  const i = process.argv.indexOf('--' + name);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

// check() prints "ok   what" or "FAIL what"; finish() exits 1 when any failed.
export function checks() {
  const failures = [];
  return {
    check(ok, what) {
      console.log((ok ? 'ok   ' : 'FAIL ') + what);
      if (!ok) failures.push(what);
    },
    finish() {
      if (failures.length) {
        console.error(failures.length + ' check(s) failed: ' + failures.join('; '));
        process.exit(1);
      }
      console.log('all checks passed');
    },
  };
}

// A 1360x1000 light-mode page; `errors` collects what went wrong on it.
export async function openPage(chromiumPath) {
  // Runs as root in CI: chromium's sandbox needs --no-sandbox there.
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    args: ['--no-sandbox', '--headless=new', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  const page = await browser.newPage({ viewport: { width: 1360, height: 1000 }, colorScheme: 'light' });
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
  page.on('pageerror', (e) => errors.push('pageerror: ' + e.message));
  page.on('requestfailed', (r) => errors.push('request failed: ' + r.url()));
  page.on('response', (r) => { if (r.status() >= 400) errors.push('HTTP ' + r.status() + ' for ' + r.url()); });
  return { browser, page, errors };
}
