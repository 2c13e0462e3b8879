# Redis for tests and local runs, built from the Debian base so no registry is needed.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/*
EXPOSE 6379
USER redis
CMD ["redis-server", "--protected-mode", "no", "--save", "", "--appendonly", "no", "--bind", "0.0.0.0"]
