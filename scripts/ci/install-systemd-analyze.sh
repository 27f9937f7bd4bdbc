#!/usr/bin/env bash
# Installs `systemd-analyze` (Debian's `systemd` package) when it is missing:
# tests/integration/systemd_unit.rs runs `systemd-analyze verify` on share/advisord.service.
# Fails loudly when it cannot be had.
set -euo pipefail
if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "installing systemd-analyze (the systemd package)" >&2
  if command -v apt-get >/dev/null 2>&1; then
    sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq systemd
  fi
  command -v systemd-analyze >/dev/null 2>&1 || {
    echo "error: cannot install systemd-analyze; install the systemd package, then run this again" >&2
    exit 1
  }
fi
