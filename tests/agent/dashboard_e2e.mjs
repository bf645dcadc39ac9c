// Opens the agent dashboard in headless Debian chromium (playwright-core) and
// checks that it renders live data. Driven by src/agent/dashboard_integration_test.cc,
// which serves the dashboard with a changing fake source.
//
//   node tests/agent/dashboard_e2e.mjs --url http://127.0.0.1:PORT/ --screenshot OUT.png
//
// Prints one line per check; exits 0 when all pass, 1 (naming the failed check) otherwise.
import { arg, checks, openPage } from '../browser.mjs';

const url = arg('url');
const screenshot = arg('screenshot');
const chromiumPath = arg('chromium', '/usr/bin/chromium');
if (!url || !screenshot) {
  console.error('usage: dashboard_e2e.mjs --url URL --screenshot FILE [--chromium PATH]');
  process.exit(2);
}

const { check, finish } = checks();

const { browser, page, errors } = await openPage(chromiumPath);
try {
  const external = [];
  page.on('request', (r) => { if (!r.url().startsWith(new URL(url).origin)) external.push(r.url()); });

  const resp = await page.goto(url, { waitUntil: 'load' });
  check(resp && resp.status() === 200, 'index answers 200');

  const cpu = page.locator('#panel-cpu');
  await page.waitForFunction(() => document.querySelector('#panel-cpu').dataset.time, null, { timeout: 20000 });
  const first = { time: await cpu.getAttribute('data-time'), last: await cpu.getAttribute('data-last'),
    label: (await cpu.locator('.last').textContent()).trim() };
  console.log('first poll: cpu ' + first.label + ' at ' + first.time);
  // The source changes every poll; wait for the next sample to arrive.
  await page.waitForFunction((t) => document.querySelector('#panel-cpu').dataset.time !== t,
    first.time, { timeout: 20000 });
  // And one more, so every chart has drawn several live points.
  const second = { time: await cpu.getAttribute('data-time'), last: await cpu.getAttribute('data-last') };
  await page.waitForFunction((t) => document.querySelector('#panel-cpu').dataset.time !== t,
    second.time, { timeout: 20000 });
  const third = { time: await cpu.getAttribute('data-time'), last: await cpu.getAttribute('data-last'),
    label: (await cpu.locator('.last').textContent()).trim() };
  console.log('later poll: cpu ' + third.label + ' at ' + third.time);
  check(Number(third.time) > Number(first.time), 'CPU chart time advances between polls');
  check(third.last !== first.last, 'CPU chart last value changes between polls (' + first.last + ' -> ' + third.last + ')');
  check(/^\d+(\.\d)?%$/.test(third.label), 'CPU title shows the last value as a percentage: ' + third.label);

  for (const id of ['cpu', 'memory', 'network', 'gpu-util', 'gpu-mem', 'gpu-temp', 'gpu-power']) {
    const panel = page.locator('#panel-' + id);
    const points = Number(await panel.getAttribute('data-points'));
    // History backfill (10 min) plus live points.
    check(points > 10, id + ' chart draws points from history and live polls (' + points + ')');
    const segments = Number(await panel.getAttribute('data-segments'));
    check(segments > 10, id + ' chart joins its points into lines (' + segments + ' segments)');
    const inked = await panel.locator('canvas').evaluate((c) => {
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
      return n;
    });
    check(inked > 500, id + ' canvas has ink (' + inked + ' pixels)');
  }
  const gpuLegend = await page.locator('#panel-gpu-util .legend').textContent();
  check(gpuLegend.includes('GPU 0') && gpuLegend.includes('GPU 1'), 'GPU legend names both GPUs: ' + gpuLegend);
  check(await page.locator('#gpu-none').isHidden(), '"no GPU" note hidden when GPUs report');

  await page.waitForFunction(() => document.querySelector('#health-badge').textContent !== 'unknown', null, { timeout: 20000 });
  const health = await page.locator('#health-badge').textContent();
  check(health === 'warn', 'health badge shows the report verdict: ' + health);
  const healthChecks = await page.locator('#health-checks').textContent();
  check(healthChecks.includes('nccl_allreduce'), 'health lists the non-passing check');

  const alertCount = await page.locator('#alert-count').textContent();
  check(alertCount === '1', 'one firing alert counted: ' + alertCount);
  const alertText = await page.locator('#alerts').textContent();
  check(alertText.includes('GpuTemperatureHigh') && alertText.includes('<b>not markup</b>'),
    'alert shown with its text as text, not markup: ' + alertText);
  check(await page.locator('#alerts b').count() === 0, 'alert annotation did not inject elements');

  const rows = await page.locator('#checkpoints tr').count();
  check(rows === 2, 'two committed checkpoints listed: ' + rows);
  const ckText = await page.locator('#checkpoints').textContent();
  check(ckText.includes('llama') && ckText.includes('1200'), 'checkpoint run and step shown: ' + ckText);

  const host = await page.locator('#host').textContent();
  check(host === 'e2e-node', 'hostname in the header: ' + host);
  const conn = await page.locator('#conn').textContent();
  check(conn === 'live', 'connection indicator says live: ' + conn);

  await page.screenshot({ path: screenshot, fullPage: true });
  console.log('screenshot: ' + screenshot);
  check(external.length === 0, 'no requests outside the agent: ' + external.join(', '));
  check(errors.length === 0, 'no JavaScript errors: ' + errors.join(' | '));
} finally {
  await browser.close();
}
finish();
