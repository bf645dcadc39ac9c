#!/usr/bin/env bash
# Object-storage throughput, one run, one machine, one Azurite, one file:
#   upload    gantry storage put FILE az://...   vs  @azure/storage-blob uploadFile
#             (gantry twice: by default it sends Content-MD5 with every block, which
#             the service verifies; with --no-md5 it does the same work as the SDK,
#             which sends none)
#   download  gantry storage get az://... FILE   vs  @azure/storage-blob downloadToFile (one stream)
#                                                and downloadToBuffer (parallel ranges) + write
# Both use the same block size and parallelism (BLOCK, PAR). Each transfer runs
# ROUNDS times, alternating gantry and the SDK; each row reports the best round.
# Throughput is measured inside each process around the transfer only (gantry's
# --json "seconds", the SDK script's own clock), in MB/s (10^6 bytes/s). Every
# download is compared byte for byte with the source. Prints Markdown ending with
# the ratios gantry/sdk (target >= 1.0 for upload and download; the download ratio
# is against the faster of the two SDK download paths).
#
# usage: bench/storage.sh [--quick]
#   --quick   SIZE 64M and ROUNDS 1 (a smoke run)
# Environment:
#   BUILD_DIR  build tree with bin/gantry (default: build/release)
#   GANTRY     the gantry binary (overrides BUILD_DIR/bin/gantry)
#   SIZE       file size, dd count in MiB (default 1024 = 1 GiB)
#   BLOCK      block size in bytes (default 8388608 = 8 MiB, gantry's default)
#   PAR        blocks in flight (default 8, gantry's default)
#   ROUNDS     rounds per transfer (default 2)
#   BENCH_DIR  scratch directory (default: a new mktemp -d; removed at the end)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${BUILD_DIR:-$root/build/release}
gantry=${GANTRY:-$build/bin/gantry}
size_mib=${SIZE:-1024}
block=${BLOCK:-8388608}
par=${PAR:-8}
rounds=${ROUNDS:-2}
case "${1:-}" in
  --quick) size_mib=${SIZE:-64}; rounds=${ROUNDS:-1} ;;
  "") ;;
  -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "storage.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac
die() { echo "storage.sh: $*" >&2; exit 2; }
[[ -x $gantry ]] || die "$gantry not found; build first (make build) or set GANTRY"
azurite=$root/node_modules/.bin/azurite-blob
[[ -x $azurite ]] || die "$azurite not found; run npm ci in $root"
command -v node >/dev/null || die "node not found (needed for Azurite and the SDK)"

scratch=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/gantry-storage-bench-XXXXXX")}
mkdir -p "$scratch/azurite"
azpid=
cleanup() {
  [[ -n $azpid ]] && kill "$azpid" 2>/dev/null && wait "$azpid" 2>/dev/null
  [[ -z ${BENCH_DIR:-} ]] && rm -rf "$scratch"
  return 0
}
trap cleanup EXIT

"$azurite" --blobHost 127.0.0.1 --blobPort 0 --location "$scratch/azurite" --silent \
  --skipApiVersionCheck --loose --disableTelemetry >"$scratch/azurite.log" 2>&1 &
azpid=$!
port=
for _ in $(seq 300); do
  port=$(sed -n 's/.*listens on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$scratch/azurite.log" | head -1)
  [[ -n $port ]] && break
  kill -0 "$azpid" 2>/dev/null || die "azurite-blob exited: $(cat "$scratch/azurite.log")"
  sleep 0.1
done
[[ -n $port ]] || die "azurite-blob did not start: $(cat "$scratch/azurite.log")"
key=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==
endpoint=http://127.0.0.1:$port/devstoreaccount1
conn="DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=$key;BlobEndpoint=$endpoint;"
export AZURE_STORAGE_CONNECTION_STRING=$conn

src=$scratch/src.bin
dd if=/dev/urandom of="$src" bs=1M count="$size_mib" status=none
bytes=$(stat -c %s "$src")

json_field() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p"; }
declare -A best  # name -> best MB/s
record() {  # name mbps
  [[ -n $2 ]] || die "no throughput for $1"
  if [[ -z ${best[$1]:-} ]] || awk -v a="$2" -v b="${best[$1]}" 'BEGIN{exit !(a>b)}'; then
    best[$1]=$2
  fi
}
get_best() { echo "${best[$1]}"; }
check() { cmp -s "$src" "$1" || die "$1 differs from the source"; rm -f "$1"; }

gflags=(--block-size "$block" --parallelism "$par" --json)
for r in $(seq "$rounds"); do
  out=$("$gantry" storage put "${gflags[@]}" "$src" "az://devstoreaccount1/bench/gantry-$r.bin")
  record gantry_put "$(json_field mb_per_s <<<"$out")"
  out=$("$gantry" storage put "${gflags[@]}" --no-md5 "$src" "az://devstoreaccount1/bench/gantry-nomd5-$r.bin")
  record gantry_put_nomd5 "$(json_field mb_per_s <<<"$out")"
  out=$(node "$here/storage_sdk.mjs" put "$conn" bench "sdk-$r.bin" "$src" "$block" "$par")
  record sdk_put "$(json_field mb_per_s <<<"$out")"
  out=$("$gantry" storage get "${gflags[@]}" "az://devstoreaccount1/bench/gantry-$r.bin" "$scratch/g.out")
  record gantry_get "$(json_field mb_per_s <<<"$out")"
  check "$scratch/g.out"
  out=$(node "$here/storage_sdk.mjs" get "$conn" bench "sdk-$r.bin" "$scratch/s.out" "$block" "$par")
  record sdk_get "$(json_field mb_per_s <<<"$out")"
  check "$scratch/s.out"
  out=$(node "$here/storage_sdk.mjs" getpar "$conn" bench "sdk-$r.bin" "$scratch/p.out" "$block" "$par")
  record sdk_getpar "$(json_field mb_per_s <<<"$out")"
  check "$scratch/p.out"
done

gp=$(get_best gantry_put); gpn=$(get_best gantry_put_nomd5); sp=$(get_best sdk_put)
gg=$(get_best gantry_get); sg=$(get_best sdk_get); spg=$(get_best sdk_getpar)
sdk_dl=$(awk -v a="$sg" -v b="$spg" 'BEGIN{print (a>b)?a:b}')
sdkver=$(node -p "require('$root/node_modules/@azure/storage-blob/package.json').version")
azver=$(node -p "require('$root/node_modules/azurite/package.json').version")
echo "### Object storage: gantry storage vs @azure/storage-blob $sdkver (Azurite $azver)"
echo
echo "$(( bytes / 1048576 )) MiB random file, block $(( block / 1048576 )) MiB, parallelism $par, best of $rounds, $(nproc) CPUs."
echo
echo "| transfer | gantry MB/s | SDK MB/s | gantry/SDK |"
echo "|---|---:|---:|---:|"
awk -v g="$gp" -v s="$sp" 'BEGIN{printf "| upload (put, Content-MD5 per block / uploadFile) | %.0f | %.0f | %.2f |\n", g, s, g/s}'
awk -v g="$gpn" -v s="$sp" 'BEGIN{printf "| upload (put --no-md5 / uploadFile) | %.0f | %.0f | %.2f |\n", g, s, g/s}'
awk -v g="$gg" -v s="$sg" 'BEGIN{printf "| download (get / downloadToFile) | %.0f | %.0f | %.2f |\n", g, s, g/s}'
awk -v g="$gg" -v s="$spg" 'BEGIN{printf "| download (get / downloadToBuffer+write) | %.0f | %.0f | %.2f |\n", g, s, g/s}'
echo
awk -v gp="$gp" -v gpn="$gpn" -v sp="$sp" -v gg="$gg" -v sd="$sdk_dl" 'BEGIN{
  printf "ratio upload %.2f with Content-MD5, %.2f without (same work as the SDK; target >= 1.0: %s), download %.2f vs the faster SDK path (target >= 1.0: %s)\n",
    gp/sp, gpn/sp, (gpn/sp >= 1.0 ? "met" : "MISSED"), gg/sd, (gg/sd >= 1.0 ? "met" : "MISSED") }'
