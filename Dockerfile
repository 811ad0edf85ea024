# syntax=docker/dockerfile:1
# The toolmesh image: one static binary on distroless, running as the
# nonroot user (65532). `make image` builds it; the subcommand and flags are
# the container's arguments, e.g. `docker run toolmesh:dev extproc --help`.
# toolmesh listens on 127.0.0.1 by default: in a container, give the
# addresses others must reach, e.g. --extproc-listen=0.0.0.0:9002.
ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS TARGETARCH
ARG VERSION=dev
WORKDIR /src
# Modules first, so a source change does not download them again.
RUN --mount=type=bind,source=go.mod,target=go.mod \
    --mount=type=bind,source=go.sum,target=go.sum \
    --mount=type=cache,target=/go/pkg/mod \
    go mod download
RUN --mount=type=bind,target=. \
    --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w -X github.com/toolmesh/toolmesh/internal/app.version=${VERSION}" -o /out/toolmesh ./cmd/toolmesh
# The SBOM of that binary's modules (CycloneDX JSON; scripts/sbom.sh).
RUN --mount=type=bind,target=. \
    --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    sh scripts/sbom.sh /out/toolmesh /out/sbom.cdx.json "${VERSION}"

FROM gcr.io/distroless/static-debian13:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="toolmesh" \
      org.opencontainers.image.description="MCP tool gateway for Envoy meshes" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/toolmesh /toolmesh
COPY --from=build /out/sbom.cdx.json /usr/share/toolmesh/sbom.cdx.json
USER 65532:65532
# ext_proc gRPC, xDS gRPC, admin HTTP (/healthz /readyz /health /metrics).
EXPOSE 9002 18000 9090
ENTRYPOINT ["/toolmesh"]
