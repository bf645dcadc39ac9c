#!/usr/bin/env bash
# Installs everything Gantry needs to build and test, from Debian 12 packages only.
# Idempotent: packages already present are not reinstalled and apt is not refreshed
# when nothing is missing, so `make test` stays fast on a warm machine.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git clang lld libclang-rt-14-dev
  # style: scripts/check-format.sh (run by .ci/run)
  clang-format
  # core libraries
  libspdlog-dev libfmt-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libnuma-dev
  # tests
  libgtest-dev libgmock-dev
  # optional features and benchmark anchors: MPI (OpenMPI), Gloo, Python bindings
  openmpi-bin libopenmpi-dev libgloo-dev pybind11-dev python3-dev python3-pybind11
  # checkpoint Python module, its tests, examples/train_resume.py and bench/ckpt.sh
  python3-torch python3-numpy python3-pytest
  # checkpoint engine: XXH3 chunk checksums, SHA-256 manifests, fio as the disk limit in bench/ckpt.sh
  libxxhash-dev libssl-dev fio openssl
  # gemm benchmark (gantry bench gemm): CBLAS from OpenBLAS
  libopenblas-dev
  # health: gpu_xid reads rotated .gz kernel logs through zlib
  zlib1g-dev
  # procps for ps/free in the doctor smoke test; time (/usr/bin/time -v) for bench/assess.sh
  procps time
  # bc for the arithmetic of bench/jobs.sh
  bc
  # readelf for the footprint test (no optional GPU/MPI library among gantry's NEEDED entries)
  binutils
  # gateway: Boost.Asio (headers), hiredis (RESP codec for the shared Redis limits), SQLite (keys, quotas)
  libboost-dev libhiredis-dev libsqlite3-dev
  # gateway tests and bench/gateway.sh: real Redis, nginx backend, HAProxy anchor, wrk load, promtool
  redis-server nginx-light haproxy wrk prometheus python3-cryptography
  # health --slurm test (tests/health_slurm): a real single-node Slurm with its own munged
  slurmctld slurmd slurm-client munge
  # jobs: Snakemake 7 (local executor) is the anchor in bench/jobs.sh; packaging is the
  # reference the PEP 440 version tests are checked against
  snakemake python3-packaging
  # drift: scipy/pandas known answers in python/tests/test_drift.py and bench/drift.sh, chromium for the report screenshot
  python3-scipy python3-pandas chromium
  # storage: Azure Blob client (libcurl), zstd for gantry backup
  libcurl4-openssl-dev libzstd-dev
  # registry: libpq for the PostgreSQL metadata store; postgresql (server) started by its integration tests
  libpq-dev postgresql
  # agent: node_exporter is the anchor in bench/agent.sh; a real Alertmanager in notify_alertmanager_integration_test
  prometheus-node-exporter prometheus-alertmanager
)

# Node.js and npm run the npm test tools (Azurite, the Blob SDK anchor, playwright-core).
# A machine that already has a node (e.g. from NodeSource, which bundles npm) keeps it:
# Debian's npm package would conflict with it.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  PACKAGES+=(nodejs npm)
fi

if [[ $(id -u) -ne 0 ]]; then
  SUDO=sudo
else
  SUDO=
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# npm test tools, exactly as pinned in package-lock.json. `npm ci` only when the
# lockfile changed since the last install, so a warm machine spends no time here.
cd "$(dirname "$0")/.."
lock_sum=$(sha256sum package-lock.json | cut -d' ' -f1)
if [[ -f node_modules/.gantry-lock-sha256 && $(cat node_modules/.gantry-lock-sha256) == "$lock_sum" ]]; then
  echo "install-deps: npm tools present"
else
  echo "install-deps: npm ci (azurite, @azure/storage-blob, playwright-core, the SARIF 2.1.0 schema and ajv, @azure/arm-compute, @kubernetes/client-node)"
  npm ci --no-audit --no-fund --loglevel=error
  echo "$lock_sum" >node_modules/.gantry-lock-sha256
fi
