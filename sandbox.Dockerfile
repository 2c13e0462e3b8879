# The per-run sandbox: a small Debian with the tools an agent needs, run as a non-root user.
# corral starts it read-only, with no capabilities and no network; see src/sandbox/container-spec.ts.
# socat is the in-sandbox end of the egress path: it relays 127.0.0.1:3128 to the run's proxy socket.
# corral-fs (python3, stdlib only) is how the file tools and the workspace export touch /workspace:
# openat with O_NOFOLLOW per path component, O_NONBLOCK, regular files only (see its header).
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      bash coreutils findutils grep sed gawk diffutils patch procps git python3 python3-pytest ca-certificates \
      curl socat less file \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --gid 10001 agent && useradd --uid 10001 --gid 10001 --home-dir /home/agent --shell /bin/bash agent \
 && mkdir -p /workspace /home/agent /run/corral && chown agent:agent /workspace /home/agent
# corral runs each sandbox in a uid slot of its own (src/sandbox/uid-slots.ts): PID 1 as BASE+2n, the
# agent as BASE+2n+1. Name them, so that whoami, git and ssh find a user (home /home/agent, a tmpfs).
ARG CORRAL_SANDBOX_UID_BASE=2000000
ARG CORRAL_SANDBOX_SLOTS=500
RUN for i in $(seq 0 $((CORRAL_SANDBOX_SLOTS - 1))); do \
      u=$((CORRAL_SANDBOX_UID_BASE + 2 * i)); \
      echo "sandbox-init:x:$u:$u:corral sandbox init:/nonexistent:/usr/sbin/nologin" >> /etc/passwd; echo "sandbox-init:x:$u:" >> /etc/group; \
      echo "agent:x:$((u + 1)):$((u + 1)):corral agent:/home/agent:/bin/bash" >> /etc/passwd; echo "agent:x:$((u + 1)):" >> /etc/group; \
    done
COPY corral-egress /usr/local/bin/corral-egress
COPY corral-fs /usr/local/bin/corral-fs
COPY corral_fs.py corral_export.py /usr/local/lib/corral/
RUN chmod 0755 /usr/local/bin/corral-fs /usr/local/bin/corral-egress \
 && chmod 0644 /usr/local/lib/corral/corral_fs.py /usr/local/lib/corral/corral_export.py \
 && python3 -m compileall -q /usr/local/lib/corral
ENV HOME=/home/agent LANG=C.UTF-8
USER 10001:10001
WORKDIR /workspace
CMD ["sleep", "infinity"]
