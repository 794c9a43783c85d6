#!/usr/bin/env bash
# The whole test suite: installs what it needs, checks that the includes
# of src/ follow its layers and its long functions say why (make
# check-layers), builds and installs the
# extension, checks that the README sections the tree cites exist
# (test/check_readme_refs.py), starts a throwaway cluster, then runs the
# PGXS targets:
#   make installcheck   pg_regress, isolation and TAP (as the unprivileged
#                       cluster user, from a copy of the tree it owns: TAP
#                       tests start servers, which refuse to run as root)
#   make random-check   the randomized comparison with the reference, and
#                       the batching test of the fold reference
#   make bench-smoke    short runs of the benchmarks
#   make upgrade-check  v0.1 built aside, written, upgraded to this tree
# Exits non-zero if anything fails.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

failed=()
step() {
    local name=$1; shift
    echo "=== $name"
    if "$@"; then echo "=== $name: ok"; else echo "=== $name: FAILED"; failed+=("$name"); fi
}

zl_install_packages || exit 1
step "layers of src/" make -C "$ZL_ROOT" -s check-layers
zl_build || exit 1
step "README references" python3 "$ZL_ROOT/test/check_readme_refs.py"
# expected outputs must not depend on when autovacuum visits a table (its
# VACUUM truncates and compacts): off here; TAP 010 tests it on its own server
export ZL_SERVER_OPTS="-c autovacuum=off"
zl_start_cluster || exit 1

installcheck() {
    local work rc=0
    work=$(zl_pguser_copy) || return 1
    zl_as_pguser env PG_CONFIG="$PG_CONFIG" PGHOST="$PGHOST" PGPORT="$PGPORT" PGUSER="$PGUSER" \
        make -C "$work" -s installcheck ${PROVE_FLAGS:+PROVE_FLAGS="$PROVE_FLAGS"} || rc=$?
    if [ $rc -ne 0 ]; then
        for f in "$work/regression.diffs" "$work/test/isolation/output/regression.diffs"; do
            [ -s "$f" ] && cat "$f"
        done
        for f in "$work"/tmp_check/log/regress_log_*; do
            [ -f "$f" ] && grep -q "not ok" "$f" && { echo "----- $f"; tail -n 60 "$f"; }
        done
        echo "work directory kept: $work"
    else
        rm -rf "$work"
    fi
    return $rc
}

step "pg_regress, isolation and TAP" installcheck
step "randomized comparison" make -C "$ZL_ROOT" -s random-check
step "benchmark smoke runs" make -C "$ZL_ROOT" -s bench-smoke
step "upgrade from v0.1" make -C "$ZL_ROOT" -s upgrade-check

zl_stop_cluster
if [ ${#failed[@]} -gt 0 ]; then
    echo "FAILED: ${failed[*]}"
    exit 1
fi
echo "all tests passed"
