#!/usr/bin/env bash
# Installs the Python tools the tests drive the product with, idempotently: a virtual
# environment holding the official MCP Python SDK (`mcp` on PyPI), the MCP host that
# `tests/mcp.rs` runs against `advisor-consult mcp`.
#
# The environment lives in ADVISORD_CI_VENV, else ~/.cache/advisord-ci/venv. Any failure
# stops the script with a non-zero status: the MCP test fails (never skips) without it.
set -euo pipefail

MCP_VERSION="2.3.0"
VENV="${ADVISORD_CI_VENV:-$HOME/.cache/advisord-ci/venv}"
PYTHON="${PYTHON:-python3}"

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "error: \`$PYTHON\` is not on PATH; install Python 3.10 or newer (the MCP SDK needs it)" >&2
  exit 1
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "creating the virtual environment $VENV" >&2
  mkdir -p "$(dirname "$VENV")"
  "$PYTHON" -m venv "$VENV"
fi

installed="$(cd / && "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))' 2>/dev/null || true)"
if [ "$installed" != "$MCP_VERSION" ]; then
  echo "installing mcp==$MCP_VERSION into $VENV" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==$MCP_VERSION"
fi

# Prove it imports, from a directory where nothing can shadow it.
(cd / && "$VENV/bin/python" -c 'import mcp, anyio, jsonschema') || {
  echo "error: the MCP Python SDK in $VENV does not import; remove $VENV and run this again" >&2
  exit 1
}
echo "mcp $MCP_VERSION ready in $VENV" >&2
