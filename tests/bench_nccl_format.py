#!/usr/bin/python3
"""End-to-end checks of `gantry bench` against nccl-tests' output format.

The parser below is written from nccl-tests 2.19 (src/util.cu, src/common.cu):
every header, row and footer line must have exactly nccl-tests' layout, every
number must be printed the way nccl-tests prints it, and the numbers must be
consistent (busbw = algbw x factor, the average, the sizes of the sweep).

Usage: bench_nccl_format.py BIN_DIR SCENARIO [ARGS...]   (see SCENARIOS below)
Exit status 0 on success; a failed check prints what and where, and exits 1.
"""

import csv
import io
import json
import os
import re
import subprocess
import sys
import tempfile

TIMEOUT_S = 120

ELEMENT_SIZE = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
                "half": 2, "float": 4, "double": 8, "bfloat16": 2}
REDUCING = {"all_reduce", "reduce_scatter", "reduce"}
ROOTED = {"broadcast", "reduce", "gather", "scatter"}
WHOLE = {"all_reduce", "broadcast", "reduce", "sendrecv"}  # count = size / elt
COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall",
               "sendrecv", "gather", "scatter"]

HEADER_META = ("#                                                              out-of-place"
               "                       in-place          ")


class CheckError(Exception):
    pass


def check(cond, message):
    if not cond:
        raise CheckError(message)


def run(argv, env_extra=None, expect_rc=0):
    env = dict(os.environ)
    env.update(env_extra or {})
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    if expect_rc is not None and proc.returncode != expect_rc:
        raise CheckError("%s exited %d, expected %d\nstdout:\n%s\nstderr:\n%s" % (
            " ".join(argv), proc.returncode, expect_rc, proc.stdout[-3000:], proc.stderr[-3000:]))
    return proc


# ----------------------------------------------------------------- formats

def float_str(value, width):
    """nccl-tests' getFloatStr: the first of %.2f %.1f %.0f that fits, else %e."""
    for fmt in ("%*.2f", "%*.1f", "%*.0f"):
        s = fmt % (width, value)
        if len(s) <= width:
            return s
    return ("%*.1e" if width >= 7 else "%*.0e") % (width, value)


def header_lines(timestamps, cputime):
    time = "cputime" if cputime else "time"
    pad, label, fmt = (19, "timestamp", "%Y-%m-%d %H:%M:%S") if timestamps else (0, "", "")
    names = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s" % (
        "size", "count", "type", "redop", "root", time, "algbw", "busbw", "#wrong", time, "algbw",
        "busbw", "#wrong", pad, label)
    units = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s" % (
        "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
        "", pad, fmt)
    return [HEADER_META, names, units]


def bus_factor(collective, n):
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in ("broadcast", "reduce", "sendrecv"):
        return 1.0
    return (n - 1) / n


def expected_count(collective, size, elt, n):
    """Element count nccl-tests derives from a swept size (its *GetCollByteCount)."""
    count = size // elt
    if collective in WHOLE:
        return count, count * elt
    chunk = (count // n) & ~(16 // elt - 1)
    return chunk, chunk * n * elt


def sweep_sizes(min_bytes, max_bytes, step, kind):
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size = size * step if kind == "factor" else size + step
    return sizes


def display_half_unit(text):
    """Half of the last printed digit of a number as nccl-tests printed it."""
    text = text.strip()
    if "e" in text:
        mantissa, exp = text.split("e")
        decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
        return 0.5 * 10 ** (int(exp) - decimals)
    decimals = len(text.split(".")[1]) if "." in text else 0
    return 0.5 * 10 ** (-decimals)


# ------------------------------------------------------------------ parser

ROW_PREFIX = re.compile(r"^( {0,11}\d+)  ( {0,11}\d+)  ([ a-z0-9]{8})  ([ a-z]{6})  ( *-?\d+)")
PARAMS = re.compile(r"^# nThread 1 nGpus 1 minBytes (\d+) maxBytes (\d+) step: (\d+)\((factor|bytes)\) "
                    r"warmup iters: (\d+) iters: (\d+) agg iters: 1 validation: (\d+) graph: 0 "
                    r"unalign: 0$")
DEVICE = re.compile(r"^#  Rank +(\d+) Group +(\d+) Pid +(\d+) on +(\S+) device +(\d+) \[([^\]]*)\] (.*)$")
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$")


def parse_placement(text, where):
    """'  time  algbw  busbw  wrong' (33 chars) or the N/A form (32 chars)."""
    if text[25:32] == "    N/A":  # a %6g field can never read like this
        body, wrong, width = text[:25], None, 32
    else:
        body, wrong_text, width = text[:25], text[25:33], 33
        check(len(wrong_text) == 8 and wrong_text.startswith("  "), "%s: bad #wrong field %r" % (where, text))
        wrong = float(wrong_text)
        check("%6g" % wrong == wrong_text[2:], "%s: #wrong %r is not %%6g" % (where, wrong_text))
    check(body[0:2] == "  " and body[9:11] == "  " and body[17:19] == "  ",
          "%s: placement columns misaligned: %r" % (where, text))
    fields = (body[2:9], body[11:17], body[19:25])
    values = []
    for field, width_ in zip(fields, (7, 6, 6)):
        value = float(field)
        check(float_str(value, width_) == field,
              "%s: %r is not nccl-tests' formatting of %r (expected %r)" % (
                  where, field, value, float_str(value, width_)))
        values.append((value, field))
    return {"time": values[0], "algbw": values[1], "busbw": values[2], "wrong": wrong}, width


def parse_text(text):
    """Parses nccl-tests text strictly; returns a dict describing it."""
    lines = text.split("\n")
    check(lines[-1] == "" and lines[-2] == "", "output must end with '#', then an empty line")
    lines = lines[:-1]
    out = {"rows": [], "devices": [], "reduced_max": None, "json_path": None}
    i = 0
    if lines[i].startswith("# Writing JSON output to "):
        out["json_path"] = lines[i][len("# Writing JSON output to "):]
        i += 1
    check(lines[i].startswith("# "), "first line must be a comment: %r" % lines[i])
    i += 1
    m = re.match(r"^# Collective test starting: (\w+)_perf$", lines[i])
    check(m, "line %d: expected '# Collective test starting: <name>_perf', got %r" % (i, lines[i]))
    out["collective"] = m.group(1)
    i += 1
    m = PARAMS.match(lines[i])
    check(m, "line %d: parameter line does not match nccl-tests: %r" % (i, lines[i]))
    out["min"], out["max"], out["step"] = int(m.group(1)), int(m.group(2)), int(m.group(3))
    out["step_kind"], out["warmup"], out["iters"] = m.group(4), int(m.group(5)), int(m.group(6))
    out["check"] = int(m.group(7))
    i += 1
    while lines[i].startswith("# Blocking Enabled: "):
        i += 1
    check(lines[i] == "#", "line %d: expected '#'" % i)
    check(lines[i + 1] == "# Using devices", "line %d: expected '# Using devices'" % (i + 1))
    i += 2
    while DEVICE.match(lines[i]):
        d = DEVICE.match(lines[i])
        rank, group, pid, host, dev = int(d.group(1)), int(d.group(2)), int(d.group(3)), d.group(4), int(d.group(5))
        rebuilt = "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s" % (
            rank, group, pid, host, dev, d.group(6), d.group(7))
        check(rebuilt == lines[i], "line %d: device line layout differs: %r" % (i, lines[i]))
        check(rank == len(out["devices"]), "device lines must be in rank order")
        out["devices"].append(lines[i])
        i += 1
    check(out["devices"], "no device lines")
    out["nranks"] = len(out["devices"])
    if lines[i] == "#" and lines[i + 1].startswith("# Reducing maxBytes to "):
        m = re.match(r"^# Reducing maxBytes to (\d+) due to memory limitation$", lines[i + 1])
        check(m, "bad memory limitation line %r" % lines[i + 1])
        out["reduced_max"] = int(m.group(1))
        i += 2
    check(lines[i] == "#", "line %d: expected '#' before the table header, got %r" % (i, lines[i]))
    i += 1
    timestamps = lines[i + 1].endswith("timestamp")
    cputime = "cputime" in lines[i + 1]
    out["timestamps"] = timestamps
    expected_header = header_lines(timestamps, cputime)
    for k in range(3):
        check(lines[i + k] == expected_header[k],
              "line %d: table header differs from nccl-tests:\n got %r\nwant %r" % (i + k, lines[i + k], expected_header[k]))
    i += 3
    while not lines[i].startswith("#"):
        out["rows"].append(parse_row(lines[i], "line %d" % i, timestamps))
        i += 1
    m = re.match(r"^# Out of bounds values : (\d+) (OK|FAILED)$", lines[i])
    check(m, "line %d: bad 'Out of bounds values' line %r" % (i, lines[i]))
    out["out_of_bounds"] = int(m.group(1))
    check((m.group(2) == "OK") == (out["out_of_bounds"] == 0), "OK/FAILED disagrees with the count")
    m = re.match(r"^# Avg bus bandwidth    : (\S+) $", lines[i + 1])
    check(m, "line %d: bad 'Avg bus bandwidth' line %r" % (i + 1, lines[i + 1]))
    out["avg"] = float(m.group(1))
    check("%g" % out["avg"] == m.group(1), "average is not printed with %g")
    m = re.match(r"^# Peak bus bandwidth   : (\S+) $", lines[i + 2])
    check(m, "line %d: bad 'Peak bus bandwidth' line %r" % (i + 2, lines[i + 2]))
    out["peak"] = float(m.group(1))
    check(lines[i + 3] == "#", "expected '#' after the bandwidth lines")
    check(lines[i + 4] == "# Collective test concluded: %s_perf" % out["collective"],
          "bad closing line %r" % lines[i + 4])
    check(lines[i + 5] == "#" and i + 6 == len(lines) - 1 and lines[-1] == "",
          "after the closing line nccl-tests prints '#' and an empty line, nothing else")
    return out


def parse_row(line, where, timestamps):
    m = ROW_PREFIX.match(line)
    check(m and len(m.group(1)) == 12 and len(m.group(2)) == 12 and len(m.group(5)) == 6,
          "%s: row prefix does not match '%%12li  %%12li  %%8s  %%6s  %%6s': %r" % (where, line))
    row = {"size": int(m.group(1)), "count": int(m.group(2)), "type": m.group(3).strip(),
           "redop": m.group(4).strip(), "root": int(m.group(5))}
    check(row["type"] in ELEMENT_SIZE, "%s: unknown type %r" % (where, row["type"]))
    rest = line[52:]
    row["oop"], width = parse_placement(rest, where)
    rest = rest[width:]
    row["ip"], width = parse_placement(rest, where)
    rest = rest[width:]
    if timestamps:
        check(len(rest) == 21 and rest[:2] == "  " and TIMESTAMP.match(rest[2:]),
              "%s: bad timestamp column %r" % (where, rest))
    else:
        check(rest == "", "%s: trailing characters %r" % (where, rest))
    return row


def check_consistency(parsed, collective=None, expect_checked=True):
    """Checks the numbers in a parsed output against each other."""
    coll = parsed["collective"]
    if collective:
        check(coll == collective, "collective %s, expected %s" % (coll, collective))
    n = parsed["nranks"]
    factor = bus_factor(coll, n)
    top = parsed["reduced_max"] if parsed["reduced_max"] is not None else parsed["max"]
    sizes = sweep_sizes(parsed["min"], top, parsed["step"], parsed["step_kind"])
    check(parsed["rows"], "no result rows")
    check(len(parsed["rows"]) % len(sizes) == 0,
          "%d rows are not a whole number of sweeps of %d sizes" % (len(parsed["rows"]), len(sizes)))
    busbws = []
    for k, row in enumerate(parsed["rows"]):
        elt = ELEMENT_SIZE[row["type"]]
        count, size = expected_count(coll, sizes[k % len(sizes)], elt, n)
        check((row["count"], row["size"]) == (count, size),
              "row %d: size/count %d/%d, nccl-tests would print %d/%d" % (k, row["size"], row["count"], size, count))
        check((row["redop"] != "none") == (coll in REDUCING), "row %d: redop %r" % (k, row["redop"]))
        check((row["root"] >= 0) == (coll in ROOTED), "row %d: root %d" % (k, row["root"]))
        for placement in ("oop", "ip"):
            p = row[placement]
            (alg, alg_text), (bus, bus_text) = p["algbw"], p["busbw"]
            tolerance = display_half_unit(alg_text) * factor + display_half_unit(bus_text) + 1e-9
            check(abs(bus - alg * factor) <= tolerance,
                  "row %d %s: busbw %s != algbw %s x %.4f" % (k, placement, bus_text, alg_text, factor))
            if expect_checked:
                check(p["wrong"] is not None, "row %d: #wrong is N/A but checks ran" % k)
            else:
                check(p["wrong"] is None, "row %d: #wrong must be N/A with -c 0" % k)
            busbws.append((bus, display_half_unit(bus_text)))
    mean = sum(b for b, _ in busbws) / len(busbws)
    slack = sum(h for _, h in busbws) / len(busbws) + abs(parsed["avg"]) * 1e-5 + 1e-9
    check(abs(parsed["avg"] - mean) <= slack,
          "Avg bus bandwidth %g is not the mean of the busbw column (%g)" % (parsed["avg"], mean))
    peak = max(b for b, _ in busbws)
    check(abs(parsed["peak"] - peak) <= max(h for _, h in busbws) + abs(peak) * 1e-5,
          "Peak bus bandwidth %g is not the largest busbw (%g)" % (parsed["peak"], peak))


def check_json_against_text(doc, parsed):
    for key in ("version", "start_time", "args", "env", "nccl_version", "config", "results",
                "out_of_bounds", "average_bus_bandwidth", "errors", "end_time"):
        check(key in doc, "JSON: missing key %r" % key)
    check(doc["version"] == 3, "JSON: version %r, expected 3" % doc["version"])
    check(doc["env"] == [], "JSON: env must be empty (the environment is not recorded)")
    config = doc["config"]
    for key in ("nthreads", "ngpus", "minimum_bytes", "maximum_bytes", "warmup_iters", "iterations",
                "aggregated_iterations", "validation", "graph", "blocking_collectives",
                "parallel_init", "devices"):
        check(key in config, "JSON config: missing key %r" % key)
    check(("step_factor" in config) != ("step_bytes" in config), "JSON config: one of step_factor/step_bytes")
    check(len(config["devices"]) == parsed["nranks"], "JSON: one device per rank")
    for d in config["devices"]:
        for key in ("rank", "group", "pid", "hostname", "device", "device_hex", "device_info"):
            check(key in d, "JSON device: missing key %r" % key)
    results = doc["results"]
    check(len(results) == len(parsed["rows"]), "JSON has %d results, text %d rows" % (len(results), len(parsed["rows"])))
    for k, (res, row) in enumerate(zip(results, parsed["rows"])):
        for key in ("size", "count", "type", "redop", "root", "out_of_place", "in_place",
                    "actual_iterations", "experiment_name"):
            check(key in res, "JSON result %d: missing key %r" % (k, key))
        check(res["root"] == "%6i" % row["root"], "JSON result %d: root must be the %%6i string" % k)
        check((res["size"], res["count"], res["type"], res["redop"]) ==
              (row["size"], row["count"], row["type"], row["redop"]), "JSON result %d differs from the text" % k)
        for placement, key in (("oop", "out_of_place"), ("ip", "in_place")):
            m = res[key]
            time_key = "cpu_time" if "cpu_time" in m else "time"
            for field, width, text_field in ((time_key, 7, "time"), ("alg_bw", 6, "algbw"), ("bus_bw", 6, "busbw")):
                check(float_str(m[field], width) == row[placement][text_field][1],
                      "JSON result %d %s.%s = %r prints as %r, text has %r" % (
                          k, key, field, m[field], float_str(m[field], width), row[placement][text_field][1]))
            if row[placement]["wrong"] is None:
                check(m["nwrong"] is None, "JSON result %d: nwrong must be null for N/A" % k)
            else:
                check(m["nwrong"] == row[placement]["wrong"], "JSON result %d: nwrong differs" % k)
    check(doc["out_of_bounds"]["count"] == parsed["out_of_bounds"], "JSON out_of_bounds.count")
    check(doc["out_of_bounds"]["okay"] == ("true" if parsed["out_of_bounds"] == 0 else "false"),
          "JSON out_of_bounds.okay is nccl-tests' string boolean")
    bws = [r[p]["bus_bw"] for r in results for p in ("out_of_place", "in_place")]
    check(abs(doc["average_bus_bandwidth"]["bandwidth"] - sum(bws) / len(bws)) <= 1e-9 * max(1, max(bws)),
          "JSON average_bus_bandwidth is not the mean bus_bw")
    check("%g" % doc["average_bus_bandwidth"]["bandwidth"] == "%g" % parsed["avg"], "JSON average differs from text")


# --------------------------------------------------------------- scenarios

def gantry(bin_dir):
    return os.path.join(bin_dir, "gantry")


def perf(bin_dir, collective):
    return os.path.join(bin_dir, collective + "_perf")


def scenario_text(bin_dir, args):
    """The *_perf entry points in several modes, parsed strictly."""
    cases = [
        ("all_reduce", ["-b", "8", "-e", "1M", "-f", "4"], True),
        ("all_reduce", ["-b", "8", "-e", "1M", "-f", "4", "-c", "0"], False),
        ("all_reduce", ["-b", "8", "-e", "1M", "-f", "4", "-S", "1"], True),
        ("all_gather", ["-b", "8", "-e", "1M", "-f", "4", "-d", "half"], True),
        ("reduce_scatter", ["-b", "100", "-e", "100000", "-i", "33333", "-o", "max", "-d", "int8"], True),
        ("alltoall", ["-b", "8", "-e", "64K", "-f", "8", "-c", "0", "-S", "1"], False),
        ("broadcast", ["-b", "8", "-e", "64K", "-f", "8", "-r", "-1"], True),
        ("reduce", ["-b", "8", "-e", "64K", "-f", "8", "-r", "1", "-o", "all", "-z", "1"], True),
        ("gather", ["-b", "8", "-e", "64K", "-f", "8", "-C", "1", "-a", "3"], True),
        ("scatter", ["-b", "8", "-e", "64K", "-f", "8", "-N", "2"], True),
        ("sendrecv", ["-b", "8", "-e", "64K", "-f", "8", "-z", "3", "-a", "0"], True),
    ]
    for ranks in ("2", "3"):
        for collective, flags, checked in cases:
            argv = [perf(bin_dir, collective), "--ranks", ranks, "-n", "3"] + flags
            proc = run(argv)
            try:
                parsed = parse_text(proc.stdout)
                check(parsed["nranks"] == int(ranks), "expected %s device lines" % ranks)
                check_consistency(parsed, collective, expect_checked=checked)
                check(parsed["out_of_bounds"] == 0, "wrong results")
            except CheckError as e:
                raise CheckError("%s\n%s\noutput:\n%s" % (" ".join(argv), e, proc.stdout))
    # `gantry bench <collective>` prints what the *_perf name prints (but the numbers).
    flags = ["--ranks", "2", "-b", "64", "-e", "4K", "-f", "4", "-r", "-1", "-c", "0"]
    a = parse_text(run([gantry(bin_dir), "bench", "reduce"] + flags).stdout)
    b = parse_text(run([perf(bin_dir, "reduce")] + flags).stdout)
    shape = lambda p: [(r["size"], r["count"], r["type"], r["redop"], r["root"]) for r in p["rows"]]
    check(shape(a) == shape(b) and a["collective"] == b["collective"] == "reduce",
          "gantry bench reduce and reduce_perf differ")


def scenario_files(bin_dir, args):
    """-J (nccl-tests JSON v3), --csv and --json."""
    with tempfile.TemporaryDirectory(prefix="gantry-bench-format-") as tmp:
        json_path = os.path.join(tmp, "out.json")
        csv_path = os.path.join(tmp, "out.csv")
        argv = [perf(bin_dir, "all_gather"), "--ranks", "3", "-b", "8", "-e", "1M", "-f", "4",
                "-n", "3", "-d", "all", "-J", json_path, "--csv", csv_path]
        proc = run(argv)
        parsed = parse_text(proc.stdout)
        check(parsed["json_path"] == json_path, "missing '# Writing JSON output to %s'" % json_path)
        check_consistency(parsed, "all_gather")
        with open(json_path) as f:
            doc = json.load(f)
        check_json_against_text(doc, parsed)
        check(doc["args"][0].endswith("all_gather_perf") and "-J" in doc["args"], "JSON args record argv")

        with open(csv_path) as f:
            rows = list(csv.reader(f))
        check(rows[0] == ["collective", "backend", "nranks", "size", "count", "type", "redop", "root",
                          "placement", "time_us", "algbw_gbs", "busbw_gbs", "wrong", "timestamp"],
              "CSV header %r" % rows[0])
        check(len(rows) == 1 + 2 * len(parsed["rows"]), "CSV: one line per row and placement")
        for k, line in enumerate(rows[1:]):
            res = doc["results"][k // 2]
            placement = "out_of_place" if k % 2 == 0 else "in_place"
            check(line[8] == placement, "CSV line %d placement" % k)
            check((int(line[3]), int(line[4]), line[5]) == (res["size"], res["count"], res["type"]),
                  "CSV line %d differs from JSON" % k)
            check(abs(float(line[11]) - res[placement]["bus_bw"]) <= 1e-9 * max(1.0, abs(res[placement]["bus_bw"])),
                  "CSV busbw differs from JSON")
            check(line[12] == "%d" % res[placement]["nwrong"], "CSV wrong")

        # A second run never overwrites -J: it writes out.json.0 (--csv is replaced).
        proc = run(argv)
        check(parse_text(proc.stdout)["json_path"] == json_path + ".0", "existing -J file must not be overwritten")
        check(os.path.exists(json_path + ".0"), "out.json.0 missing")

        # --json: the same document on stdout, no table.
        proc = run([gantry(bin_dir), "bench", "broadcast", "--ranks", "2", "-b", "1K", "-e", "4K",
                    "-f", "2", "-c", "0", "--json"])
        doc = json.loads(proc.stdout)
        check(doc["version"] == 3 and len(doc["results"]) == 3, "--json document")
        check(doc["results"][0]["out_of_place"]["nwrong"] is None, "--json: nwrong null with -c 0")
        check(doc["gantry"]["collective"] == "broadcast" and doc["gantry"]["nranks"] == 2, "--json gantry section")


def scenario_sweep(bin_dir, args):
    """Correctness sweep: every type and op, odd sizes, as the brief asks."""
    collective, ranks = args
    argv = [gantry(bin_dir), "bench", collective, "--ranks", ranks, "-d", "all", "-o", "all",
            "-b", "8", "-e", "64K", "-f", "8", "-c", "1", "-n", "2", "-w", "1"]
    proc = run(argv)
    check("# Out of bounds values : 0 OK\n" in proc.stdout, "%s: wrong results\n%s" % (" ".join(argv), proc.stdout))
    parsed = parse_text(proc.stdout)
    check_consistency(parsed, collective)
    types = 10
    ops = 5 if collective in REDUCING else 1
    check(len(parsed["rows"]) == types * ops * 5, "expected every type and op: %d rows" % len(parsed["rows"]))


def scenario_corrupt(bin_dir, args):
    """A damaged element must be reported: #wrong > 0, FAILED, exit code 7."""
    for collective in COLLECTIVES:
        argv = [perf(bin_dir, collective), "--ranks", "2", "-b", "1K", "-e", "4K", "-f", "2", "-n", "1"]
        proc = run(argv, env_extra={"GANTRY_BENCH_CORRUPT_FOR_TEST": "1"}, expect_rc=7)
        parsed = parse_text(proc.stdout)
        check(parsed["out_of_bounds"] > 0, "%s: corruption not counted" % collective)
        wrong = [r[p]["wrong"] for r in parsed["rows"] for p in ("oop", "ip")]
        check(all(w is not None and w > 0 for w in wrong), "%s: every check must see the damage: %r" % (collective, wrong))
    # And without the hook, the same run is clean.
    run([perf(bin_dir, "all_reduce"), "--ranks", "2", "-b", "1K", "-e", "4K", "-f", "2", "-n", "1"])


BAD_INPUTS = [
    (["bench", "all_reduce", "-b", "64M", "-e", "8M"], "-b"),
    (["bench", "all_reduce", "-b", "0"], "-b 0"),
    (["bench", "all_reduce", "-b", "-8"], "-b"),
    (["bench", "all_reduce", "-e", "12Q"], "-e"),
    (["bench", "all_reduce", "-n", "0"], "-n 0"),
    (["bench", "all_reduce", "-n", "abc"], "-n"),
    (["bench", "all_reduce", "-w", "-1"], "-w"),
    (["bench", "all_reduce", "-o", "sump"], "-o"),
    (["bench", "all_reduce", "-o", "mulsum"], "-o mulsum"),
    (["bench", "all_reduce", "-d", "float8"], "-d"),
    (["bench", "allreduce"], "allreduce"),
    (["bench", "all_reduce", "--ranks", "0"], "--ranks 0"),
    (["bench", "all_reduce", "--ranks", "-3"], "--ranks"),
    (["bench", "all_reduce", "--backend", "carrier-pigeon"], "--backend"),
    (["bench", "all_reduce", "-g", "2"], "--ranks"),
    (["bench", "all_reduce", "-t", "4"], "-t 4"),
    (["bench", "all_reduce", "-G", "1"], "-G 1"),
    (["bench", "all_reduce", "-a", "7"], "-a 7"),
    (["bench", "all_reduce", "-z", "4"], "-z 4"),
    (["bench", "all_reduce", "-J", "out.txt"], "-J out.txt"),
    (["bench", "all_reduce", "--frobnicate"], "--frobnicate"),
    (["bench", "all_reduce", "-q"], "-q"),
    (["bench", "all_reduce", "-b"], "-b"),
    (["bench", "broadcast", "--ranks", "2", "-r", "2"], "-r 2"),
    (["bench", "all_reduce", "all_gather"], "all_gather"),
    (["bench", "all_reduce", "--log-level", "chatty"], "--log-level"),
]


def scenario_bad_input(bin_dir, args):
    """Bad input: exit 2 and one line on stderr naming the flag or value."""
    for argv, needle in BAD_INPUTS:
        proc = run([gantry(bin_dir)] + argv, expect_rc=2)
        err = proc.stderr.strip("\n")
        check(err and "\n" not in err, "%s: expected one stderr line, got %r" % (argv, proc.stderr))
        check(needle in err, "%s: stderr %r does not name %r" % (argv, err, needle))
        check(proc.stdout == "", "%s: nothing on stdout, got %r" % (argv, proc.stdout[:200]))
    # Help and listing.
    proc = run([gantry(bin_dir), "bench", "--help"])
    for word in COLLECTIVES + ["--minbytes", "--ranks", "--backend", "--csv", "-J", "-S", "default 32M"]:
        check(word in proc.stdout, "bench --help does not mention %r" % word)
    proc = run([gantry(bin_dir), "bench"], expect_rc=2)
    check("all_reduce" in proc.stderr, "bare `gantry bench` lists the collectives")
    proc = run([perf(bin_dir, "all_reduce"), "-h"])
    check(proc.stdout.startswith("USAGE: all_reduce_perf"), "all_reduce_perf -h")
    proc = run([perf(bin_dir, "all_reduce"), "extra"], expect_rc=2)


SCENARIOS = {
    "text": scenario_text,
    "files": scenario_files,
    "sweep": scenario_sweep,
    "corrupt": scenario_corrupt,
    "bad-input": scenario_bad_input,
}


def main():
    if len(sys.argv) < 3 or sys.argv[2] not in SCENARIOS:
        sys.stderr.write(__doc__)
        return 2
    try:
        SCENARIOS[sys.argv[2]](sys.argv[1], sys.argv[3:])
    except (CheckError, subprocess.TimeoutExpired) as e:
        sys.stderr.write("FAILED: %s\n" % e)
        return 1
    print("ok: %s" % " ".join(sys.argv[2:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
