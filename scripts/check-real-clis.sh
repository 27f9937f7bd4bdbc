#!/usr/bin/env bash
# Check the shipped catalogue's CLI entries (codex-cli, gemini-cli, claude-cli) against the
# real CLIs, credential-less and offline, and against fake-advisor posing as them.
#
# The real CLIs are installed from npm OUTSIDE the repository:
#   mkdir -p /tmp/realclis && cd /tmp/realclis &&
#     npm install @openai/codex @google/gemini-cli @anthropic-ai/claude-code
# and found through ADVISORD_REAL_CLIS (default /tmp/realclis/node_modules/.bin).
#
# Usage: scripts/check-real-clis.sh [--deadline-s SECS] [--fake-only|--real-only]
# Exit status: 0 when every outcome is classified as expected, 1 otherwise, 2 on misuse.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
real_bin="${ADVISORD_REAL_CLIS:-/tmp/realclis/node_modules/.bin}"
deadline=20
which_runs=both
while [ $# -gt 0 ]; do
  case "$1" in
    --deadline-s) deadline="$2"; shift 2 ;;
    --fake-only) which_runs=fake; shift ;;
    --real-only) which_runs=real; shift ;;
    *) echo "check-real-clis: unknown argument \`$1\`" >&2; exit 2 ;;
  esac
done

cd "$root"
cargo build --quiet -p advisord-fakes --bin fake-advisor
cargo build --quiet -p advisord-adapters --example real_clis
target="${CARGO_TARGET_DIR:-$root/target}"
example="$target/debug/examples/real_clis"

status=0
if [ "$which_runs" != fake ]; then
  for cli in codex gemini claude; do
    if [ ! -x "$real_bin/$cli" ]; then
      echo "check-real-clis: \`$real_bin/$cli\` is missing; install the CLIs (see the header)" >&2
      exit 2
    fi
  done
  echo "== the real CLIs"
  for cli in codex gemini claude; do
    printf '   %-7s %s\n' "$cli" "$("$real_bin/$cli" --version 2>&1 | head -n 1)"
  done
  "$example" --bin "$real_bin" --deadline-s "$deadline" || status=1
fi

if [ "$which_runs" != real ]; then
  fakes="$(mktemp -d)"
  trap 'rm -rf "$fakes"' EXIT
  for cli in codex gemini claude; do
    ln -s "$target/debug/fake-advisor" "$fakes/$cli"
  done
  echo
  echo "== fake-advisor as codex, gemini and claude"
  "$example" --bin "$fakes" --deadline-s "$deadline" || status=1
fi
exit "$status"
