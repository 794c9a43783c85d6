# zipper_lake — PGXS build
EXTENSION  = zipper_lake
MODULE_big = zipper_lake
OBJS = \
	src/zl_mod.o \
	src/zl_malloc.o \
	src/zl_tableam.o \
	src/zl_storage.o \
	src/zl_recentbuf.o \
	src/zl_columnar_write.o \
	src/zl_columnar_read.o \
	src/zl_freespace.o \
	src/zl_metadata.o \
	src/zl_metaread.o \
	src/zl_metacache.o \
	src/zl_rowsort.o \
	src/zl_write.o \
	src/zl_compact.o \
	src/zl_load.o \
	src/zl_scan.o \
	src/zl_time.o \
	src/zl_register.o \
	src/zl_inspect.o \
	src/zl_verify.o \
	src/zl_apply.o \
	src/zl_fold.o \
	src/zl_record.o \
	src/zl_prune.o \
	src/zl_read.o \
	src/zl_customscan.o \
	src/zl_aggregate.o \
	src/zl_keyprobe.o \
	src/zl_chunkfilter.o \
	src/zl_keyindex.o \
	src/zl_keys.o \
	src/zl_inline.o \
	src/zl_rowcheck.o \
	src/zl_ddl.o \
	src/zl_create.o \
	src/zl_triggers.o \
	src/zl_relation.o \
	src/zl_reclaim.o \
	src/zl_retention.o \
	src/zl_scrub.o \
	src/zl_erase.o \
	src/zl_events.o \
	src/zl_events_apply.o \
	src/zl_events_json.o

DATA = $(wildcard sql/install/zipper_lake--*.sql)

REGRESS = $(patsubst sql/%.sql,%,$(sort $(wildcard sql/*.sql)))
REGRESS_OPTS = --inputdir=. --load-extension=zipper_lake

ISOLATION = $(patsubst test/isolation/specs/%.spec,%,$(sort $(wildcard test/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test/isolation --outputdir=test/isolation/output --load-extension=zipper_lake

# TAP tests (crash recovery, standby, dump/restore, ...) start their own
# servers: run "make installcheck" as a non-root user (test/run_tests.sh does)
TAP_TESTS = 1
PROVE_TESTS = test/t/*.pl

PG_CPPFLAGS = -I$(srcdir)/src
SHLIB_LINK = -lzstd -llz4
PG_CFLAGS = -Wall -Wextra -Werror -Wno-unused-parameter -Wno-missing-field-initializers -Wno-sign-compare

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS tracks no header dependencies: every object depends on every header
$(OBJS): $(wildcard src/*.h)

# Against the running server of PGHOST / PGPORT (test/run_tests.sh starts one):
# the batching test of zipper_lake, the fold reference and its Python model
# (a few seconds; test/random/README.md), then the randomized comparison of
# zipper_lake with them (also with work_mem = 64kB, so batches are applied in
# many chunks of keys), and short runs of the benchmarks
# (test/bench/README.md has the real ones).
RANDOM_FLAGS ?=
RANDOM_BATCHING_FLAGS ?=
# Debian's python3, which has python3-psycopg2
PYTHON ?= /usr/bin/python3
random-check: random-batching-check
	dropdb --if-exists zl_random >/dev/null && createdb zl_random
	PGDATABASE=zl_random $(PYTHON) $(srcdir)/test/random/random_compare.py $(RANDOM_FLAGS)
	PGOPTIONS='-c work_mem=64kB' PGDATABASE=zl_random $(PYTHON) $(srcdir)/test/random/random_compare.py \
		--seeds 7 --scale 4 $(RANDOM_FLAGS)

# the batching test alone: zipper_lake against the fold, whatever the batching
random-batching-check:
	dropdb --if-exists zl_random >/dev/null && createdb zl_random
	PGDATABASE=zl_random $(PYTHON) $(srcdir)/test/random/random_compare.py --mode batching --check-zipper \
		$(RANDOM_BATCHING_FLAGS)

bench-smoke:
	dropdb --if-exists zl_bench_smoke >/dev/null && createdb zl_bench_smoke
	PGDATABASE=zl_bench_smoke $(PYTHON) $(srcdir)/test/bench/bench_apply.py --smoke --quiet
	PGDATABASE=zl_bench_smoke $(PYTHON) $(srcdir)/test/bench/bench_apply.py --smoke --quiet --late 0.1
	PGDATABASE=zl_bench_smoke $(PYTHON) $(srcdir)/test/bench/bench_read.py --smoke
	PGDATABASE=zl_bench_smoke $(PYTHON) $(srcdir)/test/bench/bench_events.py --smoke
	PGDATABASE=zl_bench_smoke PATH="$(shell $(PG_CONFIG) --bindir):$$PATH" \
		$(PYTHON) $(srcdir)/test/bench/bench_keys.py --smoke
	PGDATABASE=zl_bench_smoke $(PYTHON) $(srcdir)/test/bench/bench_history.py --smoke
	PGDATABASE=zl_bench_smoke $(PYTHON) $(srcdir)/test/bench/bench_snapshot.py --smoke
	PGDATABASE=zl_bench_smoke $(PYTHON) $(srcdir)/test/bench/bench_retention.py --smoke
	PGDATABASE=zl_bench_smoke $(PYTHON) $(srcdir)/test/bench/bench_users.py --smoke
	PGDATABASE=zl_bench_smoke PATH="$(shell $(PG_CONFIG) --bindir):$$PATH" \
		$(PYTHON) $(srcdir)/test/bench/report.py --smoke

# Build the released v0.1 into a private copy of the server installation,
# write tables with it, upgrade to this tree and check (test/upgrade/).
upgrade-check:
	$(srcdir)/test/upgrade/upgrade_check.sh

.PHONY: random-check random-batching-check bench-smoke upgrade-check
