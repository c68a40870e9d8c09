# The zaris server: cmd/zaris built static by scripts/build-static.sh (CI builds it the same way), on a
# base image with no shell, run as a non-root user. Build: docker build -t zaris .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN bash scripts/build-static.sh /out/zaris

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/zaris /zaris
USER 65532:65532
# Every flag is also a ZARIS_* variable. The listeners take every interface where the server allows it;
# --data-addr must name an address the other nodes reach (the container's own), so it has no default here.
ENV ZARIS_RESP_ADDR=0.0.0.0:6379 \
    ZARIS_GOSSIP_ADDR=0.0.0.0:7946 \
    ZARIS_HTTP_ADDR=0.0.0.0:8080
# RESP, gossip (TCP and UDP), data and control, HTTP (/metrics, /healthz, /readyz, status page).
EXPOSE 6379/tcp 7946/tcp 7946/udp 7947/tcp 8080/tcp
ENTRYPOINT ["/zaris"]
