# zipper_lake — PGXS build
EXTENSION  = zipper_lake
MODULE_big = zipper_lake
OBJS = \
	src/zl_mod.o \
	src/zl_tableam.o \
	src/zl_storage.o \
	src/zl_freespace.o \
	src/zl_metadata.o \
	src/zl_write.o \
	src/zl_scan.o \
	src/zl_time.o \
	src/zl_register.o \
	src/zl_inspect.o \
	src/zl_apply.o \
	src/zl_prune.o \
	src/zl_read.o \
	src/zl_customscan.o \
	src/zl_keys.o \
	src/zl_inline.o \
	src/zl_triggers.o

DATA = $(wildcard sql/install/zipper_lake--*.sql)

REGRESS = $(patsubst sql/%.sql,%,$(sort $(wildcard sql/*.sql)))
REGRESS_OPTS = --inputdir=. --load-extension=zipper_lake

ISOLATION = $(patsubst test/isolation/specs/%.spec,%,$(sort $(wildcard test/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test/isolation --outputdir=test/isolation/output --load-extension=zipper_lake

PG_CPPFLAGS = -I$(srcdir)/src
PG_CFLAGS = -Wall -Wextra -Werror -Wno-unused-parameter -Wno-missing-field-initializers -Wno-sign-compare

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS tracks no header dependencies: every object depends on the one header
$(OBJS): src/zipper_lake.h
