/*-------------------------------------------------------------------------
 *
 * zl_write.c
 *	  The write state of a table, placement of rows, the sub-group writer.
 *
 * Every writer hands finished rows to the write state of its table, and a
 * flush writes them.  Rows come in two kinds:
 *
 *  - Versions that are right by construction: those apply_changes
 *    computed (zl_write_place, with their period) and the rows compaction
 *    keeps (zl_write_add, zl_compact.c).  They go straight to placement.
 *  - Versions loaded as given: rows of INSERT and COPY, and rows loaded
 *    before the table was registered, when registration places them
 *    (zl_write_load).  They are checked before they are placed, against
 *    each other and against the stored versions of their keys (zl_load.c):
 *    the state collects them in a load, and a flush has them checked
 *    first; the check hands what they leave to placement (zl_write_place).
 *
 * Placement and the sub-group writer
 * ----------------------------------
 * Rows to place go into a sort (zl_rowsort.c's ZLIntSort: each row with
 * its integer keys in an array while they fit, a tuplesort beyond) by
 * (placed, partition of valid_to, window of valid_from, valid_from,
 * arrival), summarized first: see place_order().  The sorted stream
 * is cut into runs of one (partition, window) and each run into
 * sub-groups: consecutive pages (zl_storage.c) — into the blocks of a
 * deleted sub-group if a free extent holds them (zl_freespace.c), else at
 * the end of the file — then one metadata row (zl_metadata.c) that makes
 * them visible at commit.  A run longer than ZL_MAX_SUBGROUP_ROWS becomes
 * several sub-groups.  In the current partition each sub-group joins the
 * newest file group of its window, unless that one already holds
 * max_subgroups sub-groups (rollover).  Every placed sub-group stores the
 * key directory of its rows (zl_keys.c).  Where free extents exist, the rows of a sub-group are buffered
 * (a tuplestore) while their page count decides where they go.
 *
 * Rows of a table that is not registered yet (pg_restore may load data
 * before the registration row) cannot be placed: they are written as
 * "unplaced" sub-groups, and registering the table reads them back as
 * loaded rows, checks and places them (zl_write_place_unplaced).
 *
 * Memory
 * ------
 * A flush needs about work_mem plus 25 MB at most, whatever it writes.
 * The two tuplesorts of pending rows, loaded rows by key (zl_load.c) and
 * rows to place, get half of work_mem each (ZL_MAIN_SORT_KB), 8 MB at
 * least, and spill to temporary files beyond that.  The check of loaded
 * rows takes 7 MB more at most (zl_load.c, "Memory"); a narrow load's
 * runs in direct placement take the place of the sort of rows to place
 * (64 kB each until they spill, and an 8 kB file buffer then, as many
 * as fit half of work_mem, 16 at least; "Direct placement"), and a run
 * sorted alone gets the sort's share when the flush writes it.  The writer's
 * sub-group buffer gets ZL_SIDE_KB (1 MB) and spills too; a sub-group
 * being written takes 20 bytes a row for its lengths, hashes, positions
 * and key directory (1.3 MB at ZL_MAX_SUBGROUP_ROWS).
 *
 * When flushes happen
 * -------------------
 * INSERT flushes at the end of the statement (ExecutorFinish hook in
 * zl_mod.c; not at the end of zipper_lake's own catalog statements, so a
 * flush never runs between a writer's catalog changes: packing,
 * zl_compact.c, reads what the writer masked), COPY at finish_bulk_insert,
 * apply_changes, erase and compaction when they are done, and any scan of
 * the table first flushes its pending rows so a transaction reads its own
 * writes.  Before it places history rows, a flush packs the small
 * sub-groups of their windows into them (zl_compact.c).
 * Pre-commit flushes whatever is left.  apply_changes and registration
 * flush before they add rows, so a flush never mixes loaded rows with
 * rows that would need no check.
 *
 * A state belongs to the subtransaction that created it: flushes write
 * only the current subtransaction's states, a subtransaction abort drops
 * its states and a subtransaction commit hands them to the parent.  Rows
 * are therefore never written in a subtransaction that might roll back
 * without them, nor lost with one that did.  The temporary files of a
 * state's sorts belong to the top transaction's resource owner, because
 * pending rows may outlive the statement that added them (zl_rowsort.c);
 * dropping a state ends its sorts.
 *
 * Writers of one table are serialized by a transaction-level advisory
 * lock on its storage id; readers take no lock of ours and never wait.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write_internal.h"

#include "access/heapam.h"
#include "access/heaptoast.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/tupdesc.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/bufpage.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/tuplesort.h"
#include "utils/tuplestore.h"

/* the keys of a row to place, in sort order (zl_rowsort.c's ZLSortRow) */
#define PLACE_ORDER				0	/* place_order() */
#define PLACE_FROM				1
#define PLACE_PARTITION			2	/* partition_end, or INT64_MIN: unplaced */
#define PLACE_WINDOW			3	/* before valid_from: local time can go back */
#define PLACE_SEQ				4	/* arrival */
#define PLACE_NKEYS				5

typedef struct ZLRunKey
{
	bool		placed;
	DateADT		partition_end;
	int64		window_start;
} ZLRunKey;

struct ZLWriteState
{
	Oid			relid;
	uint64		storage_id;
	SubTransactionId subxid;
	bool		registered;
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

	/* direct placement ("Direct placement" below) */
	bool		direct;			/* the rows to place are in runs */
	bool		direct_ended;	/* and left them for the sort */
	struct DirectRun *runs;
	int			nruns;
	int			maxruns;
	struct runmap_hash *run_map;
	int			run_cursor;		/* the run being read (write_placed) */

	/* rows pending per history run, for packing (zl_compact.c) */
	struct runmap_hash *history_runs;
};

/*
 * Direct placement.  A narrow load (zl_load.c) hands each run -- a
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
 */
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

/* write states of the current transaction, in TopTransactionContext */
static List *write_states = NIL;

/* tables whose packing a writer holds (zl_write_hold_packing), in TopMemoryContext */
static List *packing_holds = NIL;

/* metadata statements of a flush must not flush again (ExecutorFinish hook) */
static bool flush_in_progress = false;

/* ---------- sort tuples ---------- */

/* the placement tuple: (order, valid_from, partition, window, arrival, row) */
static void
create_place_desc(ZLWriteState *state)
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
static ZLIntSort *
begin_place_sort(ZLWriteState *state)
{
	return zl_intsort_begin(state->place_desc, PLACE_NKEYS, ZL_MAIN_SORT_KB, true);
}

/* ---------- states ---------- */

/* the table's options and key hasher, if it is registered yet */
static void
load_registration(ZLWriteState *state, Relation rel)
{
	state->registered = zl_meta_load_options(rel, &state->opts, true);
	if (state->registered)
		state->hasher = zl_key_hasher_create(state->tupdesc, &state->opts);
}

static void
reset_pending(ZLWriteState *state)
{
	state->load = NULL;
	state->placesort = NULL;
	state->nloaded = 0;
	state->nplace = 0;
	state->arrival = 0;
	state->direct = false;
	state->direct_ended = false;
	state->runs = NULL;
	state->nruns = state->maxruns = 0;
	state->run_map = NULL;
	state->run_cursor = 0;
	state->history_runs = NULL;
}

/* end the sorts of the pending rows (closing their files) and forget them */
static void
forget_pending(ZLWriteState *state)
{
	if (state->load)
		zl_load_end(state->load);
	if (state->placesort)
		zl_intsort_end(state->placesort);
	for (int i = 0; i < state->nruns; i++)
	{
		if (state->runs[i].rows)
			tuplestore_end(state->runs[i].rows);
		if (state->runs[i].sorted)
			zl_intsort_end(state->runs[i].sorted);
	}
	MemoryContextReset(state->rows_context);
	reset_pending(state);
}

static bool
state_has_rows(ZLWriteState *state)
{
	return state->nloaded > 0 || state->nplace > 0;
}

ZLWriteState *
zl_write_state_get(Relation rel)
{
	SubTransactionId subxid = GetCurrentSubTransactionId();
	uint64		storage_id = zl_storage_id(rel);
	ListCell   *lc;
	ZLWriteState *state;
	MemoryContext old;

	foreach(lc, write_states)
	{
		state = lfirst(lc);
		if (state->relid == RelationGetRelid(rel) && state->subxid == subxid &&
			state->storage_id == storage_id)
		{
			/*
			 * ALTER TABLE ... ADD COLUMN since the last statement: rows come
			 * in the new shape now, and loads compare and rebuild them so.
			 */
			if (state->rel_desc != RelationGetDescr(rel))
			{
				zl_write_flush_relation(state->relid);	/* rows of the old shape */
				old = MemoryContextSwitchTo(state->context);
				state->tupdesc = CreateTupleDescCopyConstr(RelationGetDescr(rel));	/* see below */
				state->rel_desc = RelationGetDescr(rel);
				state->key_row = palloc0(sizeof(Datum) * state->tupdesc->natts);
				MemoryContextSwitchTo(old);
			}
			/* the table may have been registered since (pg_restore does) */
			if (!state->registered)
			{
				old = MemoryContextSwitchTo(state->context);
				load_registration(state, rel);
				MemoryContextSwitchTo(old);
			}
			return state;
		}
	}

	(void) zl_write_lock_table(storage_id, false);

	old = MemoryContextSwitchTo(TopTransactionContext);
	state = palloc0(sizeof(ZLWriteState));
	state->relid = RelationGetRelid(rel);
	state->storage_id = storage_id;
	state->subxid = subxid;
	state->context = AllocSetContextCreate(TopTransactionContext,
										   "zipper_lake write state",
										   ALLOCSET_DEFAULT_SIZES);
	state->rows_context = AllocSetContextCreate(state->context,
												"zipper_lake pending rows",
												ALLOCSET_DEFAULT_SIZES);
	state->row_context = AllocSetContextCreate(state->context,
											   "zipper_lake row",
											   ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(state->context);

	/*
	 * With its constraints: rows stored before ADD COLUMN ... DEFAULT read
	 * the default only through them, and generated columns are marked there.
	 */
	state->tupdesc = CreateTupleDescCopyConstr(RelationGetDescr(rel));
	state->rel_desc = RelationGetDescr(rel);
	state->key_row = palloc0(sizeof(Datum) * state->tupdesc->natts);
	state->payload.context = state->context;
	state->row_copy.context = state->context;
	create_place_desc(state);
	load_registration(state, rel);
	reset_pending(state);
	MemoryContextSwitchTo(TopTransactionContext);
	write_states = lappend(write_states, state);
	MemoryContextSwitchTo(old);
	return state;
}

static char *
describe_row(ZLWriteState *state, HeapTuple tuple)
{
	return zl_describe_version(&state->opts, state->tupdesc, tuple);
}

/* does a run go to a history partition (placed, not the current one)? */
static inline bool
run_in_history(const ZLRunKey *key)
{
	return key->placed && key->partition_end != ZL_CURRENT_PARTITION;
}

/* where a version valid from valid_from to valid_to is placed */
static void
run_key_of(const ZLTableOptions *opts, int64 valid_from, int64 valid_to, ZLRunKey *key)
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
static void
place_row(ZLWriteState *state, HeapTuple tuple, ZLRunKey *key,
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

	run_key_of(opts, valid_from, valid_to, key);
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
 * window (write_placed reads the run of every row).
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
static ZLIntSort *
place_sort(ZLWriteState *state)
{
	if (state->placesort == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(state->rows_context);

		state->placesort = begin_place_sort(state);
		MemoryContextSwitchTo(old);
	}
	return state->placesort;
}

/*
 * A run's rows move from its tuplestore into sort (through slot); the
 * caller has the top transaction's resource owner current, which the
 * sort's files belong to.
 */
static void
move_run_rows(DirectRun *run, ZLIntSort *sort, TupleTableSlot *slot)
{
	while (tuplestore_gettupleslot(run->rows, true, false, slot))
		zl_intsort_put_slot(sort, slot);
	tuplestore_end(run->rows);
	run->rows = NULL;
}

/* the runs' rows go to the sort (see "Direct placement") */
static void
leave_direct(ZLWriteState *state)
{
	ResourceOwner save = CurrentResourceOwner;

	state->direct = false;
	state->direct_ended = true;
	CurrentResourceOwner = TopTransactionResourceOwner;
	for (int i = 0; i < state->nruns; i++)
		move_run_rows(&state->runs[i], place_sort(state), state->place_read_slot);
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
static void
pack_history_runs(ZLWriteState *state, Relation rel)
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
		list_member_oid(packing_holds, state->relid))
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
static void
put_place(ZLWriteState *state, HeapTuple tuple, const ZLRunKey *key, int64 valid_from)
{
	int64		keys[PLACE_NKEYS];

	if (state->direct)
		leave_direct(state);
	place_keys(state, key, valid_from, keys);
	zl_intsort_put(place_sort(state), keys, tuple);
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
static void
put_direct(ZLWriteState *state, HeapTuple tuple, const ZLRunKey *key, int64 valid_from)
{
	DirectRun  *run;
	ResourceOwner save;
	int64		keys[PLACE_NKEYS];

	if (!state->direct && !state->direct_ended && state->nplace == 0)
		state->direct = true;
	if (!state->direct || (run = direct_run(state, key)) == NULL)
	{
		put_place(state, tuple, key, valid_from);
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

static int
direct_run_cmp(const void *a, const void *b)
{
	const DirectRun *x = a;
	const DirectRun *y = b;

	if (x->order != y->order)
		return x->order < y->order ? -1 : 1;
	if (x->partition != y->partition)
		return x->partition < y->partition ? -1 : 1;
	return x->window < y->window ? -1 : (x->window > y->window);
}

static bool run_is_columnar(const ZLWriteState *state, const ZLRunKey *key);

/*
 * Toast a version of rel whose row is too wide, keeping the values it
 * already holds in rel's TOAST relation: a version made from a stored one
 * shares its values (README "Features and how they work", "Storage").  PostgreSQL's toaster takes
 * an on-disk value of a new row for someone else's and stores it again,
 * unless the old row of an update holds the same pointer; so the pointers
 * are handed to it as such an old row (and, being the new row's too, none
 * is deleted).  Only for values of rel itself: rows arriving from outside
 * (INSERT, COPY) are toasted as given.
 */
HeapTuple
zl_toast_version(Relation rel, HeapTuple tuple)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Datum	   *values;
	bool	   *isnull;
	HeapTuple	shared;
	HeapTuple	toasted;

	if (!HeapTupleHasExternal(tuple))
		return heap_toast_insert_or_update(rel, tuple, NULL, 0);
	values = palloc(sizeof(Datum) * desc->natts);
	isnull = palloc(sizeof(bool) * desc->natts);
	heap_deform_tuple(tuple, desc, values, isnull);
	for (int i = 0; i < desc->natts; i++)
		if (TupleDescAttr(desc, i)->attlen != -1 || isnull[i] ||
			!VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(values[i])))
			isnull[i] = true;
	shared = heap_form_tuple(desc, values, isnull);
	toasted = heap_toast_insert_or_update(rel, tuple, shared, 0);
	heap_freetuple(shared);
	pfree(values);
	pfree(isnull);
	return toasted;
}

/*
 * Hand placement a row that needs no check; with rel, a decoded columnar
 * row written again (see zl_write_add_decoded).
 */
static void
add_row(ZLWriteState *state, Relation rel, HeapTuple tuple)
{
	ZLRunKey	key;
	int64		valid_from = 0;
	int64		valid_to;

	memset(&key, 0, sizeof(key));
	if (state->registered)
		place_row(state, tuple, &key, &valid_from, &valid_to);
	if (rel != NULL && tuple->t_len > TOAST_TUPLE_THRESHOLD && !run_is_columnar(state, &key))
		tuple = zl_toast_version(rel, tuple);
	put_place(state, tuple, &key, valid_from);
}

/*
 * Add one finished (already toasted) row that needs no check: a row
 * compaction keeps, or a row of a table not registered yet (checked when
 * registration places it).
 */
void
zl_write_add(ZLWriteState *state, HeapTuple tuple)
{
	add_row(state, NULL, tuple);
}

/*
 * Add a row read from a columnar sub-group, written again (compaction,
 * packing, erase).  It holds its values inline, so where it goes into rows
 * (a table switched to history in rows, set_history_format) a wide one is
 * toasted first, as apply's versions are.  (Rows of row sub-groups keep
 * their TOAST pointers and go through zl_write_add: toasting them again
 * would copy their values and leave the old copies to nobody.)
 */
void
zl_write_add_decoded(ZLWriteState *state, Relation rel, HeapTuple tuple)
{
	add_row(state, rel, tuple);
}

/* the format history runs are written in (ZL_FORMAT_ROWS or ZL_FORMAT_COLUMNAR) */
char
zl_write_state_history_format(const ZLWriteState *state)
{
	return state->opts.history_format;
}

/*
 * Hold packing (zl_compact.c) of a table while a writer has stored rows to
 * retire that it has not masked yet; release it before the writer's last
 * flush.  Held per table, not per write state: user code the writer runs
 * (a CHECK constraint) may write the table in a subtransaction of its own,
 * whose state must not pack either.  Holds end with the transaction.
 */
void
zl_write_hold_packing(Oid relid, bool hold)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	if (hold)
		packing_holds = lappend_oid(packing_holds, relid);
	else
		packing_holds = list_delete_oid(packing_holds, relid);
	MemoryContextSwitchTo(old);
}

/*
 * Hand placement a row whose period [valid_from, valid_to) is known and
 * checked: a version apply_changes computed (complete key, finite
 * valid_from before valid_to, at most the open end: zl_apply.c checks
 * every change), or one a load check leaves (zl_load.c).
 */
void
zl_write_place(ZLWriteState *state, HeapTuple tuple, int64 valid_from, int64 valid_to)
{
	ZLRunKey	key;

	run_key_of(&state->opts, valid_from, valid_to, &key);
	put_place(state, tuple, &key, valid_from);
}

/*
 * Add one finished (already toasted) row loaded as given (INSERT, COPY,
 * rows placed at registration); the flush checks it before it is placed
 * (zl_load.c).  The tuple is copied into the state's memory.
 */
void
zl_write_load(ZLWriteState *state, HeapTuple tuple)
{
	ZLRunKey	key;
	int64		valid_from,
				valid_to;

	if (!state->registered)
	{
		zl_write_add(state, tuple);
		return;
	}
	place_row(state, tuple, &key, &valid_from, &valid_to);
	if (valid_to <= state->opts.history_cut)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("version ends before the history cut of zipper table \"%s\"",
						get_rel_name(state->relid)),
				 errdetail("Failing row has %s; the table dropped the history that ended at or before %s.",
						   describe_row(state, tuple),
						   zl_instant_to_cstring(state->opts.history_cut, state->opts.period_type)),
				 errhint("Leave out versions that ended by the cut (README \"Lifecycle\").")));

	if (state->load == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(state->rows_context);

		/* into an empty table (we hold its writer lock): narrow (zl_load.c) */
		state->load = zl_load_begin(&state->opts, state->storage_id, state->tupdesc,
									state->hasher,
									state->nplace == 0 && !zl_meta_has_subgroups(state->storage_id));
		MemoryContextSwitchTo(old);
	}
	/* a row a narrow load takes goes to placement as it comes */
	if (zl_load_add(state->load, tuple, valid_from, valid_to))
		put_direct(state, tuple, &key, valid_from);
	state->nloaded++;
}

/* ---------- writing sub-groups ---------- */

/* the smallest sub-group worth writing into free blocks rather than appending */
#define ZL_MIN_REUSE_BLOCKS 8

/* a lower bound of the pages rows of these lengths fill */
static BlockNumber
pages_at_least(const uint32 *lengths, int n)
{
	Size		bytes = 0;

	for (int i = 0; i < n; i++)
		bytes += MAXALIGN(lengths[i]) + sizeof(ItemIdData);
	return (BlockNumber) ((bytes + (BLCKSZ - SizeOfPageHeaderData) - 1) /
						  (BLCKSZ - SizeOfPageHeaderData));
}

/*
 * Where the next sub-group of the rows left of a run goes (zl_freespace.c),
 * from their lengths: all n rows into the smallest free extent that holds
 * them; else, outside the current partition, as many as fill the largest
 * one if that makes at least min_piece pages; else all at the end of the
 * file (*first_block = InvalidBlockNumber).  Returns how many rows the
 * sub-group takes.  Runs of the current partition are never split:
 * apply_changes probes the key directory of every current sub-group, so
 * their number must not grow with the fragmentation of free space.
 */
static int
place_subgroup(ZLFreeSpace *free_space, const uint32 *lengths, int n, bool current,
			   BlockNumber min_piece, BlockNumber *first_block, int32 *blocks)
{
	BlockNumber largest = zl_free_space_largest(free_space);
	BlockNumber at_least = pages_at_least(lengths, n);
	ZLPageWriter *counter;
	BlockNumber pages_before = 0;
	int			fitting = n;

	*first_block = InvalidBlockNumber;
	*blocks = 0;
	if (current)
		min_piece = at_least;
	if (largest == 0 || largest < Min(min_piece, at_least))
		return n;

	counter = zl_page_counter_begin();
	for (int i = 0; i < n; i++)
	{
		pages_before = zl_page_writer_pages(counter);
		zl_page_counter_add_length(counter, lengths[i]);
		if (zl_page_writer_pages(counter) > largest)
		{
			fitting = i;		/* rows [0, i) fill pages_before pages */
			break;
		}
	}
	if (fitting == n)
	{
		BlockNumber unused;

		zl_page_writer_finish(counter, &unused, blocks);
	}
	else
	{
		pfree(counter);
		if (current || pages_before < min_piece)
			return n;
		*blocks = (int32) pages_before;
	}
	*first_block = zl_free_space_take(free_space, *blocks);
	Assert(*first_block != InvalidBlockNumber);
	return fitting;
}

/* the sorted rows to place, read run by run */
typedef struct RunReader
{
	ZLWriteState *state;
	ZLSortRow	next;			/* the sort's next row */
	bool		have;			/* next holds a row not written yet */
	TupleTableSlot *slot;		/* to read a run's tuplestore */
	ZLRunKey	run;			/* the run being written */
	Tuplestorestate *buffer;	/* rows of a run buffered for placement */
	TupleTableSlot *buffer_slot;
	ZLRowPayload buffer_copy;	/* the aligned copy of a row read from it */
	uint32	   *lengths;		/* their lengths */
	uint32	   *hashes;			/* key hashes of a sub-group's rows */
	int32	   *positions;		/* and their positions */
	ZLHistoryInserts *history_inserts;	/* history sub-groups' catalog rows */
} RunReader;

/*
 * A run whose rows came out of start order, sorted alone: its rows move
 * from its tuplestore into a sort like the one of rows to place (using
 * slot), which the run is read from.
 */
static void
sort_direct_run(ZLWriteState *state, DirectRun *run, TupleTableSlot *slot)
{
	ResourceOwner save = CurrentResourceOwner;
	MemoryContext old = MemoryContextSwitchTo(state->rows_context);

	CurrentResourceOwner = TopTransactionResourceOwner;	/* files for the flush */
	run->sorted = begin_place_sort(state);
	move_run_rows(run, run->sorted, slot);
	zl_intsort_perform(run->sorted);
	CurrentResourceOwner = save;
	MemoryContextSwitchTo(old);
}

static void
read_next(RunReader *rr)
{
	ZLWriteState *state = rr->state;

	if (!state->direct)
	{
		rr->have = zl_intsort_next(state->placesort, &rr->next);
		return;
	}
	for (; state->run_cursor < state->nruns; state->run_cursor++)
	{
		DirectRun  *run = &state->runs[state->run_cursor];

		if (run->unsorted && run->sorted == NULL)
			sort_direct_run(state, run, rr->slot);
		if (run->sorted)
			rr->have = zl_intsort_next(run->sorted, &rr->next);
		else if ((rr->have = tuplestore_gettupleslot(run->rows, true, false, rr->slot)))
			zl_sortrow_from_slot(rr->slot, PLACE_NKEYS, &rr->next, &state->row_copy);
		if (rr->have)
			return;
		if (run->sorted)
		{
			zl_intsort_end(run->sorted);	/* its memory goes to the next run */
			run->sorted = NULL;
			run->unsorted = false;
		}
	}
	rr->have = false;
}

/* does the sort's next row belong to the run being written? */
static bool
next_in_run(RunReader *rr)
{
	int64		partition;

	if (!rr->have)
		return false;
	partition = rr->next.keys[PLACE_PARTITION];
	return (rr->run.placed ? partition == (int64) rr->run.partition_end :
			partition == PG_INT64_MIN) &&
		rr->next.keys[PLACE_WINDOW] == rr->run.window_start;
}

/*
 * History runs of a table whose history format is columnar become columnar
 * sub-groups (zl_columnar_write.c); the current partition stays in rows,
 * which apply reads and replaces all the time, and so do rows loaded
 * before registration.
 */
static bool
run_is_columnar(const ZLWriteState *state, const ZLRunKey *key)
{
	return run_in_history(key) && state->opts.history_format == ZL_FORMAT_COLUMNAR;
}

/*
 * Write the next n rows of the run (fewer if the run ends first) as one
 * sub-group, from the buffer or straight from the sort, into blocks free
 * blocks from first_block on (InvalidBlockNumber: at the end of the file).
 * A columnar sub-group is encoded first, and then goes into the smallest
 * free extent that holds it, or at the end of the file.
 */
static void
write_subgroup(Relation rel, RunReader *rr, int n, bool from_buffer,
			   BlockNumber first_block, int32 blocks, ZLFreeSpace *free_space)
{
	ZLWriteState *state = rr->state;
	const ZLRunKey *key = &rr->run;
	ZLSubGroup	sg;
	int32		rollover_seq = 0;
	ZLPageWriter *writer = NULL;
	ZLColumnarWriter *columnar = NULL;
	bytea	   *directory = NULL;
	int			i;

	memset(&sg, 0, sizeof(sg));
	sg.placed = key->placed;
	sg.partition_end = key->partition_end;
	sg.window_start = key->window_start;

	/*
	 * History sub-groups join their window's file group as they are
	 * inserted, several at once; before any other sub-group takes an id,
	 * those waiting are inserted, so ids follow the order of writing.
	 */
	sg.file_group = 0;
	if (!run_in_history(key))
	{
		zl_meta_history_inserts_flush(rr->history_inserts);
		if (key->placed)
			zl_meta_choose_file_group(state->storage_id, key->partition_end,
									  key->window_start, state->opts.max_subgroups,
									  &sg.file_group, &rollover_seq);
	}

	sg.format = run_is_columnar(state, key) ? ZL_FORMAT_COLUMNAR : ZL_FORMAT_ROWS;
	if (sg.format == ZL_FORMAT_COLUMNAR)
		columnar = zl_columnar_writer_begin(state->tupdesc);
	else
		writer = first_block == InvalidBlockNumber ?
			zl_page_writer_begin(rel, InvalidBlockNumber, 0) :
			zl_page_writer_begin(rel, first_block, blocks);
	for (i = 0; i < n; i++)
	{
		ZLSortRow	buffered;
		ZLSortRow  *row = &rr->next;
		HeapTuple	tuple;
		int32		position;
		int64		from;

		if (from_buffer)
		{
			row = &buffered;
			if (!tuplestore_gettupleslot(rr->buffer, true, false, rr->buffer_slot))
				elog(ERROR, "zipper_lake sub-group buffer ended early");
			zl_sortrow_from_slot(rr->buffer_slot, PLACE_NKEYS, row, &rr->buffer_copy);
		}
		else if (!next_in_run(rr))
			break;

		CHECK_FOR_INTERRUPTS();
		tuple = &row->row;
		from = row->keys[PLACE_FROM];
		if (i == 0)
			sg.first_start = from;
		sg.last_start = from;
		position = columnar ? zl_columnar_writer_add(columnar, tuple) :
			zl_page_writer_add(writer, tuple);

		/* placed sub-groups get a key directory (zl_keys.c) */
		if (key->placed)
		{
			MemoryContext old;

			MemoryContextReset(state->row_context);
			old = MemoryContextSwitchTo(state->row_context);
			zl_key_extract(state->hasher, tuple, state->tupdesc, state->key_row);
			rr->hashes[i] = zl_key_hash(state->hasher, state->key_row);
			rr->positions[i] = position;
			MemoryContextSwitchTo(old);
		}
		if (!from_buffer)
			read_next(rr);
	}
	sg.row_count = i;
	if (columnar)
	{
		/* encoded, its size is known: the smallest free extent that holds it */
		BlockNumber pages = zl_columnar_writer_finish(columnar);

		first_block = zl_free_space_take(free_space, pages);
		writer = first_block == InvalidBlockNumber ?
			zl_page_writer_begin(rel, InvalidBlockNumber, 0) :
			zl_page_writer_begin(rel, first_block, pages);
		zl_columnar_writer_write(columnar, writer);
		zl_columnar_writer_end(columnar);
	}
	zl_page_writer_finish(writer, &sg.first_block, &sg.blocks);

	if (key->placed)
		directory = zl_key_directory_build(rr->hashes, rr->positions, i);
	if (run_in_history(key))
		zl_meta_history_insert(rr->history_inserts, &sg, directory);
	else
	{
		(void) zl_meta_insert_subgroup(rel, &sg, rollover_seq, directory);
		if (directory)
			pfree(directory);
	}
}

/*
 * Write the next up to ZL_MAX_SUBGROUP_ROWS rows of the run.  With no free
 * extent to reuse they stream to the end of the file as one sub-group;
 * otherwise they are buffered, and their lengths decide where their
 * sub-groups go (place_subgroup): pieces in free blocks take a quarter of
 * them at least.
 */
static void
write_chunk(Relation rel, RunReader *rr, ZLFreeSpace *free_space)
{
	bool		current = rr->run.placed && rr->run.partition_end == ZL_CURRENT_PARTITION;
	BlockNumber min_piece;
	int			n = 0;

	if (zl_free_space_largest(free_space) == 0 || run_is_columnar(rr->state, &rr->run))
	{
		write_subgroup(rel, rr, ZL_MAX_SUBGROUP_ROWS, false, InvalidBlockNumber, 0,
					   free_space);
		return;
	}

	if (rr->buffer == NULL)
	{
		rr->buffer = tuplestore_begin_heap(false, false, ZL_SIDE_KB);
		rr->buffer_slot = MakeSingleTupleTableSlot(rr->state->place_desc,
												   &TTSOpsMinimalTuple);
		rr->buffer_copy.context = CurrentMemoryContext;
	}
	tuplestore_clear(rr->buffer);
	while (n < ZL_MAX_SUBGROUP_ROWS && next_in_run(rr))
	{
		tuplestore_puttupleslot(rr->buffer,
								zl_sortrow_to_slot(rr->next.keys, PLACE_NKEYS, &rr->next.row,
												   rr->state->place_slot,
												   &rr->state->payload));
		rr->lengths[n++] = rr->next.row.t_len;
		read_next(rr);
	}
	min_piece = Max(ZL_MIN_REUSE_BLOCKS, pages_at_least(rr->lengths, n) / 4);
	for (int done = 0; done < n;)
	{
		BlockNumber first_block;
		int32		blocks;
		int			take = place_subgroup(free_space, rr->lengths + done, n - done, current,
										  min_piece, &first_block, &blocks);

		write_subgroup(rel, rr, take, true, first_block, blocks, free_space);
		done += take;
	}
}

/* write the rows to place, run by run in placement order */
static void
write_placed(ZLWriteState *state, Relation rel)
{
	ZLFreeSpace *free_space;
	RunReader	rr;
	MemoryContext old = MemoryContextSwitchTo(state->rows_context);

	pack_history_runs(state, rel);
	if (state->direct)
		qsort(state->runs, state->nruns, sizeof(DirectRun), direct_run_cmp);
	else
		zl_intsort_perform(state->placesort);
	free_space = zl_free_space_begin(rel, state->storage_id);

	memset(&rr, 0, sizeof(rr));
	rr.state = state;
	rr.slot = state->place_read_slot;
	rr.lengths = palloc(sizeof(uint32) * ZL_MAX_SUBGROUP_ROWS);
	rr.hashes = palloc(sizeof(uint32) * ZL_MAX_SUBGROUP_ROWS);
	rr.positions = palloc(sizeof(int32) * ZL_MAX_SUBGROUP_ROWS);
	rr.history_inserts = zl_meta_history_inserts_begin(rel);
	read_next(&rr);
	while (rr.have)
	{
		int64		partition = rr.next.keys[PLACE_PARTITION];

		rr.run.placed = partition != PG_INT64_MIN;
		rr.run.partition_end = rr.run.placed ? (DateADT) partition : 0;
		rr.run.window_start = rr.next.keys[PLACE_WINDOW];
		while (next_in_run(&rr))
			write_chunk(rel, &rr, free_space);
	}
	zl_meta_history_inserts_end(rr.history_inserts);
	if (rr.buffer)
		tuplestore_end(rr.buffer);
	zl_free_space_end(free_space);
	MemoryContextSwitchTo(old);
}

/*
 * A load that stopped being narrow (zl_load.c, "Narrow loads"): the rows it
 * took narrowly, handed to placement as they came, join the others for the
 * full check.
 */
static void
check_in_full(ZLWriteState *state, Relation rel)
{
	MemoryContext old = MemoryContextSwitchTo(state->rows_context);
	ZLIntSort  *placed;
	ZLSortRow	row;
	ZLLoad	   *load = state->load;

	if (state->direct)
		leave_direct(state);
	placed = place_sort(state);
	/* a narrow load begins with nothing else to place (zl_write_load) */
	if (state->nplace != zl_load_taken(load))
		elog(ERROR, "a narrow load of \"%s\" shares placement with other rows",
			 RelationGetRelationName(rel));
	zl_intsort_perform(placed);
	state->placesort = NULL;
	state->nplace = 0;
	state->history_runs = NULL; /* the check places the rows it keeps anew */
	while (zl_intsort_next(placed, &row))
	{
		HeapTuple	tuple = heap_copytuple(&row.row);
		ZLRunKey	key;
		int64		valid_from,
					valid_to;

		place_row(state, tuple, &key, &valid_from, &valid_to);
		(void) zl_load_add(load, tuple, valid_from, valid_to);	/* not narrow now */
		heap_freetuple(tuple);
	}
	zl_intsort_end(placed);
	MemoryContextSwitchTo(old);
	if (!zl_load_check(load, rel, state))
		elog(ERROR, "the full check of a load of \"%s\" did not finish", RelationGetRelationName(rel));
}

static void
flush_state(ZLWriteState *state)
{
	Relation	rel;

	if (!state_has_rows(state))
		return;
	if (IsInParallelMode())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("cannot write zipper table rows during a parallel operation"),
				 errhint("Read the table in a separate statement after writing it.")));

	rel = table_open(state->relid, NoLock);
	if (state->nloaded > 0 && !zl_load_check(state->load, rel, state))
		check_in_full(state, rel);
	if (state->nplace > 0)
		write_placed(state, rel);
	table_close(rel, NoLock);

	/* start over empty */
	forget_pending(state);
}

/* flush the current subtransaction's pending rows of one table (or all) */
static void
flush_matching(Oid relid)
{
	SubTransactionId subxid = GetCurrentSubTransactionId();
	ListCell   *lc;
	bool		pushed = false;

	if (flush_in_progress)
		return;

	foreach(lc, write_states)
	{
		ZLWriteState *state = lfirst(lc);

		if (state->subxid != subxid || !state_has_rows(state))
			continue;
		if (OidIsValid(relid) && state->relid != relid)
			continue;
		if (!pushed && !ActiveSnapshotSet())
		{
			PushActiveSnapshot(GetTransactionSnapshot());
			pushed = true;
		}
		flush_in_progress = true;
		PG_TRY();
		{
			flush_state(state);
		}
		PG_FINALLY();
		{
			flush_in_progress = false;
		}
		PG_END_TRY();
	}
	if (pushed)
		PopActiveSnapshot();
}

void
zl_write_flush_relation(Oid relid)
{
	flush_matching(relid);
}

void
zl_write_flush_all(void)
{
	flush_matching(InvalidOid);
}

/* end a state's sorts and free it */
static void
drop_state(ZLWriteState *state)
{
	forget_pending(state);
	MemoryContextDelete(state->context);
}

/* drop pending rows of a relation whose file is being replaced */
void
zl_write_discard_relation(Oid relid)
{
	ListCell   *lc;

	foreach(lc, write_states)
	{
		ZLWriteState *state = lfirst(lc);

		if (state->relid == relid)
		{
			drop_state(state);
			write_states = foreach_delete_current(write_states, lc);
		}
	}
}

/*
 * Rewrite a table's unplaced sub-groups (rows loaded before it was
 * registered) as placed ones, checked like any load.  Called right after
 * the registration row is inserted, so every sub-group the table has is
 * unplaced.
 */
void
zl_write_place_unplaced(Relation rel)
{
	ZLWriteState *state;
	Snapshot	snapshot;
	ZLSubGroup *sgs;
	int			nsgs;
	TableScanDesc scan;
	TupleTableSlot *slot;

	/* rows may still wait, unplaced, in this transaction: write them first */
	zl_write_flush_relation(RelationGetRelid(rel));
	CommandCounterIncrement();	/* see the registration row just inserted */
	state = zl_write_state_get(rel);
	if (!state->registered)
		elog(ERROR, "table \"%s\" is not registered", RelationGetRelationName(rel));

	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	sgs = zl_meta_load_subgroups(state->storage_id, snapshot, DATEVAL_NOBEGIN, &nsgs);
	if (nsgs == 0)
	{
		UnregisterSnapshot(snapshot);
		return;
	}

	slot = table_slot_create(rel, NULL);
	scan = table_beginscan(rel, snapshot, 0, NULL);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		bool		should_free;
		HeapTuple	tuple = ExecFetchSlotHeapTuple(slot, false, &should_free);

		zl_write_load(state, tuple);
		if (should_free)
			heap_freetuple(tuple);
	}
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snapshot);

	for (int i = 0; i < nsgs; i++)
	{
		if (sgs[i].placed)
			elog(ERROR, "table \"%s\" has placed sub-groups before registration",
				 RelationGetRelationName(rel));
		zl_meta_delete_subgroup(rel, sgs[i].subgroup_id);
	}
	zl_write_flush_relation(RelationGetRelid(rel));
}

/* ---------- transaction callbacks ---------- */

static void
zl_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			zl_write_flush_all();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			/* memory went with TopTransactionContext, files with its owner */
			write_states = NIL;
			list_free(packing_holds);
			packing_holds = NIL;
			break;
	}
}

static void
zl_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					SubTransactionId parentSubid, void *arg)
{
	ListCell   *lc;

	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		foreach(lc, write_states)
		{
			ZLWriteState *state = lfirst(lc);

			if (state->subxid == mySubid)
			{
				drop_state(state);
				write_states = foreach_delete_current(write_states, lc);
			}
		}
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		foreach(lc, write_states)
		{
			ZLWriteState *state = lfirst(lc);

			if (state->subxid == mySubid)
				state->subxid = parentSubid;
		}
	}
}

void
zl_write_register_callbacks(void)
{
	RegisterXactCallback(zl_xact_callback, NULL);
	RegisterSubXactCallback(zl_subxact_callback, NULL);
}
