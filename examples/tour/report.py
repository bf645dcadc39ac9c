#!/usr/bin/env python3
"""Renders the tour's step results as one self-contained HTML page.

    /usr/bin/python3 examples/tour/report.py --results $TOUR_OUT/results --out report.html

Reads every DIR/*.json written by common.Step (files that are not an object with
"step" are skipped), orders them by "order" and writes a page with inline CSS
and inline SVG only: no JavaScript, no external resources, every string from
the data escaped. Standard library only. Exit 0 when written, 2 (naming the
file) when DIR is missing or holds no steps, or a file is not valid JSON.
"""

import argparse
import datetime
import glob
import html
import json
import math
import os
import re
import sys

BLUE, ORANGE, RED, GREEN, GREY, DARK = "#1f6feb", "#e8750a", "#cf222e", "#1a7f37", "#9aa4ae", "#24292f"
PALETTE = ["#1f6feb", "#8250df", "#0a7ea4", "#bf3989", "#4d7c0f", "#9a6700", "#6639ba", "#0969da"]


def esc(value):
    return html.escape(str(value), quote=True)


def num(v):
    """v as a float when it is a finite number, else None (NaN, None, strings, bools)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def points(raw, n=2):
    """The entries of raw that are lists whose first n items are finite numbers,
    as tuples (those n floats, then the rest unchanged)."""
    out = []
    for p in raw if isinstance(raw, list) else []:
        if isinstance(p, (list, tuple)) and len(p) >= n:
            head = [num(v) for v in p[:n]]
            if None not in head:
                out.append(tuple(head) + tuple(p[n:]))
    return out


def nice_ticks(lo, hi, integer=False, count=5):
    """Round tick values (1, 2 or 5 times a power of ten apart) covering [lo, hi]."""
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw * 0.999)
    if integer:
        step = max(1.0, float(round(step)))
    first, last = math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step
    return [first + i * step for i in range(int(round((last - first) / step)) + 1)], step


def fmt(v, step=None):
    """A number for people: as many decimals as the tick step needs, else 3 significant."""
    if step is not None:
        decimals = max(0, -math.floor(math.log10(step) + 1e-9))
        s = f"{v:.{decimals}f}"
    elif v == int(v) and abs(v) < 1e6:
        s = str(int(v))
    else:
        s = f"{v:.3g}"
    return "0" if re.fullmatch(r"-0(\.0*)?", s) else s


class Chart:
    """One SVG chart: title, legend row, nice-tick axes with grid, and helpers that
    draw in data coordinates. ycats makes the y axis categorical (row 0 on top)."""

    def __init__(self, title, xs, ys, *, xlabel="", ylabel="", width=600, height=300,
                 y0=False, yint=False, ycats=None, left=64):
        self.title, self.xlabel, self.ylabel, self.w, self.h = title, xlabel, ylabel, width, height
        self.left, self.right, self.top, self.bottom = left, 18, 52, 46
        xs = [v for v in xs if num(v) is not None]
        ys = [v for v in ys if num(v) is not None] + ([0.0] if y0 and ys else [])
        if len(ys) > 1 and max(ys) > min(ys):  # headroom: no line drawn on the top frame
            ys.append(max(ys) + 0.04 * (max(ys) - min(ys)))
        self.ycats = ycats
        self.empty = not (ycats if ycats is not None else ys)
        self.xt, self.xstep = nice_ticks(min(xs, default=0.0), max(xs, default=1.0))
        if ycats is None:
            self.yt, self.ystep = nice_ticks(min(ys, default=0.0), max(ys, default=1.0), yint)
        self.parts, self.legend, self.vlines = [], [], 0

    @property
    def pw(self):
        return self.w - self.left - self.right

    @property
    def ph(self):
        return self.h - self.top - self.bottom

    def x(self, v):
        lo, hi = self.xt[0], self.xt[-1]
        return self.left + (v - lo) / (hi - lo) * self.pw

    def y(self, v):
        if self.ycats is not None:
            return self.top + (v + 0.5) / len(self.ycats) * self.ph
        lo, hi = self.yt[0], self.yt[-1]
        return self.top + self.ph - (v - lo) / (hi - lo) * self.ph

    def key(self, label, color, kind="line"):
        self.legend.append((label, color, kind))

    def line(self, pts, color, label=None, width=2.0, dash=None, step=False, opacity=1.0):
        if label:
            self.key(label, color, "dash" if dash else "line")
        xy = []
        for px, py in ((self.x(p[0]), self.y(p[1])) for p in pts):
            if step and xy:
                xy.append((px, xy[-1][1]))
            xy.append((px, py))
        if len(xy) == 1:  # a single point still shows
            self.parts.append(f'<circle cx="{xy[0][0]:.1f}" cy="{xy[0][1]:.1f}" r="{width + 1.5:.1f}" fill="{color}"/>')
        elif xy:
            d = " ".join(f"{a:.1f},{b:.1f}" for a, b in xy)
            self.parts.append(f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="{width}" '
                              f'stroke-linejoin="round" opacity="{opacity}"'
                              + (f' stroke-dasharray="{dash}"' if dash else "") + "/>")

    def dots(self, pts, color, label=None, r=3.0):
        if label:
            self.key(label, color, "dot")
        self.parts += [f'<circle cx="{self.x(p[0]):.1f}" cy="{self.y(p[1]):.1f}" r="{r}" fill="{color}" '
                       f'fill-opacity="0.75"/>' for p in pts]

    def band(self, pts, color, label=None):
        """Shades between lower and upper: pts are (x, lower, upper)."""
        if label:
            self.key(label, color, "area")
        if len(pts) >= 2:
            edge = [(p[0], p[2]) for p in pts] + [(p[0], p[1]) for p in reversed(pts)]
            d = " ".join(f"{self.x(a):.1f},{self.y(b):.1f}" for a, b in edge)
            self.parts.append(f'<polygon points="{d}" fill="{color}" fill-opacity="0.18" stroke="{color}" '
                              f'stroke-opacity="0.45"/>')

    def vline(self, xv, label, color):
        """A vertical marker across the plot, labelled at the top (labels stagger)."""
        px, row = self.x(xv), self.vlines % 3
        self.vlines += 1
        right = px > self.left + self.pw * 0.7
        self.parts.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{self.top}" y2="{self.top + self.ph}" '
                          f'stroke="{color}" stroke-width="1.5" stroke-dasharray="4 3"/>'
                          f'<text x="{px + (-5 if right else 5):.1f}" y="{self.top + 14 + 14 * row}" '
                          f'text-anchor="{"end" if right else "start"}" class="mk" fill="{color}">{esc(label)}</text>')

    def hbar(self, row, value, color, label):
        x0, bh = self.x(max(0.0, self.xt[0])), min(24.0, self.ph / len(self.ycats) * 0.6)
        x1 = self.x(value)
        self.parts.append(f'<rect x="{min(x0, x1):.1f}" y="{self.y(row) - bh / 2:.1f}" width="{abs(x1 - x0):.1f}" '
                          f'height="{bh:.1f}" fill="{color}" rx="2"/>'
                          f'<text x="{max(x0, x1) + 6:.1f}" y="{self.y(row) + 4:.1f}" class="tl">{esc(label)}</text>')

    def tick(self, row, xv, color=DARK):
        half = min(17.0, self.ph / len(self.ycats) * 0.45)
        px, py = self.x(xv), self.y(row)
        self.parts.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{py - half:.1f}" y2="{py + half:.1f}" '
                          f'stroke="{color}" stroke-width="3"/>')

    def svg(self):
        L, T, W, H = self.left, self.top, self.pw, self.ph
        out = [f'<svg class="chart" viewBox="0 0 {self.w} {self.h}" width="{self.w}" height="{self.h}" '
               f'role="img" aria-label="{esc(self.title)}"><title>{esc(self.title)}</title>',
               f'<text x="{L}" y="20" class="ct">{esc(self.title)}</text>']
        for t in self.xt:
            out.append(f'<line x1="{self.x(t):.1f}" x2="{self.x(t):.1f}" y1="{T}" y2="{T + H}" class="grid"/>'
                       f'<text x="{self.x(t):.1f}" y="{T + H + 16}" text-anchor="middle" class="tl">'
                       f'{fmt(t, self.xstep)}</text>')
        if self.ycats is None:
            for t in self.yt:
                out.append(f'<line x1="{L}" x2="{L + W}" y1="{self.y(t):.1f}" y2="{self.y(t):.1f}" class="grid"/>'
                           f'<text x="{L - 6}" y="{self.y(t) + 4:.1f}" text-anchor="end" class="tl">'
                           f'{fmt(t, self.ystep)}</text>')
        else:
            out += [f'<text x="{L - 8}" y="{self.y(i) + 4:.1f}" text-anchor="end" class="tl">{esc(c)}</text>'
                    for i, c in enumerate(self.ycats)]
        out.append(f'<rect x="{L}" y="{T}" width="{W}" height="{H}" class="frame"/>')
        if self.xlabel:
            out.append(f'<text x="{L + W / 2:.1f}" y="{self.h - 8}" text-anchor="middle" class="al">{esc(self.xlabel)}</text>')
        if self.ylabel:
            out.append(f'<text transform="translate(14 {T + H / 2:.1f}) rotate(-90)" text-anchor="middle" '
                       f'class="al">{esc(self.ylabel)}</text>')
        if self.empty:
            out.append(f'<text x="{L + W / 2:.1f}" y="{T + H / 2:.1f}" text-anchor="middle" class="nodata">no data</text>')
        out += self.parts
        lx = L
        for label, color, kind in self.legend:
            if kind == "dot":
                sym = f'<circle cx="{lx + 8}" cy="36" r="4" fill="{color}"/>'
            elif kind == "area":
                sym = f'<rect x="{lx}" y="31" width="16" height="10" fill="{color}" fill-opacity="0.25" stroke="{color}"/>'
            else:
                sym = (f'<line x1="{lx}" x2="{lx + 18}" y1="36" y2="36" stroke="{color}" '
                       f'stroke-width="{4 if kind == "bold" else 2.5}"' + (' stroke-dasharray="5 3"' if kind == "dash" else "") + "/>")
            out.append(sym + f'<text x="{lx + 23}" y="40" class="lg">{esc(label)}</text>')
            lx += 23 + 6.2 * len(str(label)) + 18
        return "\n".join(out + ["</svg>"])


def plot_loss(s):
    ref, res, killed = points(s.get("reference")), points(s.get("resumed")), num(s.get("killed_at"))
    allp = ref + res
    c = Chart("Training loss: uninterrupted vs. killed and resumed", [p[0] for p in allp] + [killed],
              [p[1] for p in allp], xlabel="step", ylabel="loss")
    c.line(ref, BLUE, "reference (never killed)", width=3, opacity=0.55)
    c.line(res, ORANGE, "killed and resumed", width=2, dash="6 4")
    if killed is not None:
        c.vline(killed, f"SIGKILL at step {fmt(killed)}", RED)
    return c


def plot_sweep(s):
    metric = str(s.get("metric") or "metric")
    trials = [(t, points(t.get("values"))) for t in s.get("trials") or [] if isinstance(t, dict)]
    allp = [p for _, ps in trials for p in ps]
    c = Chart(f"Hyperparameter sweep: {metric} per trial", [p[0] for p in allp], [p[1] for p in allp],
              xlabel="epoch", ylabel=metric)
    status = {t.get("status") if isinstance(t.get("status"), str) else None for t, _ in trials}
    if status & {"succeeded", None}:
        c.key("completed", PALETTE[0])
    if "early_terminated" in status:
        c.key("early-terminated", GREY)
    if "failed" in status:
        c.key("failed", RED, "dash")
    # Grey ones underneath, the best one on top.
    ordered = sorted(enumerate(trials), key=lambda it: (it[1][0].get("best") is True,
                                                        it[1][0].get("status") != "early_terminated"))
    for i, (t, ps) in ordered:
        st, best = t.get("status"), t.get("best") is True
        color = GREY if st == "early_terminated" else RED if st == "failed" else PALETTE[i % len(PALETTE)]
        if best:
            params = t.get("params") if isinstance(t.get("params"), dict) else {}
            label = f"best: trial {t.get('trial', i)}" + (" (" + ", ".join(f"{k}={v}" for k, v in params.items()) + ")" if params else "")
            c.key(label, GREEN, "bold")
            color = GREEN
        c.line(ps, color, width=4 if best else 1.6, dash="4 3" if st == "failed" else None,
               opacity=1.0 if best else 0.8)
    return c


def plot_latency(s):
    pts, phases = points(s.get("points")), points(s.get("phases"), 1)
    c = Chart("Gateway request latency by serving tier", [p[0] for p in pts] + [p[0] for p in phases],
              [p[1] for p in pts], xlabel="time (s)", ylabel="latency (ms)", y0=True)
    tiers = {"primary": BLUE, "fallback": ORANGE, "error": RED}
    for tier in list(tiers) + sorted({str(p[2]) for p in pts if len(p) > 2} - set(tiers)):
        mine = [p for p in pts if len(p) > 2 and str(p[2]) == tier]
        if mine:
            c.dots(mine, tiers.get(tier, GREY), f"{tier} ({len(mine)})")
    for p in phases:
        c.vline(p[0], str(p[1]) if len(p) > 1 else "", DARK)
    return c


def plot_capacity(s):
    pts = points(s.get("points"))
    c = Chart("Autoscaler capacity: backends over time", [p[0] for p in pts], [p[1] for p in pts],
              xlabel="time (s)", ylabel="backends", y0=True, yint=True)
    c.line(pts, BLUE, "backends", width=2.5, step=True)
    return c


def plot_drift(s):
    cols = [r for r in s.get("columns") or [] if isinstance(r, dict)]
    names = [str(r.get("column", "?")) + (f" ({r['test']})" if r.get("test") else "") for r in cols]
    dd = s.get("dataset_drift")
    title = "Data drift per column" + {True: ": dataset drift detected", False: ": no dataset drift"}.get(dd, "")
    c = Chart(title, [num(r.get("statistic")) for r in cols] + [num(r.get("threshold")) for r in cols] + [0.0],
              [], xlabel="test statistic", ycats=names, height=max(300, 100 + 28 * len(cols)),
              left=min(220, 24 + int(6.6 * max((len(n) for n in names), default=4))))
    c.key("drifted", ORANGE, "area")
    c.key("within threshold", BLUE, "area")
    c.key("threshold", DARK)
    for i, r in enumerate(cols):
        stat, thr = num(r.get("statistic")), num(r.get("threshold"))
        if stat is not None:
            c.hbar(i, stat, ORANGE if r.get("drifted") is True else BLUE, fmt(stat))
        if thr is not None:
            c.tick(i, thr)
    return c


def plot_anomaly(s):
    pts, fired, signal = points(s.get("points")), num(s.get("fired_at")), str(s.get("signal") or "signal")
    band = [(p[0], num(p[2]), num(p[3])) for p in pts if len(p) >= 4 and None not in (num(p[2]), num(p[3]))]
    c = Chart(f"Anomaly detection: {signal}", [p[0] for p in pts] + [fired],
              [p[1] for p in pts] + [b[1] for b in band] + [b[2] for b in band], xlabel="time (s)", ylabel="value")
    c.band(band, BLUE, "expected band")
    c.line(pts, DARK, "observed", width=1.8)
    bounds = {b[0]: b for b in band}
    outside = [p for p in pts if p[0] in bounds and not bounds[p[0]][1] <= p[1] <= bounds[p[0]][2]]
    if outside:
        c.dots(outside, RED, "outside band", r=3.5)
    if fired is not None:
        c.vline(fired, f"alert fired at {fmt(fired)} s", RED)
    return c


PLOTS = {"loss": plot_loss, "sweep": plot_sweep, "latency": plot_latency,
         "capacity": plot_capacity, "drift": plot_drift, "anomaly": plot_anomaly}

CSS = """
body{margin:0;background:#f3f5f7;color:#1f2328;font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:1280px;margin:0 auto;padding:24px 32px 48px}
h1{margin:0 0 14px;font-size:28px}h2{margin:0 0 10px;font-size:19px}h3{margin:14px 0 6px;font-size:15px}
#verdict{padding:14px 22px;border-radius:8px;color:#fff;font-size:22px;font-weight:700;letter-spacing:.3px}
#verdict.pass{background:#1a7f37}#verdict.fail{background:#cf222e}
.meta{color:#57606a;margin:8px 2px 22px}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #d0d7de}
th,td{padding:6px 12px;border-bottom:1px solid #e1e4e8;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
a{color:#0969da;text-decoration:none}
.ok{color:#1a7f37;font-weight:700}.bad{color:#cf222e;font-weight:700}
.step{background:#fff;border:1px solid #d0d7de;border-left:6px solid #1a7f37;border-radius:8px;padding:16px 22px;margin:22px 0}
.step.failed{border-left-color:#cf222e}.step .sub{color:#57606a;font-weight:400;font-size:14px;margin-left:8px}
ul.summary{margin:4px 0 8px;padding-left:20px}ul.summary li{margin:2px 0}
.checks td:first-child{width:48px}.checks td.detail{color:#57606a}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:16px;margin-top:14px}
.plots svg{width:100%;height:auto;background:#fff;border:1px solid #e1e4e8;border-radius:6px}
svg text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
.ct{font-size:14px;font-weight:600;fill:#1f2328}.lg,.tl{font-size:11.5px;fill:#424a53}.al{font-size:12px;fill:#57606a}
.mk{font-size:11.5px;font-weight:600;paint-order:stroke;stroke:#fff;stroke-width:3px}
.nodata{font-size:15px;fill:#8c959f;font-style:italic}
.grid{stroke:#eaeef2;stroke-width:1}.frame{fill:none;stroke:#afb8c1;stroke-width:1}
"""


def outcome(ok):
    return '<span class="ok">ok</span>' if ok else '<span class="bad">FAIL</span>'


def anchor(step):
    return "step-" + re.sub(r"[^A-Za-z0-9_-]", "_", str(step.get("step")))


def seconds(step):
    s = num(step.get("seconds"))
    return f"{s:.1f} s" if s is not None else "–"


def checks_of(step):
    return [c for c in step.get("checks") or [] if isinstance(c, dict)]


def render_step(step):
    ok, checks = step.get("ok") is True, checks_of(step)
    summary = step.get("summary")
    summary = [summary] if isinstance(summary, str) else summary if isinstance(summary, list) else []
    out = [f'<section class="step{"" if ok else " failed"}" id="{anchor(step)}">',
           f'<h2>{esc(step.get("order", ""))}. {esc(step.get("title"))} {outcome(ok)}'
           f'<span class="sub">{esc(step.get("step"))} · {esc(seconds(step))}</span></h2>']
    if summary:
        out.append('<ul class="summary">' + "".join(f"<li>{esc(line)}</li>" for line in summary) + "</ul>")
    if checks:
        out.append('<h3>Checks</h3><table class="checks">' + "".join(
            f'<tr><td>{outcome(c.get("ok") is True)}</td><td>{esc(c.get("what", ""))}</td>'
            f'<td class="detail">{esc(c.get("detail", ""))}</td></tr>' for c in checks) + "</table>")
    series = step.get("series") if isinstance(step.get("series"), dict) else {}
    charts = [PLOTS[k](v if isinstance(v, dict) else {}).svg() for k, v in series.items() if k in PLOTS]
    if charts:
        out.append('<div class="plots">' + "\n".join(charts) + "</div>")
    return "\n".join(out + ["</section>"])


def render(steps, generated):
    failed = [s for s in steps if s.get("ok") is not True]
    verdict = (f"PASS · all {len(steps)} steps ok" if not failed
               else f"FAIL · {len(failed)} of {len(steps)} steps failed")
    total = sum(num(s.get("seconds")) or 0.0 for s in steps)
    rows = []
    for s in steps:
        checks = checks_of(s)
        passed = sum(c.get("ok") is True for c in checks)
        rows.append(f'<tr><td class="n">{esc(s.get("order", ""))}</td>'
                    f'<td><a href="#{anchor(s)}">{esc(s.get("title"))}</a></td><td>{outcome(s.get("ok") is True)}</td>'
                    f'<td class="n">{esc(seconds(s))}</td><td class="n {"ok" if passed == len(checks) else "bad"}">'
                    f'{passed}/{len(checks)}</td></tr>')
    return "\n".join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Gantry tour: {esc(verdict)}</title><style>{CSS}</style></head><body><main>",
        "<h1>Gantry tour</h1>",
        f'<div id="verdict" class="{"fail" if failed else "pass"}">{esc(verdict)}</div>',
        f'<p class="meta">{len(steps)} steps · {total:.1f} s in total · generated {esc(generated)}</p>',
        "<table><tr><th>#</th><th>step</th><th>outcome</th><th>time</th><th>checks passed</th></tr>",
        "\n".join(rows), "</table>",
        *[render_step(s) for s in steps],
        "</main></body></html>\n"])


def order_key(item):
    path, step = item
    try:
        return (0, int(step.get("order")), path)
    except (TypeError, ValueError):
        return (1, 0, path)


def load(results):
    """The step objects of results/*.json in order; raises ValueError naming the file."""
    if not os.path.isdir(results):
        raise ValueError(f"{results}: no such directory")
    steps = []
    for path in sorted(glob.glob(os.path.join(results, "*.json"))):
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: not valid JSON: {e}") from e
        if isinstance(doc, dict) and "step" in doc:
            steps.append((path, doc))
        else:
            print(f"report.py: skipping {path}: not a step result (no \"step\" key)", file=sys.stderr)
    if not steps:
        raise ValueError(f"{results}: no step results (*.json with a \"step\" key)")
    return [doc for _, doc in sorted(steps, key=order_key)]


def main(argv=None):
    ap = argparse.ArgumentParser(description="Render the Gantry tour results as one HTML page.")
    ap.add_argument("--results", required=True, help="directory of <step>.json files")
    ap.add_argument("--out", required=True, help="HTML file to write")
    args = ap.parse_args(argv)
    try:
        steps = load(args.results)
    except ValueError as e:
        print(f"report.py: error: {e}", file=sys.stderr)
        return 2
    generated = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    tmp = args.out + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(render(steps, generated))
        os.replace(tmp, args.out)
    except OSError as e:
        print(f"report.py: error: {args.out}: {e}", file=sys.stderr)
        return 2
    print(f"report: {args.out} ({len(steps)} steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
