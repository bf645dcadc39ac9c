#!/usr/bin/env bash
# Side-by-side reverse-proxy benchmark for the inference gateway, in one run on this
# machine: the same nginx static-JSON backend (a small OpenAI chat completion), the same
# request (POST /v1/chat/completions, small JSON body, bench/gateway/chat.lua), the same
# worker count W for every proxy, and wrk with keep-alive as the load:
#   direct          wrk -> backend (the ceiling)
#   nginx           nginx reverse proxy, upstream keepalive 64, HTTP/1.1, Connection ""
#   haproxy         HAProxy, nbthread W, http-reuse always
#   nginx-samejob   nginx doing the gateway's job as stock nginx can, as a user would
#                   deploy it instead: the same API key checked with a `map` on the
#                   Authorization header, `limit_req` per key at gantry's rate (never
#                   hit), credentials stripped, x-request-id and X-Forwarded-* added, a
#                   buffered JSON access log (bench/gateway/nginx-samejob.conf.in)
#   gantry-plain    gantry gateway, protocol http, auth none (a plain proxy)
#   gantry-openai   + OpenAI awareness (body "model" routing, usage sniffing), auth none
#   gantry-apikey   + API-key auth (role user, model glob tiny-*)
#   gantry-ratelimit  api key + a key rate limit (high, local: never hit)
#   gantry-audit    api key + the signed audit log
#   gantry-ratelimit-only  plain + a global request rate limit (the limiter alone)
#   gantry-audit-only      plain + the signed audit log (the audit log alone)
#   gantry-all      api key + request/token rate limits + quota + audit (everything on)
# Every variant runs REPEAT times, interleaved; each row reports its best run (highest
# RPS, with that run's p50/p99), so a burst of noise from other processes does not decide
# a row. Then a fixed-rate latency run (50% of nginx's best RPS, REPEAT times, lowest p99
# kept) for nginx, nginx-samejob, haproxy and gantry-all. Prints Markdown (paste it into
# docs/benchmarks.md) ending with the targets:
#   gantry-plain RPS >= 1.0x nginx
#   gantry-all RPS >= 1.0x nginx-samejob and >= 0.9x nginx
#   gantry-all p99 <= nginx p99 + 0.5 ms
# Wall-clock rows need a quiet machine: check `uptime` first (load well under the CPU
# count), and compare builds with --instructions, which does not depend on load.
#
# usage: bench/gateway.sh [--quick | --instructions [N]]
#   --quick   -d 3s, REPEAT 1, no fixed-rate run (a smoke run, about a minute)
#   --instructions [N]  no wrk: each gantry variant in VARIANTS runs under valgrind
#             (callgrind) for N keep-alive requests (default 3000, after 300 unmeasured),
#             4 connections, and the instructions per request are printed for the
#             request path (worker threads), the audit writer and all threads. Exact and
#             repeatable to a few instructions, so it compares two builds whatever the
#             load. Valgrind cannot run AVX-512 code: build without -march=native,
#             e.g. cmake -B build/prof -DGANTRY_NATIVE=OFF -DCMAKE_CXX_FLAGS=-march=x86-64-v3
#             and BUILD_DIR=build/prof. Crypto is counted as valgrind runs it (SHA-256
#             without the SHA extensions), which overstates the audit writer.
# Environment:
#   BUILD_DIR   build tree with bin/gantry (default: build/release next to this script)
#   GANTRY      the gantry binary (overrides BUILD_DIR)
#   W           workers for the backend, nginx, HAProxy and gantry (default 1: on a 2-core
#               machine wrk, the proxy and the backend already share 2 CPUs)
#   CONNS, THREADS, DURATION   wrk -c, -t, -d (default 64, 1, 10s)
#   REPEAT      runs of every variant, interleaved (default 3; --quick: 1)
#   VARIANTS    space-separated subset of the variants above (default: all)
#   RATE_PCT    fixed-rate run at this % of nginx's best RPS (default 50; 0 = skip)
#   RATE_CONNS  connections of the fixed-rate run (default 256, mostly idle)
#   KEEP_TMP    set to keep the temp dir (configs, logs, wrk outputs) for a look afterwards
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
conf_dir=$here/gateway
build=${BUILD_DIR:-$root/build/release}
gantry=${GANTRY:-$build/bin/gantry}
python=/usr/bin/python3
[[ -x $python ]] || python=python3

quick=0
instructions=0
case "${1:-}" in
  --quick) quick=1 ;;
  --instructions)
    instructions=${2:-3000}
    [[ $instructions =~ ^[0-9]+$ && $instructions -gt 0 ]] ||
      { echo "gateway.sh: --instructions takes a request count, not '$instructions'" >&2; exit 2; } ;;
  "") ;;
  -h|--help) sed -n '2,60p' "$0" | sed -n '/^#/p' | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "gateway.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac
W=${W:-1}
CONNS=${CONNS:-64}
THREADS=${THREADS:-1}
if [[ $quick -eq 1 ]]; then
  DURATION=${DURATION:-3s}
  REPEAT=${REPEAT:-1}
  RATE_PCT=${RATE_PCT:-0}
else
  DURATION=${DURATION:-10s}
  REPEAT=${REPEAT:-3}
  RATE_PCT=${RATE_PCT:-50}
fi
ALL_VARIANTS="direct nginx haproxy nginx-samejob gantry-plain gantry-openai gantry-apikey gantry-ratelimit gantry-audit gantry-ratelimit-only gantry-audit-only gantry-all"
VARIANTS=${VARIANTS:-$ALL_VARIANTS}
RATE_CONNS=${RATE_CONNS:-256}

log() { echo "gateway.sh: $*" >&2; }
die() { echo "gateway.sh: $*" >&2; exit 2; }

need() {  # tool, Debian package
  command -v "$1" >/dev/null || [[ -x /usr/sbin/$1 ]] ||
    die "$1 not found: install the Debian package $2 (scripts/install-deps.sh)"
}
for v in $VARIANTS; do
  [[ " $ALL_VARIANTS " == *" $v "* ]] || die "unknown variant '$v' (known: $ALL_VARIANTS)"
done
if [[ $instructions -gt 0 ]]; then
  need valgrind valgrind
  VARIANTS=$(for v in $VARIANTS; do [[ $v == gantry-* ]] && echo "$v"; done | xargs)
  [[ -n $VARIANTS ]] || die "--instructions measures gantry variants; VARIANTS names none"
else
  need wrk wrk
  need haproxy haproxy
fi
need nginx nginx-light
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
haproxy_bin=$(command -v haproxy || echo /usr/sbin/haproxy)
want_gantry=0
[[ " $VARIANTS " == *" gantry-"* ]] && want_gantry=1
if [[ $want_gantry -eq 1 && ! -x $gantry ]]; then
  die "$gantry not found; build first (make build) or set BUILD_DIR/GANTRY"
fi

tmp=$(mktemp -d /tmp/gantry-gwbench-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
  done
  for p in "${pids[@]}"; do
    wait "$p" 2>/dev/null || true
  done
  if [[ -n ${KEEP_TMP:-} ]]; then
    echo "gateway.sh: logs and configs kept in $tmp" >&2
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT

free_port() {
  "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_port() {  # port, pid, what
  local i
  for ((i = 0; i < 200; i++)); do
    kill -0 "$2" 2>/dev/null || die "$3 exited before listening on $1 (see $tmp/$3.log: $(tail -5 "$tmp/$3.log" 2>/dev/null))"
    (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
    sleep 0.05
  done
  die "$3 did not listen on 127.0.0.1:$1"
}
user_line=""
[[ $(id -u) -eq 0 ]] && user_line="user root root;"
# The static body (the same one tests/gateway/fixtures.py serves), ' escaped for nginx.
body='{"id":"chatcmpl-static","object":"chat.completion","created":0,"model":"tiny-lm","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}'

render() {  # template, out, port, [backend port]
  sed -e "s|@USER@|$user_line|" -e "s|@WORKERS@|$W|g" -e "s|@PREFIX@|$(dirname "$2")|g" \
      -e "s|@PORT@|$3|g" -e "s|@BACKEND_PORT@|${4:-0}|g" -e "s|@BODY@|$body|" \
      -e "s|@KEY@|${key:-}|g" "$1" >"$2"
}

start_nginx() {  # name, template, port, [backend port]
  mkdir -p "$tmp/$1"
  render "$conf_dir/$2" "$tmp/$1/nginx.conf" "$3" "${4:-}"
  "$nginx_bin" -p "$tmp/$1" -c "$tmp/$1/nginx.conf" -e "$tmp/$1/error.log" >"$tmp/$1.log" 2>&1 &
  pids+=($!)
  wait_port "$3" "$!" "$1"
}

backend_port=$(free_port)
start_nginx backend nginx-backend.conf.in "$backend_port"
log "backend: nginx static JSON, $W worker(s), on 127.0.0.1:$backend_port"

# One API key for every variant that checks keys (gantry's and nginx-samejob's map).
key=""
state=$tmp/gateway.db
if [[ $want_gantry -eq 1 ]]; then
  key=$("$gantry" gateway keys create --state "$state" --name bench --role user --json |
        "$python" -c 'import json,sys; print(json.load(sys.stdin)["key"])') ||
    die "gantry gateway keys create failed"
  if [[ " $VARIANTS " == *"gantry-audit"* || " $VARIANTS " == *"gantry-all"* ]]; then
    "$gantry" audit keygen --out "$tmp/audit" >/dev/null || die "gantry audit keygen failed"
  fi
else
  # nginx-samejob alone: a key of the same shape ("gk_" + 16 + "_" + 43 characters).
  key=$("$python" -c 'import secrets; print("gk_" + secrets.token_hex(8) + "_" + secrets.token_urlsafe(32))')
fi

declare -A url gantry_pid
url[direct]=http://127.0.0.1:$backend_port

if [[ " $VARIANTS " == *" nginx "* ]]; then
  p=$(free_port)
  start_nginx nginx nginx-proxy.conf.in "$p" "$backend_port"
  url[nginx]=http://127.0.0.1:$p
fi
if [[ " $VARIANTS " == *" nginx-samejob "* ]]; then
  p=$(free_port)
  start_nginx nginx-samejob nginx-samejob.conf.in "$p" "$backend_port"
  url[nginx-samejob]=http://127.0.0.1:$p
fi
if [[ " $VARIANTS " == *" haproxy "* ]]; then
  p=$(free_port)
  mkdir -p "$tmp/haproxy"
  render "$conf_dir/haproxy.cfg.in" "$tmp/haproxy/haproxy.cfg" "$p" "$backend_port"
  "$haproxy_bin" -db -f "$tmp/haproxy/haproxy.cfg" >"$tmp/haproxy.log" 2>&1 &
  pids+=($!)
  wait_port "$p" "$!" haproxy
  url[haproxy]=http://127.0.0.1:$p
fi

# Variants whose route requires an API key (the others get no Authorization header).
wants_key() {
  case $1 in
    gantry-apikey|gantry-ratelimit|gantry-audit|gantry-all|nginx-samejob) return 0 ;;
    *) return 1 ;;
  esac
}

# The gateway config of one variant (YAML on stdout).
gantry_config() {  # variant, port
  local protocol=openai auth=required
  case $1 in
    gantry-plain|gantry-ratelimit-only|gantry-audit-only) protocol=http; auth=none ;;
    gantry-openai) auth=none ;;
  esac
  cat <<EOF
listen: 127.0.0.1:$2
workers: $W
limits: {max_connections: 4096, idle_timeout: 300s}
backends:
  - {name: static, url: "http://127.0.0.1:$backend_port", max_idle: 64}
routes:
  - {prefix: /, protocol: $protocol, backend: static, auth: $auth}
state: $state
auth: {api_keys: true}
roles:
  user:
    - {action: "model:invoke", resource: "tiny-*"}
EOF
  case $1 in
    gantry-ratelimit)
      echo 'rate_limits:'
      echo '  - {scope: key, match: "*", requests: 1000000000, per: 1s}' ;;
    gantry-ratelimit-only)
      echo 'rate_limits:'
      echo '  - {scope: global, requests: 1000000000, per: 1s}' ;;
    gantry-all)
      echo 'rate_limits:'
      echo '  - {scope: key, match: "*", requests: 1000000000, per: 1s}'
      echo '  - {scope: key, match: "*", tokens_per_minute: 1000000000000}'
      echo 'quotas:'
      echo '  - {scope: key, match: "*", calls_per_day: 1000000000000, tokens_per_month: 1000000000000000}' ;;
  esac
  case $1 in
    gantry-audit|gantry-audit-only|gantry-all)
      echo "audit: {path: $tmp/audit-$1.jsonl, signing_key: $tmp/audit.key}" ;;
  esac
}

start_gantry() {  # variant -> sets url[variant]
  local p
  p=$(free_port)
  gantry_config "$1" "$p" >"$tmp/$1.yaml"
  # A fresh log: the wait below must not read the previous run's "listening" line.
  rm -f "$tmp/$1.log"
  "$gantry" gateway check --config "$tmp/$1.yaml" >"$tmp/$1.check" 2>&1 ||
    die "gantry gateway check rejected the $1 config: $(cat "$tmp/$1.check")"
  # shellcheck disable=SC2086  # GANTRY_WRAP is a command prefix (valgrind and its options)
  ${GANTRY_WRAP:-} "$gantry" gateway run --config "$tmp/$1.yaml" >"$tmp/$1.log" 2>&1 &
  gantry_pid[$1]=$!
  pids+=($!)
  local i
  for ((i = 0; i < 1200; i++)); do
    grep -q "gantry gateway listening on" "$tmp/$1.log" 2>/dev/null && break
    kill -0 "${gantry_pid[$1]}" 2>/dev/null || die "$1 exited: $(tail -5 "$tmp/$1.log")"
    sleep 0.05
  done
  url[$1]=$(grep -o "http://[0-9.]*:[0-9]*" "$tmp/$1.log" | head -1 || true)
  [[ -n ${url[$1]} ]] || die "$1 did not print its listening line: $(tail -5 "$tmp/$1.log")"
}
stop_gantry() {
  kill "${gantry_pid[$1]}" 2>/dev/null || true
  wait "${gantry_pid[$1]}" 2>/dev/null || true
}

check_once() {  # variant, key, [expected status]: one request must answer 200 first
  local code want=${3:-200}
  code=$("$python" - "${url[$1]}" "$2" <<'EOF'
import http.client, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1]); key = sys.argv[2]
c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
h = {"Content-Type": "application/json"}
if key: h["Authorization"] = "Bearer " + key
c.request("POST", "/v1/chat/completions",
          b'{"model":"tiny-lm","messages":[{"role":"user","content":"hello"}],"max_tokens":2}', h)
r = c.getresponse(); r.read(); print(r.status)
EOF
) || code="no answer"
  [[ $code == "$want" ]] || die "$1: a single request answered $code, not $want (log: $tmp/$1.log)"
}

# --instructions: instructions per request under callgrind, per thread group.
instructions_run() {
  need callgrind_control valgrind
  cat >"$tmp/client.py" <<'EOF'
# N keep-alive POSTs (the wrk request of chat.lua) round-robin on C connections.
import socket, sys
port, n, key, conns = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
body = b'{"model":"tiny-lm","messages":[{"role":"user","content":"hello"}],"max_tokens":2}'
head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
if key:
    head += b"Authorization: Bearer " + key.encode() + b"\r\n"
req = head + b"Content-Length: %d\r\n\r\n" % len(body) + body
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(conns)]
bufs = [b""] * conns
for i in range(n):
    k = i % conns
    socks[k].sendall(req)
    buf = bufs[k]
    while True:
        e = buf.find(b"\r\n\r\n")
        if e >= 0:
            lines = buf[:e].decode("latin-1").split("\r\n")
            cl = next((int(l.split(":", 1)[1]) for l in lines[1:]
                       if l.lower().startswith("content-length:")), 0)
            if len(buf) >= e + 4 + cl:
                if not lines[0].startswith("HTTP/1.1 200"):
                    sys.exit("request %d answered %s" % (i, lines[0]))
                buf = buf[e + 4 + cl:]
                break
        d = socks[k].recv(65536)
        if not d:
            sys.exit("connection closed after %d requests" % i)
        buf += d
    bufs[k] = buf
EOF
  local n=$instructions v out f group total k port
  log "instructions: $n requests per variant under callgrind ($gantry)"
  echo "Instructions per request (callgrind, $n keep-alive requests on 4 connections after 300 unmeasured):"
  echo
  echo "| variant | request path | audit writer | other threads | all threads |"
  echo "|---|---:|---:|---:|---:|"
  for v in $VARIANTS; do
    out=$tmp/callgrind-$v
    mkdir -p "$out"
    GANTRY_WRAP="valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes --callgrind-out-file=$out/cg.out" \
      start_gantry "$v"
    k=""
    wants_key "$v" && k=$key
    port=${url[$v]##*:}
    "$python" "$tmp/client.py" "$port" 300 "$k" 4 || die "$v: warm-up failed (log: $tmp/$v.log)"
    callgrind_control -i on "${gantry_pid[$v]}" >/dev/null 2>&1
    "$python" "$tmp/client.py" "$port" "$n" "$k" 4 || die "$v: measured run failed (log: $tmp/$v.log)"
    sleep 0.5  # lets the audit writer's group commit finish
    callgrind_control -d "${gantry_pid[$v]}" >/dev/null 2>&1
    callgrind_control -i off "${gantry_pid[$v]}" >/dev/null 2>&1
    stop_gantry "$v"
    local -A ir=([req]=0 [audit]=0 [other]=0)
    for f in "$out"/cg.out.1-*; do
      [[ -e $f ]] || die "$v: callgrind wrote no dump (log: $tmp/$v.log)"
      if grep -q "Worker::Session" "$f"; then group=req
      elif grep -q "AuditLog::Impl::Run" "$f"; then group=audit
      else group=other; fi
      ir[$group]=$((ir[$group] + $(awk '/^summary:/ {print $2}' "$f")))
    done
    total=$((ir[req] + ir[audit] + ir[other]))
    echo "| $v | $((ir[req] / n)) | $((ir[audit] / n)) | $((ir[other] / n)) | $((total / n)) |"
    unset ir
  done
}

run_wrk() {  # variant, out file, [connections]
  local k=""
  wants_key "$1" && k=$key
  GANTRY_KEY=$k RATE_DELAY_MS=${RATE_DELAY_MS:-} wrk -t "$THREADS" -c "${3:-$CONNS}" \
    -d "$DURATION" --latency -s "$conf_dir/chat.lua" "${url[$1]}" >"$2" 2>&1 ||
    die "wrk failed on $1: $(cat "$2")"
}

if [[ " $VARIANTS " == *" nginx-samejob "* ]]; then
  # The map must be doing its job: a wrong key is refused, the right one proxied.
  check_once nginx-samejob "gk_0000000000000000_wrong" 401
  check_once nginx-samejob "$key"
fi

if [[ $instructions -gt 0 ]]; then
  instructions_run
  exit 0
fi

for ((run = 1; run <= REPEAT; run++)); do
  for v in $VARIANTS; do
    if [[ $v == gantry-* ]]; then
      start_gantry "$v"
    fi
    k=""
    wants_key "$v" && k=$key
    check_once "$v" "$k"
    log "run $run/$REPEAT: $v (${url[$v]}), wrk -t $THREADS -c $CONNS -d $DURATION"
    run_wrk "$v" "$tmp/wrk_${v}_$run.txt"
    [[ $v == gantry-* ]] && stop_gantry "$v"
  done
done

if [[ " $VARIANTS " == *" nginx-samejob "* ]]; then
  # Its access log is part of the job: records must have been written (64 KiB buffers
  # fill within a run) and be JSON.
  "$python" - "$tmp/nginx-samejob/access.jsonl" <<'EOF' || die "nginx-samejob wrote no usable access log ($tmp/nginx-samejob)"
import json, sys
with open(sys.argv[1]) as f:
    recs = [json.loads(line) for line in f]
assert any(r["key_id"] == "bench" and r["status"] == 200 for r in recs), recs[:3]
EOF
fi

# Fixed-rate latency: each of RATE_CONNS connections sends a request, waits for the answer,
# then waits RATE_DELAY_MS (wrk's Lua delay(), whole milliseconds) before the next, so
# the offered rate is about RATE_CONNS / (delay + latency). Many mostly idle connections
# keep the millisecond granularity of delay() small against the cycle; the latency term
# is nginx's p50 at its best run. Every variant runs REPEAT times; the run with the
# lowest p99 is reported (noise only ever adds latency).
if [[ $RATE_PCT -gt 0 && " $VARIANTS " == *" nginx "* ]]; then
  best_file=$(grep -H "Requests/sec" "$tmp"/wrk_nginx_*.txt | sort -t: -k3 -g | tail -1 | cut -d: -f1)
  best_nginx=$(awk '/Requests\/sec/ {print $2}' "$best_file")
  p50_nginx=$(awk '$1 == "50%" {print $2}' "$best_file")
  target=$("$python" -c "print(max(1, int($best_nginx * $RATE_PCT / 100)))")
  RATE_DELAY_MS=$("$python" - "$p50_nginx" "$RATE_CONNS" "$target" <<'PY'
import re, sys
m = re.match(r"([\d.]+)(us|ms|s)$", sys.argv[1])
lat = float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)] if m else 1.0
print(max(1, round(int(sys.argv[2]) * 1000 / int(sys.argv[3]) - lat)))
PY
)
  export RATE_DELAY_MS
  log "fixed-rate run: about $target req/s ($RATE_PCT% of nginx's $best_nginx), $RATE_CONNS connections, delay ${RATE_DELAY_MS} ms"
  for ((run = 1; run <= REPEAT; run++)); do
    for v in nginx nginx-samejob haproxy gantry-all; do
      [[ " $VARIANTS " == *" $v "* ]] || continue
      [[ $v == gantry-* ]] && start_gantry "$v"
      log "fixed rate, run $run/$REPEAT: $v"
      run_wrk "$v" "$tmp/rate_${v}_$run.txt" "$RATE_CONNS"
      [[ $v == gantry-* ]] && stop_gantry "$v"
    done
  done
  echo "$target $RATE_CONNS $RATE_DELAY_MS" >"$tmp/rate_target"
fi

gantry_version=""
[[ -x $gantry ]] && gantry_version=$("$gantry" --version 2>/dev/null | head -1 || true)
"$python" - "$tmp" "$VARIANTS" "$W" "$CONNS" "$THREADS" "$DURATION" "$quick" "$gantry_version" <<'EOF'
import glob, os, platform, re, subprocess, sys

tmp, variants, W, conns, threads, duration, quick, gver = sys.argv[1:9]
variants = variants.split()

def ms(v):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", v)
    if not m:
        return float("nan")
    x = float(m.group(1))
    return x * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[m.group(2)]

def parse(path):
    t = open(path).read()
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
    lat = dict(re.findall(r"^\s+(50|75|90|99)%\s+(\S+)", t, re.M))
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", t)
    errs = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", t)
    return {"rps": rps, "p50": ms(lat.get("50", "nan")), "p99": ms(lat.get("99", "nan")),
            "non2xx": int(non2xx.group(1)) if non2xx else 0,
            "errors": sum(map(int, errs.groups())) if errs else 0}

best, runs = {}, {}
for v in variants:
    rs = [parse(p) for p in sorted(glob.glob(os.path.join(tmp, "wrk_%s_*.txt" % v)))]
    runs[v] = len(rs)
    if rs:
        best[v] = max(rs, key=lambda r: r["rps"])

def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"

def ver(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True)
        return (out.stdout + out.stderr).strip().splitlines()[0]
    except (OSError, IndexError):
        return "?"

print("### Gateway reverse-proxy overhead%s" % (" (quick)" if quick == "1" else ""))
print()
print("%s, %d CPUs, %s. %s; %s; %s; %s." % (cpu_model(), os.cpu_count(), platform.platform(),
      gver or "gantry n/a", ver(["nginx", "-v"]), ver(["haproxy", "-v"]), ver(["wrk", "-v"])))
print()
print("wrk -t %s -c %s -d %s --latency, keep-alive, POST /v1/chat/completions (small JSON body) "
      "against an nginx static-JSON backend; backend, nginx, HAProxy and gantry each with "
      "%s worker(s). Best of %d run(s) per row (interleaved). Ratios are against nginx as a "
      "plain reverse proxy and against nginx-samejob (nginx with the API-key map, limit_req "
      "per key and a buffered JSON access log)." % (threads, conns, duration, W,
                                                   max(runs.values() or [0]), ))
print()
nx = best.get("nginx")
sj = best.get("nginx-samejob")
print("| variant | RPS | p50 ms | p99 ms | RPS vs nginx | RPS vs nginx-samejob | p99 - nginx p99 (ms) | non-2xx | socket errors |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for v in variants:
    b = best.get(v)
    if not b:
        print("| %s | n/a | | | | | | | |" % v)
        continue
    ratio = "%.2fx" % (b["rps"] / nx["rps"]) if nx else "n/a"
    ratio_sj = "%.2fx" % (b["rps"] / sj["rps"]) if sj else "n/a"
    dp99 = "%+.2f" % (b["p99"] - nx["p99"]) if nx else "n/a"
    print("| %s | %.0f | %.3f | %.3f | %s | %s | %s | %d | %d |" % (v, b["rps"], b["p50"], b["p99"],
          ratio, ratio_sj, dp99, b["non2xx"], b["errors"]))
print()

def rate_run(path):
    t = open(path).read()
    lat = dict(re.findall(r"^\s+(50|75|90|99)%\s+(\S+)", t, re.M))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
    return rps, [ms(lat.get(q, "nan")) for q in ("50", "75", "90", "99")]

if os.path.exists(os.path.join(tmp, "rate_target")):
    target, rconns, rdelay = open(os.path.join(tmp, "rate_target")).read().split()
    print("Fixed rate: about %s req/s offered (%s connections, each waiting %s ms after every "
          "answer, with wrk's Lua delay(); wrk2 is not packaged in Debian, so the rate is "
          "approximate and latencies are not corrected for coordinated omission). Lowest-p99 "
          "run of each:" % (target, rconns, rdelay))
    print()
    print("| variant | achieved RPS | p50 ms | p75 ms | p90 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for v in ("nginx", "nginx-samejob", "haproxy", "gantry-all"):
        rs = [rate_run(p) for p in glob.glob(os.path.join(tmp, "rate_%s_*.txt" % v))]
        if not rs:
            continue
        rps, q = min(rs, key=lambda r: r[1][3])
        print("| %s | %.0f | %s |" % (v, rps, " | ".join("%.3f" % x for x in q)))
    print()

bad = [v for v, b in best.items() if b["non2xx"] or b["errors"]]
if bad:
    print("WARNING: non-2xx answers or socket errors in: %s (those rows do not measure "
          "successful proxying)." % ", ".join(bad))
    print()
g = best.get("gantry-all")
gp = best.get("gantry-plain")
print("| target | measured | result |")
print("|---|---|---|")
def check_target(name, have, value, ok, fmt):
    if not have:
        print("| %s | not measured | SKIP |" % name)
    else:
        print("| %s | %s | %s |" % (name, fmt % value, "PASS" if ok else "MISS"))
check_target("gantry-plain RPS >= 1.0x nginx", gp and nx, gp and nx and gp["rps"] / nx["rps"],
       gp and nx and gp["rps"] >= nx["rps"], "%.2fx")
check_target("gantry-all RPS >= 1.0x nginx-samejob", g and sj, g and sj and g["rps"] / sj["rps"],
       g and sj and g["rps"] >= sj["rps"], "%.2fx")
check_target("gantry-all RPS >= 0.9x nginx", g and nx, g and nx and g["rps"] / nx["rps"],
       g and nx and g["rps"] >= 0.9 * nx["rps"], "%.2fx")
check_target("gantry-all p99 <= nginx p99 + 0.5 ms", g and nx, g and nx and g["p99"] - nx["p99"],
       g and nx and g["p99"] - nx["p99"] <= 0.5, "%+.2f ms")
EOF
