# relay's image, for those who build with Docker (docker build -t relay .).
# `make image` builds the same image without a container engine
# (deploy/image): an empty base, the static relay, CA certificates, and
# passwd and group files naming the user it runs as.

# Build: a static relay with the musl librdkafka that confluent-kafka-go
# bundles, as scripts/release.sh builds it.
FROM golang:1.26-bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends musl-tools ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
ARG DATE=unknown
RUN CGO_ENABLED=1 CC=musl-gcc go build -tags musl,netgo,osusergo -trimpath \
      -ldflags "-s -w -buildid= -X relay/internal/buildinfo.Version=${VERSION} -X relay/internal/buildinfo.Commit=${COMMIT} -X relay/internal/buildinfo.Date=${DATE} -linkmode external -extldflags '-static -Wl,--build-id=none'" \
      -o /out/usr/local/bin/relay ./cmd/relay \
 && /out/usr/local/bin/relay version \
 && mkdir -p /out/etc/ssl/certs /out/tmp \
 && chmod 1777 /out/tmp \
 && cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/ \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > /out/etc/passwd \
 && printf 'root:x:0:\nnonroot:x:65532:\n' > /out/etc/group

# Run: nothing but relay and what it reads. No shell.
FROM scratch
ARG VERSION=dev
ARG COMMIT=unknown
ARG DATE=unknown
LABEL org.opencontainers.image.title="relay" \
      org.opencontainers.image.description="the single ingress stage in front of Kafka consumers: every record processed, rejected, quarantined or in a bounded retry tier, in the transaction that commits its offset" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.created="${DATE}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/ /
ENV PATH=/usr/local/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
# RELAY_HTTP_ADDR's default: /metrics, /livez, /readyz.
EXPOSE 9464
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/relay", "run"]
