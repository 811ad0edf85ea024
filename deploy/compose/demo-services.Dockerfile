# syntax=docker/dockerfile:1
# The demo Tool Services (deploy/cmd/demo-services) for the Compose setup.
# Build context: the repository root.
ARG GO_VERSION=1.26
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS TARGETARCH
WORKDIR /src/deploy
RUN --mount=type=bind,target=/src \
    --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/demo-services ./cmd/demo-services

FROM gcr.io/distroless/static-debian13:nonroot
COPY --from=build /out/demo-services /demo-services
USER 65532:65532
EXPOSE 8081 8082 8083
ENTRYPOINT ["/demo-services"]
