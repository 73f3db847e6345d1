#!/usr/bin/env bash
# ctest's format_check: every tracked C++ and CUDA source follows .clang-format (clang-format 14, Debian 12's).
# Exits 77 (ctest: skipped) where clang-format or git is missing; lists the files at fault otherwise.
#   tests/format_check.sh SOURCE_DIR          check
#   clang-format -i FILE...                    what fixes a file it names
set -uo pipefail
src=${1:?usage: format_check.sh SOURCE_DIR}
command -v clang-format >/dev/null || { echo "skipped: no clang-format (apt-get install clang-format)"; exit 77; }
git -C "$src" rev-parse --git-dir >/dev/null 2>&1 || { echo "skipped: $src is not a git checkout"; exit 77; }
mapfile -t files < <(git -C "$src" ls-files '*.cpp' '*.h' '*.cu')
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$src/$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "format_check: ${#bad[@]} of ${#files[@]} files differ from .clang-format; run: clang-format -i ${bad[*]}"
  exit 1
fi
echo "format_check: ${#files[@]} files follow .clang-format"
