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
 * the windows of file groups and packing (zl_compact.c).
 *
 * File-group windows
 * ------------------
 * A row's run is its partition and its base window: history_group_span
 * (current_group_span in the current partition) aligned as zl_window_of
 * computes.  In the current partition a run is a file group's window.  A
 * history file group's window is one or more consecutive base windows,
 * [window_start, window_end), and those of one partition never overlap;
 * a history row goes to the file group whose window holds its base
 * window.  Before a flush writes, zl_place_plan_windows reads the windows
 * of the file groups of the partitions it writes (once, with the latest
 * snapshot, as every catalog read of a writer), packs (zl_compact.c), and
 * gives the runs no window holds new windows: consecutive such base
 * windows of a partition join one window while it holds fewer than
 * ZL_FILL_ROWS rows and no existing window lies between them.  The flush
 * then writes each window's rows, which come together in placement order
 * (windows are whole, consecutive base windows), as sub-groups of its file
 * group, cut where valid_from goes back (zl_subgroup_write.c).
 *
 * Why: a daily batch ends versions that started over months, all in one
 * partition; one file group per base window gave it ~100 sub-groups of a
 * few hundred rows (columnar chunks of 1,024 rows part-empty, per-sub-group
 * costs in every scan and key lookup), which packing, working within a file
 * group, cannot join.  ZL_FILL_ROWS is 32 columnar chunks: per-sub-group
 * costs (catalog row, key directory, page rounding) are small against it,
 * a window that reached it plus the next base window rarely passes
 * ZL_MAX_SUBGROUP_ROWS (which would leave a small second sub-group), and
 * reads of one day inside a wide window still skip most chunks by their
 * min/max of valid_from.  A catalog of 0.1 (no window_end column until
 * ALTER EXTENSION UPDATE) keeps one base window a file group.
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
#include "utils/snapmgr.h"
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

/* the order of (partition, window start) pairs */
static int
partition_window_cmp(DateADT p1, int64 w1, DateADT p2, int64 w2)
{
	if (p1 != p2)
		return p1 < p2 ? -1 : 1;
	return w1 < w2 ? -1 : (w1 > w2);
}

static int
window_cmp(const void *a, const void *b)
{
	const ZLWindow *x = a;
	const ZLWindow *y = b;

	return partition_window_cmp(x->partition_end, x->start, y->partition_end, y->start);
}

/* how many of the n sorted windows come before (partition_end, start) or at it */
static int
windows_up_to(const ZLWindow *windows, int n, DateADT partition_end, int64 start)
{
	int			lo = 0,
				hi = n;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;
		const ZLWindow *w = &windows[mid];

		if (w->partition_end < partition_end ||
			(w->partition_end == partition_end && w->start <= start))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* the one of the n sorted windows holding a base window of a partition, or NULL */
static const ZLWindow *
find_window(const ZLWindow *windows, int n, DateADT partition_end, int64 base)
{
	int			i = windows_up_to(windows, n, partition_end, base);

	if (i > 0 && windows[i - 1].partition_end == partition_end && base < windows[i - 1].end)
		return &windows[i - 1];
	return NULL;
}

/* the window of a flush's plan holding a base window of a history partition */
const ZLWindow *
zl_place_window(const ZLWriteState *state, DateADT partition_end, int64 base)
{
	const ZLWindow *w = find_window(state->windows, state->nwindows, partition_end, base);

	if (w == NULL)
		elog(ERROR, "zipper_lake has no file-group window planned for a history row");
	return w;
}

/* add a window to state->windows */
static ZLWindow *
add_window(ZLWriteState *state, DateADT partition_end, int64 start, int64 end)
{
	ZLWindow   *w;

	if (state->nwindows == state->maxwindows)
	{
		state->maxwindows = Max(16, state->maxwindows * 2);
		state->windows = state->windows == NULL ?
			palloc(sizeof(ZLWindow) * state->maxwindows) :
			repalloc(state->windows, sizeof(ZLWindow) * state->maxwindows);
	}
	w = &state->windows[state->nwindows++];
	w->partition_end = partition_end;
	w->start = start;
	w->end = end;
	return w;
}

/* the history runs pending, by partition and base window */
static ZLPendingRun *
pending_runs(ZLWriteState *state, int *nruns)
{
	runmap_iterator it;
	RunMapEntry *entry;
	ZLPendingRun *runs = palloc(sizeof(ZLPendingRun) * Max(state->history_runs->members, 1));
	int			n = 0;

	runmap_start_iterate(state->history_runs, &it);
	while ((entry = runmap_iterate(state->history_runs, &it)) != NULL)
	{
		runs[n].partition_end = (DateADT) entry->id.partition;
		runs[n].window_start = entry->id.window;
		runs[n++].rows = entry->rows;
	}
	*nruns = n;
	return runs;
}

static int
pending_partition_cmp(const void *a, const void *b)
{
	const ZLPendingRun *x = a;
	const ZLPendingRun *y = b;

	return partition_window_cmp(x->partition_end, 0, y->partition_end, 0);
}

static int
pending_run_cmp(const void *a, const void *b)
{
	const ZLPendingRun *x = a;
	const ZLPendingRun *y = b;

	return partition_window_cmp(x->partition_end, x->window_start,
								y->partition_end, y->window_start);
}

/*
 * The windows of the file groups of the history partitions the runs
 * write, as the catalog has them (with the writer's latest snapshot, as
 * every catalog read of a writer; CommandCounterIncrement lets it see this
 * transaction's masks and deletions), into state->windows; returns the
 * sub-groups of those partitions, for packing.
 */
static ZLSubGroup *
load_windows(ZLWriteState *state, const ZLPendingRun *runs, int nruns, int *nsgs)
{
	ZLSubGroupFilter filter = {false, DATEVAL_NOEND, DATEVAL_NOBEGIN, PG_INT64_MIN, PG_INT64_MAX, 0};
	Snapshot	snapshot;
	ZLSubGroup *sgs;
	int			kept = 0,
				distinct = 0;

	for (int r = 0; r < nruns; r++)
	{
		filter.min_partition = Min(filter.min_partition, runs[r].partition_end);
		filter.max_partition = Max(filter.max_partition, runs[r].partition_end);
	}
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	sgs = zl_meta_load_filtered_subgroups(state->storage_id, snapshot, &filter, nsgs);
	UnregisterSnapshot(snapshot);

	/* the sub-groups of the runs' partitions (runs are sorted), in creation order */
	for (int i = 0; i < *nsgs; i++)
	{
		ZLPendingRun probe = {sgs[i].partition_end, 0, 0};

		if (sgs[i].placed && sgs[i].partition_end != ZL_CURRENT_PARTITION &&
			bsearch(&probe, runs, nruns, sizeof(ZLPendingRun), pending_partition_cmp) != NULL)
			sgs[kept++] = sgs[i];
	}
	*nsgs = kept;

	/* one window per file group: the sub-groups' windows, sorted, once each */
	for (int i = 0; i < kept; i++)
		(void) add_window(state, sgs[i].partition_end, sgs[i].window_start,
						  zl_subgroup_window_end(&state->opts, &sgs[i]));
	qsort(state->windows, state->nwindows, sizeof(ZLWindow), window_cmp);
	for (int i = 0; i < state->nwindows; i++)
		if (distinct == 0 || window_cmp(&state->windows[distinct - 1], &state->windows[i]) != 0)
			state->windows[distinct++] = state->windows[i];
	state->nwindows = distinct;
	return sgs;
}

/*
 * New file groups for the runs no existing window holds (see "File-group
 * windows"): consecutive such base windows of a partition are taken into
 * one window while it holds fewer than fill rows and no existing window
 * lies in between.
 */
static void
open_windows(ZLWriteState *state, const ZLPendingRun *runs, int nruns, int64 fill)
{
	int			nexisting = state->nwindows;
	int			open_index = -1;	/* the window being filled */
	int64		open_rows = 0;

	for (int r = 0; r < nruns; r++)
	{
		const ZLPendingRun *run = &runs[r];
		int64		end;

		if (find_window(state->windows, nexisting, run->partition_end, run->window_start))
			continue;			/* an existing file group's */
		end = zl_window_end(&state->opts, run->partition_end, run->window_start);
		if (open_index >= 0)
		{
			const ZLWindow *open = &state->windows[open_index];
			int			next = windows_up_to(state->windows, nexisting,
											 open->partition_end, open->start);

			/* full, another partition, or an existing window in between */
			if (open_rows >= fill || open->partition_end != run->partition_end ||
				(next < nexisting && state->windows[next].partition_end == run->partition_end &&
				 state->windows[next].start < end))
				open_index = -1;
		}
		if (open_index >= 0)
		{
			state->windows[open_index].end = end;
			open_rows += run->rows;
			continue;
		}
		(void) add_window(state, run->partition_end, run->window_start, end);
		open_index = state->nwindows - 1;
		open_rows = run->rows;
	}
	qsort(state->windows, state->nwindows, sizeof(ZLWindow), window_cmp);
}

/*
 * Before the rows are placed: the windows of the file groups the history
 * runs go to (see "File-group windows"), and the small sub-groups of those
 * file groups join the runs (zl_compact.c, "Packing small sub-groups").
 */
void
zl_place_plan_windows(ZLWriteState *state, Relation rel)
{
	ZLPendingRun *runs;
	ZLPendingRun *packed;
	int			nruns,
				npacked = 0;
	ZLSubGroup *sgs;
	int			nsgs;

	if (state->history_runs == NULL)
		return;
	runs = pending_runs(state, &nruns);
	qsort(runs, nruns, sizeof(ZLPendingRun), pending_run_cmp);
	sgs = load_windows(state, runs, nruns, &nsgs);

	/*
	 * Packing works per file group: the rows of each existing window.  Not
	 * while the writer has still to mask rows it replaced (apply_changes
	 * until retire_rows: user code in a CHECK constraint may make a flush
	 * happen before), nor for a transaction whose snapshot is older than
	 * the latest: packing copies rows other transactions wrote, or leaves
	 * out rows they masked, which that snapshot must not see change.
	 */
	packed = palloc(sizeof(ZLPendingRun) * Max(nruns, 1));
	for (int r = 0; r < nruns; r++)
	{
		const ZLWindow *w = find_window(state->windows, state->nwindows,
										runs[r].partition_end, runs[r].window_start);

		if (w == NULL)
			continue;			/* a new file group: nothing to pack */
		if (npacked > 0 && packed[npacked - 1].partition_end == w->partition_end &&
			packed[npacked - 1].window_start == w->start)
			packed[npacked - 1].rows += runs[r].rows;
		else
		{
			packed[npacked].partition_end = w->partition_end;
			packed[npacked].window_start = w->start;
			packed[npacked++].rows = runs[r].rows;
		}
	}
	if (npacked > 0 && !IsolationUsesXactSnapshot() && !zl_write_packing_held(state->relid))
	{
		zl_pack_small_subgroups(rel, state, packed, npacked, sgs, nsgs);
		pfree(runs);
		runs = pending_runs(state, &nruns);		/* packing added rows */
		qsort(runs, nruns, sizeof(ZLPendingRun), pending_run_cmp);
	}

	/* a catalog of 0.1 not updated yet keeps one base window a file group */
	open_windows(state, runs, nruns, zl_meta_has_window_end() ? ZL_FILL_ROWS : 0);
	pfree(packed);
	pfree(runs);
	if (sgs)
		pfree(sgs);
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
