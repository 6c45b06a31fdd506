# syntax=docker/dockerfile:1
#
# The instore service as a container image: a static binary (CGO_ENABLED=0;
# the SQLite driver is pure Go) on an empty base image, run as a non-root
# user, its SQLite data in the volume /data. docs/operations.md ("Container
# image") explains every line; build and run it with
#
#   docker build -t instore --build-arg VERSION=$(git describe --always --dirty) --build-arg COMMIT=$(git rev-parse HEAD) .
#   docker run -d --name instore -p 8080:8080 -p 8081:8081 -p 8082:8082 -p 127.0.0.1:9090:9090 -v instore-data:/data --stop-timeout 45 instore
#
# (podman takes the same commands; add --format docker to its build to keep
# the HEALTHCHECK, which the OCI image format has no field for.)
#
# Targets: "image" (the default, last) compiles in the golang stage;
# "prebuilt" takes a binary built beforehand from the build context, next to
# an empty directory "data" (CI builds it on the host, where no base image
# can be pulled: .ci/image). That binary must be static, built with
# CGO_ENABLED=0 (the image has no C library to load):
#
#   mkdir -p ctx/data && CGO_ENABLED=0 go build -trimpath -o ctx/instore ./cmd/instore
#   docker build --target prebuilt -t instore -f Dockerfile ctx

ARG GO_VERSION=1.26

# Base images by their full names (registry, namespace): podman, and any
# builder without registry aliases, pulls them as they are written.
FROM docker.io/library/golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
ARG COMMIT=""
ARG DATE=""
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT} -X main.date=${DATE}" \
      -o /out/instore ./cmd/instore \
 && mkdir -p /out/data

# What both targets share: no shell, no package manager, no CA store (the
# service makes no outgoing TLS connection); UID/GID 65532, the "nonroot"
# user of distroless images.
FROM scratch AS base
ENV INSTORE_DATA=/data \
    INSTORE_LISTEN_ONLINE=0.0.0.0:8080 \
    INSTORE_LISTEN_ACCESS=0.0.0.0:8081 \
    INSTORE_LISTEN_TERMINAL=0.0.0.0:8082 \
    INSTORE_LISTEN_OPS=0.0.0.0:9090 \
    INSTORE_LOG_FORMAT=json
EXPOSE 8080 8081 8082 9090
USER 65532:65532
# The shutdown lets operations in flight finish (40 s with the defaults):
# give `docker stop -t` / terminationGracePeriodSeconds more than that.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/instore", "healthcheck"]
ENTRYPOINT ["/instore"]
CMD ["serve"]

FROM base AS prebuilt
COPY --chown=65532:65532 data /data
COPY --chmod=0555 instore /instore
VOLUME ["/data"]

FROM base AS image
COPY --from=build --chown=65532:65532 /out/data /data
COPY --from=build --chmod=0555 /out/instore /instore
VOLUME ["/data"]
