#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds, starts a throwaway
# cluster, then runs pg_regress + isolation tests, the randomized comparison
# against the reference implementation, and the TAP tests (crash recovery,
# streaming standby, dump/restore).  Exits non-zero if anything fails.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

failed=()
step() {
    local name=$1; shift
    echo "=== $name"
    if "$@"; then echo "=== $name: ok"; else echo "=== $name: FAILED"; failed+=("$name"); fi
}
show_diffs() {
    for f in "$ZL_ROOT/regression.diffs" "$ZL_ROOT/test/isolation/output/regression.diffs"; do
        [ -s "$f" ] && cat "$f"
    done
    return 1
}

zl_install_packages || exit 1
zl_build || exit 1
zl_start_cluster || exit 1

step "pg_regress and isolation" bash -c "make -C '$ZL_ROOT' -s installcheck || { $(declare -f show_diffs); ZL_ROOT='$ZL_ROOT' show_diffs; }"
# the driver's defaults are the CI run: 28 seeds, every table configuration 4 times
step "randomized comparison" bash -c "dropdb --if-exists zl_random >/dev/null && createdb zl_random && PGDATABASE=zl_random /usr/bin/python3 '$ZL_ROOT/test/random/random_compare.py'"
step "benchmark smoke runs" bash -c "dropdb --if-exists zl_bench_smoke >/dev/null && createdb zl_bench_smoke && PGDATABASE=zl_bench_smoke /usr/bin/python3 '$ZL_ROOT/test/bench/bench_apply.py' --smoke --quiet && PGDATABASE=zl_bench_smoke /usr/bin/python3 '$ZL_ROOT/test/bench/bench_read.py' --smoke"
step "TAP" "$ZL_ROOT/test/tap.sh"

zl_stop_cluster
if [ ${#failed[@]} -gt 0 ]; then
    echo "FAILED: ${failed[*]}"
    exit 1
fi
echo "all tests passed"
