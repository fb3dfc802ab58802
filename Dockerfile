# chromafsd's container image: the host daemon and its CSI node plugin, for
# a DaemonSet (deploy/kubernetes/) or a host that runs it in a container.
#
# Built by `scripts/image.sh build`, never by `docker build .` of the
# repository: the script stages the build context (chromafsd built with
# CGO off, chromafs and chromafs-mount as links to it: one binary that is
# the three commands by name; the dynamic loader and libc it loads at run
# time, since chroma-go's purego dlopens, taken from Debian's libc6;
# Debian's CA bundle for HTTPS to Chroma Cloud; a passwd and group that
# name root and nobody; an empty /tmp), so the base is the empty image and
# the build pulls nothing from any registry. No shell, no package manager:
# chromafs and glibc (rebuild the image for a glibc fix).
#
# Run it as the DaemonSet does: privileged (chromafsd mounts with mount(2)
# on /dev/fuse as root, so fusermount3 is not needed and not shipped), with
# /dev/fuse, the state directory, kubelet's directory shared both ways
# (Bidirectional; rshared for `docker run -v`), and the Chroma token from a
# file of mode 0400 (--token-file) or the environment (CHROMA_TOKEN).
FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="chromafsd" \
      org.opencontainers.image.description="chromafs host daemon: Chroma collections of docs as read-only file systems, one view per conversation" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/chromafs/chromafs"
COPY rootfs/ /
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
# root, explicitly: mounting needs CAP_SYS_ADMIN in a privileged container
USER 0:0
ENTRYPOINT ["/usr/local/bin/chromafsd"]
