/*-------------------------------------------------------------------------
 *
 * zl_write.c
 *	  Placement of rows, the checks of loaded versions, the sub-group writer.
 *
 * Every writer hands finished rows to the write state of its table, and a
 * flush writes them.  Rows come in two kinds:
 *
 *  - Versions that are right by construction: those apply_changes
 *    computed and the rows compaction keeps (zl_write_add).  They go
 *    straight to placement.
 *  - Versions loaded as given: rows of INSERT and COPY, and rows loaded
 *    before the table was registered, when registration places them
 *    (zl_write_load).  A loaded version [a, b) with values v stands for
 *    "upsert v at a" and, unless a version of the key starts at b,
 *    "delete at b" (README, "Change semantics").  So they are checked
 *    before they are placed: one that overlaps another version of its key,
 *    loaded with it or stored, is refused; adjacent versions of a key
 *    with equal values, loaded or stored, become one.
 *
 * Checking loaded versions
 * ------------------------
 * Loaded rows go into a tuplesort by (key hash, valid_from).  At the
 * flush the sorted stream is read hash by hash, each key's versions in
 * start order (the keys of one hash, more than one only if hashes collide,
 * side by side, told apart by their equality), merged with the stored
 * versions of those keys in the same order (check_item).  A version that
 * starts before the latest end so far of its key overlaps
 * (ERRCODE_EXCLUSION_VIOLATION, naming the key and both periods; the
 * statement fails, so it changes nothing).  A run of adjacent versions
 * with equal values that holds a loaded one becomes one version: the
 * first's row with the last's end; the stored versions in it are masked
 * or their sub-group compacted, as apply_changes retires rows
 * (zl_write_compact_subgroup).  Stored versions are found for a chunk of
 * up to ZL_CHECK_CHUNK_KEYS key hashes at a time: in the current partition
 * through the key directories (zl_keys.c), in history only in partitions
 * that can hold a version ending at or after the chunk's earliest start,
 * in sub-groups that start no later than its latest end.  They go into a
 * tuplesort of their own, merged with the chunk's loaded rows (buffered in
 * a tuplestore meanwhile).  If no sub-group can hold such a version (an
 * empty table, pg_restore), the loaded stream is checked on its own.
 *
 * Placement and the sub-group writer
 * ----------------------------------
 * Rows to place go into a second tuplesort by (placed, partition of
 * valid_to, valid_from, arrival) — which sorts them by the window of
 * valid_from too, windows being consecutive ranges.  The sorted stream
 * is cut into runs of one (partition, window) and each run into
 * sub-groups: consecutive pages (zl_storage.c) — into the blocks of a
 * deleted sub-group if a free extent holds them (zl_freespace.c), else at
 * the end of the file — then one metadata row (zl_metadata.c) that makes
 * them visible at commit.  A run longer than ZL_MAX_SUBGROUP_ROWS becomes
 * several sub-groups.  In the current partition each sub-group joins the
 * newest file group of its window, unless that one already holds
 * max_subgroups sub-groups (rollover), and stores the key directory of its
 * rows.  Where free extents exist, the rows of a sub-group are buffered
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
 * The two tuplesorts (loaded rows by key, rows to place) get half of
 * work_mem each, 8 MB at least, and spill to temporary files beyond that.
 * The check's chunk buffer, stored-version sort and mask sort, and the
 * writer's sub-group buffer, get ZL_SIDE_KB (1 MB) each and spill too.  A
 * chunk's key hashes take a quarter of work_mem, 4 MB at most; a
 * sub-group being written 20 bytes a row for its lengths, hashes,
 * positions and key directory (1.3 MB at ZL_MAX_SUBGROUP_ROWS).  Not
 * counted: the metadata of the sub-groups a load may touch (some hundred
 * bytes each, and their masks) and the key directories of the current
 * partition (8 bytes per open version, cached per backend as for
 * apply_changes, zl_keys.c).
 *
 * When flushes happen
 * -------------------
 * INSERT flushes at the end of the statement (ExecutorFinish hook in
 * zl_mod.c), COPY at finish_bulk_insert, and any scan of the table first
 * flushes its pending rows so a transaction reads its own writes.
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
 * pending rows may outlive the statement that added them; dropping a
 * state ends its sorts.
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
#include "access/tupdesc.h"
#include "access/xact.h"
#include "catalog/pg_operator_d.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/bufpage.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/tuplesort.h"
#include "utils/tuplestore.h"

/*
 * Distinct key hashes whose stored versions a load looks up at once: a
 * quarter of work_mem of them, at most 4 MB (1M keys), at least 1024.
 */
#define ZL_CHECK_CHUNK_KEYS \
	Max(1024, Min((Size) work_mem * 1024 / 4, (Size) 4 * 1024 * 1024) / sizeof(uint32))

/* memory (kB) of each of the two main sorts: half of work_mem, 8 MB at least */
#define ZL_MAIN_SORT_KB			Max(work_mem / 2, 8192)

/* memory (kB) of each buffer and sort of a flush besides the main two */
#define ZL_SIDE_KB				1024

/* kinds of check items; stored ones sort first among equal starts */
#define ITEM_STORED				0
#define ITEM_LOADED				1

/*
 * Columns of the sort tuples: items (loaded or stored versions, sorted by
 * key hash and start) and rows to place; both carry the row as a bytea.
 */
#define ITEM_HASH				1
#define ITEM_FROM				2
#define ITEM_KIND				3
#define ITEM_SEQ				4	/* arrival, or stored location */
#define ITEM_TO					5
#define ITEM_ROW				6
#define ITEM_NATTS				6

#define PLACE_ORDER				1	/* place_order() */
#define PLACE_PARTITION			2	/* partition_end, or INT64_MIN: unplaced */
#define PLACE_FROM				3
#define PLACE_SEQ				4
#define PLACE_WINDOW			5	/* before valid_from: local time can go back */
#define PLACE_ROW				6
#define PLACE_NATTS				6

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

	/* sort tuples, their slots, and a buffer for the bytea of a row */
	TupleDesc	item_desc;		/* once registered */
	TupleDesc	place_desc;
	TupleTableSlot *item_slot;	/* virtual, to put */
	TupleTableSlot *place_slot;
	TupleTableSlot *item_read_slot; /* minimal, to read */
	TupleTableSlot *place_read_slot;
	Datum	   *key_row;		/* row-shaped: key slots filled per row */
	bytea	   *payload;
	Size		payload_size;
	char	   *row_buffer;		/* aligned copy of a row being written */
	Size		row_buffer_size;

	/* pending rows (in rows_context) */
	Tuplesortstate *keysort;	/* loaded rows to check, by key hash */
	Tuplesortstate *placesort;	/* rows to place */
	int64		nloaded;
	int64		nplace;
	int64		arrival;
	int64		min_from;		/* of the loaded rows */
	int64		max_to;
};

/* write states of the current transaction, in TopTransactionContext */
static List *write_states = NIL;

/* metadata statements of a flush must not flush again (ExecutorFinish hook) */
static bool flush_in_progress = false;

/* ---------- sort tuples ---------- */

static void
init_int8_column(TupleDesc desc, AttrNumber attnum, const char *name)
{
	TupleDescInitEntry(desc, attnum, name, INT8OID, -1, 0);
}

/* slots to put tuples of a sort descriptor (virtual) and to read them */
static TupleDesc
with_slots(TupleDesc desc, TupleTableSlot **put, TupleTableSlot **read)
{
	*put = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	*read = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	return desc;
}

/* the placement tuple: (order, partition, valid_from, arrival, window, row) */
static void
create_place_desc(ZLWriteState *state)
{
	TupleDesc	desc = CreateTemplateTupleDesc(PLACE_NATTS);

	init_int8_column(desc, PLACE_ORDER, "place_order");
	init_int8_column(desc, PLACE_PARTITION, "partition_end");
	init_int8_column(desc, PLACE_FROM, "valid_from");
	init_int8_column(desc, PLACE_SEQ, "arrival");
	init_int8_column(desc, PLACE_WINDOW, "window_start");
	TupleDescInitEntry(desc, PLACE_ROW, "row", BYTEAOID, -1, 0);
	state->place_desc = with_slots(desc, &state->place_slot, &state->place_read_slot);
}

/* the item tuple: (hash, valid_from, kind, seq, valid_to, row) */
static void
create_item_desc(ZLWriteState *state)
{
	TupleDesc	desc = CreateTemplateTupleDesc(ITEM_NATTS);

	init_int8_column(desc, ITEM_HASH, "hash");
	init_int8_column(desc, ITEM_FROM, "valid_from");
	TupleDescInitEntry(desc, ITEM_KIND, "kind", INT4OID, -1, 0);
	init_int8_column(desc, ITEM_SEQ, "seq");
	init_int8_column(desc, ITEM_TO, "valid_to");
	TupleDescInitEntry(desc, ITEM_ROW, "row", BYTEAOID, -1, 0);
	state->item_desc = with_slots(desc, &state->item_slot, &state->item_read_slot);
}

/* a sort on four integer columns, ascending, in the current context */
static Tuplesortstate *
begin_sort(TupleDesc desc, int nkeys, AttrNumber *attnums, Oid *operators, int work_mem_kb)
{
	Oid			collations[5] = {0};
	bool		nulls_first[5] = {0};

	Assert(nkeys <= lengthof(collations));
	return tuplesort_begin_heap(desc, nkeys, attnums, operators, collations, nulls_first,
								work_mem_kb, NULL, TUPLESORT_NONE);
}

/* items by (hash, valid_from, kind, seq) */
static Tuplesortstate *
begin_item_sort(ZLWriteState *state, int work_mem_kb)
{
	AttrNumber	attnums[4] = {ITEM_HASH, ITEM_FROM, ITEM_KIND, ITEM_SEQ};
	Oid			operators[4] = {Int8LessOperator, Int8LessOperator, Int4LessOperator,
	Int8LessOperator};

	return begin_sort(state->item_desc, 4, attnums, operators, work_mem_kb);
}

/* rows to place by (order, partition, valid_from, arrival) */
static Tuplesortstate *
begin_place_sort(ZLWriteState *state)
{
	AttrNumber	attnums[5] = {PLACE_ORDER, PLACE_PARTITION, PLACE_WINDOW, PLACE_FROM, PLACE_SEQ};
	Oid			operators[5] = {Int8LessOperator, Int8LessOperator, Int8LessOperator,
	Int8LessOperator, Int8LessOperator};

	return begin_sort(state->place_desc, 5, attnums, operators, ZL_MAIN_SORT_KB);
}

/*
 * The two sorts of a state may hold rows past the statement that added
 * them, so their temporary files belong to the top transaction (files are
 * created on the resource owner current when a sort spills).
 */
static void
state_sort_put(Tuplesortstate *sort, TupleTableSlot *slot)
{
	ResourceOwner save = CurrentResourceOwner;

	CurrentResourceOwner = TopTransactionResourceOwner;
	tuplesort_puttupleslot(sort, slot);
	CurrentResourceOwner = save;
}

static void
state_sort_perform(Tuplesortstate *sort)
{
	ResourceOwner save = CurrentResourceOwner;

	CurrentResourceOwner = TopTransactionResourceOwner;
	tuplesort_performsort(sort);
	CurrentResourceOwner = save;
}

/* the row as a bytea (in the state's buffer, valid until the next call) */
static Datum
row_payload(ZLWriteState *state, HeapTuple tuple)
{
	Size		size = VARHDRSZ + tuple->t_len;

	if (size > state->payload_size)
	{
		if (state->payload)
			pfree(state->payload);
		state->payload_size = Max(size, 2 * state->payload_size);
		state->payload = MemoryContextAlloc(state->context, state->payload_size);
	}
	SET_VARSIZE(state->payload, size);
	memcpy(VARDATA(state->payload), tuple->t_data, tuple->t_len);
	return PointerGetDatum(state->payload);
}

static int64
slot_int8(TupleTableSlot *slot, AttrNumber attnum)
{
	bool		isnull;

	return DatumGetInt64(slot_getattr(slot, attnum, &isnull));
}

/* length of the row a sort tuple carries */
static uint32
slot_row_length(TupleTableSlot *slot, AttrNumber attnum)
{
	bool		isnull;

	return VARSIZE_ANY_EXHDR(DatumGetPointer(slot_getattr(slot, attnum, &isnull)));
}

/* the row a sort tuple carries, copied to aligned memory at buffer */
static void
slot_row_into(TupleTableSlot *slot, AttrNumber attnum, HeapTuple tuple, char *buffer)
{
	bool		isnull;
	Pointer		p = DatumGetPointer(slot_getattr(slot, attnum, &isnull));

	tuple->t_len = VARSIZE_ANY_EXHDR(p);
	tuple->t_data = (HeapTupleHeader) buffer;
	tuple->t_tableOid = InvalidOid;
	ItemPointerSetInvalid(&tuple->t_self);
	memcpy(buffer, VARDATA_ANY(p), tuple->t_len);
}

/* the row a sort tuple carries, as a palloc'd tuple */
static HeapTuple
slot_row_copy(TupleTableSlot *slot, AttrNumber attnum)
{
	HeapTuple	tuple = palloc(HEAPTUPLESIZE + slot_row_length(slot, attnum));

	slot_row_into(slot, attnum, tuple, (char *) tuple + HEAPTUPLESIZE);
	return tuple;
}

/* ---------- states ---------- */

/* the table's options and key hasher, if it is registered yet */
static void
load_registration(ZLWriteState *state, Relation rel)
{
	state->registered = zl_meta_load_options(rel, &state->opts, true);
	if (state->registered)
	{
		state->hasher = zl_key_hasher_create(state->tupdesc, &state->opts);
		create_item_desc(state);
	}
}

static void
reset_pending(ZLWriteState *state)
{
	state->keysort = NULL;
	state->placesort = NULL;
	state->nloaded = 0;
	state->nplace = 0;
	state->arrival = 0;
	state->min_from = PG_INT64_MAX;
	state->max_to = PG_INT64_MIN;
}

/* end the sorts of the pending rows (closing their files) and forget them */
static void
forget_pending(ZLWriteState *state)
{
	if (state->keysort)
		tuplesort_end(state->keysort);
	if (state->placesort)
		tuplesort_end(state->placesort);
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
				state->tupdesc = CreateTupleDescCopy(RelationGetDescr(rel));
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
	state->tupdesc = CreateTupleDescCopy(RelationGetDescr(rel));
	state->rel_desc = RelationGetDescr(rel);
	state->key_row = palloc0(sizeof(Datum) * state->tupdesc->natts);
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

	key->placed = true;
	key->partition_end = zl_partition_of(opts, valid_to);
	key->window_start = zl_window_of(opts, key->partition_end, valid_from);
	*valid_from_out = valid_from;
	*valid_to_out = valid_to;
}

/*
 * Rows are placed in (partition, window, valid_from) order.  Windows are
 * not always consecutive ranges of valid_from (local time goes back at
 * the end of summer time, or by a day in Sitka in 1867), so the window is
 * a sort key of its own.  This summary of partition and window — 24 bits
 * of partition, 40 of window start in units of 2^14 microseconds, both
 * clamped — keeps their order, so that it decides most comparisons of the
 * sort alone; the full columns decide the ties.
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

/* hand a row to placement */
static void
put_place(ZLWriteState *state, HeapTuple tuple, const ZLRunKey *key, int64 valid_from)
{
	TupleTableSlot *slot = state->place_slot;

	if (state->placesort == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(state->rows_context);

		state->placesort = begin_place_sort(state);
		MemoryContextSwitchTo(old);
	}
	ExecClearTuple(slot);
	memset(slot->tts_isnull, 0, sizeof(bool) * PLACE_NATTS);
	slot->tts_values[PLACE_ORDER - 1] =
		Int64GetDatum(key->placed ? place_order(key->partition_end, key->window_start) : PG_INT64_MIN);
	slot->tts_values[PLACE_PARTITION - 1] =
		Int64GetDatum(key->placed ? (int64) key->partition_end : PG_INT64_MIN);
	slot->tts_values[PLACE_WINDOW - 1] = Int64GetDatum(key->window_start);
	slot->tts_values[PLACE_FROM - 1] = Int64GetDatum(valid_from);
	slot->tts_values[PLACE_SEQ - 1] = Int64GetDatum(state->arrival++);
	slot->tts_values[PLACE_ROW - 1] = row_payload(state, tuple);
	ExecStoreVirtualTuple(slot);
	state_sort_put(state->placesort, slot);
	state->nplace++;
}

/*
 * Add one finished (already toasted) row that needs no check: a version
 * apply_changes computed, a row compaction keeps, or a row of a table not
 * registered yet (checked when registration places it).
 */
void
zl_write_add(ZLWriteState *state, HeapTuple tuple)
{
	ZLRunKey	key;
	int64		valid_from = 0;
	int64		valid_to;

	memset(&key, 0, sizeof(key));
	if (state->registered)
		place_row(state, tuple, &key, &valid_from, &valid_to);
	put_place(state, tuple, &key, valid_from);
}

/* an item for a sort by key hash */
static void
put_item(ZLWriteState *state, Tuplesortstate *sort, HeapTuple tuple, uint32 hash,
		 int64 valid_from, int64 valid_to, int kind, int64 seq)
{
	TupleTableSlot *slot = state->item_slot;

	ExecClearTuple(slot);
	memset(slot->tts_isnull, 0, sizeof(bool) * ITEM_NATTS);
	slot->tts_values[ITEM_HASH - 1] = Int64GetDatum((int64) hash);
	slot->tts_values[ITEM_FROM - 1] = Int64GetDatum(valid_from);
	slot->tts_values[ITEM_KIND - 1] = Int32GetDatum(kind);
	slot->tts_values[ITEM_SEQ - 1] = Int64GetDatum(seq);
	slot->tts_values[ITEM_TO - 1] = Int64GetDatum(valid_to);
	slot->tts_values[ITEM_ROW - 1] = row_payload(state, tuple);
	ExecStoreVirtualTuple(slot);
	if (sort == state->keysort)
		state_sort_put(sort, slot);
	else
		tuplesort_puttupleslot(sort, slot);
}

/*
 * Add one finished (already toasted) row loaded as given (INSERT, COPY,
 * rows placed at registration); it is checked when it is placed.  The
 * tuple is copied into the state's memory.
 */
void
zl_write_load(ZLWriteState *state, HeapTuple tuple)
{
	ZLRunKey	key;
	int64		valid_from,
				valid_to;
	MemoryContext old;

	if (!state->registered)
	{
		zl_write_add(state, tuple);
		return;
	}
	place_row(state, tuple, &key, &valid_from, &valid_to);

	MemoryContextReset(state->row_context);
	old = MemoryContextSwitchTo(state->rows_context);
	if (state->keysort == NULL)
		state->keysort = begin_item_sort(state, ZL_MAIN_SORT_KB);
	MemoryContextSwitchTo(state->row_context);
	zl_key_extract(state->hasher, tuple, state->tupdesc, state->key_row);
	put_item(state, state->keysort, tuple, zl_key_hash(state->hasher, state->key_row),
			 valid_from, valid_to, ITEM_LOADED, state->arrival++);
	MemoryContextSwitchTo(old);

	state->nloaded++;
	state->min_from = Min(state->min_from, valid_from);
	state->max_to = Max(state->max_to, valid_to);
}

/* ---------- retiring stored rows (apply_changes and loads) ---------- */

static int
int32_cmp(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;

	return x < y ? -1 : (x > y);
}

/* rows of a sub-group being compacted that stay: all but the dropped ones */
typedef struct CompactArg
{
	ZLWriteState *state;
	const int32 *dropped;		/* ascending */
	int			ndropped;
} CompactArg;

static void
keep_row(void *arg, const ZLSubGroup *sg, int32 position, HeapTuple tuple)
{
	CompactArg *ca = arg;

	if (bsearch(&position, ca->dropped, ca->ndropped, sizeof(int32), int32_cmp) == NULL)
		zl_write_add(ca->state, tuple);
}

/*
 * Stored rows that a writer replaced (dropped, ascending positions of one
 * sub-group) are retired by a mask row that lists them — unless the
 * sub-group is in the current partition and would be more than half
 * masked: then it is compacted here, its remaining rows written again
 * (into the same window) and its metadata row deleted, masks and all, and
 * true is returned.  Readers with older snapshots keep seeing the old
 * sub-group, whose blocks later writers reuse once none can
 * (zl_freespace.c); the current partition stays at most about twice its
 * live size, so the cost of a batch does not grow with history.
 */
bool
zl_write_compact_subgroup(Relation rel, ZLWriteState *state, const ZLSubGroup *sg,
						  const int32 *dropped, int ndropped)
{
	CompactArg	arg = {state, dropped, ndropped};

	if (sg->partition_end != ZL_CURRENT_PARTITION ||
		(sg->masked_rows + ndropped) * 2 <= sg->row_count)
		return false;
	zl_read_subgroup_rows(rel, sg, false, keep_row, &arg);
	zl_meta_delete_subgroup(state->storage_id, sg->subgroup_id);
	return true;
}

/* ---------- checking loaded versions ---------- */

/* one key's versions, in start order, as the check goes through them */
typedef struct KeyCheck
{
	Datum	   *key_row;		/* row-shaped: the key (in the group's memory) */

	/* the version of the key that ends latest so far */
	bool		have_last;
	int64		last_from;
	int64		last_to;
	bool		last_loaded;

	/* the run of adjacent versions with equal values being built */
	bool		in_run;
	int64		run_from;
	int64		run_to;
	bool		run_loaded;
	int			run_items;
	HeapTuple	run_head;		/* first version: its row is the run's */
	Datum	   *head_values;	/* deformed when first compared, else NULL */
	bool	   *head_nulls;
	int64	   *run_stored;		/* locations of the stored versions in it */
	int			nrun_stored;
	int			maxrun_stored;
	MemoryContext run_context;
} KeyCheck;

typedef struct LoadCheck
{
	ZLWriteState *state;
	Relation	rel;
	ZLValueComparer *values;
	ZLRowCheck *row_check;		/* merged versions: generated columns, constraints */

	/* sub-groups that may hold versions of loaded keys */
	ZLSubGroup *sgs;
	int			nsgs;

	/* stored versions merged away: sub-group index << 32 | position */
	Tuplesortstate *merged;

	/*
	 * Items come sorted by key hash, then start: the keys of one hash (one,
	 * unless hashes collide) are checked side by side.
	 */
	bool		in_group;
	int64		group_hash;
	KeyCheck  **group;			/* [0, ngroup) in use; kept for reuse */
	int			ngroup;
	int			maxgroup;
	MemoryContext group_context;	/* the keys of the group */
	MemoryContext item_context; /* one item */
	Datum	   *probe;			/* row-shaped: an item's key */
} LoadCheck;

/* compare two items by (hash, valid_from, kind, seq) */
static int
item_cmp(TupleTableSlot *a, TupleTableSlot *b)
{
	for (AttrNumber col = ITEM_HASH; col <= ITEM_SEQ; col++)
	{
		bool		isnull;
		int64		x = col == ITEM_KIND ? DatumGetInt32(slot_getattr(a, col, &isnull)) :
			slot_int8(a, col);
		int64		y = col == ITEM_KIND ? DatumGetInt32(slot_getattr(b, col, &isnull)) :
			slot_int8(b, col);

		if (x != y)
			return x < y ? -1 : 1;
	}
	return 0;
}

static char *
period_text(LoadCheck *lc, int64 from, int64 to)
{
	Oid			type = lc->state->opts.period_type;

	return psprintf("[%s, %s)", zl_instant_to_cstring(from, type),
					zl_instant_to_cstring(to, type));
}

static void
report_overlap(LoadCheck *lc, KeyCheck *kc, HeapTuple row, int64 from, int64 to,
			   bool loaded)
{
	char	   *earlier = period_text(lc, kc->last_from, kc->last_to);
	char	   *later = period_text(lc, from, to);

	ereport(ERROR,
			(errcode(ERRCODE_EXCLUSION_VIOLATION),
			 errmsg("overlapping versions of key %s in zipper table \"%s\"",
					zl_describe_key(&lc->state->opts, lc->state->tupdesc, row),
					RelationGetRelationName(lc->rel)),
			 loaded && kc->last_loaded ?
			 errdetail("Versions %s and %s being loaded overlap.", earlier, later) :
			 errdetail("Version %s being loaded overlaps the stored version %s.",
					   loaded ? later : earlier, loaded ? earlier : later),
			 errhint("A key has at most one version at any time: correct or leave out one of the two. Change stored versions with zipper_lake.apply_changes().")));
}

/* hand a finished run to placement, retiring the stored versions in it */
static void
end_run(LoadCheck *lc, KeyCheck *kc)
{
	ZLWriteState *state = lc->state;
	HeapTuple	row = kc->run_head;
	ZLRunKey	key;
	MemoryContext old;

	if (!kc->in_run)
		return;
	kc->in_run = false;
	if (!kc->run_loaded)
		return;					/* stored versions only: nothing changes */

	old = MemoryContextSwitchTo(lc->item_context);
	if (kc->run_items > 1)
	{
		int			col = state->opts.to_attnum;
		Datum		to = zl_instant_to_datum(kc->run_to, state->opts.period_type);
		bool		isnull = false;

		row = heap_modify_tuple_by_cols(row, state->tupdesc, 1, &col, &to, &isnull);
		/* a new period: its generated columns and constraints (zl_rowcheck.c) */
		row = zl_row_check(lc->row_check, row);
	}
	/* the rows were checked when added or stored: only place the run */
	key.placed = true;
	key.partition_end = zl_partition_of(&state->opts, kc->run_to);
	key.window_start = zl_window_of(&state->opts, key.partition_end, kc->run_from);
	put_place(state, row, &key, kc->run_from);
	MemoryContextSwitchTo(old);

	if (kc->nrun_stored > 0 && lc->merged == NULL)
	{
		old = MemoryContextSwitchTo(state->rows_context);
		lc->merged = tuplesort_begin_datum(INT8OID, Int8LessOperator, InvalidOid, false,
										   ZL_SIDE_KB, NULL, TUPLESORT_NONE);
		MemoryContextSwitchTo(old);
	}
	for (int i = 0; i < kc->nrun_stored; i++)
		tuplesort_putdatum(lc->merged, Int64GetDatum(kc->run_stored[i]), false);
}

static void
start_run(KeyCheck *kc, HeapTuple row, int64 from, int64 to, bool loaded, int64 seq)
{
	MemoryContext old;

	MemoryContextReset(kc->run_context);
	old = MemoryContextSwitchTo(kc->run_context);
	kc->in_run = true;
	kc->run_from = from;
	kc->run_to = to;
	kc->run_loaded = loaded;
	kc->run_items = 1;
	kc->run_head = heap_copytuple(row);
	kc->head_values = NULL;
	kc->nrun_stored = 0;
	kc->maxrun_stored = 4;
	kc->run_stored = palloc(sizeof(int64) * kc->maxrun_stored);
	if (!loaded)
		kc->run_stored[kc->nrun_stored++] = seq;
	MemoryContextSwitchTo(old);
}

/* the keys of a hash are done */
static void
end_group(LoadCheck *lc)
{
	for (int i = 0; i < lc->ngroup; i++)
		end_run(lc, lc->group[i]);
	lc->ngroup = 0;
	lc->in_group = false;
	MemoryContextReset(lc->group_context);
}

/* the check of the key in lc->probe, among the keys of the current hash */
static KeyCheck *
key_check_for(LoadCheck *lc)
{
	ZLWriteState *state = lc->state;
	KeyCheck   *kc;
	MemoryContext old;

	for (int i = 0; i < lc->ngroup; i++)
		if (zl_keys_equal(state->hasher, lc->group[i]->key_row, lc->probe))
			return lc->group[i];

	if (lc->ngroup == lc->maxgroup)
	{
		old = MemoryContextSwitchTo(state->rows_context);
		lc->maxgroup = Max(4, lc->maxgroup * 2);
		lc->group = lc->group ? repalloc(lc->group, sizeof(KeyCheck *) * lc->maxgroup) :
			palloc(sizeof(KeyCheck *) * lc->maxgroup);
		for (int i = lc->ngroup; i < lc->maxgroup; i++)
		{
			lc->group[i] = palloc0(sizeof(KeyCheck));
			lc->group[i]->run_context = AllocSetContextCreate(state->rows_context,
															  "zipper_lake load run",
															  ALLOCSET_SMALL_SIZES);
			lc->group[i]->key_row = palloc0(sizeof(Datum) * state->tupdesc->natts);
		}
		MemoryContextSwitchTo(old);
	}
	kc = lc->group[lc->ngroup++];
	kc->have_last = false;
	kc->in_run = false;
	for (int i = 0; i < state->opts.nkeys; i++)
	{
		int			col = state->opts.key_attnums[i] - 1;
		Form_pg_attribute att = TupleDescAttr(state->tupdesc, col);

		old = MemoryContextSwitchTo(lc->group_context);
		kc->key_row[col] = datumCopy(lc->probe[col], att->attbyval, att->attlen);
		MemoryContextSwitchTo(old);
	}
	return kc;
}

/*
 * One version, loaded or stored, in (key hash, valid_from) order: refuse
 * an overlap with an earlier one of its key, extend the key's run of
 * equal versions or start a new one.
 */
static void
check_item(LoadCheck *lc, TupleTableSlot *slot)
{
	ZLWriteState *state = lc->state;
	bool		isnull;
	int64		hash = slot_int8(slot, ITEM_HASH);
	int64		from = slot_int8(slot, ITEM_FROM);
	int64		to = slot_int8(slot, ITEM_TO);
	bool		loaded = DatumGetInt32(slot_getattr(slot, ITEM_KIND, &isnull)) == ITEM_LOADED;
	int64		seq = slot_int8(slot, ITEM_SEQ);
	bool		extended = false;
	HeapTuple	row;
	KeyCheck   *kc;
	MemoryContext old;

	CHECK_FOR_INTERRUPTS();
	if (lc->in_group && hash != lc->group_hash)
		end_group(lc);
	lc->in_group = true;
	lc->group_hash = hash;

	MemoryContextReset(lc->item_context);
	old = MemoryContextSwitchTo(lc->item_context);
	row = slot_row_copy(slot, ITEM_ROW);
	zl_key_extract(state->hasher, row, state->tupdesc, lc->probe);
	kc = key_check_for(lc);

	/* stored versions that overlap each other are not this load's doing */
	if (kc->have_last && from < kc->last_to && (loaded || kc->last_loaded))
		report_overlap(lc, kc, row, from, to, loaded);

	if (kc->in_run && kc->run_to == from)
	{
		TupleDesc	tupdesc = state->tupdesc;
		Datum	   *values = palloc(sizeof(Datum) * tupdesc->natts);
		bool	   *nulls = palloc(sizeof(bool) * tupdesc->natts);

		if (kc->head_values == NULL)
		{
			MemoryContextSwitchTo(kc->run_context);
			kc->head_values = palloc(sizeof(Datum) * tupdesc->natts);
			kc->head_nulls = palloc(sizeof(bool) * tupdesc->natts);
			heap_deform_tuple(kc->run_head, tupdesc, kc->head_values, kc->head_nulls);
			MemoryContextSwitchTo(lc->item_context);
		}
		heap_deform_tuple(row, tupdesc, values, nulls);
		if (zl_values_equal(lc->values, kc->head_values, kc->head_nulls, values, nulls))
		{
			kc->run_to = to;
			kc->run_loaded |= loaded;
			kc->run_items++;
			if (!loaded)
			{
				if (kc->nrun_stored == kc->maxrun_stored)
				{
					kc->maxrun_stored *= 2;
					kc->run_stored = repalloc(kc->run_stored,
											  sizeof(int64) * kc->maxrun_stored);
				}
				kc->run_stored[kc->nrun_stored++] = seq;
			}
			extended = true;
		}
	}
	if (!extended)
	{
		end_run(lc, kc);
		start_run(kc, row, from, to, loaded, seq);
	}
	MemoryContextSwitchTo(old);

	if (!kc->have_last || to > kc->last_to)
	{
		kc->have_last = true;
		kc->last_from = from;
		kc->last_to = to;
		kc->last_loaded = loaded;
	}
}

/*
 * Check loaded items (from the key sort, or a chunk of them buffered)
 * merged with the stored items of their keys (a sort, or none).
 */
static void
check_streams(LoadCheck *lc, Tuplesortstate *loaded_sort, Tuplestorestate *loaded_buffer,
			  TupleTableSlot *loaded_slot, Tuplesortstate *stored_sort,
			  TupleTableSlot *stored_slot)
{
	bool		have_loaded,
				have_stored;

#define NEXT_LOADED() (loaded_sort ? \
	tuplesort_gettupleslot(loaded_sort, true, false, loaded_slot, NULL) : \
	tuplestore_gettupleslot(loaded_buffer, true, false, loaded_slot))
#define NEXT_STORED() (stored_sort != NULL && \
	tuplesort_gettupleslot(stored_sort, true, false, stored_slot, NULL))

	have_loaded = NEXT_LOADED();
	have_stored = NEXT_STORED();
	while (have_loaded || have_stored)
	{
		if (have_loaded && (!have_stored || item_cmp(loaded_slot, stored_slot) < 0))
		{
			check_item(lc, loaded_slot);
			have_loaded = NEXT_LOADED();
		}
		else
		{
			check_item(lc, stored_slot);
			have_stored = NEXT_STORED();
		}
	}
	end_group(lc);
#undef NEXT_LOADED
#undef NEXT_STORED
}

/* can a sub-group hold versions of loaded keys between from and to? */
static bool
may_hold(LoadCheck *lc, const ZLSubGroup *sg, int64 from, int64 to)
{
	if (!sg->placed || sg->masked_rows >= sg->row_count)
		return false;
	if (sg->partition_end == ZL_CURRENT_PARTITION)
		return true;
	return sg->partition_end >= zl_partition_of(&lc->state->opts, from) &&
		sg->first_start <= to;
}

/* stored rows of the keys of a chunk */
typedef struct CollectArg
{
	LoadCheck  *lc;
	Tuplesortstate *sort;
	const uint32 *hashes;		/* ascending, distinct */
	int			nhashes;
	int64		min_from;
	int64		max_to;
} CollectArg;

static int
uint32_cmp(const void *a, const void *b)
{
	uint32		x = *(const uint32 *) a;
	uint32		y = *(const uint32 *) b;

	return x < y ? -1 : (x > y);
}

static void
collect_stored(void *arg, const ZLSubGroup *sg, int32 position, HeapTuple tuple)
{
	CollectArg *ca = arg;
	LoadCheck  *lc = ca->lc;
	ZLWriteState *state = lc->state;
	const ZLTableOptions *opts = &state->opts;
	uint32		hash;
	bool		isnull;
	int64		from,
				to;
	MemoryContext old;

	MemoryContextReset(state->row_context);
	old = MemoryContextSwitchTo(state->row_context);
	zl_key_extract(state->hasher, tuple, state->tupdesc, state->key_row);
	hash = zl_key_hash(state->hasher, state->key_row);
	from = zl_datum_to_instant(heap_getattr(tuple, opts->from_attnum, state->tupdesc, &isnull),
							   opts->period_type);
	to = zl_datum_to_instant(heap_getattr(tuple, opts->to_attnum, state->tupdesc, &isnull),
							 opts->period_type);
	if (to >= ca->min_from && from <= ca->max_to &&
		bsearch(&hash, ca->hashes, ca->nhashes, sizeof(uint32), uint32_cmp) != NULL)
		put_item(state, ca->sort, tuple, hash, from, to, ITEM_STORED,
				 ((int64) (sg - lc->sgs) << 32) | (uint32) position);
	MemoryContextSwitchTo(old);
}

/* the stored versions of a chunk's keys that may touch its versions, sorted */
static Tuplesortstate *
find_stored(LoadCheck *lc, const uint32 *hashes, int nhashes, int64 min_from, int64 max_to)
{
	CollectArg	arg = {lc, NULL, hashes, nhashes, min_from, max_to};

	arg.sort = begin_item_sort(lc->state, ZL_SIDE_KB);
	for (int i = 0; i < lc->nsgs; i++)
	{
		ZLSubGroup *sg = &lc->sgs[i];

		if (!may_hold(lc, sg, min_from, max_to))
			continue;
		if (sg->partition_end == ZL_CURRENT_PARTITION && sg->key_directory != NULL)
		{
			int			npositions;
			int32	   *positions = zl_key_directory_probe(sg->key_directory, hashes,
														   nhashes, &npositions);

			if (npositions == 0)
				continue;
			qsort(positions, npositions, sizeof(int32), int32_cmp);
			zl_read_subgroup_positions(lc->rel, sg, positions, npositions,
									   collect_stored, &arg);
			pfree(positions);
		}
		else
			zl_read_subgroup_rows(lc->rel, sg, false, collect_stored, &arg);
	}
	tuplesort_performsort(arg.sort);
	return arg.sort;
}

/*
 * Check the sorted loaded rows chunk by chunk: up to ZL_CHECK_CHUNK_KEYS
 * key hashes, all rows of each, buffered while the stored versions of
 * those keys are found and sorted.
 */
static void
check_chunks(LoadCheck *lc)
{
	ZLWriteState *state = lc->state;
	TupleTableSlot *slot = state->item_read_slot;
	TupleTableSlot *buffer_slot = MakeSingleTupleTableSlot(state->item_desc,
														   &TTSOpsMinimalTuple);
	TupleTableSlot *stored_slot = MakeSingleTupleTableSlot(state->item_desc,
														   &TTSOpsMinimalTuple);
	Tuplestorestate *buffer = tuplestore_begin_heap(false, false, ZL_SIDE_KB);
	int			max_hashes = ZL_CHECK_CHUNK_KEYS;
	uint32	   *hashes = palloc(sizeof(uint32) * max_hashes);
	bool		have;

	have = tuplesort_gettupleslot(state->keysort, true, false, slot, NULL);
	while (have)
	{
		int			nhashes = 0;
		int64		min_from = PG_INT64_MAX;
		int64		max_to = PG_INT64_MIN;
		Tuplesortstate *stored;

		tuplestore_clear(buffer);
		while (have)
		{
			uint32		hash = (uint32) slot_int8(slot, ITEM_HASH);

			if (nhashes == 0 || hashes[nhashes - 1] != hash)
			{
				if (nhashes == max_hashes)
					break;
				hashes[nhashes++] = hash;
			}
			min_from = Min(min_from, slot_int8(slot, ITEM_FROM));
			max_to = Max(max_to, slot_int8(slot, ITEM_TO));
			tuplestore_puttupleslot(buffer, slot);
			have = tuplesort_gettupleslot(state->keysort, true, false, slot, NULL);
		}
		stored = find_stored(lc, hashes, nhashes, min_from, max_to);
		check_streams(lc, NULL, buffer, buffer_slot, stored, stored_slot);
		tuplesort_end(stored);
	}
	tuplestore_end(buffer);
	pfree(hashes);
}

/*
 * Retire the stored versions that loaded ones were merged with, one
 * sub-group at a time: compacted, or listed in mask rows inserted a batch
 * at a time.
 */
static void
retire_merged(LoadCheck *lc)
{
	int			maxpositions = 1024;
	int32	   *positions = palloc(sizeof(int32) * maxpositions);
	int			npositions = 0;
	int64		current = -1;
	int			nmasks = 0;
	int			batch_positions = 0;
	int64	   *mask_ids = palloc(sizeof(int64) * 1024);
	int32	  **mask_positions = palloc(sizeof(int32 *) * 1024);
	int		   *mask_counts = palloc(sizeof(int) * 1024);
	Datum		value;
	bool		isnull;
	bool		more;

	if (lc->merged == NULL)
		return;
	tuplesort_performsort(lc->merged);
	do
	{
		int64		location = 0;

		more = tuplesort_getdatum(lc->merged, true, &value, &isnull, NULL);
		if (more)
			location = DatumGetInt64(value);
		if (npositions > 0 && (!more || (location >> 32) != current))
		{
			const ZLSubGroup *sg = &lc->sgs[current];

			if (!zl_write_compact_subgroup(lc->rel, lc->state, sg, positions, npositions))
			{
				mask_ids[nmasks] = sg->subgroup_id;
				mask_positions[nmasks] = palloc(sizeof(int32) * npositions);
				memcpy(mask_positions[nmasks], positions, sizeof(int32) * npositions);
				mask_counts[nmasks++] = npositions;
				batch_positions += npositions;
			}
			if (nmasks > 0 && (!more || nmasks == 1024 || batch_positions >= 65536))
			{
				zl_meta_insert_masks(lc->state->storage_id, nmasks, mask_ids,
									 mask_positions, mask_counts);
				for (int i = 0; i < nmasks; i++)
					pfree(mask_positions[i]);
				nmasks = 0;
				batch_positions = 0;
			}
			npositions = 0;
		}
		if (more)
		{
			if (npositions == maxpositions)
			{
				maxpositions *= 2;
				positions = repalloc_huge(positions, sizeof(int32) * maxpositions);
			}
			current = location >> 32;
			positions[npositions++] = (int32) (location & 0xFFFFFFFF);
		}
	} while (more);
	tuplesort_end(lc->merged);
	lc->merged = NULL;
}

/*
 * Check the loaded rows of a flush and hand what they leave to placement
 * (see the header comment).
 */
static void
check_loaded(ZLWriteState *state, Relation rel)
{
	LoadCheck	lc;
	Snapshot	snapshot;
	bool		stored = false;
	bool		current = false;
	MemoryContext old = MemoryContextSwitchTo(state->rows_context);

	memset(&lc, 0, sizeof(lc));
	lc.state = state;
	lc.rel = rel;
	lc.values = zl_value_comparer_create(state->tupdesc, &state->opts);
	lc.row_check = zl_row_check_begin(rel, &state->opts);
	lc.probe = palloc0(sizeof(Datum) * state->tupdesc->natts);
	lc.group_context = AllocSetContextCreate(state->rows_context, "zipper_lake load keys",
											 ALLOCSET_DEFAULT_SIZES);
	lc.item_context = AllocSetContextCreate(state->rows_context, "zipper_lake load item",
											ALLOCSET_DEFAULT_SIZES);

	/* what earlier statements and committed writers stored */
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	lc.sgs = zl_meta_load_subgroups(state->storage_id, snapshot,
									zl_partition_of(&state->opts, state->min_from), &lc.nsgs);
	for (int i = 0; i < lc.nsgs; i++)
	{
		if (may_hold(&lc, &lc.sgs[i], state->min_from, state->max_to))
		{
			stored = true;
			current |= lc.sgs[i].partition_end == ZL_CURRENT_PARTITION;
		}
	}
	if (current)
		zl_meta_load_key_directories(state->storage_id, snapshot, lc.sgs, lc.nsgs);
	UnregisterSnapshot(snapshot);

	state_sort_perform(state->keysort);
	if (stored)
		check_chunks(&lc);
	else
		check_streams(&lc, state->keysort, NULL, state->item_read_slot, NULL, NULL);
	tuplesort_end(state->keysort);
	state->keysort = NULL;
	retire_merged(&lc);
	zl_row_check_end(lc.row_check);
	MemoryContextSwitchTo(old);
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
	TupleTableSlot *slot;		/* the sort's next row */
	bool		have;			/* slot holds a row not written yet */
	ZLRunKey	run;			/* the run being written */
	Tuplestorestate *buffer;	/* rows of a run buffered for placement */
	TupleTableSlot *buffer_slot;
	uint32	   *lengths;		/* their lengths */
	uint32	   *hashes;			/* key hashes of a sub-group's rows */
	int32	   *positions;		/* and their positions */
} RunReader;

static void
read_next(RunReader *rr)
{
	rr->have = tuplesort_gettupleslot(rr->state->placesort, true, false, rr->slot, NULL);
}

/* does the sort's next row belong to the run being written? */
static bool
next_in_run(RunReader *rr)
{
	int64		partition;

	if (!rr->have)
		return false;
	partition = slot_int8(rr->slot, PLACE_PARTITION);
	return (rr->run.placed ? partition == (int64) rr->run.partition_end :
			partition == PG_INT64_MIN) &&
		slot_int8(rr->slot, PLACE_WINDOW) == rr->run.window_start;
}

/*
 * Write the next n rows of the run (fewer if the run ends first) as one
 * sub-group, from the buffer or straight from the sort, into blocks free
 * blocks from first_block on (InvalidBlockNumber: at the end of the file).
 */
static void
write_subgroup(Relation rel, RunReader *rr, int n, bool from_buffer,
			   BlockNumber first_block, int32 blocks)
{
	ZLWriteState *state = rr->state;
	const ZLRunKey *key = &rr->run;
	ZLSubGroup	sg;
	int32		rollover_seq = 0;
	ZLPageWriter *writer;
	bool		current = key->placed && key->partition_end == ZL_CURRENT_PARTITION;
	bytea	   *directory = NULL;
	int			i;

	memset(&sg, 0, sizeof(sg));
	sg.placed = key->placed;
	sg.partition_end = key->partition_end;
	sg.window_start = key->window_start;

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
	for (i = 0; i < n; i++)
	{
		TupleTableSlot *slot = rr->slot;
		HeapTupleData tuple;
		int32		position;
		int64		from;

		if (from_buffer)
		{
			slot = rr->buffer_slot;
			if (!tuplestore_gettupleslot(rr->buffer, true, false, slot))
				elog(ERROR, "zipper_lake sub-group buffer ended early");
		}
		else if (!next_in_run(rr))
			break;

		CHECK_FOR_INTERRUPTS();
		if (slot_row_length(slot, PLACE_ROW) > state->row_buffer_size)
		{
			if (state->row_buffer)
				pfree(state->row_buffer);
			state->row_buffer_size = Max(slot_row_length(slot, PLACE_ROW), BLCKSZ);
			state->row_buffer = MemoryContextAlloc(state->context, state->row_buffer_size);
		}
		slot_row_into(slot, PLACE_ROW, &tuple, state->row_buffer);
		from = slot_int8(slot, PLACE_FROM);
		if (i == 0)
			sg.first_start = from;
		sg.last_start = from;
		position = zl_page_writer_add(writer, &tuple);

		/* open versions get a key directory, for apply_changes (zl_keys.c) */
		if (current)
		{
			MemoryContext old;

			MemoryContextReset(state->row_context);
			old = MemoryContextSwitchTo(state->row_context);
			zl_key_extract(state->hasher, &tuple, state->tupdesc, state->key_row);
			rr->hashes[i] = zl_key_hash(state->hasher, state->key_row);
			rr->positions[i] = position;
			MemoryContextSwitchTo(old);
		}
		if (!from_buffer)
			read_next(rr);
	}
	sg.row_count = i;
	zl_page_writer_finish(writer, &sg.first_block, &sg.blocks);

	if (current)
		directory = zl_key_directory_build(rr->hashes, rr->positions, i);
	(void) zl_meta_insert_subgroup(state->storage_id, &sg, rollover_seq, directory);
	if (directory)
		pfree(directory);
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

	if (zl_free_space_largest(free_space) == 0)
	{
		write_subgroup(rel, rr, ZL_MAX_SUBGROUP_ROWS, false, InvalidBlockNumber, 0);
		return;
	}

	if (rr->buffer == NULL)
	{
		rr->buffer = tuplestore_begin_heap(false, false, ZL_SIDE_KB);
		rr->buffer_slot = MakeSingleTupleTableSlot(rr->state->place_desc,
												   &TTSOpsMinimalTuple);
	}
	tuplestore_clear(rr->buffer);
	while (n < ZL_MAX_SUBGROUP_ROWS && next_in_run(rr))
	{
		tuplestore_puttupleslot(rr->buffer, rr->slot);
		rr->lengths[n++] = slot_row_length(rr->slot, PLACE_ROW);
		read_next(rr);
	}
	min_piece = Max(ZL_MIN_REUSE_BLOCKS, pages_at_least(rr->lengths, n) / 4);
	for (int done = 0; done < n;)
	{
		BlockNumber first_block;
		int32		blocks;
		int			take = place_subgroup(free_space, rr->lengths + done, n - done, current,
										  min_piece, &first_block, &blocks);

		write_subgroup(rel, rr, take, true, first_block, blocks);
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

	state_sort_perform(state->placesort);
	free_space = zl_free_space_begin(rel, state->storage_id);

	memset(&rr, 0, sizeof(rr));
	rr.state = state;
	rr.slot = state->place_read_slot;
	rr.lengths = palloc(sizeof(uint32) * ZL_MAX_SUBGROUP_ROWS);
	rr.hashes = palloc(sizeof(uint32) * ZL_MAX_SUBGROUP_ROWS);
	rr.positions = palloc(sizeof(int32) * ZL_MAX_SUBGROUP_ROWS);
	read_next(&rr);
	while (rr.have)
	{
		int64		partition = slot_int8(rr.slot, PLACE_PARTITION);

		rr.run.placed = partition != PG_INT64_MIN;
		rr.run.partition_end = rr.run.placed ? (DateADT) partition : 0;
		rr.run.window_start = slot_int8(rr.slot, PLACE_WINDOW);
		while (next_in_run(&rr))
			write_chunk(rel, &rr, free_space);
	}
	if (rr.buffer)
		tuplestore_end(rr.buffer);
	zl_free_space_end(free_space);
	MemoryContextSwitchTo(old);
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
	if (state->nloaded > 0)
		check_loaded(state, rel);
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
			/* memory went with TopTransactionContext, files with its owner */
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
