#!/usr/bin/env bash
# Stages the MCP servers the node image carries — @modelcontextprotocol/server-everything and
# server-filesystem, and the SDK for corral's remote bridge (mcp/remote-bridge.js) — from the npm
# registry, on the build host, exactly as mcp/package-lock.json pins them (npm ci, no install scripts),
# into CTX/mcp/ (CTX: the node stage stage-node.sh printed). The image build copies them to
# /opt/corral-mcp; it downloads nothing, and a sandbox never does. Reused while the lockfile and the
# bridge are unchanged.
#
# Usage: images/sandbox-node/stage-mcp.sh CTX
set -euo pipefail
cd "$(dirname "$0")"
CTX=${1:?usage: stage-mcp.sh CTX}
want=$(cat mcp/package.json mcp/package-lock.json mcp/remote-bridge.js | sha256sum | cut -c1-16)
if [ "$(cat "$CTX/mcp/inputs" 2>/dev/null)" != "mcp@$want" ] || [ ! -d "$CTX/mcp/node_modules/@modelcontextprotocol/server-filesystem" ]; then
  rm -rf "$CTX/mcp"
  mkdir -p "$CTX/mcp"
  cp mcp/package.json mcp/package-lock.json mcp/remote-bridge.js "$CTX/mcp/"
  (cd "$CTX/mcp" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
  echo "mcp@$want" >"$CTX/mcp/inputs"
fi
