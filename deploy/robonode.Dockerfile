# The robonode image: two static binaries on an empty base, so it builds
# with no registry. scripts/images prepares the context (the binaries, a
# passwd and group naming the unprivileged user, the host's CA bundle);
# `make images` runs it.
FROM scratch
COPY rootfs/ /
COPY --chown=65532:65532 data/ /data/
USER 65532:65532
WORKDIR /data
ENV PATH=/usr/local/bin
EXPOSE 7233 7280 7301 7301/udp 7302
HEALTHCHECK --interval=2s --timeout=3s --retries=30 CMD ["robonode", "healthcheck"]
ENTRYPOINT ["robonode"]
