# Termada in a container: the single binary, run as a non-root user (uid 10001).
#
#   docker build -t termada .
#   docker run -d --name termada -p 127.0.0.1:7717:7717 -v termada-state:/home/termada/state termada
#   docker exec termada termada dashboard        # the tokenized dashboard URL
#
# Inside its own network namespace the daemon listens on 0.0.0.0:7717 (TERMADA_CONTAINER=1 plus
# the runtime's /.dockerenv allow that, nowhere else); publish it on the host's loopback only,
# with the same port on both sides (the API checks the Host header). Agents connect over MCP
# HTTP with an agent token (docs/DAEMON.md) or with `docker exec -i termada termada serve --stdio`.

# --- build: deno compile (downloads denort for this platform, so it needs the network) ---
FROM denoland/deno:debian-2.9.6 AS build
WORKDIR /src
COPY . .
RUN deno task compile && ./dist/termada version

# --- runtime: a small Debian with the shells and tools agents expect ---
FROM debian:bookworm-slim
RUN apt-get update \
  && apt-get install -y --no-install-recommends \
    bash zsh ca-certificates openssh-client git procps less tini \
  && rm -rf /var/lib/apt/lists/* \
  && useradd --uid 10001 --user-group --create-home --home-dir /home/termada --shell /bin/bash termada \
  && install -d -m 0700 -o 10001 -g 10001 /home/termada/state
COPY --from=build /src/dist/termada /usr/local/bin/termada
USER 10001:10001
WORKDIR /home/termada
ENV HOME=/home/termada \
  TERMADA_HOME=/home/termada/state \
  TERMADA_CONTAINER=1
VOLUME ["/home/termada/state"]
EXPOSE 7717
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s CMD ["termada", "status"]
# tini reaps the zombies of agents' orphaned processes and forwards SIGTERM (a graceful stop).
ENTRYPOINT ["/usr/bin/tini", "--", "termada"]
CMD ["serve", "--bind", "0.0.0.0:7717"]
