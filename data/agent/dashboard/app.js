// gantry agent dashboard. No framework and no external files: it polls the
// agent's JSON API (/api/v1/...) and draws its own charts on <canvas>.
// Every string from the API goes into the page through textContent, never
// innerHTML, so labels and alert texts cannot inject markup.
'use strict';

(function () {
  const WINDOWS = { '15m': 15 * 60e3, '1h': 3600e3, '6h': 6 * 3600e3, '24h': 24 * 3600e3 };
  const SLOW_POLL_MS = 15e3; // health and checkpoints change rarely
  const COLORS = ['#2f6fca', '#e8710a', '#1e8e3e', '#d93025', '#9334e6', '#12a4af', '#b06000',
    '#c5221f', '#5f6368', '#188038'];

  const state = {
    windowMs: WINDOWS['15m'],
    pollMs: 3000,
    resolutionMs: 15000,
    lastTime: 0,
    lastSlow: 0,
    history: false,
    failures: 0,
  };

  // ---- formatting -------------------------------------------------------
  function fmtNum(v, digits) {
    if (v === null || v === undefined || !isFinite(v)) return '–';
    return v.toFixed(digits);
  }
  function fmtPercent(v) { return fmtNum(v, v >= 10 || v === Math.round(v) ? 0 : 1) + '%'; }
  function fmtRate(v) {
    if (v === null || v === undefined || !isFinite(v)) return '–';
    const units = ['B/s', 'KiB/s', 'MiB/s', 'GiB/s', 'TiB/s'];
    let i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (v >= 100 || i === 0 ? v.toFixed(0) : v.toFixed(1)) + ' ' + units[i];
  }
  function fmtTime(ms) {
    const d = new Date(ms);
    const p = (n) => String(n).padStart(2, '0');
    return p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds());
  }
  function fmtAgo(sec) {
    if (!isFinite(sec)) return '';
    if (sec < 90) return Math.round(sec) + ' s ago';
    if (sec < 5400) return Math.round(sec / 60) + ' min ago';
    if (sec < 2 * 86400) return Math.round(sec / 3600) + ' h ago';
    return Math.round(sec / 86400) + ' d ago';
  }
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // ---- charts -----------------------------------------------------------
  // One panel: several named lines over the selected time window.
  class Chart {
    constructor(panel, opts) {
      this.panel = panel;
      this.canvas = panel.querySelector('canvas');
      this.legend = panel.querySelector('.legend');
      this.lastLabel = panel.querySelector('.last');
      this.fmt = opts.fmt;
      this.fixedMax = opts.max; // undefined: scale to the data
      this.binary = !!opts.binary; // byte rates: round the scale in KiB/MiB/GiB
      this.lines = new Map(); // key -> {label, points: [[t, v]]}
    }
    line(key, label) {
      let l = this.lines.get(key);
      if (!l) {
        l = { label: label, points: [], color: COLORS[this.lines.size % COLORS.length] };
        this.lines.set(key, l);
      }
      return l;
    }
    add(key, label, t, v) {
      const l = this.line(key, label);
      const pts = l.points;
      if (pts.length && pts[pts.length - 1][0] >= t) {
        if (pts[pts.length - 1][0] === t) pts[pts.length - 1][1] = v;
        return;
      }
      pts.push([t, v]);
    }
    replace(key, label, points) { this.line(key, label).points = points; }
    clear() { this.lines.clear(); }
    trim(from) {
      for (const l of this.lines.values()) {
        let i = 0;
        while (i < l.points.length && l.points[i][0] < from) i++;
        if (i) l.points.splice(0, i);
      }
    }
    draw(now) {
      const c = this.canvas;
      const dpr = window.devicePixelRatio || 1;
      const w = c.clientWidth, h = c.clientHeight;
      if (!w || !h) return;
      if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
        c.width = Math.round(w * dpr);
        c.height = Math.round(h * dpr);
      }
      const g = c.getContext('2d');
      g.setTransform(dpr, 0, 0, dpr, 0, 0);
      g.clearRect(0, 0, w, h);
      const css = getComputedStyle(document.documentElement);
      const gridColor = css.getPropertyValue('--grid').trim() || '#eee';
      const mutedColor = css.getPropertyValue('--muted').trim() || '#777';
      const from = now - state.windowMs;
      let max = 0;
      for (const l of this.lines.values()) {
        for (const p of l.points) if (p[0] >= from && p[1] !== null && p[1] > max) max = p[1];
      }
      max = this.fixedMax !== undefined ? Math.max(this.fixedMax, max) : niceMax(max, this.binary);

      g.font = '11px system-ui, sans-serif';
      // Room for the widest axis label ("572 MiB/s").
      let labelWidth = 0;
      for (let i = 0; i <= 4; i++) labelWidth = Math.max(labelWidth, g.measureText(this.fmt((max * i) / 4)).width);
      const left = Math.ceil(labelWidth) + 10, right = 8, top = 8, bottom = 20;
      const pw = w - left - right, ph = h - top - bottom;
      g.lineWidth = 1;
      g.textBaseline = 'middle';
      for (let i = 0; i <= 4; i++) {
        const y = top + ph - (ph * i) / 4;
        g.strokeStyle = gridColor;
        g.beginPath(); g.moveTo(left, y + 0.5); g.lineTo(left + pw, y + 0.5); g.stroke();
        g.fillStyle = mutedColor;
        g.textAlign = 'right';
        g.fillText(this.fmt((max * i) / 4), left - 6, y);
      }
      g.textAlign = 'left';
      g.textBaseline = 'alphabetic';
      g.fillText(fmtTime(from), left, h - 5);
      g.textAlign = 'right';
      g.fillText(fmtTime(now), left + pw, h - 5);

      const x = (t) => left + ((t - from) / state.windowMs) * pw;
      const y = (v) => top + ph - (Math.min(v, max) / max) * ph;
      // A gap longer than a few samples (agent restart, missing samples)
      // breaks the line instead of drawing a misleading straight segment.
      // Samples come at the poll interval live and at the history's
      // resolution (or its downsampled spacing) from the past.
      const gapMs = Math.max(state.pollMs * 4, state.resolutionMs * 3, state.windowMs / 100);
      let pointsDrawn = 0, segments = 0;
      for (const l of this.lines.values()) {
        g.strokeStyle = l.color;
        g.fillStyle = l.color;
        g.lineWidth = 1.6;
        g.beginPath();
        let prevT = null, runStart = null;
        const dot = (p) => g.fillRect(x(p[0]) - 1.5, y(p[1]) - 1.5, 3, 3);
        for (const p of l.points) {
          const [t, v] = p;
          if (t < from || v === null) {
            if (runStart && prevT === runStart[0]) dot(runStart);
            prevT = null;
            runStart = null;
            continue;
          }
          if (prevT === null || t - prevT > gapMs) {
            // A lone sample between gaps is still data: mark it with a dot.
            if (runStart && prevT === runStart[0]) dot(runStart);
            g.moveTo(x(t), y(v));
            runStart = p;
          } else {
            g.lineTo(x(t), y(v));
            segments++;
          }
          prevT = t;
          pointsDrawn++;
        }
        if (runStart && prevT === runStart[0]) dot(runStart);
        g.stroke();
      }
      if (!pointsDrawn) {
        g.fillStyle = mutedColor;
        g.textAlign = 'center';
        g.fillText('no data yet', left + pw / 2, top + ph / 2);
      }
      this.panel.dataset.points = String(pointsDrawn);
      this.panel.dataset.segments = String(segments);
    }
    // Legend with each line's latest value; the first line's latest value
    // also goes into the title (and data-last, which tests read).
    updateLabels() {
      this.legend.textContent = '';
      let first = null, firstTime = 0;
      for (const l of this.lines.values()) {
        const last = l.points.length ? l.points[l.points.length - 1] : null;
        if (last && first === null) { first = last[1]; firstTime = last[0]; }
        const item = el('span');
        const sw = el('i');
        sw.style.background = l.color;
        item.appendChild(sw);
        item.appendChild(document.createTextNode(l.label + ' ' + (last ? this.fmt(last[1]) : '–')));
        this.legend.appendChild(item);
      }
      this.lastLabel.textContent = first === null ? '' : this.fmt(first);
      if (first !== null) {
        this.panel.dataset.last = String(first);
        this.panel.dataset.time = String(firstTime);
      }
    }
  }

  function niceMax(v, binary) {
    if (!(v > 0)) return 1;
    if (binary) {
      let scale = 1;
      while (v / scale >= 1024) scale *= 1024;
      return niceMax(v / scale, false) * scale;
    }
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }

  // Which signals feed which chart. `key` groups series into lines; `sum`
  // adds all series of one line (network over devices).
  const gpuLabel = (labels) => 'GPU ' + (labels.gpu !== undefined ? labels.gpu : '?');
  const CHARTS = {
    cpu: { fmt: fmtPercent, max: 100, signals: [
      { name: 'cpu_utilization', key: () => 'cpu', label: () => 'busy' }] },
    memory: { fmt: fmtPercent, max: 100, signals: [
      { name: 'memory_used_percent', key: () => 'mem', label: () => 'memory' },
      { name: 'swap_used_percent', key: () => 'swap', label: () => 'swap' }] },
    network: { fmt: fmtRate, binary: true, signals: [
      { name: 'network_receive_bytes_per_second', key: () => 'rx', label: () => 'rx', sum: true },
      { name: 'network_transmit_bytes_per_second', key: () => 'tx', label: () => 'tx', sum: true }] },
    gpu_util: { fmt: fmtPercent, max: 100, signals: [
      { name: 'gpu_utilization', key: gpuLabel, label: gpuLabel }] },
    gpu_mem: { fmt: fmtPercent, max: 100, signals: [
      { name: 'gpu_memory_used_percent', key: gpuLabel, label: gpuLabel }] },
    gpu_temp: { fmt: (v) => fmtNum(v, 0) + ' °C', signals: [
      { name: 'gpu_temperature_celsius', key: gpuLabel, label: gpuLabel }] },
    gpu_power: { fmt: (v) => fmtNum(v, 0) + ' W', signals: [
      { name: 'gpu_power_watts', key: gpuLabel, label: gpuLabel }] },
  };
  const charts = {};

  function routeSignals(signals, t) {
    let gpus = 0;
    for (const [id, spec] of Object.entries(CHARTS)) {
      for (const s of spec.signals) {
        const sums = new Map();
        for (const sig of signals) {
          if (sig.name !== s.name || sig.value === null) continue;
          const labels = sig.labels || {};
          const key = s.key(labels);
          if (id === 'gpu_util') gpus++;
          if (s.sum) {
            const cur = sums.get(key) || { label: s.label(labels), v: 0 };
            cur.v += sig.value;
            sums.set(key, cur);
          } else {
            charts[id].add(key, s.label(labels), t, sig.value);
          }
        }
        for (const [key, e] of sums) charts[id].add(key, e.label, t, e.v);
      }
    }
    return gpus;
  }

  // ---- API --------------------------------------------------------------
  async function getJson(path) {
    const r = await fetch(path, { cache: 'no-store' });
    if (!r.ok) {
      let msg = r.status + ' ' + r.statusText;
      try { msg = (await r.json()).error || msg; } catch (e) { /* not JSON */ }
      throw new Error(path + ': ' + msg);
    }
    return r.json();
  }

  // Fills every chart from the history for the selected window.
  async function backfill() {
    if (!state.history) return;
    const since = Object.keys(WINDOWS).find((k) => WINDOWS[k] === state.windowMs) || '15m';
    for (const [id, spec] of Object.entries(CHARTS)) {
      const chart = charts[id];
      for (const s of spec.signals) {
        let data;
        try {
          data = await getJson('/api/v1/series?name=' + encodeURIComponent(s.name) +
            '&since=' + since + '&max_points=400');
        } catch (e) {
          console.warn(e.message);
          continue;
        }
        const lines = new Map();
        for (const ser of data.series || []) {
          const key = s.key(ser.labels || {});
          let line = lines.get(key);
          if (!line) { line = { label: s.label(ser.labels || {}), byTime: new Map() }; lines.set(key, line); }
          for (const [t, v] of ser.points || []) {
            if (v === null) continue;
            line.byTime.set(t, s.sum ? (line.byTime.get(t) || 0) + v : v);
          }
        }
        for (const [key, line] of lines) {
          const pts = Array.from(line.byTime.entries()).sort((a, b) => a[0] - b[0]);
          // Keep live points newer than the history's last bucket.
          const old = chart.lines.get(key);
          const lastHist = pts.length ? pts[pts.length - 1][0] : 0;
          if (old) for (const p of old.points) if (p[0] > lastHist) pts.push(p);
          chart.replace(key, line.label, pts);
        }
      }
    }
  }

  function setConn(cls, text) {
    const c = document.getElementById('conn');
    c.className = 'conn ' + cls;
    c.textContent = text;
  }

  async function pollSummary() {
    const s = await getJson('/api/v1/summary');
    document.getElementById('host').textContent = s.hostname || '';
    document.title = 'gantry agent · ' + (s.hostname || '');
    if (s.poll_seconds > 0) state.pollMs = s.poll_seconds * 1000;
    if (s.history_resolution_s > 0) state.resolutionMs = s.history_resolution_s * 1000;
    document.getElementById('poll').textContent = String(state.pollMs / 1000);
    const firstHistory = !state.history && s.history;
    state.history = !!s.history;
    if (firstHistory) await backfill();
    let gpus = 0;
    if (s.time_ms && s.time_ms > state.lastTime) {
      state.lastTime = s.time_ms;
      gpus = routeSignals(s.signals || [], s.time_ms);
    } else {
      gpus = (s.signals || []).filter((x) => x.name === 'gpu_utilization').length;
    }
    const haveGpu = gpus > 0 || charts.gpu_util.lines.size > 0;
    document.getElementById('gpu-charts').classList.toggle('hidden', !haveGpu);
    document.getElementById('gpu-none').classList.toggle('hidden', haveGpu);
    const now = s.now_ms || Date.now();
    for (const c of Object.values(charts)) {
      c.trim(now - state.windowMs);
      c.updateLabels();
      c.draw(now);
    }
    document.getElementById('updated').textContent = s.time_ms ? fmtTime(s.time_ms) : 'never';
    document.body.dataset.polls = String((+document.body.dataset.polls || 0) + 1);
  }

  async function pollAlerts() {
    const a = await getJson('/api/v1/alerts');
    const list = document.getElementById('alerts');
    const alerts = a.alerts || [];
    list.textContent = '';
    const count = document.getElementById('alert-count');
    count.textContent = String(alerts.length);
    count.classList.toggle('firing', alerts.length > 0);
    if (!alerts.length) { list.appendChild(el('li', 'none', 'none')); return; }
    for (const al of alerts) {
      const labels = al.labels || {}, ann = al.annotations || {};
      const li = el('li');
      const sev = labels.severity || '';
      if (sev) li.appendChild(el('span', 'sev ' + sev.replace(/[^a-z]/gi, ''), sev));
      li.appendChild(el('strong', '', labels.alertname || 'alert'));
      const text = ann.summary || ann.description || '';
      if (text) li.appendChild(document.createTextNode(' — ' + text));
      let since = al.starts_at_ms || (al.startsAt ? Date.parse(al.startsAt) : 0);
      if (since) li.appendChild(el('div', 'meta', 'since ' + new Date(since).toLocaleString()));
      list.appendChild(li);
    }
  }

  async function pollHealth() {
    const h = await getJson('/api/v1/health');
    const badge = document.getElementById('health-badge');
    const status = String(h.status || 'unknown');
    badge.className = 'badge ' + status.replace(/[^a-z]/gi, '');
    badge.textContent = status;
    const meta = [];
    if (h.reason) meta.push(h.reason);
    if (h.profile) meta.push('profile ' + h.profile);
    if (h.timestamp) meta.push('checked ' + h.timestamp + (h.age_s !== undefined ? ' (' + fmtAgo(h.age_s) + ')' : ''));
    document.getElementById('health-meta').textContent = meta.join(' · ');
    const list = document.getElementById('health-checks');
    list.textContent = '';
    const bad = (h.checks || []).filter((c) => c.outcome && c.outcome !== 'pass' && c.outcome !== 'skip');
    for (const c of bad) {
      const li = el('li');
      li.appendChild(el('span', 'sev ' + (c.outcome === 'warn' ? 'warning' : 'critical'), c.outcome));
      li.appendChild(el('strong', '', c.name || ''));
      if (c.message) li.appendChild(document.createTextNode(' — ' + c.message));
      list.appendChild(li);
    }
    if (h.checks && h.checks.length && !bad.length) {
      list.appendChild(el('li', 'none', h.checks.length + ' checks passed'));
    }
  }

  async function pollCheckpoints() {
    const c = await getJson('/api/v1/checkpoints');
    const body = document.getElementById('checkpoints');
    body.textContent = '';
    const list = c.checkpoints || [];
    const now = Date.now() / 1000;
    for (const k of list) {
      const tr = el('tr');
      const run = el('td', '', k.run);
      run.title = k.path || '';
      tr.appendChild(run);
      tr.appendChild(el('td', 'n', String(k.step)));
      tr.appendChild(el('td', '', fmtAgo(now - k.committed_unix_s)));
      body.appendChild(tr);
    }
    if (!list.length) {
      const tr = el('tr');
      const td = el('td', 'none', (c.roots || []).length ? 'no committed steps' : 'no checkpoint roots configured');
      td.colSpan = 3;
      tr.appendChild(td);
      body.appendChild(tr);
    }
    document.getElementById('ckpt-meta').textContent = (c.errors || []).join('; ');
  }

  async function tick() {
    try {
      const jobs = [pollSummary(), pollAlerts()];
      if (Date.now() - state.lastSlow >= SLOW_POLL_MS) {
        state.lastSlow = Date.now();
        jobs.push(pollHealth(), pollCheckpoints());
      }
      await Promise.all(jobs);
      state.failures = 0;
      setConn('live', 'live');
    } catch (e) {
      state.failures++;
      setConn(state.failures > 2 ? 'down' : 'stale', 'agent unreachable');
      console.warn(e.message);
    }
    setTimeout(tick, state.pollMs);
  }

  function init() {
    for (const [id, spec] of Object.entries(CHARTS)) {
      const panel = document.querySelector('[data-chart="' + id + '"]');
      charts[id] = new Chart(panel, spec);
    }
    for (const b of document.querySelectorAll('.window button')) {
      b.addEventListener('click', async () => {
        for (const o of document.querySelectorAll('.window button')) o.classList.toggle('on', o === b);
        state.windowMs = WINDOWS[b.dataset.window];
        await backfill();
        const now = Date.now();
        for (const c of Object.values(charts)) { c.updateLabels(); c.draw(now); }
      });
    }
    window.addEventListener('resize', () => {
      const now = Date.now();
      for (const c of Object.values(charts)) c.draw(now);
    });
    tick();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
