/*-------------------------------------------------------------------------
 *
 * zl_write.c
 *	  The write state of a table: the rows writers hand over, flushes.
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
 * (zl_place.c and zl_subgroup_write.c.)  Rows to place go into a sort (zl_rowsort.c's ZLIntSort: each row with
 * its integer keys in an array while they fit, a tuplesort beyond) by
 * (placed, partition of valid_to, window of valid_from, valid_from,
 * arrival), summarized first: see place_order().  The sorted stream
 * is cut into runs of one (partition, window) and each run into
 * sub-groups: consecutive pages (zl_storage.c) — into the blocks of a
 * deleted sub-group if a free extent holds them (zl_freespace.c), else at
 * the end of the file — then one metadata row (zl_meta_subgroup.c) that
 * makes them visible at commit.  A run longer than ZL_MAX_SUBGROUP_ROWS becomes
 * several sub-groups.  In the current partition each sub-group joins the
 * newest file group of its window, unless that one already holds
 * max_subgroups sub-groups (rollover).  Every placed sub-group stores the
 * key directory of its rows (zl_keys.c).  Where free extents exist, the
 * rows of a sub-group are buffered (a tuplestore) while their page count
 * decides where they go.
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
 * as fit half of work_mem, 16 at least; zl_place.c, "Direct
 * placement"), and a run
 * sorted alone gets the sort's share when the flush writes it.  The writer's
 * sub-group buffer gets ZL_SIDE_KB (1 MB) and spills too; a sub-group
 * being written takes 20 bytes a row for its lengths, hashes, positions
 * and key directory (1.3 MB at ZL_MAX_SUBGROUP_ROWS).
 *
 * When flushes happen
 * -------------------
 * INSERT flushes at the end of the statement (ExecutorFinish hook in
 * zl_executor.c; not at the end of zipper_lake's own catalog statements, so a
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

/* write states of the current transaction, in TopTransactionContext */
static List *write_states = NIL;

/* tables whose packing a writer holds (zl_write_hold_packing), in TopMemoryContext */
static List *packing_holds = NIL;

/* metadata statements of a flush must not flush again (ExecutorFinish hook) */
static bool flush_in_progress = false;

/* ---------- states ---------- */

/* the table's options and key hasher, if it is registered yet */
static void
load_registration(ZLWriteState *state, Relation rel)
{
	state->registered = zl_meta_load_options(rel, &state->opts, true);
	state->numbered = zl_meta_has_tids();
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
	state->windows = NULL;
	state->nwindows = state->maxwindows = 0;
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
	zl_place_create_desc(state);
	load_registration(state, rel);
	reset_pending(state);
	MemoryContextSwitchTo(TopTransactionContext);
	write_states = lappend(write_states, state);
	MemoryContextSwitchTo(old);
	return state;
}

/*
 * Toast a version of rel whose row is too wide, keeping the values it
 * already holds in rel's TOAST relation: a version made from a stored one
 * shares its values (README "Features and how they work", "Storage").  PostgreSQL's toaster takes
 * an on-disk value of a new row for someone else's and stores it again,
 * unless the old row of an update holds the same pointer; so the pointers
 * are handed to it as such an old row (and, being the new row's too, none
 * is deleted).  Only for values of rel itself: rows arriving from outside
 * (INSERT, COPY) are toasted as given.
 *
 * The chunks are written unseen by logical decoding
 * (HEAP_INSERT_NO_LOGICAL, as rewriteheap.c writes those of a rewrite):
 * decoding keeps a transaction's TOAST chunks for the next heap change of
 * it, which for a zipper table never comes (its rows are in its own
 * pages), and the next heap DELETE of the transaction would then crash
 * the decoding process (ReorderBufferToastReplace expects a new tuple).
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
		return heap_toast_insert_or_update(rel, tuple, NULL, HEAP_INSERT_NO_LOGICAL);
	values = palloc(sizeof(Datum) * desc->natts);
	isnull = palloc(sizeof(bool) * desc->natts);
	heap_deform_tuple(tuple, desc, values, isnull);
	for (int i = 0; i < desc->natts; i++)
		if (TupleDescAttr(desc, i)->attlen != -1 || isnull[i] ||
			!VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(values[i])))
			isnull[i] = true;
	shared = heap_form_tuple(desc, values, isnull);
	toasted = heap_toast_insert_or_update(rel, tuple, shared, HEAP_INSERT_NO_LOGICAL);
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
		zl_place_row(state, tuple, &key, &valid_from, &valid_to);
	if (rel != NULL && tuple->t_len > TOAST_TUPLE_THRESHOLD && !run_is_columnar(state, &key))
		tuple = zl_toast_version(rel, tuple);
	zl_place_put(state, tuple, &key, valid_from);
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

/*
 * Let the state's flushes take only free blocks below a block (0: any):
 * VACUUM moving sub-groups off the end of the file (zl_relocate.c) must
 * not move them into other free blocks there.
 */
void
zl_write_state_reuse_below(ZLWriteState *state, BlockNumber below)
{
	state->reuse_below = below;
}

/*
 * With reuse_below set: cut the columnar sub-groups the state's flushes
 * write to about the largest free extent left each, rows_per_block
 * rows a block (the moved sub-group's density), so that a sub-group larger
 * than any free extent below it can still move down in pieces
 * (zl_relocate.c); 0 turns it off.  Row history is cut to fit anyway
 * (zl_subgroup_write.c, place_subgroup).
 */
void
zl_write_state_fit_free_extents(ZLWriteState *state, double rows_per_block)
{
	state->fit_rows_per_block = rows_per_block;
}

/* the format history runs are written in (ZL_FORMAT_ROWS or ZL_FORMAT_COLUMNAR) */
char
zl_write_state_history_format(const ZLWriteState *state)
{
	return state->opts.history_format;
}

/*
 * Write the current partition's runs columnar too (on) or in rows (off):
 * VACUUM's rewrite of the current partition (zl_retention.c) turns it on
 * until its flush.  Only a table whose history is columnar takes it.
 */
void
zl_write_set_current_columnar(ZLWriteState *state, bool on)
{
	state->current_columnar = on;
}

/* does a writer hold packing of this table (zl_write_hold_packing)? */
bool
zl_write_packing_held(Oid relid)
{
	return list_member_oid(packing_holds, relid);
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

	zl_place_run_key(&state->opts, valid_from, valid_to, &key);
	zl_place_put(state, tuple, &key, valid_from);
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
	zl_place_row(state, tuple, &key, &valid_from, &valid_to);
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
		zl_place_put_direct(state, tuple, &key, valid_from);
	state->nloaded++;
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
		zl_place_leave_direct(state);
	placed = zl_place_sort(state);
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

		zl_place_row(state, tuple, &key, &valid_from, &valid_to);
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
		zl_write_placed(state, rel);
	table_close(rel, NoLock);

	/* start over empty */
	forget_pending(state);
}

/* has a table with pending rows (so locked) indexes? */
static bool
relation_has_index(Oid relid)
{
	Relation	rel = table_open(relid, NoLock);
	bool		has = RelationGetForm(rel)->relhasindex;

	table_close(rel, NoLock);
	return has;
}

/*
 * Flush the current subtransaction's pending rows of one table (or all, or
 * with indexed_only those of tables with indexes).
 */
static void
flush_matching(Oid relid, bool indexed_only)
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
		if (indexed_only && !relation_has_index(state->relid))
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
	flush_matching(relid, false);
}

void
zl_write_flush_all(void)
{
	flush_matching(InvalidOid, false);
}

/* at the end of COPY: the rows of tables whose indexes check them */
void
zl_write_flush_indexed(void)
{
	flush_matching(InvalidOid, true);
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
		zl_meta_delete_subgroup(rel, &sgs[i]);
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
			zl_index_entries_by_writes_forget(1);
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
		zl_index_entries_by_writes_forget(GetCurrentTransactionNestLevel());
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
