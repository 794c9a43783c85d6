#!/usr/bin/env bash
# Upgrade harness (README "Upgrading"): build the released v0.1 into a
# private copy of the PostgreSQL installation, write zipper tables with it,
# then install this tree's library over it and run ALTER EXTENSION UPDATE;
# the tables must read the same, verify() must stay empty, and the new
# version must go on changing them.  Between the library swap and the
# UPDATE, 0.1's SQL definitions must keep working with the new library.
#
#   test/upgrade/upgrade_check.sh        (as root or the cluster user)
#
# Needs the v0.1 commit in the clone (tag v0.1); exits non-zero on any
# difference.  Later releases add their steps to sql/ in this directory.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
zl_install_packages

here=$(cd "$(dirname "$0")" && pwd)
old_ref=v0.1
old_commit=b926230147a9ac3e1cdccef02fcaba74223380c6   # what v0.1 tags
work=$(mktemp -d /tmp/zl_upgrade.XXXXXX)
prefix=$work/pg          # private copy of the server installation
port=$((ZL_PORT + 11))
data=$work/data
trap 'zl_as_pguser "$prefix/usr/lib/postgresql/15/bin/pg_ctl" -D "$data" -m fast stop >/dev/null 2>&1 || true' EXIT

step() { echo "--- $*"; }
fail() { echo "UPGRADE CHECK FAILED: $*" >&2; exit 1; }

step "private copy of $($PG_CONFIG --version) in $prefix"
server_lib=$("$PG_CONFIG" --pkglibdir)
bindir=$("$PG_CONFIG" --bindir)
sharedir=$("$PG_CONFIG" --sharedir)
incdir=$("$PG_CONFIG" --includedir)
mkdir -p "$prefix$(dirname "$sharedir")" "$prefix$(dirname "$incdir")" "$prefix$(dirname "$(dirname "$bindir")")"
cp -a "$(dirname "$bindir")" "$prefix$(dirname "$(dirname "$bindir")")/"
cp -a "$sharedir" "$prefix$(dirname "$sharedir")/"
cp -a "$incdir" "$prefix$(dirname "$incdir")/"
new_pg_config=$prefix$bindir/pg_config
[ "$("$new_pg_config" --pkglibdir)" = "$prefix$server_lib" ] || fail "the copy is not relocatable"
rm -f "$prefix$server_lib/zipper_lake.so" "$prefix$sharedir"/extension/zipper_lake*

step "build $old_ref into the copy"
src=$work/src_old
mkdir -p "$src"
if git -C "$ZL_ROOT" cat-file -e "$old_ref^{commit}" 2>/dev/null; then rev=$old_ref
elif git -C "$ZL_ROOT" cat-file -e "$old_commit^{commit}" 2>/dev/null; then rev=$old_commit
else fail "$old_ref ($old_commit) is not in this clone"; fi
git -C "$ZL_ROOT" archive "$rev" | tar -C "$src" -xf -
make -C "$src" -s PG_CONFIG="$new_pg_config" >/dev/null
make -C "$src" -s PG_CONFIG="$new_pg_config" install >/dev/null

step "a cluster of the copy on port $port"
chmod -R a+rX "$work"
[ "$(id -u)" = 0 ] && chown -R "$ZL_PGUSER" "$work"
zl_as_pguser "$prefix$bindir/initdb" -D "$data" -A trust -U "$ZL_PGUSER" >/dev/null
start() {
    zl_as_pguser "$prefix$bindir/pg_ctl" -D "$data" -w -l "$work/server.log" \
        -o "-p $port -k $work -c listen_addresses=" start >/dev/null
}
stop() { zl_as_pguser "$prefix$bindir/pg_ctl" -D "$data" -m fast -w stop >/dev/null; }
sql() { psql -X -q -v ON_ERROR_STOP=1 -h "$work" -p "$port" -U "$ZL_PGUSER" -d upgrade "$@"; }
start
psql -X -q -h "$work" -p "$port" -U "$ZL_PGUSER" -d postgres -c "CREATE DATABASE upgrade"

step "write with $old_ref"
sql -f "$here/sql/write_0.1.sql"
[ "$(sql -At -c "SELECT extversion FROM pg_extension WHERE extname = 'zipper_lake'")" = 0.1 ] || fail "not 0.1"
sql -At -f "$here/sql/contents.sql" > "$work/before.txt"

step "install this tree's library; 0.1's SQL still works with it"
stop
make -C "$ZL_ROOT" -s PG_CONFIG="$new_pg_config" >/dev/null
make -C "$ZL_ROOT" -s PG_CONFIG="$new_pg_config" install >/dev/null
start
sql -At -f "$here/sql/contents.sql" > "$work/swapped.txt"
diff -u "$work/before.txt" "$work/swapped.txt" || fail "contents differ after the library swap"
sql -f "$here/sql/use_0.1_api.sql"

step "ALTER EXTENSION zipper_lake UPDATE"
sql -c "ALTER EXTENSION zipper_lake UPDATE"
[ "$(sql -At -c "SELECT extversion FROM pg_extension WHERE extname = 'zipper_lake'")" = "$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$ZL_ROOT/zipper_lake.control")" ] \
    || fail "not at the default version after the update"
sql -At -f "$here/sql/contents.sql" > "$work/after.txt"
diff -u "$work/swapped.txt" "$work/after.txt" || fail "contents differ after the update"

step "the same objects as a fresh installation"
sql -At -f "$here/sql/objects.sql" > "$work/objects_upgraded.txt"
psql -X -q -h "$work" -p "$port" -U "$ZL_PGUSER" -d postgres -c "CREATE DATABASE fresh"
psql -X -q -v ON_ERROR_STOP=1 -h "$work" -p "$port" -U "$ZL_PGUSER" -d fresh \
    -c "CREATE EXTENSION zipper_lake" -At -f "$here/sql/objects.sql" > "$work/objects_fresh.txt"
diff -u "$work/objects_fresh.txt" "$work/objects_upgraded.txt" || fail "upgraded and fresh installations differ"

step "change, read and check with the new version"
psql -X -q -a -h "$work" -p "$port" -U "$ZL_PGUSER" -d upgrade < "$here/sql/use_0.2.sql" > "$work/use_0.2.out" 2>&1
diff -u "$here/expected/use_0.2.out" "$work/use_0.2.out" || fail "unexpected results after the upgrade"

stop
trap - EXIT
rm -rf "$work"
echo "upgrade from $old_ref: ok"
