#!/usr/bin/env bash
# Shared helpers for the demo and the test suite: install the Debian packages,
# build and install the extension, run a throwaway PostgreSQL 15 cluster as an
# unprivileged user (PostgreSQL refuses to run as root).

# callers choose their own shell options (set -e etc.)

ZL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# PG_CONFIG selects the server (default: Debian's PostgreSQL 15); before the
# packages are installed it may not exist yet, hence the fallback
export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
PG_BIN=$("$PG_CONFIG" --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
ZL_PGUSER=${ZL_PGUSER:-postgres}
ZL_PORT=${ZL_PORT:-5499}
ZL_DIR=${ZL_DIR:-/tmp/zipper_lake_cluster}
export PGHOST=$ZL_DIR PGPORT=$ZL_PORT PGUSER=$ZL_PGUSER PGDATABASE=postgres

zl_packages=(postgresql-15 postgresql-server-dev-15 postgresql-contrib make gcc
             libipc-run-perl python3-psycopg2 postgresql-15-wal2json libzstd-dev
             liblz4-dev postgresql-15-cron)

zl_install_packages() {
    local missing=()
    for p in "${zl_packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "installing: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

zl_build() {
    PG_BIN=$("$PG_CONFIG" --bindir)
    make -C "$ZL_ROOT" -s
    make -C "$ZL_ROOT" -s install >/dev/null
}

# run a command as the unprivileged cluster user (or as is, if we are not root)
zl_as_pguser() {
    if [ "$(id -u)" = 0 ]; then
        su "$ZL_PGUSER" -s /bin/bash -c "$(printf '%q ' "$@")"
    else
        "$@"
    fi
}

# a copy of the source tree (without .git) owned by the cluster user, for
# targets that run as that user; prints its path
zl_pguser_copy() {
    local work
    work=$(mktemp -d /tmp/zl_tree.XXXXXX) || return 1
    tar -C "$ZL_ROOT" --exclude=.git --exclude=results --exclude=tmp_check -cf - . | tar -C "$work" -xf - || return 1
    if [ "$(id -u)" = 0 ]; then
        id "$ZL_PGUSER" >/dev/null 2>&1 || useradd --system --create-home "$ZL_PGUSER"
        chown -R "$ZL_PGUSER" "$work"
    fi
    echo "$work"
}

zl_start_cluster() {
    if [ "$(id -u)" = 0 ]; then
        id "$ZL_PGUSER" >/dev/null 2>&1 || useradd --system --create-home "$ZL_PGUSER"
        mkdir -p "$ZL_DIR" && chown "$ZL_PGUSER" "$ZL_DIR"
    fi
    if [ ! -f "$ZL_DIR/data/PG_VERSION" ]; then
        zl_as_pguser $PG_BIN/initdb -D "$ZL_DIR/data" -A trust -U "$ZL_PGUSER" >/dev/null
    fi
    if ! zl_as_pguser $PG_BIN/pg_ctl -D "$ZL_DIR/data" status >/dev/null 2>&1; then
        zl_as_pguser $PG_BIN/pg_ctl -D "$ZL_DIR/data" -w -l "$ZL_DIR/server.log" \
            -o "-p $ZL_PORT -k $ZL_DIR -c listen_addresses= -c max_prepared_transactions=4 ${ZL_SERVER_OPTS:-}" start >/dev/null
    fi
}

zl_stop_cluster() {
    zl_as_pguser $PG_BIN/pg_ctl -D "$ZL_DIR/data" -m fast stop >/dev/null 2>&1 || true
}
