#!/usr/bin/env bash
# Print the commit the working tree is at, for the provenance the images carry (build argument TOOLCANARY_COMMIT):
# the full hash of HEAD, with "-dirty" when the tree differs from it. Untracked files that git does not ignore
# count as changes, since the image build copies them too. Prints nothing (and exits 0) outside a git tree,
# so the caller can fall back to another value.
#
# Usage: scripts/git_commit.sh [-h|--help]
# Examples:
#   scripts/git_commit.sh                          # 3f2c9a0e...  or  3f2c9a0e...-dirty
#   TOOLCANARY_COMMIT=$(scripts/git_commit.sh) docker compose --profile analysis build
set -euo pipefail
case "${1:-}" in
  -h|--help) sed -n '2,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
  "") ;;
  *) echo "error: unexpected argument '$1' (this script takes none; see --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
commit="$(git rev-parse --verify --quiet HEAD 2>/dev/null)" || exit 0
if [ -n "$(git status --porcelain 2>/dev/null)" ]; then
  commit="$commit-dirty"
fi
echo "$commit"
