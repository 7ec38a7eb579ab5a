#!/usr/bin/env bash
# Builds the Windows release zip: cross-builds the tree into build-windows (scripts/windows/build.sh) and runs cpack
# there (settings: deploy/windows/package.cmake). Prints the zip's path:
# build-windows/csi-proxy-<version>-windows-amd64.zip.
set -euo pipefail
cd "$(dirname "$0")/../.."

bash scripts/windows/build.sh
(cd build-windows && cpack >/dev/null)
ls "$PWD"/build-windows/csi-proxy-*-windows-amd64.zip
