# The tessera image: the static binary and the compose configs, nothing
# else. FROM scratch so that building it pulls nothing from any registry.
#
# Build it with deploy/build.sh, which compiles the binary with
# CGO_ENABLED=0 and hands docker a context holding only:
#   tessera      the binary
#   config/      deploy/compose/*.yml
# There is no shell in the image: health checks run `tessera ready`.
FROM scratch
COPY tessera /tessera
COPY config/ /etc/tessera/
# HTTP (Prometheus remote write/read, PromQL), node RPC, etcd client, etcd peer.
EXPOSE 7201 9000 2379 2380
ENTRYPOINT ["/tessera"]
# With no arguments: one node, embedded etcd, RF 1, data in /data.
CMD ["node", "-f", "/etc/tessera/single.yml"]
