# syntax=docker/dockerfile:1
#
# throttlekit-server container image.
#
#   docker build -t throttlekit-server .
#   docker run --rm -p 6380:6380 -p 9121:9121 throttlekit-server
#
# Build stage: a static, stripped binary (no cgo, no libc needed at run time).
ARG GO_VERSION=1.26
FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
        -o /out/throttlekit-server ./cmd/throttlekit-server

# Final stage: distroless "static" has no shell, no package manager and no
# curl; it runs as the unprivileged user nonroot (uid 65532). The health check
# therefore runs the server binary itself in its "healthcheck" mode, which GETs
# /healthz on the metrics listener and exits 0 or 1.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/throttlekit-server /usr/local/bin/throttlekit-server
USER nonroot:nonroot
# Inside a container the loopback defaults would be unreachable: listen on all
# interfaces. Clients reach the container through its network, never from
# 127.0.0.1, so protected mode is off here as in Redis's own image: the
# container's network is the boundary. Set THROTTLEKIT_REQUIREPASS (or an
# aclfile) when the port is reachable by others.
ENV THROTTLEKIT_ADDR=0.0.0.0:6380 \
    THROTTLEKIT_METRICS_ADDR=0.0.0.0:9121 \
    THROTTLEKIT_PROTECTED_MODE=no \
    THROTTLEKIT_LOG_FORMAT=json
EXPOSE 6380 9121
# Shutdown is graceful on SIGTERM (docker stop's default signal).
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/throttlekit-server", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/throttlekit-server"]
