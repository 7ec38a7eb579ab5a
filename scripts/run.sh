#!/usr/bin/env bash
# Installs what is needed, builds, and starts csi-proxy in the foreground on the default configuration
# (config/csi-proxy.toml: sockets in /run/csi-proxy). Stop it with Ctrl-C or SIGTERM.
# Extra arguments go to csi-proxy, e.g. scripts/run.sh --log-level debug
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCSI_PROXY_BUILD_TESTS=OFF -DCSI_PROXY_BUILD_BENCH=OFF >/dev/null
cmake --build build -j"$(nproc)"
# The audit log's directory, as the systemd unit's LogsDirectory= makes it.
install -d -m 0700 /var/log/csi-proxy
exec build/bin/csi-proxy --config config/csi-proxy.toml "$@"
