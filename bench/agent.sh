#!/usr/bin/env bash
# Metrics agent benchmark, one run on this machine: node_exporter (Debian
# prometheus-node-exporter, default collectors) and `gantry agent` (node
# metrics plus GPU metrics from the fake NVML with an 8-GPU scenario) are each
# scraped N times in sequence over one keep-alive connection with Prometheus'
# Accept header. Per exporter: server CPU time per scrape (utime+stime deltas
# of /proc/<pid>/stat over the scrapes), RSS after the run (VmRSS), scrape
# latency p50/p99, series and metric-name counts and the body size. For
# reference, node_exporter also runs with exactly the collectors the agent
# implements. Like for like: the run fails when node_exporter (defaults) serves
# a node metric name the agent does not. `gantry --version` start-up is timed
# too (every command pays it). `gantry agent` runs twice:
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
  -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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

# 8 busy H100s with GPM for the fake NVML (the format in include/gantry/health/nvml.h).
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
        "energy_mj": 123456789, "pcie_replay": 0,
        # what dcgm-exporter's other defaults read (src/testing/fake_nvml_scenario.h, HopperH100)
        "memory_temp_c": 50, "encoder_util": 3, "decoder_util": 4,
        "nvlink_throughput_kib": {"tx": 1000, "rx": 2000}, "virtualization_mode": 0,
        "gpm": {"supported": 1, "metrics": [
            {"graphics_util": 55.0, "any_tensor_util": 20.0, "dram_bw_util": 30.0,
             "pcie_tx_mib_s": 100.0, "pcie_rx_mib_s": 200.0}]}})
    gpus[-1]["memory_info"]["reserved"] = 512 << 20
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
last = [b""]
def scrape():
    conn.request("GET", "/metrics", headers={"Accept": accept})
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        sys.exit("%s: HTTP %d" % (name, r.status))
    last[0] = body
    return len(body)
for _ in range(20):
    size = scrape()
# Series and metric names of the last warm-up body (OpenMetrics counters carry
# _total on the series, the family name without it: compare series names).
series = [l.split("{")[0].split(" ")[0] for l in last[0].decode().splitlines()
          if l and not l.startswith("#")]
names = sorted(set(series))
if len(sys.argv) > 5:
    open(sys.argv[5], "w").write("\n".join(names) + "\n")
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
                  "p50_ms": pct(50) * 1000, "p99_ms": pct(99) * 1000, "body_bytes": size,
                  "series": len(series), "names": len(names)}))
PY

results=()

# node_exporter, default collectors.
port=$(free_port)
"$node_exporter" --web.listen-address="127.0.0.1:$port" >"$tmp/node_exporter.log" 2>&1 &
pid=$!; pids+=("$pid")
wait_ready "$port"
results+=("$(python3 "$tmp/scrape.py" node_exporter "$pid" "$port" "$scrapes" "$tmp/names-node_exporter")")
kill "$pid"; wait "$pid" 2>/dev/null || true

# For reference only (the targets compare with the defaults above):
# node_exporter with exactly the collectors the agent implements (src/agent/node_collector.cc).
port=$(free_port)
"$node_exporter" --web.listen-address="127.0.0.1:$port" --collector.disable-defaults \
  --collector.arp --collector.conntrack --collector.cpu --collector.diskstats \
  --collector.entropy --collector.filefd --collector.filesystem --collector.loadavg \
  --collector.meminfo --collector.netclass --collector.netdev --collector.netstat --collector.os \
  --collector.pressure --collector.selinux --collector.sockstat --collector.softnet --collector.stat \
  --collector.textfile --collector.time --collector.timex --collector.udp_queues \
  --collector.uname --collector.vmstat >"$tmp/node_exporter_same.log" 2>&1 &
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
  results+=("$(python3 "$tmp/scrape.py" "$1" "$pid" "$port" "$scrapes" "$tmp/names-gantry-$2")")
  kill "$pid"; wait "$pid" 2>/dev/null || true
}
run_gantry "gantry (cache 0)" 0s
run_gantry "gantry (cached)" 15s

# Start-up of the binary itself: every command pays it.
python3 - "$build/bin/gantry" > "$tmp/startup" <<'PY'
import subprocess, sys, time
runs = []
for _ in range(100):
    t = time.perf_counter()
    subprocess.run([sys.argv[1], "--version"], stdout=subprocess.DEVNULL, check=True)
    runs.append(time.perf_counter() - t)
print("%.2f" % (sum(runs) / len(runs) * 1000))
PY

printf '%s\n' "${results[@]}" | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
ne = rows[0]
print("### gantry agent vs node_exporter (%d sequential scrapes each, %s)" %
      (ne["scrapes"], open("/proc/cpuinfo").read().split("model name")[1].split(":")[1].split("\n")[0].strip()
       if "model name" in open("/proc/cpuinfo").read() else "this machine"))
print()
print("| exporter | CPU ms/scrape | RSS MiB | p50 ms | p99 ms | series | names | body KiB |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print("| %s | %.3f | %.1f | %.3f | %.3f | %d | %d | %.1f |" % (r["name"], r["cpu_ms_per_scrape"],
          r["rss_bytes"] / 2**20, r["p50_ms"], r["p99_ms"], r["series"], r["names"],
          r["body_bytes"] / 1024))
print()
# Like for like: the agent must serve every name node_exporter (defaults) serves here.
tmp = sys.argv[1]
ne_names = set(open(tmp + "/names-node_exporter").read().split())
ga_names = set(open(tmp + "/names-gantry-0s").read().split())
# node_exporter describes itself (Go runtime and process series); those are not node metrics.
own = lambda n: n.startswith(("go_", "process_", "promhttp_", "node_exporter_build_info"))
missing = sorted(n for n in ne_names - ga_names if not own(n))
print("- names node_exporter serves here that the agent does not: %d%s" %
      (len(missing), (" (" + ", ".join(missing[:40]) + (", ..." if len(missing) > 40 else "") + ")") if missing else ""))
print("- `gantry --version` start-up: %s ms (mean of 100 runs)" % open(tmp + "/startup").read().strip())
ok = not missing
for r in rows[1:]:
    if r["name"].startswith("node_exporter"):
        continue
    cpu = r["cpu_ms_per_scrape"] / ne["cpu_ms_per_scrape"] if ne["cpu_ms_per_scrape"] else float("nan")
    rss = r["rss_bytes"] / ne["rss_bytes"]
    p99 = r["p99_ms"] / ne["p99_ms"]
    good = cpu <= 0.25 and rss <= 1.0 and p99 <= 1.0
    if r["name"] == "gantry (cache 0)":
        ok = ok and good
    print("- %s / node_exporter: CPU per scrape %.3fx (target <= 0.25x), RSS %.2fx (<= 1x), "
          "p99 %.2fx (<= 1x): %s" % (r["name"], cpu, rss, p99, "meets the targets" if good else "MISSES a target"))
sys.exit(0 if ok else 1)
' "$tmp"
