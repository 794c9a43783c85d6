# zipper_lake — PGXS build
EXTENSION  = zipper_lake
MODULE_big = zipper_lake
OBJS = \
	src/zl_init.o \
	src/common/zl_describe.o \
	src/common/zl_guc.o \
	src/common/zl_malloc.o \
	src/common/zl_rowsort.o \
	src/common/zl_time.o \
	src/common/zl_util.o \
	src/storage/columnar/zl_columnar_read.o \
	src/storage/columnar/zl_columnar_write.o \
	src/storage/zl_keys.o \
	src/storage/zl_recentbuf.o \
	src/storage/zl_storage.o \
	src/storage/zl_subgroup_read.o \
	src/remote/zl_remote_conn.o \
	src/remote/zl_remote_resolve.o \
	src/remote/zl_remote_stage.o \
	src/remote/zl_remote_xact.o \
	src/follow/zl_follow_api.o \
	src/follow/zl_follow_catalog.o \
	src/follow/zl_follow_pgoutput.o \
	src/follow/zl_follow_source.o \
	src/follow/zl_follow_stage.o \
	src/follow/zl_follow_worker.o \
	src/catalog/zl_keyindex.o \
	src/catalog/zl_metacache.o \
	src/catalog/zl_metadata.o \
	src/catalog/zl_meta_bytes.o \
	src/catalog/zl_meta_freespace.o \
	src/catalog/zl_meta_record.o \
	src/catalog/zl_meta_registration.o \
	src/catalog/zl_maskcodec.o \
	src/catalog/zl_meta_subgroup.o \
	src/catalog/zl_metaread.o \
	src/catalog/zl_parent.o \
	src/catalog/zl_record.o \
	src/catalog/zl_relation.o \
	src/write/zl_compact.o \
	src/write/zl_freespace.o \
	src/write/zl_index_hidden.o \
	src/write/zl_index_rows.o \
	src/write/zl_load.o \
	src/write/zl_merge.o \
	src/write/zl_rowcheck.o \
	src/write/zl_place.o \
	src/write/zl_subgroup_write.o \
	src/write/zl_write.o \
	src/lifecycle/zl_erase.o \
	src/lifecycle/zl_reclaim.o \
	src/lifecycle/zl_relocate.o \
	src/lifecycle/zl_index_vacuum.o \
	src/lifecycle/zl_retention.o \
	src/lifecycle/zl_scrub.o \
	src/access/zl_chunkfilter_exec.o \
	src/access/zl_prune.o \
	src/access/zl_scan.o \
	src/access/zl_scan_columnar.o \
	src/access/zl_scan_probe.o \
	src/access/zl_tidfetch.o \
	src/access/zl_index_build.o \
	src/access/zl_tableam.o \
	src/access/zl_triggers.o \
	src/apply/events/zl_events.o \
	src/apply/events/zl_events_apply.o \
	src/apply/events/zl_events_canal.o \
	src/apply/events/zl_events_debezium.o \
	src/apply/events/zl_events_json.o \
	src/apply/events/zl_events_maxwell.o \
	src/apply/events/zl_events_ogg.o \
	src/apply/events/zl_events_values.o \
	src/apply/events/zl_events_wal2json.o \
	src/apply/zl_apply.o \
	src/apply/zl_apply_batch.o \
	src/apply/zl_apply_leaves.o \
	src/apply/zl_apply_remote.o \
	src/apply/zl_apply_workers.o \
	src/apply/zl_apply_pool.o \
	src/apply/zl_apply_resolver.o \
	src/apply/zl_apply_conflict.o \
	src/apply/zl_apply_lookup.o \
	src/apply/zl_apply_record.o \
	src/apply/zl_fold.o \
	src/planner/zl_aggregate.o \
	src/planner/zl_aggregate_distinct.o \
	src/planner/zl_aggregate_group.o \
	src/planner/zl_aggregate_memo.o \
	src/planner/zl_chunkfilter.o \
	src/planner/zl_clauses.o \
	src/planner/zl_customscan.o \
	src/planner/zl_inline.o \
	src/planner/zl_keyprobe.o \
	src/planner/zl_indexpaths.o \
	src/api/zl_copy_history.o \
	src/api/zl_create.o \
	src/api/zl_inspect.o \
	src/api/zl_read.o \
	src/api/zl_register.o \
	src/api/zl_verify.o \
	src/hooks/zl_ddl.o \
	src/hooks/zl_executor.o

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
SHLIB_LINK = -lzstd -llz4 -lpq
PG_CFLAGS = -Wall -Wextra -Werror -Wno-unused-parameter -Wno-missing-field-initializers -Wno-sign-compare

# Header dependencies file by file: gcc lists the headers each object
# includes (-MMD) in a .Po file under .deps/, which the next make reads.
# Makefile.global sets autodepend itself, hence the override.
override autodepend = yes

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)
# libpq-fe.h (shards: src/remote), searched after the server's headers
override CPPFLAGS += -I$(includedir)

# PGXS names each .Po file after the source's base name alone, which two
# folders of src/ may share: name it after the whole path instead (this
# rule replaces the one of Makefile.global)
%.o: %.c
	@mkdir -p $(DEPDIR)
	$(COMPILE.c) -o $@ $< -MMD -MP -MF $(DEPDIR)/$(subst /,_,$*).Po

# the JIT's bitcode of a source is rebuilt with its object, whose header
# dependencies the .Po files track
$(foreach obj,$(OBJS),$(eval $(obj:.o=.bc): $(obj)))

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

# smoke runs of every benchmark (report.py --smoke runs each at its smallest
# size and prints the README table), plus the variants it does not run
bench-smoke:
	dropdb --if-exists zl_bench_smoke >/dev/null && createdb zl_bench_smoke
	PGDATABASE=zl_bench_smoke $(PYTHON) $(srcdir)/test/bench/bench_apply.py --smoke --quiet --late 0.1
	PGDATABASE=zl_bench_smoke $(PYTHON) $(srcdir)/test/bench/bench_read.py --smoke
	PGDATABASE=zl_bench_smoke $(PYTHON) $(srcdir)/test/bench/bench_indexes.py --smoke --quiet --grow keys
	PGDATABASE=zl_bench_smoke PATH="$(shell $(PG_CONFIG) --bindir):$$PATH" \
		$(PYTHON) $(srcdir)/test/bench/report.py --smoke

# The includes of src/ follow its layers (test/check_layers.py), and no
# function is over 150 lines without a reason (test/check_functions.py):
# first each checker's own test on files made to break its rules, then src/.
check-layers:
	$(PYTHON) $(srcdir)/test/check_layers.py --self-test
	$(PYTHON) $(srcdir)/test/check_layers.py $(srcdir)/src
	$(PYTHON) $(srcdir)/test/check_functions.py --self-test
	$(PYTHON) $(srcdir)/test/check_functions.py $(srcdir)/src

# Build the released v0.1 into a private copy of the server installation,
# write tables with it, upgrade to this tree and check (test/upgrade/).
upgrade-check:
	$(srcdir)/test/upgrade/upgrade_check.sh

.PHONY: random-check random-batching-check bench-smoke upgrade-check check-layers
