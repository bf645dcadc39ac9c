#!/usr/bin/env bash
# clang-format --dry-run -Werror (.clang-format) on the C++ files that must be clean:
#   - every file changed since the base commit in .ci/format-base (when this clone has it), and
#   - every tracked file not listed in .ci/format-exempt (files written before the check
#     existed; a file leaves the list when it is next changed, since it is then checked anyway).
# New files are always checked. Exit 1 with clang-format's diagnostics when a file is not clean;
# `clang-format -i FILE` fixes it.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v clang-format >/dev/null || { echo "check-format: clang-format missing (apt-get install clang-format)" >&2; exit 2; }

mapfile -t tracked < <(git ls-files '*.h' '*.cc' '*.cu')
declare -A exempt=()
if [[ -f .ci/format-exempt ]]; then
  while IFS= read -r f; do [[ -n $f && $f != \#* ]] && exempt[$f]=1; done < .ci/format-exempt
fi
declare -A check=()
for f in "${tracked[@]}"; do
  [[ -z ${exempt[$f]:-} ]] && check[$f]=1
done
base=$(cat .ci/format-base 2>/dev/null || true)
if [[ -n $base ]] && git cat-file -e "$base^{commit}" 2>/dev/null; then
  while IFS= read -r f; do
    [[ -f $f ]] && check[$f]=1
  done < <(git diff --name-only --diff-filter=ACMR "$base" -- '*.h' '*.cc' '*.cu')
else
  echo "check-format: base commit '${base:-none}' is not in this clone; checking the non-exempt files only"
fi
files=("${!check[@]}")
echo "check-format: ${#files[@]} files"
[[ ${#files[@]} -eq 0 ]] && exit 0
printf '%s\n' "${files[@]}" | sort | xargs clang-format --dry-run -Werror
