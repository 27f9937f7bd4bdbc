#!/usr/bin/env bash
# Install the real codex, gemini and claude CLIs, at the versions tests/integration/real_clis.rs pins,
# and the MCP Inspector's CLI (the fourth MCP client of tests/integration/agent_hosts.rs),
# from npm into a cache OUTSIDE the repository:
#   ${ADVISORD_REAL_CLIS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/advisord-ci/npm}
# The suite finds them in its node_modules/.bin (or wherever ADVISORD_REAL_CLIS points).
#
# Cached: when the installed versions are the pinned ones, nothing is downloaded. Fails
# loudly (exit 1, naming what is missing) when npm or node is absent or the install fails:
# CI must never skip the real-CLI suite silently.
#
# Usage: scripts/install-real-clis.sh     (prints the directory holding the CLIs)
set -euo pipefail

# The pinned versions (keep equal to PINNED in tests/integration/real_clis.rs).
packages=(
  "@openai/codex@0.171.0"
  "@google/gemini-cli@0.61.0"
  "@anthropic-ai/claude-code@2.1.197"
  "@modelcontextprotocol/inspector@0.15.0"
)
commands=(codex gemini claude mcp-inspector)

cache="${ADVISORD_REAL_CLIS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/advisord-ci/npm}"
bin="$cache/node_modules/.bin"

fail() {
  echo "install-real-clis: $*" >&2
  exit 1
}

command -v node >/dev/null 2>&1 || fail "\`node\` is not on PATH; install Node.js 20 or later (the CLIs run on it)"
command -v npm >/dev/null 2>&1 || fail "\`npm\` is not on PATH; install it with Node.js"

installed_version() { # package name -> version in the cache, or nothing
  local manifest="$cache/node_modules/$1/package.json"
  [ -f "$manifest" ] && node -e 'process.stdout.write(require(process.argv[1]).version)' "$manifest"
}

up_to_date=true
for spec in "${packages[@]}"; do
  name="${spec%@*}"
  want="${spec##*@}"
  [ "$(installed_version "$name" || true)" = "$want" ] || up_to_date=false
done
for command in "${commands[@]}"; do
  [ -x "$bin/$command" ] || up_to_date=false
done

if [ "$up_to_date" = false ]; then
  echo "install-real-clis: installing ${packages[*]} into $cache" >&2
  mkdir -p "$cache"
  [ -f "$cache/package.json" ] || echo '{"private": true}' > "$cache/package.json"
  if ! (cd "$cache" && npm install --no-audit --no-fund --save-exact "${packages[@]}" >&2); then
    fail "npm could not install ${packages[*]} into $cache; check the network or the npm registry (npm config get registry)"
  fi
fi

for command in "${commands[@]}"; do
  [ -x "$bin/$command" ] || fail "\`$bin/$command\` is missing after the install"
  # The inspector has no --version; its package says it.
  if [ "$command" = mcp-inspector ]; then
    echo "install-real-clis: mcp-inspector $(installed_version @modelcontextprotocol/inspector)" >&2
    continue
  fi
  version="$("$bin/$command" --version 2>&1 | head -n 1)" \
    || fail "\`$bin/$command --version\` fails: $version"
  echo "install-real-clis: $command $version" >&2
done
echo "$bin"
