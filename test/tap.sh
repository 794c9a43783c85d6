#!/usr/bin/env bash
# Run the TAP tests in test/t/*.pl (PostgreSQL::Test::Cluster) with prove.
#
# The extension must already be built and installed (zl_build); this script
# does not build.  PostgreSQL refuses to run as root, so when started as root
# the tests run as $ZL_PGUSER (postgres) from a private copy of test/t in a
# fresh mktemp directory owned by that user.
#
#   test/tap.sh                         # all tests
#   test/tap.sh t/002_standby.pl        # some tests (only the file name counts)
#   PROVE_FLAGS=-v test/tap.sh          # verbose prove output
#   ZL_TAP_KEEP=1 test/tap.sh           # keep the work directory
#
# Exits non-zero when a test fails, after printing the tail of its logs.

set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
zl_install_packages

PG_LIB=$("$PG_CONFIG" --pkglibdir)
PERL_LIB=$PG_LIB/pgxs/src/test/perl
[ -f "$PERL_LIB/PostgreSQL/Test/Cluster.pm" ] || { echo "missing $PERL_LIB" >&2; exit 2; }
[ -f "$PG_LIB/zipper_lake.so" ] || { echo "zipper_lake is not installed: run zl_build first" >&2; exit 2; }

work=$(mktemp -d /tmp/zl_tap.XXXXXX)
cp -r "$ZL_ROOT/test/t" "$work/t"
if [ "$(id -u)" = 0 ]; then
    id "$ZL_PGUSER" >/dev/null 2>&1 || useradd --system --create-home "$ZL_PGUSER"
    chown -R "$ZL_PGUSER" "$work"
fi

tests=()
for t in "$@"; do tests+=("t/$(basename "$t")"); done
if [ ${#tests[@]} -eq 0 ]; then
    for t in "$work"/t/*.pl; do tests+=("t/$(basename "$t")"); done
fi

# lib.sh exports PG* for its own cluster; the test modules pick their own
unset PGHOST PGPORT PGUSER PGDATABASE

rc=0
(cd "$work" && zl_as_pguser env \
    PATH="$PG_BIN:$PATH" \
    PERL5LIB="$PERL_LIB${PERL5LIB:+:$PERL5LIB}" \
    PG_REGRESS="$PG_LIB/pgxs/src/test/regress/pg_regress" \
    TESTDIR="$work" \
    PG_TEST_PORT_DIR="$work" \
    prove ${PROVE_FLAGS:-} --timer "${tests[@]}") 2>&1 | tee "$work/prove.out" || rc=$?

if [ $rc -ne 0 ]; then
    # failed tests are listed in prove's summary as "t/NAME.pl (Wstat: ...)"
    failed=$(sed -n 's|^t/\([^ ]*\)\.pl .*(Wstat.*|\1|p' "$work/prove.out" | sort -u)
    [ -n "$failed" ] || failed=$(cd "$work/tmp_check/log" 2>/dev/null && ls regress_log_* | sed 's/^regress_log_//' || true)
    echo
    echo "=== TAP tests failed (prove exit $rc); logs in $work/tmp_check/log ==="
    for t in $failed; do
        for f in "$work/tmp_check/log/regress_log_$t" "$work"/tmp_check/log/"$t"_*.log; do
            [ -f "$f" ] || continue
            case "$f" in
                */regress_log_*) n=100 ;;   # the test's own log: queries, diagnostics
                *) n=50 ;;                  # a node's server log
            esac
            echo
            echo "----- tail -n $n $f -----"
            tail -n "$n" "$f"
        done
    done
    exit $rc
fi

if [ -n "${ZL_TAP_KEEP:-}" ]; then
    echo "work directory kept: $work"
else
    rm -rf "$work"
fi
