/*-------------------------------------------------------------------------
 *
 * zl_write.c
 *	  Placement of rows and the sub-group writer.
 *
 * Every writer (INSERT, COPY, apply_changes, registration of a loaded
 * table) hands finished rows to a write state.  The state sorts them into
 * runs by placement — (partition of valid_to, window of valid_from) — and
 * a flush turns each run into sub-groups: rows sorted by valid_from,
 * written as consecutive pages (zl_storage.c) — into the blocks of a
 * deleted sub-group if a free extent holds them (zl_freespace.c), else at
 * the end of the file — then one metadata row
 * (zl_metadata.c) that makes them visible at commit.  A run longer than
 * ZL_MAX_SUBGROUP_ROWS becomes several sub-groups.  In the current
 * partition each sub-group joins the newest file group of its window,
 * unless that one already holds max_subgroups sub-groups (rollover).
 *
 * Rows of a table that is not registered yet (pg_restore may load data
 * before the registration row) cannot be placed: they are written as
 * "unplaced" sub-groups, and registering the table rewrites them placed
 * (zl_write_place_unplaced).
 *
 * When flushes happen
 * -------------------
 * INSERT buffers rows and flushes at the end of the statement
 * (ExecutorFinish hook in zl_mod.c), COPY at finish_bulk_insert, and any
 * scan of the table first flushes its pending rows so a transaction reads
 * its own writes.  Pre-commit flushes whatever is left.
 *
 * A state belongs to the subtransaction that created it: flushes write
 * only the current subtransaction's states, a subtransaction abort drops
 * its states and a subtransaction commit hands them to the parent.  Rows
 * are therefore never written in a subtransaction that might roll back
 * without them, nor lost with one that did.
 *
 * Writers of one table are serialized by a transaction-level advisory
 * lock on its storage id; readers take no lock of ours and never wait.
 *
 *-------------------------------------------------------------------------
 */
#include "zipper_lake.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/bufpage.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

typedef struct ZLPendingRow
{
	int64		valid_from;
	uint32		arrival;		/* keeps the sort stable */
	HeapTuple	tuple;
} ZLPendingRow;

typedef struct ZLRunKey
{
	bool		placed;
	DateADT		partition_end;
	int64		window_start;
} ZLRunKey;

typedef struct ZLRun
{
	ZLRunKey	key;			/* hash key: must be first */
	ZLPendingRow *rows;
	int			nrows;
	int			maxrows;
} ZLRun;

struct ZLWriteState
{
	Oid			relid;
	uint64		storage_id;
	SubTransactionId subxid;
	bool		registered;
	ZLTableOptions opts;
	ZLKeyHasher *hasher;		/* for key directories, once registered */
	TupleDesc	tupdesc;
	MemoryContext context;		/* the state itself and its options */
	MemoryContext rows_context; /* runs and pending rows; reset by a flush */
	HTAB	   *runs;
	uint32		nrows;
};

/* write states of the current transaction, in TopTransactionContext */
static List *write_states = NIL;

/* metadata statements of a flush must not flush again (ExecutorFinish hook) */
static bool flush_in_progress = false;

static void
create_runs(ZLWriteState *state)
{
	HASHCTL		ctl;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(ZLRunKey);
	ctl.entrysize = sizeof(ZLRun);
	ctl.hcxt = state->rows_context;
	state->runs = hash_create("zipper_lake runs", 64, &ctl,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	state->nrows = 0;
}

/* the table's options and key hasher, if it is registered yet */
static void
load_registration(ZLWriteState *state, Relation rel)
{
	state->registered = zl_meta_load_options(rel, &state->opts, true);
	if (state->registered)
		state->hasher = zl_key_hasher_create(state->tupdesc, &state->opts);
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
	MemoryContextSwitchTo(state->context);
	state->tupdesc = CreateTupleDescCopy(RelationGetDescr(rel));
	load_registration(state, rel);
	create_runs(state);
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

/* check a row against the rules of README "Guarantees" and compute its placement */
static void
place_row(ZLWriteState *state, HeapTuple tuple, ZLRunKey *key,
		  int64 *valid_from_out)
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

	key->placed = true;
	key->partition_end = zl_partition_of(opts, valid_to);
	key->window_start = zl_window_of(opts, key->partition_end, valid_from);
	*valid_from_out = valid_from;
}

/*
 * Add one finished (already toasted) row.  The tuple is copied into the
 * state's memory.
 */
void
zl_write_add(ZLWriteState *state, HeapTuple tuple)
{
	ZLRunKey	key;
	ZLRun	   *run;
	bool		found;
	int64		valid_from = 0;
	MemoryContext old;

	memset(&key, 0, sizeof(key));
	if (state->registered)
		place_row(state, tuple, &key, &valid_from);

	old = MemoryContextSwitchTo(state->rows_context);
	run = hash_search(state->runs, &key, HASH_ENTER, &found);
	if (!found)
	{
		run->maxrows = 64;
		run->nrows = 0;
		run->rows = palloc(sizeof(ZLPendingRow) * run->maxrows);
	}
	else if (run->nrows == run->maxrows)
	{
		run->maxrows *= 2;
		run->rows = repalloc_huge(run->rows, sizeof(ZLPendingRow) * run->maxrows);
	}
	run->rows[run->nrows].valid_from = valid_from;
	run->rows[run->nrows].arrival = state->nrows++;
	run->rows[run->nrows].tuple = heap_copytuple(tuple);
	run->nrows++;
	MemoryContextSwitchTo(old);
}

static int
pending_row_cmp(const void *a, const void *b)
{
	const ZLPendingRow *ra = a;
	const ZLPendingRow *rb = b;

	if (ra->valid_from != rb->valid_from)
		return ra->valid_from < rb->valid_from ? -1 : 1;
	return ra->arrival < rb->arrival ? -1 : (ra->arrival > rb->arrival ? 1 : 0);
}

/* the smallest sub-group worth writing into free blocks rather than appending */
#define ZL_MIN_REUSE_BLOCKS 8

/* a lower bound of the pages rows fill (zl_page_counter_begin: exactly) */
static BlockNumber
pages_at_least(const ZLPendingRow *rows, int n)
{
	Size		bytes = 0;

	for (int i = 0; i < n; i++)
		bytes += MAXALIGN(rows[i].tuple->t_len) + sizeof(ItemIdData);
	return (BlockNumber) ((bytes + (BLCKSZ - SizeOfPageHeaderData) - 1) /
						  (BLCKSZ - SizeOfPageHeaderData));
}

/*
 * Where the next sub-group of the rows left of a run goes (zl_freespace.c):
 * all n rows into the smallest free extent that holds them; else, outside
 * the current partition, as many as fill the largest one if that makes at
 * least min_piece pages; else all at the end of the file (*first_block =
 * InvalidBlockNumber).  Returns how many rows the sub-group takes.  Runs of
 * the current partition are never split: apply_changes probes the key
 * directory of every current sub-group, so their number must not grow
 * with the fragmentation of free space.
 */
static int
place_subgroup(ZLFreeSpace *free_space, const ZLPendingRow *rows, int n, bool current,
			   BlockNumber min_piece, BlockNumber *first_block, int32 *blocks)
{
	BlockNumber largest = zl_free_space_largest(free_space);
	BlockNumber at_least = pages_at_least(rows, n);
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
		(void) zl_page_writer_add(counter, rows[i].tuple);
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

/*
 * Write one sub-group of (a prefix of) rows, the rest of a run, into free
 * blocks if they hold at least min_piece of its pages; returns how many
 * rows it took.
 */
static int
write_subgroup(Relation rel, ZLWriteState *state, ZLFreeSpace *free_space,
			   const ZLRunKey *key, ZLPendingRow *rows, int n, BlockNumber min_piece)
{
	ZLSubGroup	sg;
	int32		rollover_seq = 0;
	ZLPageWriter *writer;
	BlockNumber first_block = InvalidBlockNumber;
	int32		blocks = 0;
	bool		current = key->placed && key->partition_end == ZL_CURRENT_PARTITION;
	int32	   *positions;
	bytea	   *directory = NULL;

	n = place_subgroup(free_space, rows, n, current, min_piece, &first_block, &blocks);
	positions = current ? palloc(sizeof(int32) * n) : NULL;

	memset(&sg, 0, sizeof(sg));
	sg.placed = key->placed;
	sg.partition_end = key->partition_end;
	sg.window_start = key->window_start;
	sg.first_start = rows[0].valid_from;
	sg.last_start = rows[n - 1].valid_from;
	sg.row_count = n;

	if (key->placed)
		zl_meta_choose_file_group(state->storage_id, key->partition_end,
								  key->window_start,
								  key->partition_end == ZL_CURRENT_PARTITION ?
								  state->opts.max_subgroups : 0,
								  &sg.file_group, &rollover_seq);
	else
		sg.file_group = 0;

	writer = first_block == InvalidBlockNumber ?
		zl_page_writer_begin(rel, InvalidBlockNumber, 0) :
		zl_page_writer_begin(rel, first_block, blocks);
	for (int i = 0; i < n; i++)
	{
		int32		position = zl_page_writer_add(writer, rows[i].tuple);

		if (current)
			positions[i] = position;
	}
	zl_page_writer_finish(writer, &sg.first_block, &sg.blocks);

	/* open versions get a key directory, for apply_changes (zl_keys.c) */
	if (current)
	{
		HeapTuple  *tuples = palloc(sizeof(HeapTuple) * n);

		for (int i = 0; i < n; i++)
			tuples[i] = rows[i].tuple;
		directory = zl_key_directory_build(state->hasher, state->tupdesc,
										   tuples, positions, n);
		pfree(tuples);
		pfree(positions);
	}
	(void) zl_meta_insert_subgroup(state->storage_id, &sg, rollover_seq, directory);
	if (directory)
		pfree(directory);
	return n;
}

static int
run_key_cmp(const void *a, const void *b)
{
	const ZLRun *ra = *(ZLRun *const *) a;
	const ZLRun *rb = *(ZLRun *const *) b;

	if (ra->key.partition_end != rb->key.partition_end)
		return ra->key.partition_end < rb->key.partition_end ? -1 : 1;
	if (ra->key.window_start != rb->key.window_start)
		return ra->key.window_start < rb->key.window_start ? -1 : 1;
	return 0;
}

static void
flush_state(ZLWriteState *state)
{
	Relation	rel;
	HASH_SEQ_STATUS status;
	ZLRun	   *run;
	ZLRun	  **runs;
	int			nruns = 0;
	ZLFreeSpace *free_space;
	long		total = hash_get_num_entries(state->runs);

	if (total == 0)
		return;
	if (IsInParallelMode())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("cannot write zipper table rows during a parallel operation"),
				 errhint("Read the table in a separate statement after writing it.")));

	rel = table_open(state->relid, NoLock);
	free_space = zl_free_space_begin(rel, state->storage_id);

	/* write runs in placement order, so the layout does not depend on hashing */
	runs = palloc(sizeof(ZLRun *) * total);
	hash_seq_init(&status, state->runs);
	while ((run = hash_seq_search(&status)) != NULL)
		runs[nruns++] = run;
	qsort(runs, nruns, sizeof(ZLRun *), run_key_cmp);

	for (int r = 0; r < nruns; r++)
	{
		run = runs[r];
		if (run->key.placed)
			qsort(run->rows, run->nrows, sizeof(ZLPendingRow), pending_row_cmp);
		for (int start = 0; start < run->nrows; start += ZL_MAX_SUBGROUP_ROWS)
		{
			ZLPendingRow *chunk = run->rows + start;
			int			nchunk = Min(ZL_MAX_SUBGROUP_ROWS, run->nrows - start);

			/* pieces in free blocks: a quarter of the chunk at least */
			BlockNumber min_piece = Max(ZL_MIN_REUSE_BLOCKS, pages_at_least(chunk, nchunk) / 4);

			for (int done = 0; done < nchunk;)
				done += write_subgroup(rel, state, free_space, &run->key, chunk + done,
									   nchunk - done, min_piece);
		}
	}
	zl_free_space_end(free_space);
	table_close(rel, NoLock);

	/* start over empty */
	MemoryContextReset(state->rows_context);
	create_runs(state);
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

		if (state->subxid != subxid || hash_get_num_entries(state->runs) == 0)
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
			MemoryContextDelete(state->context);
			write_states = foreach_delete_current(write_states, lc);
		}
	}
}

/*
 * Rewrite a table's unplaced sub-groups (rows loaded before it was
 * registered) as placed ones.  Called right after the registration row is
 * inserted, so every sub-group the table has is unplaced.
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

		zl_write_add(state, tuple);
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
		zl_meta_delete_subgroup(state->storage_id, sgs[i].subgroup_id);
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
			/* memory went with TopTransactionContext */
			write_states = NIL;
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
				MemoryContextDelete(state->context);
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
