/*-------------------------------------------------------------------------
 *
 * zl_place.c
 *	  Placement: where each row a writer hands over goes.
 *
 * Every row handed to a write state (zl_write.c: zl_write_add,
 * zl_write_place, zl_write_load) is checked against the rules of a version
 * where that is needed, given its run -- the partition of its valid_to and the window
 * of its valid_from -- and goes into the sort of rows to place, keyed so
 * that the flush reads it run by run in (partition, window, valid_from)
 * order (place_order).  Rows of history runs are counted per run, for
 * packing (zl_compact.c).
 *
 * Direct placement
 * ----------------
 * A narrow load (zl_load.c) hands each run -- a
 * partition and window -- its rows as they come: each run keeps them in a
 * tuplestore of its own, and the flush reads the runs in placement order.
 * A run whose rows came in start order (INSERT ... SELECT ... ORDER BY
 * valid_from) needs no sort; one whose rows did not is sorted alone when
 * the flush comes to it (sort_direct_run: in memory while it fits half of
 * work_mem), which costs much less than one sort of all the load's rows
 * (a 1M-row load in random start order spilled that sort to disk, and its
 * comparisons went through heap_getattr for every tie of the run).  More
 * runs than half of work_mem gives ZL_DIRECT_RUN_KB each (or than
 * ZL_DIRECT_MAX_RUNS), or a load that needs the full check, moves what the
 * runs hold into the sort.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write_internal.h"

#include "access/heaptoast.h"
#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/tuplestore.h"

typedef struct RunId
{
	int64		partition;
	int64		window;
} RunId;

typedef struct RunMapEntry
{
	RunId		id;
	int			index;			/* run_map: into runs */
	int64		rows;			/* history_runs: rows pending */
	char		status;
} RunMapEntry;

#define SH_PREFIX runmap
#define SH_ELEMENT_TYPE RunMapEntry
#define SH_KEY_TYPE RunId
#define SH_KEY id
#define SH_HASH_KEY(tb, key) hash_bytes((const unsigned char *) &(key), sizeof(RunId))
#define SH_EQUAL(tb, a, b) ((a).partition == (b).partition && (a).window == (b).window)
#define SH_SCOPE static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

/* the placement tuple: (order, valid_from, partition, window, arrival, row) */
void
zl_place_create_desc(ZLWriteState *state)
{
	TupleDesc	desc = CreateTemplateTupleDesc(PLACE_NKEYS + 1);

	TupleDescInitEntry(desc, PLACE_ORDER + 1, "place_order", INT8OID, -1, 0);
	TupleDescInitEntry(desc, PLACE_FROM + 1, "valid_from", INT8OID, -1, 0);
	TupleDescInitEntry(desc, PLACE_PARTITION + 1, "partition_end", INT8OID, -1, 0);
	TupleDescInitEntry(desc, PLACE_WINDOW + 1, "window_start", INT8OID, -1, 0);
	TupleDescInitEntry(desc, PLACE_SEQ + 1, "arrival", INT8OID, -1, 0);
	TupleDescInitEntry(desc, PLACE_NKEYS + 1, "row", BYTEAOID, -1, 0);
	state->place_desc = desc;
	zl_rowsort_slots(desc, &state->place_slot, &state->place_read_slot);
}

/* rows to place by (order, valid_from, partition, window, arrival): see place_order() */
ZLIntSort *
zl_place_begin_sort(ZLWriteState *state)
{
	return zl_intsort_begin(state->place_desc, PLACE_NKEYS, ZL_MAIN_SORT_KB, true);
}

/* where a version valid from valid_from to valid_to is placed */
void
zl_place_run_key(const ZLTableOptions *opts, int64 valid_from, int64 valid_to, ZLRunKey *key)
{
	key->placed = true;
	key->partition_end = zl_partition_of(opts, valid_to);
	key->window_start = zl_window_of(opts, key->partition_end, valid_from);
}

/*
 * Check a row against the rules of a version (README, "Change semantics":
 * a complete key, a finite valid_from before valid_to, valid_to at most the
 * open end) and compute its placement.
 */
void
zl_place_row(ZLWriteState *state, HeapTuple tuple, ZLRunKey *key,
		  int64 *valid_from_out, int64 *valid_to_out)
{
	const ZLTableOptions *opts = &state->opts;
	TupleDesc	tupdesc = state->tupdesc;
	bool		from_null,
				to_null;
	Datum		from_datum,
				to_datum;
	int64		valid_from,
				valid_to;

	for (int i = 0; i < opts->nkeys; i++)
	{
		bool		isnull;

		(void) heap_getattr(tuple, opts->key_attnums[i], tupdesc, &isnull);
		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("null value in key column \"%s\" of zipper table \"%s\"",
							zl_attname(tupdesc, opts->key_attnums[i]),
							get_rel_name(state->relid)),
					 errdetail("Failing row has %s.", describe_row(state, tuple)),
					 errhint("Every version of a zipper table needs a complete key.")));
	}

	from_datum = heap_getattr(tuple, opts->from_attnum, tupdesc, &from_null);
	to_datum = heap_getattr(tuple, opts->to_attnum, tupdesc, &to_null);
	if (from_null || to_null)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("null value in period column \"%s\" of zipper table \"%s\"",
						zl_attname(tupdesc, from_null ? opts->from_attnum : opts->to_attnum),
						get_rel_name(state->relid)),
				 errdetail("Failing row has %s.", describe_row(state, tuple)),
				 errhint("Open versions use the table's open end as valid_to.")));

	valid_from = zl_datum_to_instant(from_datum, opts->period_type);
	valid_to = zl_datum_to_instant(to_datum, opts->period_type);
	if (!zl_instant_is_finite(valid_from) || valid_from >= valid_to ||
		valid_to > opts->open_end)
	{
		const char *problem = !zl_instant_is_finite(valid_from) ?
			"infinite valid_from" :
			valid_from >= valid_to ? "empty validity period" :
			"valid_to after the open end";

		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("%s in zipper table \"%s\"", problem,
						get_rel_name(state->relid)),
				 errdetail("Failing row has %s; the open end is %s.",
						   describe_row(state, tuple),
						   zl_instant_to_cstring(opts->open_end, opts->period_type)),
				 errhint("A version needs a finite valid_from before its valid_to, and valid_to at most the open end.")));
	}

	zl_place_run_key(opts, valid_from, valid_to, key);
	*valid_from_out = valid_from;
	*valid_to_out = valid_to;
}

/*
 * Rows are placed in (partition, window, valid_from) order.  Windows are
 * not always consecutive ranges of valid_from (local time goes back at
 * the end of summer time, or by a day in Sitka in 1867), so the window is
 * a sort key of its own.  This summary of partition and window — 24 bits
 * of partition, 40 of window start in units of 2^14 microseconds, both
 * clamped — keeps their order and tells runs apart; valid_from comes next,
 * so that two rows of one run (most comparisons) are compared on the
 * second key, not the fifth.  Only runs whose summaries collide (window
 * starts within 16 ms of each other, or clamped: before about 1715 or
 * after about 2285) would come interleaved by valid_from: each piece is then written
 * as a sub-group of its own, still placed by its own partition and
 * window (zl_write_placed reads the run of every row).
 */
static int64
place_order(DateADT partition_end, int64 window_start)
{
	int64		partition = partition_end == ZL_CURRENT_PARTITION ? (1 << 23) - 1 :
		Max(-(1 << 23), Min((int64) partition_end, (1 << 23) - 2));
	int64		from = Max(-((int64) 1 << 39), Min(window_start >> 14, ((int64) 1 << 39) - 1));
	uint64		order = ((uint64) (partition + (1 << 23)) << 40) |
		(uint64) (from + ((int64) 1 << 39));

	return (int64) (order ^ ((uint64) 1 << 63));	/* unsigned order as signed */
}

/* the sort of rows to place, begun when first needed */
ZLIntSort *
zl_place_sort(ZLWriteState *state)
{
	if (state->placesort == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(state->rows_context);

		state->placesort = zl_place_begin_sort(state);
		MemoryContextSwitchTo(old);
	}
	return state->placesort;
}

/*
 * A run's rows move from its tuplestore into sort (through slot); the
 * caller has the top transaction's resource owner current, which the
 * sort's files belong to.
 */
void
zl_place_move_run_rows(DirectRun *run, ZLIntSort *sort, TupleTableSlot *slot)
{
	while (tuplestore_gettupleslot(run->rows, true, false, slot))
		zl_intsort_put_slot(sort, slot);
	tuplestore_end(run->rows);
	run->rows = NULL;
}

/* the runs' rows go to the sort (see "Direct placement") */
void
zl_place_leave_direct(ZLWriteState *state)
{
	ResourceOwner save = CurrentResourceOwner;

	state->direct = false;
	state->direct_ended = true;
	CurrentResourceOwner = TopTransactionResourceOwner;
	for (int i = 0; i < state->nruns; i++)
		zl_place_move_run_rows(&state->runs[i], zl_place_sort(state), state->place_read_slot);
	CurrentResourceOwner = save;
	state->nruns = 0;
}

/* count a row pending for a run of a history partition */
static void
count_history_row(ZLWriteState *state, const ZLRunKey *key)
{
	RunId		id = {(int64) key->partition_end, key->window_start};
	RunMapEntry *entry;
	bool		found;

	if (!run_in_history(key))
		return;
	if (state->history_runs == NULL)
		state->history_runs = runmap_create(state->rows_context, 64, NULL);
	entry = runmap_insert(state->history_runs, id, &found);
	if (!found)
		entry->rows = 0;
	entry->rows++;
}

/*
 * Before the rows are placed: the small sub-groups of the history runs'
 * file groups join them (zl_compact.c, "Packing small sub-groups").
 */
void
zl_place_pack_history_runs(ZLWriteState *state, Relation rel)
{
	runmap_iterator it;
	RunMapEntry *entry;
	ZLPendingRun *runs;
	int			nruns = 0;

	/*
	 * Not while the writer has still to mask rows it replaced (apply_changes
	 * until retire_rows: user code in a CHECK constraint may make a flush
	 * happen before), nor for a transaction whose snapshot is older than the
	 * latest: packing copies rows other transactions wrote, or leaves out
	 * rows they masked, which that snapshot must not see change.
	 */
	if (state->history_runs == NULL || IsolationUsesXactSnapshot() ||
		zl_write_packing_held(state->relid))
		return;
	runs = palloc(sizeof(ZLPendingRun) * state->history_runs->members);
	runmap_start_iterate(state->history_runs, &it);
	while ((entry = runmap_iterate(state->history_runs, &it)) != NULL)
	{
		runs[nruns].partition_end = (DateADT) entry->id.partition;
		runs[nruns].window_start = entry->id.window;
		runs[nruns++].rows = entry->rows;
	}
	zl_pack_small_subgroups(rel, state, runs, nruns);
	pfree(runs);
}

/* the sort keys of a row to place, counted for its history run */
static void
place_keys(ZLWriteState *state, const ZLRunKey *key, int64 valid_from, int64 *keys)
{
	count_history_row(state, key);
	keys[PLACE_ORDER] = key->placed ? place_order(key->partition_end, key->window_start) :
		PG_INT64_MIN;
	keys[PLACE_FROM] = valid_from;
	keys[PLACE_PARTITION] = key->placed ? (int64) key->partition_end : PG_INT64_MIN;
	keys[PLACE_WINDOW] = key->window_start;
	keys[PLACE_SEQ] = state->arrival++;
}

/* hand a row to placement */
void
zl_place_put(ZLWriteState *state, HeapTuple tuple, const ZLRunKey *key, int64 valid_from)
{
	int64		keys[PLACE_NKEYS];

	if (state->direct)
		zl_place_leave_direct(state);
	place_keys(state, key, valid_from, keys);
	zl_intsort_put(zl_place_sort(state), keys, tuple);
	state->nplace++;
}

/* the run of a key, added if new; NULL if there would be too many */
static DirectRun *
direct_run(ZLWriteState *state, const ZLRunKey *key)
{
	RunId		id = {key->placed ? (int64) key->partition_end : PG_INT64_MIN, key->window_start};
	RunMapEntry *entry;
	bool		found;
	MemoryContext old;
	DirectRun  *run;

	if (state->run_map == NULL)
		state->run_map = runmap_create(state->rows_context, 64, NULL);
	entry = runmap_lookup(state->run_map, id);
	if (entry != NULL)
		return &state->runs[entry->index];
	if (state->nruns >= Min(ZL_DIRECT_MAX_RUNS, Max(16, work_mem / 2 / ZL_DIRECT_RUN_KB)))
		return NULL;
	old = MemoryContextSwitchTo(state->rows_context);
	if (state->nruns == state->maxruns)
	{
		state->maxruns = Max(16, state->maxruns * 2);
		state->runs = state->runs == NULL ? palloc(sizeof(DirectRun) * state->maxruns) :
			repalloc(state->runs, sizeof(DirectRun) * state->maxruns);
	}
	run = &state->runs[state->nruns];
	run->order = key->placed ? place_order(key->partition_end, key->window_start) : PG_INT64_MIN;
	run->partition = id.partition;
	run->window = id.window;
	{
		ResourceOwner save = CurrentResourceOwner;

		/* a tuplestore's file belongs to the owner it was begun under */
		CurrentResourceOwner = TopTransactionResourceOwner;
		run->rows = tuplestore_begin_heap(false, false, ZL_DIRECT_RUN_KB);
		CurrentResourceOwner = save;
	}
	run->last_from = PG_INT64_MIN;
	run->unsorted = false;
	run->sorted = NULL;
	entry = runmap_insert(state->run_map, id, &found);
	entry->index = state->nruns++;
	MemoryContextSwitchTo(old);
	return run;
}

/*
 * Hand a row a narrow load took to placement: straight to its run (see
 * "Direct placement") while there are not too many, else to the sort.
 */
void
zl_place_put_direct(ZLWriteState *state, HeapTuple tuple, const ZLRunKey *key, int64 valid_from)
{
	DirectRun  *run;
	ResourceOwner save;
	int64		keys[PLACE_NKEYS];

	if (!state->direct && !state->direct_ended && state->nplace == 0)
		state->direct = true;
	if (!state->direct || (run = direct_run(state, key)) == NULL)
	{
		zl_place_put(state, tuple, key, valid_from);
		return;
	}
	if (valid_from < run->last_from)
		run->unsorted = true;
	else
		run->last_from = valid_from;
	save = CurrentResourceOwner;
	CurrentResourceOwner = TopTransactionResourceOwner;	/* files for the flush */
	place_keys(state, key, valid_from, keys);
	tuplestore_puttupleslot(run->rows, zl_sortrow_to_slot(keys, PLACE_NKEYS, tuple,
														  state->place_slot, &state->payload));
	CurrentResourceOwner = save;
	state->nplace++;
}

int
zl_place_direct_run_cmp(const void *a, const void *b)
{
	const DirectRun *x = a;
	const DirectRun *y = b;

	if (x->order != y->order)
		return x->order < y->order ? -1 : 1;
	if (x->partition != y->partition)
		return x->partition < y->partition ? -1 : 1;
	return x->window < y->window ? -1 : (x->window > y->window);
}
