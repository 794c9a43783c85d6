/*-------------------------------------------------------------------------
 *
 * zl_write_internal.h
 *	  What stays inside write/.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_WRITE_INTERNAL_H
#define ZL_WRITE_INTERNAL_H

#include "write/zl_write.h"

/*
 * Memory (kB) of each of the two sorts of pending rows of a flush (loaded
 * rows by key, rows to place; zl_write.c, "Memory"): half of work_mem,
 * 8 MB at least.
 */
#define ZL_MAIN_SORT_KB			Max(work_mem / 2, 8192)

/* ---------- zl_write.c ---------- */

extern void zl_write_add(ZLWriteState *state, HeapTuple tuple);
extern void zl_write_add_decoded(ZLWriteState *state, Relation rel, HeapTuple tuple);
extern char zl_write_state_history_format(const ZLWriteState *state);

/* ---------- zl_compact.c ---------- */

/* rows a flush is about to write into one (history partition, window) */
typedef struct ZLPendingRun
{
	DateADT		partition_end;
	int64		window_start;
	int64		rows;
} ZLPendingRun;

extern void zl_pack_small_subgroups(Relation rel, ZLWriteState *state,
									const ZLPendingRun *runs, int nruns);

/* ---------- zl_freespace.c ---------- */

typedef struct ZLFreeSpace ZLFreeSpace;

extern ZLFreeSpace *zl_free_space_begin(Relation rel, uint64 storage_id);
extern BlockNumber zl_free_space_largest(const ZLFreeSpace *fs);
extern BlockNumber zl_free_space_take(ZLFreeSpace *fs, BlockNumber blocks);
extern void zl_free_space_end(ZLFreeSpace *fs);

/* ---------- zl_load.c ---------- */

typedef struct ZLLoad ZLLoad;

extern ZLLoad *zl_load_begin(const ZLTableOptions *opts, uint64 storage_id,
							 TupleDesc tupdesc, ZLKeyHasher *hasher, bool may_be_narrow);
extern bool zl_load_add(ZLLoad *load, HeapTuple tuple, int64 valid_from, int64 valid_to);
extern int64 zl_load_taken(const ZLLoad *load);
extern bool zl_load_check(ZLLoad *load, Relation rel, ZLWriteState *writer);
extern void zl_load_end(ZLLoad *load);

#endif							/* ZL_WRITE_INTERNAL_H */
