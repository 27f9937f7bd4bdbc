#!/usr/bin/env bash
# Installs the Python tools the tests drive the product with, idempotently: a virtual
# environment holding the official MCP Python SDK (`mcp` on PyPI), the MCP host that
# `tests/mcp.rs` runs against `advisor-consult mcp`; and Playwright (`playwright` on PyPI)
# with Debian's `chromium`, which the cockpit's browser test drives (Playwright is pointed
# at /usr/bin/chromium: it never downloads a browser of its own).
#
# The environment lives in ADVISORD_CI_VENV, else ~/.cache/advisord-ci/venv. Any failure
# stops the script with a non-zero status: the MCP and browser tests fail (never skip)
# without it.
set -euo pipefail

MCP_VERSION="2.3.0"
PLAYWRIGHT_VERSION="1.65.2"
CHROMIUM="/usr/bin/chromium"
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

# Debian's Chromium, the browser the cockpit's test drives.
if [ ! -x "$CHROMIUM" ]; then
  echo "installing Debian's chromium" >&2
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -q || { echo "error: \`apt-get update\` failed; install the \`chromium\` package by hand" >&2; exit 1; }
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium || {
    echo "error: cannot install Debian's \`chromium\`; install it by hand (the browser test needs $CHROMIUM)" >&2
    exit 1
  }
fi
"$CHROMIUM" --headless --no-sandbox --version >/dev/null 2>&1 || {
  echo "error: $CHROMIUM does not run; reinstall the \`chromium\` package" >&2
  exit 1
}

installed="$(cd / && "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("playwright"))' 2>/dev/null || true)"
if [ "$installed" != "$PLAYWRIGHT_VERSION" ]; then
  echo "installing playwright==$PLAYWRIGHT_VERSION into $VENV (no browser download)" >&2
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "playwright==$PLAYWRIGHT_VERSION"
fi
(cd / && "$VENV/bin/python" -c 'import playwright.sync_api') || {
  echo "error: Playwright in $VENV does not import; remove $VENV and run this again" >&2
  exit 1
}
echo "playwright $PLAYWRIGHT_VERSION and $CHROMIUM ready" >&2
