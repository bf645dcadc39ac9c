"""Tests of report.py (standard library only):

    /usr/bin/python3 -m unittest examples/tour/report_test.py

write_fixtures() is also used by hand to render a sample page:

    /usr/bin/python3 -c 'import sys; sys.path.insert(0, "examples/tour"); import report_test; \
        report_test.write_fixtures("/tmp/tour-results", all_ok=True)'
"""

import contextlib
import io
import json
import math
import os
import re
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402

TITLE = "Train <b>& resume</b>"
FAILING_TITLE = "Serve \"gateway\" <b>&</b> fall back"


def full_step():
    """A step with every series, shaped like the real tour's."""
    ref = [[s, 2.3 * math.exp(-s / 90) + 0.1 + 0.02 * math.sin(s / 7)] for s in range(0, 301, 5)]
    resumed = [p for p in ref if p[0] >= 120]
    trials = []
    for i, lr in enumerate([0.001, 0.003, 0.01, 0.03, 0.1, 0.3]):
        epochs = 3 if i in (0, 5) else 10
        values = [[e, 1.0 / (1 + e * (0.2 + 0.1 * i % 0.5)) + 0.05 * i] for e in range(1, epochs + 1)]
        trials.append({"trial": i, "params": {"lr": lr}, "values": values, "best": i == 2,
                       "status": "early_terminated" if epochs == 3 else "succeeded"})
    latency = [[t / 2, 18 + 6 * math.sin(t) + (60 if 40 <= t < 70 else 0),
                "fallback" if 40 <= t < 70 else "primary"] for t in range(0, 120)]
    latency += [[35.5, 900, "error"], [36, 950, "error"]]
    anomaly = [[t, 0.5 + 0.05 * math.sin(t / 3) + (0.3 if t >= 30 else 0), 0.38, 0.62] for t in range(0, 45)]
    return {
        "step": "train", "order": 2, "title": TITLE, "ok": True, "seconds": 12.34,
        "summary": ["trained 300 steps, killed at 140 with SIGKILL", "resumed from step 120 <checkpoint>"],
        "checks": [{"what": "resumed loss equals reference", "ok": True, "detail": "180 steps identical"},
                   {"what": "checkpoint verified", "ok": True, "detail": ""}],
        "series": {
            "loss": {"reference": ref, "resumed": resumed, "killed_at": 140},
            "sweep": {"trials": trials, "metric": "val_loss"},
            "latency": {"points": latency, "phases": [[0, "primary up"], [20, "primary killed"],
                                                      [35, "fallback serves"], [60, "primary back"]]},
            "capacity": {"points": [[0, 0], [5, 1], [12, 3], [30, 3], [45, 1], [60, 0]]},
            "drift": {"columns": [{"column": "x0", "statistic": 0.31, "threshold": 0.1, "drifted": True, "test": "ks"},
                                  {"column": "x1", "statistic": 0.04, "threshold": 0.1, "drifted": False, "test": "ks"},
                                  {"column": "category", "statistic": 0.02, "threshold": 0.2, "drifted": False,
                                   "test": "psi"}], "dataset_drift": True},
            "anomaly": {"points": anomaly, "signal": "output:probs:mean", "fired_at": 31.5},
        }}


def failing_step():
    """A failed step: NaN and None values, empty and constant series, a single point."""
    nan = float("nan")
    return {
        "step": "serve", "order": 3, "title": FAILING_TITLE, "ok": False, "seconds": nan,
        "summary": "one line, not a list",
        "checks": [{"what": "fallback answered", "ok": False, "detail": "HTTP 502 <html>"},
                   {"what": "primary answered", "ok": True}],
        "series": {
            "loss": {"reference": [[0, nan], [1, None], [2, 1.0]], "resumed": [], "killed_at": None},
            "latency": {"points": [], "phases": []},
            "capacity": {"points": [[0, 2], [10, 2], [20, 2]]},
            "anomaly": {"points": [[0, nan, nan, nan], [1, 0.5, None, 0.7]], "fired_at": nan},
        }}


def write_fixtures(directory, all_ok=False):
    """Writes the two step files (both ok when all_ok) and a non-step JSON file."""
    os.makedirs(directory, exist_ok=True)
    second = failing_step()
    if all_ok:
        second.update(ok=True, seconds=3.2, checks=[dict(c, ok=True) for c in second["checks"]])
    for doc in (full_step(), second):
        with open(os.path.join(directory, doc["step"] + ".json"), "w") as f:
            json.dump(doc, f)  # NaN written as NaN, as json.dump does by default
    with open(os.path.join(directory, "notes.json"), "w") as f:
        json.dump(["not", "a", "step"], f)


def run_main(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = report.main(argv)
    return rc, err.getvalue()


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = os.path.join(self.tmp.name, "results")
        self.out = os.path.join(self.tmp.name, "report.html")

    def tearDown(self):
        self.tmp.cleanup()

    def render(self):
        rc, err = run_main(["--results", self.dir, "--out", self.out])
        self.assertEqual(rc, 0, err)
        with open(self.out, encoding="utf-8") as f:
            return f.read()

    def test_page(self):
        write_fixtures(self.dir)
        page = self.render()
        for title in (TITLE, FAILING_TITLE):
            self.assertNotIn(title, page)
            self.assertIn(report.esc(title), page)
        self.assertNotIn("<b>", page)
        self.assertIn("&lt;checkpoint&gt;", page)
        self.assertIn("HTTP 502 &lt;html&gt;", page)
        self.assertNotIn("<script", page.lower())
        self.assertIsNone(re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I))
        self.assertNotIn("http://", page)
        self.assertNotIn("https://", page)
        self.assertNotIn("NaN", page)
        present = len(full_step()["series"]) + len(failing_step()["series"])
        self.assertEqual(page.count("<svg"), present)
        self.assertEqual(page.count("</svg>"), present)
        self.assertIn('id="verdict" class="fail"', page)
        self.assertRegex(page, r'id="verdict"[^>]*>FAIL · 1 of 2 steps failed<')
        self.assertIn("no data", page)  # the empty latency series
        # Ordered by "order": train (2) before serve (3), the non-step file ignored.
        self.assertLess(page.index('id="step-train"'), page.index('id="step-serve"'))

    def test_all_ok_is_pass(self):
        write_fixtures(self.dir, all_ok=True)
        page = self.render()
        self.assertRegex(page, r'id="verdict" class="pass">PASS · all 2 steps ok<')

    def test_bad_json_is_exit_2_naming_the_file(self):
        write_fixtures(self.dir)
        bad = os.path.join(self.dir, "broken.json")
        with open(bad, "w") as f:
            f.write('{"step": "x", ')
        rc, err = run_main(["--results", self.dir, "--out", self.out])
        self.assertEqual(rc, 2)
        self.assertIn(bad, err)
        self.assertFalse(os.path.exists(self.out))

    def test_missing_or_empty_dir_is_exit_2(self):
        rc, err = run_main(["--results", self.dir, "--out", self.out])
        self.assertEqual(rc, 2)
        self.assertIn(self.dir, err)
        os.makedirs(self.dir)
        rc, err = run_main(["--results", self.dir, "--out", self.out])
        self.assertEqual(rc, 2)
        self.assertIn(self.dir, err)

    def test_ticks(self):
        ticks, step = report.nice_ticks(0.13, 2.41)
        self.assertEqual(step, 0.5)
        self.assertAlmostEqual(ticks[0], 0.0)
        self.assertAlmostEqual(ticks[-1], 2.5)
        ticks, step = report.nice_ticks(5, 5)  # constant values: no zero span
        self.assertLess(ticks[0], 5)
        self.assertGreater(ticks[-1], 5)
        self.assertEqual(report.nice_ticks(0, 3, integer=True)[1], 1.0)
        self.assertEqual(report.fmt(0.30000000000000004, 0.1), "0.3")
        self.assertEqual(report.fmt(-0.0001, 0.5), "0")


if __name__ == "__main__":
    unittest.main()
