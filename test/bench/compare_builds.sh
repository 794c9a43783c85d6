#!/usr/bin/env bash
# bench_apply.py on two builds of the extension in the same run
# (test/bench/README.md, "Two builds in one run").
#
#   test/bench/compare_builds.sh [--port N] [--work DIR] [--keep] OLD_REF [NEW_REF] [-- bench_apply options]
#
# Builds OLD_REF (any git revision of this repository) and NEW_REF (default:
# this working tree as it is, uncommitted changes included) each into a
# private copy of the PostgreSQL installation of $PG_CONFIG, starts one fresh
# cluster per build (ports N and N+1, default 5577 and 5578; the settings of
# "How to run"), creates the database zl_bench in each, and runs
#   bench_apply.py --build OLD=... --build NEW=... [bench_apply options]
# which alternates rounds between the two clusters and prints each build's
# median ratio heap/zipper and the quotient NEW/OLD.  The clusters are
# stopped and DIR (default: a fresh /tmp/zl_compare.XXXXXX) removed at the
# end unless --keep.  Nothing is installed into $PG_CONFIG's installation.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
port=5577 work= keep=0
while [ $# -gt 0 ]; do
    case $1 in
        --port) port=$2; shift 2 ;;
        --work) work=$2; shift 2 ;;
        --keep) keep=1; shift ;;
        -h|--help) usage ;;
        --) break ;;
        -*) echo "unknown option $1" >&2; usage ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] && [ "$1" != -- ] || usage
old_ref=$1; shift
new_ref=
if [ $# -gt 0 ] && [ "$1" != -- ]; then new_ref=$1; shift; fi
[ $# -gt 0 ] && [ "$1" = -- ] && shift
bench_args=("$@")

git -C "$ZL_ROOT" rev-parse -q --verify "$old_ref^{commit}" >/dev/null || { echo "not a revision: $old_ref" >&2; exit 2; }
[ -z "$new_ref" ] || git -C "$ZL_ROOT" rev-parse -q --verify "$new_ref^{commit}" >/dev/null || { echo "not a revision: $new_ref" >&2; exit 2; }
old_name="old-$(git -C "$ZL_ROOT" rev-parse --short "$old_ref")"
if [ -n "$new_ref" ]; then
    new_name="new-$(git -C "$ZL_ROOT" rev-parse --short "$new_ref")"
else
    new_name="new-$(git -C "$ZL_ROOT" rev-parse --short HEAD)"
    [ -z "$(git -C "$ZL_ROOT" status --porcelain -- src sql Makefile zipper_lake.control)" ] || new_name+="-dirty"
fi

if [ -z "$work" ]; then work=$(mktemp -d /tmp/zl_compare.XXXXXX); else mkdir -p "$work"; fi
work=$(cd "$work" && pwd)

bindir=$("$PG_CONFIG" --bindir)
sharedir=$("$PG_CONFIG" --sharedir)
incdir=$("$PG_CONFIG" --includedir)
libdir=$("$PG_CONFIG" --pkglibdir)
pgbin() { echo "$work/$1/pg$bindir"; }

stop_all() {
    for side in old new; do
        [ -f "$work/$side/data/postmaster.pid" ] &&
            zl_as_pguser "$(pgbin $side)/pg_ctl" -D "$work/$side/data" -m fast -w stop >/dev/null 2>&1
    done
    if [ "$keep" = 0 ]; then rm -rf "$work"; else echo "kept: $work"; fi
}
trap stop_all EXIT

# a private copy of the server installation, with REF (or this tree) built into it
build() {
    local side=$1 ref=$2 prefix=$work/$1/pg src=$work/$1/src
    echo "--- $side: build ${ref:-the working tree} into $prefix"
    mkdir -p "$prefix$(dirname "$sharedir")" "$prefix$(dirname "$incdir")" "$prefix$(dirname "$(dirname "$bindir")")" "$src"
    cp -a "$(dirname "$bindir")" "$prefix$(dirname "$(dirname "$bindir")")/"
    cp -a "$sharedir" "$prefix$(dirname "$sharedir")/"
    cp -a "$incdir" "$prefix$(dirname "$incdir")/"
    [ "$("$prefix$bindir/pg_config" --pkglibdir)" = "$prefix$libdir" ] || { echo "the copy of $PG_CONFIG is not relocatable" >&2; exit 1; }
    rm -f "$prefix$libdir/zipper_lake.so" "$prefix$sharedir"/extension/zipper_lake*
    if [ -n "$ref" ]; then
        git -C "$ZL_ROOT" archive "$ref" | tar -C "$src" -xf -
    else
        tar -C "$ZL_ROOT" --exclude=.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
            --exclude=results --exclude=tmp_check --exclude=log -cf - . | tar -C "$src" -xf -
    fi
    make -C "$src" -s -j2 PG_CONFIG="$prefix$bindir/pg_config" >/dev/null
    make -C "$src" -s PG_CONFIG="$prefix$bindir/pg_config" install >/dev/null
}

# a fresh cluster of that copy with the settings of README "How to run"
start() {
    local side=$1 p=$2 data=$work/$1/data
    echo "--- $side: cluster on port $p"
    zl_as_pguser "$(pgbin "$side")/initdb" -D "$data" -A trust -U "$ZL_PGUSER" >/dev/null
    cat >> "$data/postgresql.conf" <<EOF
shared_buffers = '1GB'
max_wal_size = '4GB'
checkpoint_timeout = '30min'
synchronous_commit = off
work_mem = '64MB'
maintenance_work_mem = '512MB'
random_page_cost = 1.1
effective_cache_size = '8GB'
jit = off
EOF
    zl_as_pguser "$(pgbin "$side")/pg_ctl" -D "$data" -w -l "$work/$side/server.log" \
        -o "-p $p -k $work/$side -c listen_addresses=" start >/dev/null
    "$(pgbin "$side")/createdb" -h "$work/$side" -p "$p" -U "$ZL_PGUSER" zl_bench
}

build old "$old_ref"
build new "$new_ref"
chmod -R a+rX "$work"
[ "$(id -u)" = 0 ] && chown -R "$ZL_PGUSER" "$work"
start old "$port"
start new "$((port + 1))"

set +e
/usr/bin/python3 "$here/bench_apply.py" \
    --build "$old_name=host=$work/old port=$port dbname=zl_bench user=$ZL_PGUSER" \
    --build "$new_name=host=$work/new port=$((port + 1)) dbname=zl_bench user=$ZL_PGUSER" \
    "${bench_args[@]}"
rc=$?
exit $rc
