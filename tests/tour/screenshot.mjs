// Opens the tour report (examples/tour/report.py's page) in headless Debian
// chromium (playwright-core), checks that it renders as a self-contained page
// with a PASS verdict and its charts, and writes a full-page screenshot.
//
//   node tests/tour/screenshot.mjs --html PATH --screenshot OUT.png [--chromium /usr/bin/chromium]
//
// Run from the repository root (playwright-core resolves from its node_modules).
// Prints one line per check; exits 0 when all pass, 1 (naming the failed
// checks) otherwise, 2 on a usage error.
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { arg, checks, openPage } from '../browser.mjs';

const html = arg('html');
const screenshot = arg('screenshot');
const chromiumPath = arg('chromium', '/usr/bin/chromium');
if (!html || !screenshot) {
  console.error('usage: screenshot.mjs --html PATH --screenshot OUT.png [--chromium PATH]');
  process.exit(2);
}
if (!existsSync(html)) {
  console.error('screenshot.mjs: --html ' + html + ': no such file');
  process.exit(2);
}
if (!existsSync(chromiumPath)) {
  console.error('screenshot.mjs: --chromium ' + chromiumPath + ': no such file (apt-get install chromium)');
  process.exit(2);
}
const url = pathToFileURL(resolve(html)).href;

const { check, finish } = checks();

const { browser, page, errors } = await openPage(chromiumPath);
try {
  const others = [];
  page.on('request', (r) => { if (r.url() !== url) others.push(r.url()); });

  await page.goto(url, { waitUntil: 'load' });

  const verdict = page.locator('#verdict');
  const verdicts = await verdict.count();
  check(verdicts === 1, 'the page has one verdict banner (#verdict): ' + verdicts);
  const text = verdicts === 1 ? (await verdict.textContent()).trim() : '';
  check(/^PASS\b.+/.test(text), 'the verdict says PASS: ' + JSON.stringify(text));

  const sizes = await page.locator('svg').evaluateAll((svgs) => svgs.map((s) => {
    const r = s.getBoundingClientRect();
    return [Math.round(r.width), Math.round(r.height)];
  }));
  const drawn = sizes.filter(([w, h]) => w > 0 && h > 0).length;
  check(drawn >= 4, 'at least 4 charts render with a nonzero size: ' + drawn + ' of ' + sizes.length +
    (sizes.length ? ' (' + sizes.map(([w, h]) => w + 'x' + h).join(' ') + ')' : ''));
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  check(width <= 1360, 'no horizontal scrolling at 1360 px: page is ' + width + ' px wide');

  await page.screenshot({ path: screenshot, fullPage: true });
  console.log('screenshot: ' + screenshot);
  check(others.length === 0, 'no requests other than the page itself: ' + others.join(', '));
  check(errors.length === 0, 'no console errors: ' + errors.join(' | '));
} finally {
  await browser.close();
}
finish();
