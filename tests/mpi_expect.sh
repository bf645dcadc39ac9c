#!/usr/bin/env bash
# Runs a command and checks both its exit code and its output (stdout+stderr),
# which ctest's PASS_REGULAR_EXPRESSION alone cannot do (it ignores the code).
#   mpi_expect.sh <expected exit code> <extended regex> <command...>
set -u
want_rc=$1
pattern=$2
shift 2
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [[ $rc -ne $want_rc ]]; then
  echo "mpi_expect: exit code $rc, expected $want_rc: $*" >&2
  exit 1
fi
if ! grep -Eq -- "$pattern" <<<"$out"; then
  echo "mpi_expect: output does not match /$pattern/: $*" >&2
  exit 1
fi
