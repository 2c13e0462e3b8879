#!/usr/bin/env bash
# Builds a Node sandbox image: images/sandbox-node/Dockerfile over a staged Node VERSION and npm
# (stage-node.sh) and the MCP servers it carries (stage-mcp.sh: server-everything, server-filesystem,
# corral's remote bridge), FROM the sandbox image. One image per Node line an operator offers, each named by
# an environment (environments/*.yaml `image:`) and listed in CORRAL_SANDBOX_IMAGES, e.g.
#   images/sandbox-node/build.sh 20.19 corral/sandbox-node:20
# Rebuilt only when its inputs (the stage, this Dockerfile, the sandbox image's id) change.
#
# Usage: images/sandbox-node/build.sh VERSION TAG [SANDBOX_IMAGE]   (SANDBOX_IMAGE default
# $CORRAL_SANDBOX_IMAGE, else corral/sandbox:latest). .ci/bootstrap builds corral/sandbox-node:latest
# with VERSION ${CORRAL_SANDBOX_NODE_VERSION:-22} this way.
set -euo pipefail
cd "$(dirname "$0")"
V=${1:?usage: build.sh VERSION TAG [SANDBOX_IMAGE]}
TAG=${2:?usage: build.sh VERSION TAG [SANDBOX_IMAGE]}
SANDBOX=${3:-${CORRAL_SANDBOX_IMAGE:-corral/sandbox:latest}}
CTX=$(bash stage-node.sh "$V")
bash stage-mcp.sh "$CTX"
SANDBOX_ID=$(docker image inspect -f '{{.Id}}' "$SANDBOX") || { echo "build.sh: no image $SANDBOX (run .ci/bootstrap)" >&2; exit 1; }
h=$({ echo "$SANDBOX_ID"; cat Dockerfile "$CTX/inputs" "$CTX/mcp/inputs"; } | sha256sum | cut -c1-16)
if [ "$(docker image inspect -f '{{ index .Config.Labels "corral.inputs" }}' "$TAG" 2>/dev/null || true)" = "$h" ]; then
  echo "image $TAG up to date ($h)"
  exit 0
fi
DOCKER_BUILDKIT=0 docker build -q --build-arg "SANDBOX_IMAGE=$SANDBOX" --label "corral.inputs=$h" --label "corral.node=$(cat "$CTX/inputs")" -t "$TAG" -f Dockerfile "$CTX" >/dev/null
echo "built $TAG: $(docker run --rm --network none --entrypoint node "$TAG" --version), npm $(docker run --rm --network none --entrypoint npm "$TAG" --version), MCP: $(cat "$CTX/mcp/inputs")"
