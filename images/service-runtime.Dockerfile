# Runtime layer of the corral service image: the Debian base, the service user, Node 22 and the
# production node_modules. Built by images/service-image.sh from the directory it stages on the host,
# images/service/.stage/ (the host's Node binary and `npm ci --omit=dev` of package-lock.json), so no
# registry is pulled from; rebuilt only when Node, the lockfile, the base or the Docker gid change.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
# gid of the host's Docker socket: the image's "docker" group, which only the worker joins (compose group_add).
ARG DOCKER_GID=999
RUN groupadd --gid 10100 corral \
 && useradd --uid 10100 --gid 10100 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin corral \
 && groupadd --non-unique --gid "${DOCKER_GID}" docker
COPY node /usr/local/bin/node
RUN node --version
COPY deps/node_modules /app/node_modules
