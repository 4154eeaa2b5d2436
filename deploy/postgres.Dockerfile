# A PostgreSQL image for machines that cannot pull the official one, built
# from this machine's PostgreSQL server binaries and the libraries they
# load (scripts/images gathers them). It honours the official image's
# POSTGRES_USER, POSTGRES_PASSWORD and PGDATA, listens on 5432 and asks
# for a password (scram-sha-256) on every network connection.
FROM scratch
COPY rootfs/ /
COPY --chown=999:999 var/ /var/
ENV PATH=/usr/lib/postgresql/15/bin:/bin PGDATA=/var/lib/postgresql/data LANG=C.UTF-8
USER 999:999
EXPOSE 5432
ENTRYPOINT ["/bin/sh", "/usr/local/bin/postgres-entrypoint"]
