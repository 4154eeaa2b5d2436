# The replicated Postgres of the compose mesh: PostgreSQL 15 and
# pg_auto_failover (pg_autoctl, the pgautofailover extension), copied from
# this machine's Debian packages with the shared libraries they load, on an
# empty base, so it builds with no registry. scripts/images prepares the
# context. One image, two roles (ROBONET_PG_ROLE): the monitor, or a data
# node (a primary or a standby, as the monitor decides); see
# deploy/pg-ha/entrypoint.
FROM scratch
COPY rootfs/ /
COPY --chown=999:999 var/ /var/
ENV PATH=/usr/lib/postgresql/15/bin:/usr/bin:/bin \
    LANG=C.UTF-8 \
    HOME=/var/lib/postgresql \
    PGDATA=/var/lib/postgresql/data \
    XDG_CONFIG_HOME=/var/lib/postgresql/pg_autoctl/config \
    XDG_DATA_HOME=/var/lib/postgresql/pg_autoctl/share \
    XDG_RUNTIME_DIR=/var/run/postgresql
USER 999:999
EXPOSE 5432
ENTRYPOINT ["/bin/sh", "/usr/local/bin/pg-ha-entrypoint"]
