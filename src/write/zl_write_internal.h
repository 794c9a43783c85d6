/*-------------------------------------------------------------------------
 *
 * zl_write_internal.h
 *	  What stays inside write/.
 *
 * The files of write/ call one another in a circle, on purpose: a flush
 * (zl_write.c) has loaded rows checked (zl_load.c), the check hands the
 * rows it keeps back to placement (zl_write_place) and compacts the
 * sub-groups it merged rows out of (zl_compact.c), and compaction and
 * packing write the rows they keep through the same write state.  The
 * circle stays inside the folder: the layers above see zl_write.h only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_WRITE_INTERNAL_H
#define ZL_WRITE_INTERNAL_H

#include "common/zl_guc.h"
#include "write/zl_write.h"

#include "utils/tuplestore.h"

/*
 * Memory (kB) of each of the two sorts of pending rows of a flush (loaded
 * rows by key, rows to place; zl_write.c, "Memory"): half of work_mem,
 * 8 MB at least.
 */
#define ZL_MAIN_SORT_KB			Max(work_mem / 2, 8192)

/* ---------- zl_compact.c ---------- */

/* rows a flush is about to write into one (history partition, window) */
typedef struct ZLPendingRun
{
	DateADT		partition_end;
	int64		window_start;
	int64		rows;
} ZLPendingRun;

extern void zl_pack_small_subgroups(Relation rel, ZLWriteState *state,
									const ZLPendingRun *runs, int nruns,
									const ZLSubGroup *sgs, int nsgs);

/* ---------- zl_freespace.c ---------- */

typedef struct ZLFreeSpace ZLFreeSpace;

extern ZLFreeSpace *zl_free_space_begin(Relation rel, uint64 storage_id);
extern BlockNumber zl_free_space_largest(const ZLFreeSpace *fs);
extern BlockNumber zl_free_space_take(ZLFreeSpace *fs, BlockNumber blocks);
extern void zl_free_space_limit(ZLFreeSpace *fs, BlockNumber below);
extern void zl_free_space_end(ZLFreeSpace *fs);

/* ---------- zl_load.c ---------- */

typedef struct ZLLoad ZLLoad;

extern ZLLoad *zl_load_begin(const ZLTableOptions *opts, uint64 storage_id,
							 TupleDesc tupdesc, ZLKeyHasher *hasher, bool may_be_narrow);
extern bool zl_load_add(ZLLoad *load, HeapTuple tuple, int64 valid_from, int64 valid_to);
extern int64 zl_load_taken(const ZLLoad *load);
extern bool zl_load_check(ZLLoad *load, Relation rel, ZLWriteState *writer);
extern void zl_load_end(ZLLoad *load);

/* ---------- the write state (zl_write.c, zl_place.c, zl_subgroup_write.c) ---------- */

/* the keys of a row to place, in sort order (zl_rowsort.c's ZLSortRow) */
#define PLACE_ORDER				0	/* place_order() */
#define PLACE_FROM				1
#define PLACE_PARTITION			2	/* partition_end, or INT64_MIN: unplaced */
#define PLACE_WINDOW			3	/* before valid_from: local time can go back */
#define PLACE_SEQ				4	/* arrival */
#define PLACE_NKEYS				5

/*
 * A run: the partition and window rows are placed in (or unplaced).
 * Placement gives each row its base window; the flush writes a history
 * row into the window of its file group (ZLWindow), which holds it.
 */
typedef struct ZLRunKey
{
	bool		placed;
	DateADT		partition_end;
	int64		window_start;
	int64		window_end;		/* history at flush; else ZL_NO_WINDOW_END */
} ZLRunKey;

/*
 * The window of a history file group: one or more consecutive base windows
 * (zl_place.c, "File-group windows").
 */
typedef struct ZLWindow
{
	DateADT		partition_end;
	int64		start;
	int64		end;
} ZLWindow;

/* the rows a (sub)transaction has pending for a table (zl_write.c) */
struct ZLWriteState
{
	Oid			relid;
	uint64		storage_id;
	SubTransactionId subxid;
	bool		registered;
	bool		current_columnar;	/* VACUUM's rewrite: current runs columnar too */
	bool		numbered;		/* the catalog numbers rows (zl_meta_has_tids) */
	ZLTableOptions opts;
	ZLKeyHasher *hasher;		/* once registered: key directories, checks */
	TupleDesc	tupdesc;		/* a copy of rel_desc */
	TupleDesc	rel_desc;		/* the relcache's descriptor when copied */
	MemoryContext context;		/* the state itself and its options */
	MemoryContext rows_context; /* sorts and flushes; reset by a flush */
	MemoryContext row_context;	/* one row's scratch memory */

	/* sort tuples (for tuplestores), their slots, and buffers for the rows */
	TupleDesc	place_desc;
	TupleTableSlot *place_slot; /* virtual, to put */
	TupleTableSlot *place_read_slot;	/* minimal, to read */
	Datum	   *key_row;		/* row-shaped: key slots filled per row */
	ZLRowPayload payload;		/* the bytea of a row to place */
	ZLRowPayload row_copy;		/* aligned copy of a row read from a tuplestore */

	/* pending rows (in rows_context) */
	ZLLoad	   *load;			/* loaded rows to check (zl_load.c) */
	ZLIntSort  *placesort;		/* rows to place */
	int64		nloaded;
	int64		nplace;
	int64		arrival;

	/* direct placement (zl_place.c, "Direct placement") */
	bool		direct;			/* the rows to place are in runs */
	bool		direct_ended;	/* and left them for the sort */
	struct DirectRun *runs;
	int			nruns;
	int			maxruns;
	struct runmap_hash *run_map;
	int			run_cursor;		/* the run being read (zl_write_placed) */

	/* rows pending per history run, for packing (zl_compact.c) and windows */
	struct runmap_hash *history_runs;

	/* the file-group windows of a flush's history runs, sorted (zl_place.c) */
	ZLWindow   *windows;
	int			nwindows;
	int			maxwindows;

	/* free blocks a flush may take: those below this block (0: any; zl_relocate.c) */
	BlockNumber reuse_below;
	/* and rows a block of columnar runs it cuts to fit them (0: no cutting) */
	double		fit_rows_per_block;
};

/* a run of direct placement (zl_place.c, "Direct placement") */
#define ZL_DIRECT_RUN_KB		64
#define ZL_DIRECT_MAX_RUNS		1024	/* each may spill to a temporary file */

typedef struct DirectRun
{
	int64		order;			/* PLACE_ORDER, PLACE_PARTITION, PLACE_WINDOW */
	int64		partition;
	int64		window;
	Tuplestorestate *rows;		/* placement tuples, as they came */
	int64		last_from;		/* the latest valid_from of its rows */
	bool		unsorted;		/* some row came before an earlier one's start */
	ZLIntSort  *sorted;			/* the rows sorted (sort_direct_run), then read */
} DirectRun;

/* does a run go to a history partition (placed, not the current one)? */
static inline bool
run_in_history(const ZLRunKey *key)
{
	return key->placed && key->partition_end != ZL_CURRENT_PARTITION;
}

/*
 * History runs of a table whose history format is columnar become columnar
 * sub-groups (zl_columnar_write.c).  The current partition's fresh writes
 * stay in rows, which apply writes and replaces all the time; VACUUM's
 * rewrite of the current partition writes it columnar too when its
 * session asks (zipper_lake.columnar_current; zl_retention.c, "A columnar
 * current partition").  Rows loaded before registration
 * stay in rows.
 */
static inline bool
run_is_columnar(const ZLWriteState *state, const ZLRunKey *key)
{
	return key->placed && state->opts.history_format == ZL_FORMAT_COLUMNAR &&
		(key->partition_end != ZL_CURRENT_PARTITION || state->current_columnar);
}

/*
 * The codec of a columnar run's chunks: history as
 * zipper_lake.columnar_compression says (zstd by default), the current
 * partition's columnar base lz4, whatever it says: apply reads open
 * versions back one at a time, decompressing a chunk column for each, and
 * lz4 does that several times faster than zstd (README "Storage formats").
 */
static inline int
run_compression(const ZLRunKey *key)
{
	return key->partition_end == ZL_CURRENT_PARTITION ? ZL_COMPRESSION_LZ4 :
		zipper_lake_columnar_compression;
}

/* a row in messages: its key and period */
static inline char *
describe_row(ZLWriteState *state, HeapTuple tuple)
{
	return zl_describe_version(&state->opts, state->tupdesc, tuple);
}

/* zl_write.c */
extern bool zl_write_packing_held(Oid relid);
extern void zl_write_add(ZLWriteState *state, HeapTuple tuple);
extern void zl_write_add_decoded(ZLWriteState *state, Relation rel, HeapTuple tuple);

/* zl_subgroup_write.c */
extern void zl_write_placed(ZLWriteState *state, Relation rel);

/* zl_place.c */
extern void zl_place_create_desc(ZLWriteState *state);
extern ZLIntSort *zl_place_begin_sort(ZLWriteState *state);
extern void zl_place_run_key(const ZLTableOptions *opts, int64 valid_from, int64 valid_to,
							 ZLRunKey *key);
extern void zl_place_put(ZLWriteState *state, HeapTuple tuple, const ZLRunKey *key,
						 int64 valid_from);
extern void zl_place_put_direct(ZLWriteState *state, HeapTuple tuple, const ZLRunKey *key,
								int64 valid_from);
extern void zl_place_row(ZLWriteState *state, HeapTuple tuple, ZLRunKey *key,
						 int64 *valid_from_out, int64 *valid_to_out);
extern ZLIntSort *zl_place_sort(ZLWriteState *state);
extern void zl_place_move_run_rows(DirectRun *run, ZLIntSort *sort, TupleTableSlot *slot);
extern void zl_place_leave_direct(ZLWriteState *state);
extern void zl_place_plan_windows(ZLWriteState *state, Relation rel);
extern const ZLWindow *zl_place_window(const ZLWriteState *state, DateADT partition_end,
									   int64 base);
extern int	zl_place_direct_run_cmp(const void *a, const void *b);

#endif							/* ZL_WRITE_INTERNAL_H */
