#!/usr/bin/env bash
# Makes a minimal Debian bookworm base image without any registry: mmdebstrap builds a rootfs from
# the machine's apt sources, `docker import` turns it into an image. Usage: make-debian-base.sh NAME
set -euo pipefail
name=${1:?usage: make-debian-base.sh IMAGE_NAME}
command -v mmdebstrap >/dev/null || { apt-get update -qq >/dev/null; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mmdebstrap --quiet --variant=minbase bookworm "$tmp/rootfs.tar"
docker import -c 'CMD ["bash"]' "$tmp/rootfs.tar" "$name" >/dev/null
echo "imported $name"
