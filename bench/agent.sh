#!/usr/bin/env bash
# Metrics agent benchmark, one run on this machine: node_exporter (Debian
# prometheus-node-exporter, default collectors) and `gantry agent` (node
# metrics plus GPU metrics from the fake NVML with an 8-GPU scenario) are each
# scraped N times in sequence over one keep-alive connection with Prometheus'
# Accept header. Per exporter: server CPU time per scrape (utime+stime deltas
# of /proc/<pid>/stat over the scrapes), RSS after the run (VmRSS), scrape
# latency p50/p99 and the body size. For reference, node_exporter also runs
# with only the collectors behind gantry's node families. `gantry agent` runs twice:
#   gantry (cache 0)   collects on every scrape, as node_exporter does (the
#                      comparison the targets apply to)
#   gantry (cached)    the default: /metrics is served from the snapshot of the
#                      last collection while it is younger than the interval
# Prints Markdown (paste it into docs/benchmarks.md) ending with the targets:
#   CPU per scrape <= 0.25x node_exporter, RSS no larger, p99 latency no higher.
#
# usage: bench/agent.sh [--quick]
#   --quick   200 scrapes (a smoke run)
# Environment:
#   BUILD_DIR  build tree with bin/gantry and lib/libgantry_fake_nvml.so
#              (default: build/release)
#   SCRAPES    scrapes per exporter (default 2000)
#   NODE_EXPORTER  the node_exporter binary (default /usr/bin/prometheus-node-exporter)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${BUILD_DIR:-$root/build/release}
scrapes=${SCRAPES:-2000}
node_exporter=${NODE_EXPORTER:-/usr/bin/prometheus-node-exporter}
case "${1:-}" in
  --quick) scrapes=${SCRAPES:-200} ;;
  "") ;;
  -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "agent.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac
for f in "$build/bin/gantry" "$build/lib/libgantry_fake_nvml.so"; do
  if [[ ! -e $f ]]; then
    echo "agent.sh: $f not found; build first (make build) or set BUILD_DIR" >&2
    exit 2
  fi
done
if [[ ! -x $node_exporter ]]; then
  echo "agent.sh: $node_exporter not found; install the Debian package prometheus-node-exporter" >&2
  exit 2
fi
command -v python3 >/dev/null || { echo "agent.sh: python3 not found" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gantry-agent-bench-XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# 8 healthy H100s for the fake NVML (the format in include/gantry/health/nvml.h).
python3 - "$tmp/scenario.json" <<'PY'
import json, sys
gpus = []
for i in range(8):
    gpus.append({
        "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-bench-%d" % i,
        "pci_bus_id": "00000001:%02X:00.0" % i, "persistence": 1,
        "ecc": {"volatile": {"corrected": 0, "uncorrected": 0},
                "aggregate": {"corrected": 0, "uncorrected": 0}},
        "remapped_rows": {"corrected": 0, "uncorrected": 0, "pending": 0, "failure": 0},
        "temperature_c": 45, "power_mw": 350000, "power_limit_mw": 700000,
        "clocks": {"app_graphics": 1755, "app_memory": 2619, "max_graphics": 1980,
                   "max_memory": 2619, "default_app_graphics": 1755,
                   "default_app_memory": 2619, "sm": 1980, "memory": 2619},
        "utilization": {"gpu": 90, "memory": 40},
        "memory_info": {"total": 85520809984, "used": 40000000000},
        "energy_mj": 123456789, "pcie_replay": 0})
json.dump({"driver_version": "550.54.15", "gpus": gpus}, open(sys.argv[1], "w"))
PY

# Waits until http://127.0.0.1:$1/metrics answers.
wait_ready() {
  for _ in $(seq 1 100); do
    if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$1/metrics', timeout=1)" 2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  echo "agent.sh: nothing answers on port $1" >&2
  return 1
}

# The scraper: N sequential scrapes on one keep-alive connection, after 20
# warm-up scrapes; prints one JSON line.
cat > "$tmp/scrape.py" <<'PY'
import http.client, json, os, sys, time
name, pid, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
accept = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
          "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
hz = os.sysconf("SC_CLK_TCK")
def cpu_seconds():
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / hz   # utime, stime (fields 14, 15)
def status(key):
    for line in open("/proc/%d/status" % pid):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
def scrape():
    conn.request("GET", "/metrics", headers={"Accept": accept})
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        sys.exit("%s: HTTP %d" % (name, r.status))
    return len(body)
for _ in range(20):
    size = scrape()
cpu0 = cpu_seconds()
lat = []
for _ in range(n):
    t = time.perf_counter()
    size = scrape()
    lat.append(time.perf_counter() - t)
cpu1 = cpu_seconds()
lat.sort()
def pct(p):
    return lat[min(len(lat) - 1, int(round(p / 100.0 * (len(lat) - 1))))]
print(json.dumps({"name": name, "scrapes": n, "cpu_ms_per_scrape": (cpu1 - cpu0) * 1000.0 / n,
                  "rss_bytes": status("VmRSS"), "hwm_bytes": status("VmHWM"),
                  "p50_ms": pct(50) * 1000, "p99_ms": pct(99) * 1000, "body_bytes": size}))
PY

results=()

# node_exporter, default collectors.
port=$(free_port)
"$node_exporter" --web.listen-address="127.0.0.1:$port" >"$tmp/node_exporter.log" 2>&1 &
pid=$!; pids+=("$pid")
wait_ready "$port"
results+=("$(python3 "$tmp/scrape.py" node_exporter "$pid" "$port" "$scrapes")")
kill "$pid"; wait "$pid" 2>/dev/null || true

# For reference only (the targets compare with the defaults above):
# node_exporter with just the collectors behind gantry's node families.
port=$(free_port)
"$node_exporter" --web.listen-address="127.0.0.1:$port" --collector.disable-defaults \
  --collector.cpu --collector.stat --collector.loadavg --collector.pressure \
  --collector.meminfo --collector.diskstats --collector.filesystem --collector.netdev \
  --collector.netclass --collector.time --collector.uname >"$tmp/node_exporter_same.log" 2>&1 &
pid=$!; pids+=("$pid")
wait_ready "$port"
results+=("$(python3 "$tmp/scrape.py" "node_exporter (same collectors)" "$pid" "$port" "$scrapes")")
kill "$pid"; wait "$pid" 2>/dev/null || true

# gantry agent, collecting on every scrape, then with the default cache.
run_gantry() {  # name cache
  local port pid
  port=$(free_port)
  cat > "$tmp/agent.yaml" <<EOF
listen: 127.0.0.1:$port
collection:
  interval: 15s
  cache: $2
  nvml_library: $build/lib/libgantry_fake_nvml.so
history:
  path: $tmp/history-$2.db
EOF
  GANTRY_FAKE_NVML_SCENARIO="$tmp/scenario.json" "$build/bin/gantry" agent --config "$tmp/agent.yaml" \
    >"$tmp/gantry-$2.log" 2>&1 &
  pid=$!; pids+=("$pid")
  wait_ready "$port"
  results+=("$(python3 "$tmp/scrape.py" "$1" "$pid" "$port" "$scrapes")")
  kill "$pid"; wait "$pid" 2>/dev/null || true
}
run_gantry "gantry (cache 0)" 0s
run_gantry "gantry (cached)" 15s

printf '%s\n' "${results[@]}" | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
ne = rows[0]
print("### gantry agent vs node_exporter (%d sequential scrapes each, %s)" %
      (ne["scrapes"], open("/proc/cpuinfo").read().split("model name")[1].split(":")[1].split("\n")[0].strip()
       if "model name" in open("/proc/cpuinfo").read() else "this machine"))
print()
print("| exporter | CPU ms/scrape | RSS MiB | p50 ms | p99 ms | body KiB |")
print("|---|---:|---:|---:|---:|---:|")
for r in rows:
    print("| %s | %.3f | %.1f | %.3f | %.3f | %.1f |" % (r["name"], r["cpu_ms_per_scrape"],
          r["rss_bytes"] / 2**20, r["p50_ms"], r["p99_ms"], r["body_bytes"] / 1024))
print()
ok = True
for r in rows[1:]:
    if r["name"].startswith("node_exporter"):
        continue
    cpu = r["cpu_ms_per_scrape"] / ne["cpu_ms_per_scrape"] if ne["cpu_ms_per_scrape"] else float("nan")
    rss = r["rss_bytes"] / ne["rss_bytes"]
    p99 = r["p99_ms"] / ne["p99_ms"]
    good = cpu <= 0.25 and rss <= 1.0 and p99 <= 1.0
    if r["name"] == "gantry (cache 0)":
        ok = good
    print("- %s / node_exporter: CPU per scrape %.3fx (target <= 0.25x), RSS %.2fx (<= 1x), "
          "p99 %.2fx (<= 1x): %s" % (r["name"], cpu, rss, p99, "meets the targets" if good else "MISSES a target"))
sys.exit(0 if ok else 1)
'
