/*-------------------------------------------------------------------------
 *
 * zl_apply.c
 *	  apply_changes() and apply_snapshot(): event-time change batches.
 *
 * The contract is README "Change semantics": a key's history is the fold
 * of every change ever applied to it, whatever the batching (zl_fold.c
 * folds one key; zl_record.c keeps what the versions do not show).  This
 * file applies a batch with the patent's write path:
 *
 *  1. Read the batch (as the caller, so its privileges apply) with one
 *     query whose rows stream to a DestReceiver, convert and validate every
 *     change, and order the changes by key hash: held in memory while they
 *     fit work_mem, else in a tuplesort that spills ("The batch by key
 *     hash").
 *  2. Apply the sorted batch a chunk of keys at a time (apply_chunks):
 *     keys are independent, so each chunk is a batch of its own, and a
 *     chunk ends at the first new key hash once its keys, changes and
 *     stored versions use work_mem.  Within a chunk each key's changes are
 *     sorted by (change_time, seq, arrival); identical duplicates collapse,
 *     conflicting ones are an error.
 *  3. Under the table's writer lock, with the latest snapshot, find the
 *     open version of every key of the chunk: the key directories of the
 *     current partition's sub-groups (zl_keys.c) name the rows whose key
 *     hash is one of the chunk's, and only those rows are read.
 *     (apply_snapshot with deletes reads every open key of the chunk's
 *     hash range: the directories name those too.)
 *  4. Only keys whose earliest change is at or before their open version's
 *     start (late changes, new or deleted keys) need history: scan just
 *     the partitions whose end date can hold a valid_to >= that change
 *     time, and keep versions ending at or after it.  The change record's
 *     segments of the chunk's hash range holding an instant at or after
 *     the chunk's earliest change give the keys' remembered instants (an
 *     in-order batch reads none).
 *  5. Fold each key's changes into its versions and remembered instants
 *     (zl_fold.c), in memory, and hand every version that is new or
 *     changed to the write state, which
 *     places it — closed versions into the history partition of their end
 *     date, open ones into the current partition's file groups with
 *     rollover — and, at the end of the batch, writes sorted sub-groups.
 *  6. Stored versions that did not survive unchanged are remembered (in a
 *     tuplesort) and retired once the whole batch is applied
 *     (retire_rows): masked (one append-only mask row per sub-group), or
 *     their sub-group compacted when it would be more than half masked.
 *     Writing no catalog row before then keeps the rows of all chunks
 *     pending together, so the batch writes full sub-groups.  The keys'
 *     new record entries wait the same way and become the record's newest
 *     piece (save_record), merged with older ones as they accumulate.
 *
 * Memory: the batch (held or sorted) takes work_mem, a chunk about
 * work_mem (a single key's changes are never split), the sort of retired
 * rows 1 MB, the write state its own sorts (zl_write.c): about twice
 * work_mem plus a constant, whatever the batch's size (README "Guarantees").
 *
 * Everything happens in the caller's transaction: an error anywhere, or a
 * rollback, leaves nothing visible.  Writers of a table serialize on its
 * writer lock, taken before reading the current versions; readers are
 * never blocked and see all of a batch or none of it.  A transaction whose
 * snapshot is older than the latest (REPEATABLE READ, SERIALIZABLE) fails
 * with a serialization failure, like heap's UPDATE, when a version of a
 * batch key where steps 3 and 4 look was written, masked or removed after
 * that snapshot (check_concurrent_changes).
 *
 * Counts returned: README "Counts" (zl_fold.c counts each change).
 *
 *-------------------------------------------------------------------------
 */
#include "zipper_lake.h"
#include "zl_radixsort.h"

#include "access/detoast.h"
#include "access/heaptoast.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_operator_d.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "parser/parse_coerce.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/snapmgr.h"
#include "utils/tuplesort.h"
#include "utils/typcache.h"

PG_FUNCTION_INFO_V1(zipper_lake_apply_changes);
PG_FUNCTION_INFO_V1(zipper_lake_apply_snapshot);
PG_FUNCTION_INFO_V1(zipper_lake_apply_changes_v2);
PG_FUNCTION_INFO_V1(zipper_lake_apply_snapshot_v2);

/* keys of a chunk from which the current partition's merged key index is used */
#define ZL_APPLY_INDEX_KEYS		1024

/* apply_snapshot with deletes: memory an open row read for a chunk takes */
#define ZL_OPEN_ROW_BYTES		1024

/* memory (kB) of the sort of retired rows; positions per mask insert */
#define ZL_RETIRED_SORT_KB		1024
#define ZL_MASKS_PER_INSERT		(1024 * 1024)

typedef enum ChangeOp
{
	OP_UPSERT,
	OP_DELETE,
	OP_IGNORE,					/* -U, an update's before-image */
	OP_TRUNCATE					/* every key deleted (no key) */
} ChangeOp;

typedef struct Change
{
	int64		time;
	bool		has_seq;
	int64		seq;
	uint32		arrival;
	ChangeOp	op;
	bool		missing_key;	/* apply_snapshot's delete of a key its image lacks */
	Datum	   *values;			/* a full target row; period slots unused */
	bool	   *isnull;
	uint8	   *given;			/* a partial change: a bit per column it gives; NULL: all */
} Change;

/* a version as stored: where it is, so it can be masked */
typedef struct StoredVersion
{
	const ZLSubGroup *sg;
	int32		position;
	bool		survives;
} StoredVersion;

typedef ZLFoldVersion Version;

/* a change of the batch held in memory, with its key hash */
typedef struct HeldChange
{
	uint32		hash;
	uint32		arrival;
	Change	   *change;
} HeldChange;

/* a slot of the batch's key table: the key's hash, so that probes pass over others */
typedef struct KeyBucket
{
	uint32		hash;
	int32		key;			/* index into keys, -1 = empty */
} KeyBucket;

typedef struct KeyState
{
	uint32		hash;
	Datum	   *values;			/* row holding the key (batch or stored) */
	bool	   *isnull;
	Change	  **changes;
	int			nchanges;
	int			maxchanges;
	Version    *versions;		/* sorted by from */
	int			nversions;
	int			maxversions;
	bool		has_current;
	int64		min_time;
	ZLRecordInstant *record;	/* remembered instants at or after min_time */
	int			nrecord;
	int			maxrecord;
	int64		record_newest;	/* the newest of them, PG_INT64_MIN if none */
	int64		record_from;	/* the record is read and rewritten from here */
} KeyState;

/* a sub-group the batch retired rows of */
typedef struct TouchedSubGroup
{
	int64		subgroup_id;
	bool		current;		/* in the current partition: may be compacted */
	int64		row_count;
	int64		masked_rows;	/* before the batch */
} TouchedSubGroup;

typedef struct ApplyCounts
{
	int64		changes;
	int64		inserted;
	int64		closed;
	int64		deleted;
	int64		unchanged;
	int64		late;
} ApplyCounts;

typedef enum ZLMissingColumns
{
	MISSING_ERROR,
	MISSING_NULL,
	MISSING_KEEP
} ZLMissingColumns;

/* everything one application needs */
typedef struct ApplyContext
{
	Relation	rel;
	TupleDesc	tupdesc;
	ZLTableOptions opts;
	const char *source_name;	/* for messages */

	/* key hashing and value equality (zl_keys.c) */
	ZLKeyHasher *hasher;
	ZLAssignment *assignment;	/* batch columns to table columns (zl_rowcheck.c) */
	ZLRowCheck *row_check;		/* generated columns and constraints of versions */
	ZLValueComparer *value_comparer;
	ZLValueComparer *tracked_comparer;	/* README "Tracked columns" */

	/* keys of the batch: open addressing over keys[] */
	KeyState  **keys;
	int			nkeys;
	int			maxkeys;
	KeyBucket  *buckets;		/* open addressing over keys */
	int			nbuckets;

	/* sub-groups read: the current partition's, then history's */
	ZLSubGroup *current;
	int			ncurrent;
	ZLSubGroup *history;
	int			nhistory;
	DateADT		history_partition;	/* the first one read, if any */

	/* the batch's key hashes, sorted and distinct, like key directories */
	uint32	   *hashes;
	int			nhashes;
	bool		keys_in_hash_order; /* ac->keys is sorted by hash too */

	/* stored versions found */
	StoredVersion **stored;
	int			nstored;
	int			maxstored;

	Snapshot	snapshot;		/* latest, taken under the writer lock */

	/* apply_snapshot: delete open keys missing from the batch at this time */
	bool		delete_missing;
	int64		delete_time;

	/*
	 * Changes of every key (README "Change semantics"): the snapshot's
	 * deletes of keys missing from its image, truncates; sorted in fold
	 * order.  Every open key of a chunk's hash range is read, and, when one
	 * precedes the newest change applied (late), history too.
	 */
	ZLTableInstant *table_deletes;
	int			ntable_deletes;
	int			maxtable_deletes;
	bool		table_deletes_late;

	/*
	 * The change record (zl_record.c): what the table remembers besides
	 * its versions, read under the writer lock by the first chunk; the
	 * entries the batch changes wait in record_writer until its rows are
	 * written.  Off while the catalog is 0.1's (no record tables).
	 */
	bool		record_on;
	ZLRecordCodec *record_codec;
	ZLRecordWriter *record_writer;
	bool		head_loaded;
	int64		newest_change;	/* applied before the batch; PG_INT64_MIN none */
	ZLTableInstants table_instants;
	ZLFoldContext fold_context;
	int64		batch_newest;	/* the batch's newest change time */

	/*
	 * Partial changes (README "Partial changes"): with ignore_nulls a NULL
	 * value keeps the column; kept_columns are the columns the batch lacks
	 * under missing_columns => 'keep'.
	 */
	bool		ignore_nulls;
	ZLMissingColumns missing_columns;
	bool	   *kept_columns;	/* natts, or NULL */

	/*
	 * The batch, converted and checked, in key hash (and arrival) order:
	 * held in memory while it fits work_mem, else in a tuplesort that
	 * spills ("The batch by key hash"); it is applied a chunk of keys at
	 * a time, the keys whose hashes lie in [chunk_lo, chunk_hi],
	 * everything of a chunk in chunk_context.
	 */
	MemoryContext input_context;	/* where the sort and its slots are made */
	MemoryContext held_context; /* the held changes; NULL once moved to the sort */
	HeldChange *held;
	int			nheld;
	int			maxheld;
	bool		held_in_arrival_order;
	int			next_held;		/* the next to apply */
	TupleDesc	sort_desc;
	Tuplesortstate *sort;
	TupleTableSlot *put_slot;	/* virtual: a change into the sort */
	TupleTableSlot *sort_slot;	/* a change out of it */
	bool		sort_more;		/* sort_slot holds the next change */
	MemoryContext chunk_context;
	MemoryContext key_context;	/* what folding one key takes; reset after it */
	uint32		chunk_lo;
	uint32		chunk_hi;
	bool		later_chunk;	/* not the first chunk of the batch */

	/*
	 * Stored rows the batch retired, as (index in touched << 32 | position)
	 * in a tuplesort: they are masked, or their sub-group compacted, once
	 * the whole batch is applied (retire_rows).
	 */
	Tuplesortstate *retired;
	TouchedSubGroup *touched;	/* in the batch's memory */
	int			ntouched;
	int			maxtouched;
	int			last_touched;	/* the index found last */
	MemoryContext batch_context;

	ApplyCounts counts;
} ApplyContext;

/* ---------- small helpers ---------- */

static void
grow_array(void **array, int *max, int needed, Size elemsize)
{
	if (needed <= *max)
		return;
	*max = Max(needed, Max(4, *max * 2));	/* most keys have one or two of each */
	*array = *array ? repalloc_huge(*array, (Size) *max * elemsize)
		: palloc_extended((Size) *max * elemsize, MCXT_ALLOC_HUGE);
}

static char *
describe_key_values(ApplyContext *ac, Datum *values, bool *isnull)
{
	HeapTuple	tuple = heap_form_tuple(ac->tupdesc, values, isnull);

	return zl_describe_key(&ac->opts, ac->tupdesc, tuple);
}

static char *
time_text(ApplyContext *ac, int64 instant)
{
	return zl_instant_to_cstring(instant, ac->opts.period_type);
}

/* ---------- comparisons ---------- */

static void
prepare_comparisons(ApplyContext *ac)
{
	ac->hasher = zl_key_hasher_create(ac->tupdesc, &ac->opts);
	ac->value_comparer = zl_value_comparer_create(ac->tupdesc, &ac->opts, false);
	ac->tracked_comparer = zl_value_comparer_create(ac->tupdesc, &ac->opts, true);
}

static void
key_table_insert_bucket(ApplyContext *ac, int keyindex)
{
	int			mask = ac->nbuckets - 1;
	uint32		hash = ac->keys[keyindex]->hash;
	int			b = hash & mask;

	while (ac->buckets[b].key >= 0)
		b = (b + 1) & mask;
	ac->buckets[b].hash = hash;
	ac->buckets[b].key = keyindex;
}

/* find the key of a row whose key hash is known; with create, add it when missing */
static KeyState *
key_lookup_hashed(ApplyContext *ac, Datum *values, bool *isnull, uint32 hash, bool create)
{
	int			mask = ac->nbuckets - 1;
	KeyState   *ks;

	for (int b = hash & mask; ac->buckets[b].key >= 0; b = (b + 1) & mask)
	{
		if (ac->buckets[b].hash != hash)
			continue;
		ks = ac->keys[ac->buckets[b].key];
		if (zl_keys_equal(ac->hasher, ks->values, values))
			return ks;
	}
	if (!create)
		return NULL;

	/* keep the table at most half full */
	if ((ac->nkeys + 1) * 2 > ac->nbuckets)
	{
		ac->nbuckets *= 2;
		pfree(ac->buckets);
		ac->buckets = palloc_extended(sizeof(KeyBucket) * ac->nbuckets, MCXT_ALLOC_HUGE);
		memset(ac->buckets, -1, sizeof(KeyBucket) * ac->nbuckets);
		for (int k = 0; k < ac->nkeys; k++)
			key_table_insert_bucket(ac, k);
	}
	ks = palloc0(sizeof(KeyState));
	ks->hash = hash;
	ks->values = values;
	ks->isnull = isnull;
	grow_array((void **) &ac->keys, &ac->maxkeys, ac->nkeys + 1, sizeof(KeyState *));
	ac->keys[ac->nkeys] = ks;
	key_table_insert_bucket(ac, ac->nkeys);
	ac->nkeys++;
	return ks;
}

/* find the key of a row; with create, add it when missing */
static KeyState *
key_lookup(ApplyContext *ac, Datum *values, bool *isnull, bool create)
{
	return key_lookup_hashed(ac, values, isnull, zl_key_hash(ac->hasher, values), create);
}

/* ---------- value comparison (IS NOT DISTINCT FROM on value columns) ---------- */

static bool
values_equal(ApplyContext *ac, Datum *a, bool *anull, Datum *b, bool *bnull)
{
	return zl_values_equal(ac->value_comparer, a, anull, b, bnull);
}

/* ---------- reading and validating the batch ---------- */

/*
 * The attribute number of a column of the changes: a column of the zipper
 * table (argument NULL) or one an argument names; 0 if the changes have
 * none and it is not required.
 */
static AttrNumber
source_column(ApplyContext *ac, Oid relid, const char *column, const char *argument,
			  bool required)
{
	AttrNumber	attnum = get_attnum(relid, column);

	if (attnum > 0 || !required)
		return attnum > 0 ? attnum : InvalidAttrNumber;
	if (argument == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" is missing from changes \"%s\"",
						column, ac->source_name),
				 errdetail("Zipper table \"%s\" needs its key and value columns and the change-time column in every batch.",
						   RelationGetRelationName(ac->rel)),
				 zl_is_key_column(&ac->opts, get_attnum(RelationGetRelid(ac->rel), column)) ?
				 errhint("Add the key column to the changes.") :
				 errhint("Add the column to the changes, or pass missing_columns => 'null' or 'keep'.")));
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_COLUMN),
			 errmsg("column \"%s\" is missing from changes \"%s\"", column, ac->source_name),
			 errdetail("Argument %s names it.", argument),
			 errhint("Name an existing column of the changes%s.",
					 strcmp(argument, "change_time") == 0 ? "" : ", or leave the argument out")));
	return InvalidAttrNumber;	/* keep compiler quiet */
}

/*
 * Select column attnum of the changes as batch column col, converted to
 * target_type(target_typmod) as INSERT would assign it (zl_rowcheck.c);
 * false if no assignment cast exists.
 */
static bool
select_assigned(ApplyContext *ac, StringInfo sql, Oid source_relid, AttrNumber attnum,
				int col, Oid target_type, int32 target_typmod)
{
	Oid			source_type;
	int32		source_typmod;
	Oid			source_collation;

	get_atttypetypmodcoll(source_relid, attnum, &source_type, &source_typmod,
						  &source_collation);
	appendStringInfo(sql, "%s%s", col > 0 ? ", " : "",
					 quote_identifier(get_attname(source_relid, attnum, false)));
	return zl_assignment_add(ac->assignment, col, source_type, source_typmod,
							 target_type, target_typmod);
}

static void
refuse_column_type(ApplyContext *ac, Oid source_relid, const char *column,
				   const char *role, Oid target_type)
{
	Oid			source_type = get_atttype(source_relid, get_attnum(source_relid, column));

	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 role == NULL ?
			 errmsg("column \"%s\" of changes \"%s\" cannot be assigned to the zipper table",
					column, ac->source_name) :
			 errmsg("%s column \"%s\" of changes \"%s\" has type %s",
					role, column, ac->source_name, format_type_be(source_type)),
			 role == NULL ?
			 errdetail("Column \"%s\" has type %s, the zipper table needs %s.",
					   column, format_type_be(source_type), format_type_be(target_type)) :
			 errdetail("The %s column must be assignable to %s.",
					   role, format_type_be(target_type)),
			 errhint("Cast the column in a view over the changes.")));
}

static ChangeOp
parse_op(ApplyContext *ac, const char *op, Change *c)
{
	static const char *const upserts[] = {"i", "u", "c", "r", "insert", "update", "upsert",
	"+i", "+u"};
	static const char *const deletes[] = {"d", "delete", "-d"};

	if (op == NULL)
		return OP_UPSERT;
	if (pg_strcasecmp(op, "-u") == 0)
		return OP_IGNORE;
	if (pg_strcasecmp(op, "t") == 0 || pg_strcasecmp(op, "truncate") == 0)
		return OP_TRUNCATE;
	for (int i = 0; i < lengthof(upserts); i++)
		if (pg_strcasecmp(op, upserts[i]) == 0)
			return OP_UPSERT;
	for (int i = 0; i < lengthof(deletes); i++)
		if (pg_strcasecmp(op, deletes[i]) == 0)
			return OP_DELETE;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown change operation \"%s\"", op),
			 errdetail("Change for key %s at %s has op \"%s\".",
					   describe_key_values(ac, c->values, c->isnull),
					   time_text(ac, c->time), op),
			 errhint("Use I, U, c, u, r, insert, update, upsert, +I or +U for upserts, D, delete or -D for deletes, -U for an update's before-image (ignored), T or truncate for a truncate.")));
	return OP_UPSERT;			/* keep compiler quiet */
}

static void
check_change(ApplyContext *ac, Change *c, bool time_null, const char *time_column)
{
	for (int i = 0; i < ac->opts.nkeys && c->op != OP_TRUNCATE; i++)
	{
		AttrNumber	attnum = ac->opts.key_attnums[i];

		if (c->isnull[attnum - 1])
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("null value in key column \"%s\" of changes \"%s\"",
							NameStr(TupleDescAttr(ac->tupdesc, attnum - 1)->attname),
							ac->source_name),
					 errdetail("Change at %s has key %s.",
							   time_null ? "null time" : time_text(ac, c->time),
							   describe_key_values(ac, c->values, c->isnull)),
					 errhint("Every change needs a complete key; nothing was applied.")));
	}
	if (time_null)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("null change time in column \"%s\" of changes \"%s\"",
						time_column, ac->source_name),
				 errdetail("Change for key %s has no time.",
						   describe_key_values(ac, c->values, c->isnull)),
				 errhint("Every change needs the time it happened in the source; nothing was applied.")));
	if (!zl_instant_is_finite(c->time) || c->time >= ac->opts.open_end)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 zl_instant_is_finite(c->time) ?
				 errmsg("change time %s is not before the open end %s",
						time_text(ac, c->time), time_text(ac, ac->opts.open_end)) :
				 errmsg("change time %s is not finite", time_text(ac, c->time)),
				 errdetail("Change for key %s in column \"%s\" of changes \"%s\".",
						   describe_key_values(ac, c->values, c->isnull),
						   time_column, ac->source_name),
				 errhint("Change times must be finite and before the table's open end; nothing was applied.")));
}

static void
add_change(KeyState *ks, Change *c)
{
	grow_array((void **) &ks->changes, &ks->maxchanges, ks->nchanges + 1, sizeof(Change *));
	ks->changes[ks->nchanges++] = c;
}

/* ---------- the batch by key hash ---------- */

/*
 * The batch is applied in key hash order (and, within a key, in the order
 * of arrival).  While its changes fit in work_mem they are held in memory
 * as they come, copied into held_context, and sorted as an array at the
 * end; the change that takes the batch past work_mem moves them all into
 * a tuplesort, which spills, and the rest follow them there.  Either way
 * the chunks see the same changes in the same order (next_change_hash,
 * next_change); holding them spares a small batch the sort tuples' forming
 * and deforming.
 *
 * A change as a sort tuple: the table's columns (converted), then the
 * change time, the op (ChangeOp), seq (NULL: none), the key hash and the
 * arrival; sorted by (hash, arrival).
 */
#define SORT_TIME(ncols)		((ncols) + 1)
#define SORT_OP(ncols)			((ncols) + 2)
#define SORT_SEQ(ncols)			((ncols) + 3)
#define SORT_HASH(ncols)		((ncols) + 4)
#define SORT_ARRIVAL(ncols)		((ncols) + 5)
#define SORT_GIVEN(ncols)		((ncols) + 6)

static void
begin_change_sort(ApplyContext *ac)
{
	int			ncols = ac->tupdesc->natts;
	TupleDesc	desc = CreateTemplateTupleDesc(ncols + 6);
	AttrNumber	attnums[2] = {SORT_HASH(ncols), SORT_ARRIVAL(ncols)};
	Oid			operators[2] = {Int8LessOperator, Int8LessOperator};
	Oid			collations[2] = {InvalidOid, InvalidOid};
	bool		nulls_first[2] = {false, false};

	for (int i = 0; i < ncols; i++)
	{
		Form_pg_attribute att = TupleDescAttr(ac->tupdesc, i);

		if (att->attisdropped)
			TupleDescInitEntry(desc, i + 1, NULL, INT4OID, -1, 0);	/* always NULL */
		else
			TupleDescInitEntry(desc, i + 1, NameStr(att->attname), att->atttypid,
							   att->atttypmod, 0);
	}
	TupleDescInitEntry(desc, SORT_TIME(ncols), "change_time", INT8OID, -1, 0);
	TupleDescInitEntry(desc, SORT_OP(ncols), "op", INT4OID, -1, 0);
	TupleDescInitEntry(desc, SORT_SEQ(ncols), "seq", INT8OID, -1, 0);
	TupleDescInitEntry(desc, SORT_HASH(ncols), "hash", INT8OID, -1, 0);
	TupleDescInitEntry(desc, SORT_ARRIVAL(ncols), "arrival", INT8OID, -1, 0);
	TupleDescInitEntry(desc, SORT_GIVEN(ncols), "given", BYTEAOID, -1, 0);
	ac->sort_desc = desc;
	ac->put_slot = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	ac->sort_slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	ac->sort = tuplesort_begin_heap(desc, 2, attnums, operators, collations, nulls_first,
									work_mem, NULL, TUPLESORT_NONE);
}

/* a checked change into the sort (its memory is the caller's) */
static void
put_change(ApplyContext *ac, Change *c, uint32 hash)
{
	int			ncols = ac->tupdesc->natts;
	Datum	   *values = ac->put_slot->tts_values;
	bool	   *isnull = ac->put_slot->tts_isnull;

	ExecClearTuple(ac->put_slot);
	memcpy(values, c->values, sizeof(Datum) * ncols);
	memcpy(isnull, c->isnull, sizeof(bool) * ncols);
	values[SORT_TIME(ncols) - 1] = Int64GetDatum(c->time);
	isnull[SORT_TIME(ncols) - 1] = false;
	values[SORT_OP(ncols) - 1] = Int32GetDatum((int32) c->op);
	isnull[SORT_OP(ncols) - 1] = false;
	values[SORT_SEQ(ncols) - 1] = Int64GetDatum(c->seq);
	isnull[SORT_SEQ(ncols) - 1] = !c->has_seq;
	values[SORT_HASH(ncols) - 1] = Int64GetDatum((int64) hash);
	isnull[SORT_HASH(ncols) - 1] = false;
	values[SORT_ARRIVAL(ncols) - 1] = Int64GetDatum((int64) c->arrival);
	isnull[SORT_ARRIVAL(ncols) - 1] = false;
	isnull[SORT_GIVEN(ncols) - 1] = c->given == NULL;
	if (c->given != NULL)
	{
		int			nbytes = (ncols + 7) / 8;
		bytea	   *given = palloc(VARHDRSZ + nbytes);

		SET_VARSIZE(given, VARHDRSZ + nbytes);
		memcpy(VARDATA(given), c->given, nbytes);
		values[SORT_GIVEN(ncols) - 1] = PointerGetDatum(given);
	}
	ExecStoreVirtualTuple(ac->put_slot);
	tuplesort_puttupleslot(ac->sort, ac->put_slot);
	ExecClearTuple(ac->put_slot);
}

/* the batch starts out held in memory */
static void
begin_batch(ApplyContext *ac)
{
	ac->input_context = CurrentMemoryContext;
	ac->held_context = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake held changes",
											 ALLOCSET_DEFAULT_SIZES);
	ac->held = NULL;
	ac->nheld = ac->maxheld = ac->next_held = 0;
	ac->held_in_arrival_order = true;
	ac->sort = NULL;
}

/* a copy of a checked change in the current memory: what the chunks use of it */
static Change *
copy_change(ApplyContext *ac, const Change *c)
{
	int			ncols = ac->tupdesc->natts;
	Change	   *copy = palloc(sizeof(Change));

	*copy = *c;
	copy->values = palloc(sizeof(Datum) * ncols);
	copy->isnull = palloc(sizeof(bool) * ncols);
	for (int i = 0; i < ncols; i++)
	{
		Form_pg_attribute att = TupleDescAttr(ac->tupdesc, i);

		copy->isnull[i] = c->isnull[i];
		copy->values[i] = copy->isnull[i] ? (Datum) 0 :
			datumCopy(c->values[i], att->attbyval, att->attlen);
	}
	if (c->given != NULL)
	{
		copy->given = palloc((ncols + 7) / 8);
		memcpy(copy->given, c->given, (ncols + 7) / 8);
	}
	return copy;
}

/*
 * The held changes move into a sort, which takes the rest of the batch
 * too.  For a moment both hold about work_mem (no chunk exists yet).
 */
static void
move_held_to_sort(ApplyContext *ac)
{
	MemoryContext old = MemoryContextSwitchTo(ac->input_context);

	begin_change_sort(ac);
	MemoryContextSwitchTo(old);
	for (int i = 0; i < ac->nheld; i++)
		put_change(ac, ac->held[i].change, ac->held[i].hash);
	MemoryContextDelete(ac->held_context);
	ac->held_context = NULL;
	ac->held = NULL;
	ac->nheld = ac->maxheld = 0;
}

/* a checked change (in the caller's memory) into the batch */
static void
hold_change(ApplyContext *ac, Change *c)
{
	uint32		hash = zl_key_hash(ac->hasher, c->values);
	MemoryContext old;
	HeldChange *held;

	/* a dropped column carries nothing, held or sorted */
	for (int i = 0; i < ac->tupdesc->natts; i++)
		if (TupleDescAttr(ac->tupdesc, i)->attisdropped)
			c->isnull[i] = true;
	if (ac->held_context == NULL)
	{
		put_change(ac, c, hash);
		return;
	}
	old = MemoryContextSwitchTo(ac->held_context);
	grow_array((void **) &ac->held, &ac->maxheld, ac->nheld + 1, sizeof(HeldChange));
	if (ac->nheld > 0 && ac->held[ac->nheld - 1].arrival > c->arrival)
		ac->held_in_arrival_order = false;
	held = &ac->held[ac->nheld++];
	held->hash = hash;
	held->arrival = c->arrival;
	held->change = copy_change(ac, c);
	MemoryContextSwitchTo(old);
	if (MemoryContextMemAllocated(ac->held_context, true) > (Size) work_mem * 1024)
		move_held_to_sort(ac);
}

#define ST_SORT sort_held
#define ST_ELEMENT_TYPE HeldChange
#define ST_CHECK_FOR_INTERRUPTS
#define ST_COMPARE(a, b) ((a)->hash != (b)->hash ? ((a)->hash < (b)->hash ? -1 : 1) : \
						  (a)->arrival < (b)->arrival ? -1 : (a)->arrival > (b)->arrival)
#define ST_SCOPE static
#define ST_DECLARE
#define ST_DEFINE
#include "lib/sort_template.h"

/* every change is in: order them */
static void
end_batch(ApplyContext *ac)
{
	if (ac->held_context != NULL)
	{
		/* held in arrival order, a hash sort keeps it among equal hashes */
		if (ac->nheld >= ZL_RADIXSORT_MIN_ELEMENTS && ac->held_in_arrival_order)
			zl_radix_sort(ac->held, ac->nheld, sizeof(HeldChange), sizeof(uint32));
		else if (ac->nheld > 1)
			sort_held(ac->held, ac->nheld);
	}
	else
	{
		tuplesort_performsort(ac->sort);
		ac->sort_more = tuplesort_gettupleslot(ac->sort, true, false, ac->sort_slot, NULL);
	}
}

/* does a row-shaped key belong to the chunk being applied? */
static bool
key_in_chunk(ApplyContext *ac, const Datum *key_values)
{
	uint32		hash = zl_key_hash(ac->hasher, key_values);

	return hash >= ac->chunk_lo && hash <= ac->chunk_hi;
}

/* the change in sort_slot, copied into the current (chunk) memory */
static Change *
slot_change(ApplyContext *ac)
{
	int			ncols = ac->tupdesc->natts;
	Change	   *c = palloc0(sizeof(Change));
	HeapTuple	tuple = ExecCopySlotHeapTuple(ac->sort_slot);
	Datum	   *values = palloc(sizeof(Datum) * (ncols + 6));
	bool	   *isnull = palloc(sizeof(bool) * (ncols + 6));

	heap_deform_tuple(tuple, ac->sort_desc, values, isnull);
	c->values = values;
	c->isnull = isnull;
	c->time = DatumGetInt64(values[SORT_TIME(ncols) - 1]);
	c->op = (ChangeOp) DatumGetInt32(values[SORT_OP(ncols) - 1]);
	c->has_seq = !isnull[SORT_SEQ(ncols) - 1];
	c->seq = c->has_seq ? DatumGetInt64(values[SORT_SEQ(ncols) - 1]) : 0;
	c->arrival = (uint32) DatumGetInt64(values[SORT_ARRIVAL(ncols) - 1]);
	if (!isnull[SORT_GIVEN(ncols) - 1])
		c->given = (uint8 *) VARDATA_ANY(DatumGetByteaPP(values[SORT_GIVEN(ncols) - 1]));
	return c;
}

/*
 * Is there a change left to apply?  Its key hash in *hash.  (A batch still
 * held has its held_context; one moved to the sort has not.)
 */
static bool
next_change_hash(ApplyContext *ac, uint32 *hash)
{
	bool		isnull;

	if (ac->held_context != NULL)
	{
		if (ac->next_held >= ac->nheld)
			return false;
		*hash = ac->held[ac->next_held].hash;
		return true;
	}
	if (!ac->sort_more)
		return false;
	*hash = (uint32) DatumGetInt64(slot_getattr(ac->sort_slot, SORT_HASH(ac->tupdesc->natts),
												 &isnull));
	return true;
}

/* that change (from the sort: copied into the current memory); on to the next */
static Change *
next_change(ApplyContext *ac)
{
	Change	   *c;

	if (ac->held_context != NULL)
		return ac->held[ac->next_held++].change;
	c = slot_change(ac);
	ac->sort_more = tuplesort_gettupleslot(ac->sort, true, false, ac->sort_slot, NULL);
	return c;
}

/* the batch applied, its memory goes */
static void
drop_batch(ApplyContext *ac)
{
	if (ac->held_context != NULL)
		MemoryContextDelete(ac->held_context);
	else
		tuplesort_end(ac->sort);
	ac->held_context = NULL;
	ac->sort = NULL;
}


/*
 * README "Partial changes": the columns an upsert gives, NULL if all.  A
 * column the batch lacks (missing_columns => 'keep') or, with
 * ignore_nulls, a NULL value keeps what the key holds; keys and periods
 * are always given.
 */
static uint8 *
given_columns(ApplyContext *ac, Change *c)
{
	int			ncols = ac->tupdesc->natts;
	uint8	   *given = NULL;

	for (int i = 0; i < ncols; i++)
	{
		Form_pg_attribute att = TupleDescAttr(ac->tupdesc, i);
		bool		kept;

		if (!zl_is_value_column(&ac->opts, att))
			continue;
		kept = (ac->kept_columns != NULL && ac->kept_columns[i]) ||
			(ac->ignore_nulls && c->isnull[i]);
		if (!kept)
			continue;
		if (given == NULL)
		{
			given = palloc((ncols + 7) / 8);
			memset(given, 0xFF, (ncols + 7) / 8);
		}
		given[i >> 3] &= ~(1 << (i & 7));
	}
	return given;
}

/* a change of every key (the caller's memory: the batch's) */
static void
add_table_delete(ApplyContext *ac, ZLTableInstant delete)
{
	grow_array((void **) &ac->table_deletes, &ac->maxtable_deletes, ac->ntable_deletes + 1,
			   sizeof(ZLTableInstant));
	ac->table_deletes[ac->ntable_deletes++] = delete;
}

/*
 * A converted and checked change into the batch: upserts and deletes held
 * or sorted (hold_change), truncates among the table deletes (in
 * batch_memory), -U counted only.
 */
static void
take_change(ApplyContext *ac, Change *c, MemoryContext batch_memory)
{
	if (c->op == OP_IGNORE)
		ac->counts.unchanged++;
	else if (c->op == OP_TRUNCATE)
	{
		ZLTableInstant truncate = {c->time, c->has_seq, c->seq};
		MemoryContext old = MemoryContextSwitchTo(batch_memory);

		add_table_delete(ac, truncate);
		MemoryContextSwitchTo(old);
	}
	else
		hold_change(ac, c);
	ac->counts.changes++;
}

/*
 * The batch's rows arrive at a DestReceiver of the query that selects
 * them, one slot at a time (no tuple table, no copy of each row): each is
 * converted and checked in row_memory, reset per row, and taken into the
 * batch (take_change).
 */
typedef struct BatchReceiver
{
	DestReceiver pub;
	ApplyContext *ac;
	const char *time_column;	/* NULL: apply_snapshot */
	bool		has_seq;
	const char *seq_column;
	bool		seq_numeric;	/* read as numeric: may have a fraction */
	int64		snapshot_time;
	MemoryContext row_memory;
	MemoryContext batch_memory;
	ErrorContextCallback *outer_context;	/* the caller's, without SPI's */
	uint64		row;			/* the row being read, from 0 */
} BatchReceiver;

static void
batch_row_error_context(void *arg)
{
	BatchReceiver *br = arg;

	errcontext("row " UINT64_FORMAT " of changes \"%s\" applied to zipper table \"%s\"",
			   br->row + 1, br->ac->source_name, RelationGetRelationName(br->ac->rel));
}

/* a finite numeric without a fraction (5.0 is 5) */
bool
zl_numeric_is_integer(Numeric n)
{
	return !numeric_is_nan(n) && !numeric_is_inf(n) &&
		DatumGetInt32(DirectFunctionCall1(numeric_min_scale, NumericGetDatum(n))) == 0;
}

/*
 * The seq of a change from a numeric or floating-point column: an
 * integer, never rounded (README "Change semantics"); out of bigint's
 * range is numeric_int8's error, as a cast to bigint would give.
 */
static int64
numeric_seq(BatchReceiver *br, Change *c, Datum value)
{
	if (!zl_numeric_is_integer(DatumGetNumeric(value)))
	{
		char	   *text = DatumGetCString(DirectFunctionCall1(numeric_out, value));

		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("seq %s is not an integer", text),
				 errdetail("Change for key %s at %s has seq %s in column \"%s\" of changes \"%s\".",
						   describe_key_values(br->ac, c->values, c->isnull),
						   time_text(br->ac, c->time), text, br->seq_column,
						   br->ac->source_name),
				 errhint("Seq orders the changes of a key at one time and must be an integer; nothing was applied.")));
	}
	return DatumGetInt64(DirectFunctionCall1(numeric_int8, value));
}

/*
 * One row of the batch: converted, checked, into the batch.  Its errors
 * name the row, in the caller's error context (not in SPI's, which would
 * show the query that selects the batch).
 */
static bool
batch_receive(TupleTableSlot *slot, DestReceiver *self)
{
	BatchReceiver *br = (BatchReceiver *) self;
	ApplyContext *ac = br->ac;
	int			ncols = ac->tupdesc->natts;
	int			nread = slot->tts_tupleDescriptor->natts;
	ErrorContextCallback *spi_context = error_context_stack;
	ErrorContextCallback callback = {br->outer_context, batch_row_error_context, br};
	MemoryContext old = MemoryContextSwitchTo(br->row_memory);
	Change	   *c = palloc0(sizeof(Change));
	bool		time_null = false;

	error_context_stack = &callback;

	slot_getallattrs(slot);
	c->values = palloc(sizeof(Datum) * (ncols + 3));
	c->isnull = palloc(sizeof(bool) * (ncols + 3));
	memcpy(c->values, slot->tts_values, sizeof(Datum) * nread);
	memcpy(c->isnull, slot->tts_isnull, sizeof(bool) * nread);
	/* values must not point into the source's TOAST */
	for (int i = 0; i < nread; i++)
		if (!c->isnull[i] && TupleDescAttr(slot->tts_tupleDescriptor, i)->attlen == -1 &&
			VARATT_IS_EXTERNAL(DatumGetPointer(c->values[i])))
			c->values[i] = PointerGetDatum(detoast_external_attr((struct varlena *)
																 DatumGetPointer(c->values[i])));
	zl_assignment_apply(ac->assignment, c->values, c->isnull, br->row_memory);
	c->arrival = (uint32) br->row;
	if (br->time_column != NULL)
	{
		time_null = c->isnull[ncols];
		if (!time_null)
			c->time = zl_datum_to_instant(c->values[ncols], ac->opts.period_type);
		c->op = parse_op(ac, c->isnull[ncols + 1] ? NULL :
						 TextDatumGetCString(c->values[ncols + 1]), c);
		check_change(ac, c, time_null, br->time_column);
		c->has_seq = br->has_seq && !c->isnull[ncols + 2];
		if (c->has_seq)
			c->seq = br->seq_numeric ? numeric_seq(br, c, c->values[ncols + 2]) :
				DatumGetInt64(c->values[ncols + 2]);
	}
	else
	{
		c->time = br->snapshot_time;
		c->op = OP_UPSERT;
		check_change(ac, c, false, "snapshot_time");
	}
	if (c->op == OP_UPSERT)
		c->given = given_columns(ac, c);
	take_change(ac, c, br->batch_memory);
	MemoryContextSwitchTo(old);
	MemoryContextReset(br->row_memory);
	br->row++;
	error_context_stack = spi_context;
	return true;
}

static void
batch_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
}

static void
batch_shutdown(DestReceiver *self)
{
}

static void
batch_destroy(DestReceiver *self)
{
}

/*
 * Read the batch.  time_column NULL means apply_snapshot: every row is an
 * upsert at snapshot_time.  op_column NULL means the column "op" if the
 * changes have one; a named one must exist.
 *
 * The batch is selected by one query, planned without parallelism, whose
 * rows stream to a DestReceiver (batch_receive) into the batch by key hash
 * (hold_change).  It is selected as it is and every column converted to the
 * table's type and typmod as INSERT assigns it (zl_rowcheck.c), so a
 * char(3) key never arrives as char(1) and a varchar(n), numeric(p,s) or
 * domain refuses what INSERT refuses (domain checks may do what parallel
 * mode forbids).  Generated columns are not read: they are computed for
 * every version written.
 */
static void
read_batch(ApplyContext *ac, Oid source_relid, const char *time_column,
		   const char *op_column, const char *seq_column, int64 snapshot_time)
{
	StringInfoData sql;
	TupleDesc	tupdesc = ac->tupdesc;
	int			ncols = tupdesc->natts;
	AttrNumber	op_attnum = InvalidAttrNumber;
	bool		has_seq = seq_column != NULL;
	bool		seq_numeric = false;
	MemoryContext row_memory = AllocSetContextCreate(CurrentMemoryContext,
													 "zipper_lake batch row",
													 ALLOCSET_DEFAULT_SIZES);
	BatchReceiver receiver;
	SPIPrepareOptions prepare_options;
	SPIExecuteOptions options;
	SPIPlanPtr	plan;

	ac->assignment = zl_assignment_create(ncols + 3);
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (int i = 0; i < ncols; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, i);
		bool		is_key = zl_is_key_column(&ac->opts, att->attnum);
		bool		is_value = zl_is_value_column(&ac->opts, att);
		AttrNumber	source_attnum = InvalidAttrNumber;

		if (is_key || is_value)
			source_attnum = source_column(ac, source_relid, NameStr(att->attname), NULL,
										  ac->missing_columns == MISSING_ERROR || is_key);
		if (source_attnum == InvalidAttrNumber)
		{
			/* unused, or missing: NULL (missing_columns => 'null') or kept */
			appendStringInfo(&sql, "%sNULL", i > 0 ? ", " : "");
			if (is_value && ac->missing_columns == MISSING_KEEP)
			{
				if (ac->kept_columns == NULL)
					ac->kept_columns = palloc0(sizeof(bool) * ncols);
				ac->kept_columns[i] = true;
			}
		}
		else if (!select_assigned(ac, &sql, source_relid, source_attnum,
								  i, att->atttypid, att->atttypmod))
			refuse_column_type(ac, source_relid, NameStr(att->attname), NULL, att->atttypid);
	}
	if (time_column != NULL)
	{
		if (!select_assigned(ac, &sql, source_relid,
							 source_column(ac, source_relid, time_column, "change_time", true),
							 ncols, ac->opts.period_type, ac->opts.period_typmod))
			refuse_column_type(ac, source_relid, time_column, "change-time",
							   ac->opts.period_type);
		op_attnum = source_column(ac, source_relid, op_column ? op_column : "op", "op",
								  op_column != NULL);
		if (op_attnum != InvalidAttrNumber)
			appendStringInfo(&sql, ", CAST(%s AS pg_catalog.text)",
							 quote_identifier(get_attname(source_relid, op_attnum, false)));
		else
			appendStringInfoString(&sql, ", NULL");
		if (has_seq)
		{
			AttrNumber	seq_attnum = source_column(ac, source_relid, seq_column, "seq", true);
			Oid			seq_type = getBaseType(get_atttype(source_relid, seq_attnum));

			/* numbers that may have a fraction are checked, not rounded */
			seq_numeric = (seq_type == NUMERICOID || seq_type == FLOAT4OID ||
						   seq_type == FLOAT8OID);
			if (!select_assigned(ac, &sql, source_relid, seq_attnum, ncols + 2,
								 seq_numeric ? NUMERICOID : INT8OID, -1))
				refuse_column_type(ac, source_relid, seq_column, "seq", INT8OID);
		}
		else
			appendStringInfoString(&sql, ", NULL");
	}
	appendStringInfo(&sql, " FROM %s",
					 quote_qualified_identifier(get_namespace_name(get_rel_namespace(source_relid)),
												get_rel_name(source_relid)));

	begin_batch(ac);			/* outside SPI's memory, which SPI_finish frees */
	memset(&receiver, 0, sizeof(receiver));
	receiver.pub.receiveSlot = batch_receive;
	receiver.pub.rStartup = batch_startup;
	receiver.pub.rShutdown = batch_shutdown;
	receiver.pub.rDestroy = batch_destroy;
	receiver.pub.mydest = DestNone;
	receiver.ac = ac;
	receiver.time_column = time_column;
	receiver.has_seq = has_seq;
	receiver.seq_column = seq_column;
	receiver.seq_numeric = seq_numeric;
	receiver.snapshot_time = snapshot_time;
	receiver.row_memory = row_memory;
	receiver.batch_memory = CurrentMemoryContext;
	memset(&options, 0, sizeof(options));
	options.read_only = true;
	options.dest = &receiver.pub;

	memset(&prepare_options, 0, sizeof(prepare_options));
	prepare_options.parseMode = RAW_PARSE_DEFAULT;
	prepare_options.cursorOptions = 0;	/* no parallel plan (see above) */

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	plan = SPI_prepare_extended(sql.data, &prepare_options);
	if (plan == NULL)
		elog(ERROR, "zipper_lake could not plan the reading of the changes: %s",
			 SPI_result_code_string(SPI_result));
	receiver.outer_context = error_context_stack;
	/* (SPI_OK_UTILITY: SPI's code for a SELECT whose rows go to DestNone) */
	if (SPI_execute_plan_extended(plan, &options) != SPI_OK_UTILITY)
		elog(ERROR, "zipper_lake could not read the changes");
	SPI_finish();
	MemoryContextDelete(row_memory);
	zl_assignment_end(ac->assignment);
	ac->assignment = NULL;
	end_batch(ac);
}

static int
change_cmp(const void *a, const void *b)
{
	const Change *ca = *(Change *const *) a;
	const Change *cb = *(Change *const *) b;

	if (ca->time != cb->time)
		return ca->time < cb->time ? -1 : 1;
	if (ca->has_seq != cb->has_seq)
		return ca->has_seq ? -1 : 1;	/* a NULL seq sorts last */
	if (ca->seq != cb->seq)
		return ca->seq < cb->seq ? -1 : 1;
	return ca->arrival < cb->arrival ? -1 : (ca->arrival > cb->arrival);
}

/*
 * Sort each key's changes; collapse identical duplicates and refuse
 * conflicting ones (same key and time, no seq to order them).
 */
static void
order_changes(ApplyContext *ac)
{
	for (int k = 0; k < ac->nkeys; k++)
	{
		KeyState   *ks = ac->keys[k];
		int			kept = 0;

		qsort(ks->changes, ks->nchanges, sizeof(Change *), change_cmp);
		for (int i = 0; i < ks->nchanges; i++)
		{
			Change	   *c = ks->changes[i];
			Change	   *prev = kept > 0 ? ks->changes[kept - 1] : NULL;

			if (prev != NULL && prev->time == c->time &&
				prev->has_seq == c->has_seq && prev->seq == c->seq)
			{
				bool		same = prev->op == c->op &&
					(c->op == OP_DELETE ||
					 values_equal(ac, prev->values, prev->isnull, c->values, c->isnull));

				if (same)
				{
					ac->counts.unchanged++;
					continue;
				}
				ereport(ERROR,
						(errcode(ERRCODE_CARDINALITY_VIOLATION),
						 errmsg("conflicting changes for key %s at %s",
								describe_key_values(ac, c->values, c->isnull),
								time_text(ac, c->time)),
						 errdetail("Two different changes have the same key and time%s, so their order is undefined.",
								   c->has_seq ? " and seq" : ""),
						 errhint("Add a seq column that orders them and pass seq => 'column'; nothing was applied.")));
			}
			ks->changes[kept++] = c;
		}
		ks->nchanges = kept;
		ks->min_time = kept > 0 ? ks->changes[0]->time : 0;
	}
}

/* ---------- finding stored versions ---------- */

static void
add_version(KeyState *ks, int64 from, int64 to, Datum *values, bool *isnull,
			StoredVersion *stored)
{
	Version    *v;

	grow_array((void **) &ks->versions, &ks->maxversions, ks->nversions + 1, sizeof(Version));
	v = &ks->versions[ks->nversions++];
	v->from = from;
	v->to = to;
	v->values = values;
	v->isnull = isnull;
	v->stored = stored;
}

typedef struct CollectArg
{
	ApplyContext *ac;
	bool		current;
	Datum	   *probe;			/* row-shaped array: key slots filled per row */
	Datum	   *scratch;		/* a stored row's values, for a look only */
	bool	   *scratch_null;

	/* the key the merged index named for each position read (or NULL) */
	const int32 *hint_positions;	/* ascending */
	KeyState  **hint_keys;
	int			nhints;
	int			next_hint;
} CollectArg;


static int
table_instant_cmp(const void *a, const void *b)
{
	const ZLTableInstant *ta = a;
	const ZLTableInstant *tb = b;

	if (zl_fold_precedes(ta->time, ta->has_seq, ta->seq, tb->time, tb->has_seq, tb->seq))
		return -1;
	return zl_fold_precedes(tb->time, tb->has_seq, tb->seq, ta->time, ta->has_seq, ta->seq);
}

/* the i-th table delete as a change of a key (values: a row holding the key) */
static void
add_key_table_delete(KeyState *ks, const ZLTableInstant *delete, Datum *values, bool *isnull)
{
	Change	   *c = palloc0(sizeof(Change));

	c->values = values;
	c->isnull = isnull;
	c->time = delete->time;
	c->has_seq = delete->has_seq;
	c->seq = delete->seq;
	c->op = OP_DELETE;
	c->missing_key = true;		/* counted only when it deletes something */
	add_change(ks, c);
	if (ks->nchanges == 1 || delete->time < ks->min_time)
		ks->min_time = delete->time;
}

/*
 * A key of the chunk the batch has no change of, met holding a version:
 * every table delete is a change of it.
 */
static KeyState *
add_missing_key_delete(ApplyContext *ac, HeapTuple tuple)
{
	int			natts = ac->tupdesc->natts;
	Datum	   *values = palloc(sizeof(Datum) * natts);
	bool	   *isnull = palloc(sizeof(bool) * natts);
	KeyState   *ks;

	heap_deform_tuple(heap_copytuple(tuple), ac->tupdesc, values, isnull);
	ks = key_lookup(ac, values, isnull, true);
	for (int i = 0; i < ac->ntable_deletes; i++)
		add_key_table_delete(ks, &ac->table_deletes[i], values, isnull);
	return ks;
}

/* the batch's keys: its truncates are changes of them too (not its image's deletes) */
static void
add_truncates_to_batch_keys(ApplyContext *ac)
{
	for (int i = 0; i < ac->ntable_deletes; i++)
	{
		const ZLTableInstant *d = &ac->table_deletes[i];

		if (ac->delete_missing && !d->has_seq && d->time == ac->delete_time)
			continue;			/* the snapshot's: its image rows are these keys' changes */
		for (int k = 0; k < ac->nkeys; k++)
			add_key_table_delete(ac->keys[k], d, ac->keys[k]->values, ac->keys[k]->isnull);
	}
}

/*
 * Table deletes older than the newest change applied: a key of the chunk
 * the batch has no change of whose closed version holds such a time is
 * deleted there too (its open version, if any, was found in the current
 * partition).
 */
static void
discover_missing_key(void *arg, const ZLSubGroup *sg, int32 position, HeapTuple tuple)
{
	CollectArg *ca = arg;
	ApplyContext *ac = ca->ac;
	bool		isnull;
	int64		from,
				to;

	zl_key_extract(ac->hasher, tuple, ac->tupdesc, ca->probe);
	if (!key_in_chunk(ac, ca->probe) || key_lookup(ac, ca->probe, NULL, false) != NULL)
		return;
	from = zl_datum_to_instant(heap_getattr(tuple, ac->opts.from_attnum, ac->tupdesc, &isnull),
							   ac->opts.period_type);
	to = zl_datum_to_instant(heap_getattr(tuple, ac->opts.to_attnum, ac->tupdesc, &isnull),
							 ac->opts.period_type);
	for (int i = 0; i < ac->ntable_deletes; i++)
		if (from <= ac->table_deletes[i].time && ac->table_deletes[i].time < to)
		{
			(void) add_missing_key_delete(ac, tuple);
			break;
		}
}

/*
 * A key needs its history when its earliest change is at or before the
 * start of its open version (late changes), or it has none (new or
 * deleted keys); only versions ending at or after that change matter.
 */
static bool
key_needs_history(const KeyState *ks)
{
	return ks->nchanges > 0 &&
		(!ks->has_current || ks->min_time <= ks->versions[0].from);
}

/*
 * Is a stored open row one the key's only change leaves as it is, with
 * nothing to remember?  The end-of-day case: an image row of an
 * apply_snapshot with deletes, later than every change the table holds,
 * equal to the key's open version.  The fold would count it unchanged,
 * keep the version and remember nothing of the key (the snapshot's
 * instant is the table's, README "The change record"); so it is counted
 * here, and neither the row is copied nor the key folded.  Anything else
 * (partial or seq'd changes, untracked columns, late snapshots, and
 * REPEATABLE READ, whose check of concurrent changes needs every key)
 * folds.
 */
static bool
snapshot_leaves_row(CollectArg *ca, KeyState *ks, HeapTuple tuple)
{
	ApplyContext *ac = ca->ac;
	Change	   *c = ks->changes[0];

	if (!ca->current || !ac->delete_missing || ac->ntable_deletes != 1 ||
		ks->nchanges != 1 || c->op != OP_UPSERT || c->has_seq || c->missing_key ||
		c->given != NULL || c->time != ac->delete_time ||
		c->time <= ac->newest_change || ac->opts.some_untracked ||
		IsolationUsesXactSnapshot())	/* every open key is checked there */
		return false;
	heap_deform_tuple(tuple, ac->tupdesc, ca->scratch, ca->scratch_null);
	if (zl_datum_to_instant(ca->scratch[ac->opts.to_attnum - 1], ac->opts.period_type) !=
		ac->opts.open_end ||
		zl_datum_to_instant(ca->scratch[ac->opts.from_attnum - 1], ac->opts.period_type) >=
		c->time)
		return false;
	return values_equal(ac, c->values, c->isnull, ca->scratch, ca->scratch_null);
}

/*
 * The batch key the merged index named for the row at position, if the
 * row's key (in ca->probe) is that key: no hashing and no probe of the
 * key table for it.  NULL otherwise (no hint, or two keys sharing a hash).
 */
static KeyState *
hinted_key(CollectArg *ca, int32 position)
{
	KeyState   *ks;

	while (ca->next_hint < ca->nhints && ca->hint_positions[ca->next_hint] < position)
		ca->next_hint++;
	if (ca->next_hint >= ca->nhints || ca->hint_positions[ca->next_hint] != position)
		return NULL;
	ks = ca->hint_keys[ca->next_hint];
	return ks != NULL && zl_keys_equal(ca->ac->hasher, ks->values, ca->probe) ? ks : NULL;
}

/* a stored row: keep it as a version of its key if that key needs it */
static void
collect_row(void *arg, const ZLSubGroup *sg, int32 position, HeapTuple tuple)
{
	CollectArg *ca = arg;
	ApplyContext *ac = ca->ac;
	int			natts = ac->tupdesc->natts;
	KeyState   *ks;
	int64		from,
				to;
	Datum	   *values;
	bool	   *nulls;
	StoredVersion *stored;

	zl_key_extract(ac->hasher, tuple, ac->tupdesc, ca->probe);
	ks = hinted_key(ca, position);
	if (ks == NULL)
		ks = key_lookup(ac, ca->probe, NULL, false);
	if (ks == NULL && ca->current && ac->ntable_deletes > 0 && key_in_chunk(ac, ca->probe))
		ks = add_missing_key_delete(ac, tuple);
	if (ks == NULL || ks->nchanges == 0)
		return;
	if (!ca->current && !key_needs_history(ks))
		return;
	if (snapshot_leaves_row(ca, ks, tuple))
	{
		ks->nchanges = 0;		/* nothing to fold */
		ac->counts.unchanged++;
		ac->batch_newest = Max(ac->batch_newest, ac->delete_time);
		return;
	}

	values = palloc(sizeof(Datum) * natts);
	nulls = palloc(sizeof(bool) * natts);
	heap_deform_tuple(heap_copytuple(tuple), ac->tupdesc, values, nulls);
	from = zl_datum_to_instant(values[ac->opts.from_attnum - 1], ac->opts.period_type);
	to = zl_datum_to_instant(values[ac->opts.to_attnum - 1], ac->opts.period_type);
	if (!ca->current && to < ks->min_time)
		return;

	stored = palloc0(sizeof(StoredVersion));
	stored->sg = sg;
	stored->position = position;
	grow_array((void **) &ac->stored, &ac->maxstored, ac->nstored + 1, sizeof(StoredVersion *));
	ac->stored[ac->nstored++] = stored;

	add_version(ks, from, to, values, nulls, stored);
	if (ca->current)
		ks->has_current = true;
}

/*
 * The rows of a sub-group whose key hash is one of the batch's (with
 * table deletes: in the chunk's hash range, every key of which the batch
 * needs): its key directory names their positions, and only those rows
 * are read.  Sub-groups without a directory (history written before 0.2)
 * are read whole.
 */
static void
read_batch_key_rows(ApplyContext *ac, const ZLSubGroup *sg, ZLRowCallback callback,
					void *arg)
{
	if (ac->ntable_deletes > 0)	/* every open key of the chunk's range */
		zl_read_subgroup_key_range(ac->rel, sg, ac->chunk_lo, ac->chunk_hi, callback, arg);
	else
		zl_read_subgroup_keys(ac->rel, sg, ac->hashes, ac->nhashes, callback, arg);
}

/*
 * The hashes of the chunk's keys (all, or those needing history), sorted
 * and distinct; their number in *n.  Keys of a sorted batch come in hash
 * order, so the sort is mostly skipped.
 */
static uint32 *
key_hashes(ApplyContext *ac, bool history_only, int *n)
{
	uint32	   *hashes = palloc(sizeof(uint32) * Max(ac->nkeys, 1));
	int			nall = 0;
	bool		sorted = true;

	*n = 0;
	for (int k = 0; k < ac->nkeys; k++)
		if (!history_only || key_needs_history(ac->keys[k]))
		{
			hashes[nall] = ac->keys[k]->hash;
			sorted &= nall == 0 || hashes[nall - 1] <= hashes[nall];
			nall++;
		}
	if (!history_only)
		ac->keys_in_hash_order = sorted && nall == ac->nkeys;
	if (!sorted)
		qsort(hashes, nall, sizeof(uint32), zl_key_hash_cmp);
	for (int k = 0; k < nall; k++)
		if (*n == 0 || hashes[*n - 1] != hashes[k])
			hashes[(*n)++] = hashes[k];
	return hashes;
}

/* a row of a current sub-group the merged key index names for a batch key */
typedef struct IndexHit
{
	int64		at;				/* list index << 32 | position */
	KeyState   *key;			/* the first batch key of the hash, if known */
} IndexHit;

/* key index hits in ascending order */
#define ST_SORT sort_hits
#define ST_ELEMENT_TYPE IndexHit
#define ST_COMPARE(a, b) ((a)->at < (b)->at ? -1 : (a)->at > (b)->at)
#define ST_SCOPE static
#define ST_DECLARE
#define ST_DEFINE
#include "lib/sort_template.h"

/* keys probed ahead of the one looked up (zl_key_index_prefetch) */
#define KEY_INDEX_AHEAD		4

/*
 * The rows of the chunk's keys in the current sub-groups the merged key
 * index covers, through one probe of it per key (zl_keyindex.c): sorted
 * by sub-group and position, with the key each was found for when the
 * chunk's keys are in hash order (they are, read from a batch sorted by
 * key hash), and their number.  NULL when there is no index to use; then
 * *in_index is NULL too.
 */
static IndexHit *
current_index_hits(ApplyContext *ac, bool **in_index, int *nhits)
{
	uint64		generation;
	int		   *map;
	ZLKeyIndex *index;
	IndexHit   *hits;
	int			maxhits = Max(ac->nhashes, 16);
	int			k = 0;

	*in_index = NULL;
	*nhits = 0;
	if (ac->ntable_deletes > 0 || ac->nhashes < ZL_APPLY_INDEX_KEYS)
		return NULL;
	index = zl_key_index_map(zl_storage_id(ac->rel), ZL_KEY_INDEX_CURRENT, ac->current,
							 ac->ncurrent, &generation, &map, in_index);
	if (index == NULL)
		return NULL;
	hits = palloc(sizeof(IndexHit) * maxhits);
	for (int h = 0; h < ac->nhashes; h++)
	{
		int			cursor = -1;
		int			ordinal;
		int32		position;
		KeyState   *key = NULL;

		if (ac->keys_in_hash_order)
		{
			while (ac->keys[k]->hash < ac->hashes[h])
				k++;
			key = ac->keys[k];
		}
		if (h + KEY_INDEX_AHEAD < ac->nhashes)
			zl_key_index_prefetch(index, ac->hashes[h + KEY_INDEX_AHEAD]);
		while ((ordinal = zl_key_index_find(index, ac->hashes[h], &cursor, &position)) >= 0)
		{
			if (map[ordinal] < 0)
				continue;		/* not in this snapshot's list */
			if (*nhits == maxhits)
			{
				maxhits *= 2;
				hits = repalloc(hits, sizeof(IndexHit) * maxhits);
			}
			hits[*nhits].at = ((int64) map[ordinal] << 32) | (uint32) position;
			hits[(*nhits)++].key = key;
		}
	}
	if (*nhits >= ZL_RADIXSORT_MIN_ELEMENTS)
		zl_radix_sort(hits, *nhits, sizeof(IndexHit), sizeof(int64));	/* at >= 0 */
	else
		sort_hits(hits, *nhits);
	return hits;
}

/*
 * The open versions of the batch's keys, from the current partition's
 * sub-groups: for a chunk of many keys, the merged index of the current
 * partition names their rows; sub-groups it does not cover (written since
 * it was built), and every sub-group for a few keys or with table deletes
 * (every key in the chunk's hash range), go through their own directories.
 */
static void
find_current_versions(ApplyContext *ac, CollectArg *arg)
{
	bool	   *in_index;
	IndexHit   *hits;
	int			nhits;
	int			h = 0;

	ac->hashes = key_hashes(ac, false, &ac->nhashes);
	zl_meta_load_key_directories(zl_storage_id(ac->rel), ac->snapshot,
								 ac->current, ac->ncurrent, NULL);
	hits = current_index_hits(ac, &in_index, &nhits);

	for (int i = 0; i < ac->ncurrent; i++)
	{
		const ZLSubGroup *sg = &ac->current[i];

		if (in_index != NULL && in_index[i])
		{
			int			first = h;
			int32	   *positions;
			KeyState  **keys;

			while (h < nhits && (int) (hits[h].at >> 32) == i)
				h++;
			if (h == first || sg->masked_rows >= sg->row_count)
				continue;
			positions = palloc(sizeof(int32) * (h - first));
			keys = palloc(sizeof(KeyState *) * (h - first));
			for (int k = first; k < h; k++)
			{
				positions[k - first] = (int32) (uint32) hits[k].at;
				keys[k - first] = hits[k].key;
			}
			arg->hint_positions = positions;
			arg->hint_keys = keys;
			arg->nhints = h - first;
			arg->next_hint = 0;
			zl_read_subgroup_positions(ac->rel, sg, positions, h - first, collect_row, arg);
			arg->nhints = 0;
			pfree(positions);
			pfree(keys);
		}
		else if (sg->masked_rows < sg->row_count)
			read_batch_key_rows(ac, sg, collect_row, arg);
	}
}

static void
find_stored_versions(ApplyContext *ac)
{
	uint64		storage_id = zl_storage_id(ac->rel);
	CollectArg	arg = {ac, true, palloc0(sizeof(Datum) * ac->tupdesc->natts),
		palloc(sizeof(Datum) * ac->tupdesc->natts), palloc(sizeof(bool) * ac->tupdesc->natts)};
	int64		history_from = PG_INT64_MAX;
	uint32	   *history_hashes;
	int			nhistory_hashes;

	/*
	 * Read directly, not through the backend's cache: every batch changes
	 * the table, so a cache would read all of its metadata again each time.
	 */
	ac->current = zl_meta_load_subgroups(storage_id, ac->snapshot, ZL_CURRENT_PARTITION,
										 &ac->ncurrent);
	for (int i = 0; i < ac->ncurrent; i++)
		if (!ac->current[i].placed)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("zipper table \"%s\" has unplaced rows",
							RelationGetRelationName(ac->rel)),
					 errhint("Rows loaded before registration are placed when the table is registered.")));
	find_current_versions(ac, &arg);

	/* keys whose changes reach back to or before their open version */
	for (int k = 0; k < ac->nkeys; k++)
		if (key_needs_history(ac->keys[k]))
			history_from = Min(history_from, ac->keys[k]->min_time);
	if (ac->table_deletes_late)
		history_from = Min(history_from, ac->table_deletes[0].time);
	ac->history_partition = ZL_CURRENT_PARTITION;
	if (history_from == PG_INT64_MAX)
		return;

	/* history: only partitions that can hold a valid_to >= history_from */
	ac->history_partition = zl_partition_of(&ac->opts, history_from);
	ac->history = zl_meta_load_subgroups(storage_id, ac->snapshot, ac->history_partition,
										 &ac->nhistory);
	arg.current = false;
	if (ac->table_deletes_late)
		for (int i = 0; i < ac->nhistory; i++)
		{
			const ZLSubGroup *sg = &ac->history[i];

			if (sg->partition_end != ZL_CURRENT_PARTITION && sg->masked_rows < sg->row_count &&
				sg->first_start <= ac->table_deletes[ac->ntable_deletes - 1].time)
				zl_read_subgroup_rows(ac->rel, sg, false, discover_missing_key, &arg);
		}
	zl_meta_load_key_directories(storage_id, ac->snapshot, ac->history, ac->nhistory, NULL);
	history_hashes = key_hashes(ac, true, &nhistory_hashes);
	for (int i = 0; i < ac->nhistory; i++)
	{
		const ZLSubGroup *sg = &ac->history[i];

		if (sg->partition_end == ZL_CURRENT_PARTITION || sg->masked_rows >= sg->row_count)
			continue;
		/* only the keys that need history (with table deletes: the chunk's range) */
		if (ac->ntable_deletes > 0)
			read_batch_key_rows(ac, sg, collect_row, &arg);
		else
			zl_read_subgroup_keys(ac->rel, sg, history_hashes, nhistory_hashes, collect_row, &arg);
	}
}

/* ---------- a snapshot older than the latest: concurrent changes ---------- */

/*
 * In REPEATABLE READ and SERIALIZABLE the batch reads the latest committed
 * versions (it must build on them, README "Writers"), but like heap's
 * UPDATE it must not edit a key that changed after its transaction's
 * snapshot.  What changed is found from the catalog alone: the same
 * partitions' sub-groups and masks as the transaction's snapshot sees them
 * are compared with what the batch read.  Rows of sub-groups only the
 * latest snapshot sees were written since ("added"); positions masked
 * since, and rows of sub-groups deleted since, were taken away
 * ("removed").  Only those rows are read, and only those of the batch's
 * keys count.  A compaction moves rows of other keys into a new sub-group
 * unchanged: a key changed when its added and removed rows do not pair up
 * as the same versions.
 */
typedef struct ConcurrentRow
{
	KeyState   *ks;
	int64		from;
	int64		to;
	Datum	   *values;
	bool	   *isnull;
	bool		added;			/* visible now only, or to the snapshot only */
	bool		paired;
} ConcurrentRow;

typedef struct ConcurrentArg
{
	ApplyContext *ac;
	bool		added;
	Datum	   *probe;			/* row-shaped array: key slots filled per row */
	ConcurrentRow *rows;
	int			nrows;
	int			maxrows;
} ConcurrentArg;

static void
report_concurrent_change(ApplyContext *ac, const char *key)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access due to concurrent update"),
			 errdetail("Key %s of zipper table \"%s\" was changed by a transaction that committed after this transaction's snapshot was taken.",
					   key, RelationGetRelationName(ac->rel)),
			 errhint("Retry the transaction: its new snapshot sees the other change.")));
}

/* an added or removed row: keep it if the batch reads its key's versions there */
static void
collect_concurrent_row(void *arg, const ZLSubGroup *sg, int32 position, HeapTuple tuple)
{
	ConcurrentArg *ca = arg;
	ApplyContext *ac = ca->ac;
	bool		current = sg->placed && sg->partition_end == ZL_CURRENT_PARTITION;
	KeyState   *ks;
	ConcurrentRow *row;

	zl_key_extract(ac->hasher, tuple, ac->tupdesc, ca->probe);
	ks = key_lookup(ac, ca->probe, NULL, false);
	if (ks == NULL || ks->nchanges == 0)
	{
		/*
		 * apply_snapshot with deletes edits every open key: one the snapshot
		 * saw open that is no longer (it would be found otherwise) changed.
		 */
		if (ac->ntable_deletes > 0 && current && key_in_chunk(ac, ca->probe))
			report_concurrent_change(ac, zl_describe_key(&ac->opts, ac->tupdesc, tuple));
		return;
	}
	if (!current && !key_needs_history(ks))
		return;

	grow_array((void **) &ca->rows, &ca->maxrows, ca->nrows + 1, sizeof(ConcurrentRow));
	row = &ca->rows[ca->nrows];
	row->ks = ks;
	row->values = palloc(sizeof(Datum) * ac->tupdesc->natts);
	row->isnull = palloc(sizeof(bool) * ac->tupdesc->natts);
	heap_deform_tuple(heap_copytuple(tuple), ac->tupdesc, row->values, row->isnull);
	row->from = zl_datum_to_instant(row->values[ac->opts.from_attnum - 1], ac->opts.period_type);
	row->to = zl_datum_to_instant(row->values[ac->opts.to_attnum - 1], ac->opts.period_type);
	if (!current && row->to < ks->min_time)
		return;					/* ends before the key's changes: not read */
	row->added = ca->added;
	row->paired = false;
	ca->nrows++;
}

/* the sub-group as the batch read it (latest snapshot), or NULL */
static const ZLSubGroup *
read_subgroup(ApplyContext *ac, int64 subgroup_id)
{
	const ZLSubGroup *sg = zl_meta_find_subgroup(ac->current, ac->ncurrent, subgroup_id);

	return sg != NULL ? sg : zl_meta_find_subgroup(ac->history, ac->nhistory, subgroup_id);
}

/* rows masked now that the snapshot sees unmasked: read them as it does */
static void
collect_masked_since(ApplyContext *ac, const ZLSubGroup *now, const ZLSubGroup *then,
					 ConcurrentArg *arg)
{
	int64		nbytes = (zl_subgroup_positions(now) + 7) / 8;
	int32	   *positions = palloc(sizeof(int32) * (now->masked_rows - then->masked_rows));
	int			n = 0;

	for (int64 byte = 0; byte < nbytes; byte++)
	{
		uint8		since = now->mask[byte] & ~(then->mask != NULL ? then->mask[byte] : 0);

		for (int bit = 0; since != 0; bit++, since >>= 1)
			if (since & 1)
				positions[n++] = (int32) (byte * 8 + bit);
	}
	Assert(n == now->masked_rows - then->masked_rows);
	zl_read_subgroup_positions(ac->rel, then, positions, n, collect_concurrent_row, arg);
	pfree(positions);
}

static int
concurrent_row_cmp(const void *a, const void *b)
{
	const ConcurrentRow *ra = a;
	const ConcurrentRow *rb = b;

	if (ra->ks != rb->ks)
		return ra->ks < rb->ks ? -1 : 1;
	if (ra->from != rb->from)
		return ra->from < rb->from ? -1 : 1;
	return (int) ra->added - (int) rb->added;
}

static int
pointer_cmp(const void *a, const void *b)
{
	uintptr_t	x = (uintptr_t) *(void *const *) a;
	uintptr_t	y = (uintptr_t) *(void *const *) b;

	return x < y ? -1 : (x > y);
}

/*
 * Fail if a key of the batch changed after the transaction's snapshot
 * (REPEATABLE READ, SERIALIZABLE); called under the writer lock, after
 * find_stored_versions read the latest state.
 */
static void
check_concurrent_changes(ApplyContext *ac)
{
	uint64		storage_id = zl_storage_id(ac->rel);
	Snapshot	snapshot = RegisterSnapshot(GetTransactionSnapshot());
	ConcurrentArg arg = {ac, true, palloc0(sizeof(Datum) * ac->tupdesc->natts)};
	ZLSubGroupFilter filter;
	ZLSubGroup *then;
	int			nthen;
	bool		deleted_current = false;
	KeyState  **changed;
	int			nchanged = 0;

	/* the partitions the batch read, as the snapshot sees them (only their masks) */
	filter.either = false;
	filter.min_partition = ac->history_partition;
	filter.max_partition = ZL_CURRENT_PARTITION;
	filter.from_lo = ZL_UNBOUNDED_LO;
	filter.from_hi = ZL_UNBOUNDED_HI;
	filter.from_min_partition = ac->history_partition;
	then = zl_meta_load_filtered_subgroups(storage_id, snapshot, &filter, &nthen);

	/* added: sub-groups only the latest snapshot sees; removed: masked since */
	for (int i = 0; i < ac->ncurrent + ac->nhistory; i++)
	{
		const ZLSubGroup *now = i < ac->ncurrent ? &ac->current[i] :
			&ac->history[i - ac->ncurrent];
		const ZLSubGroup *old;

		if (i >= ac->ncurrent && now->partition_end == ZL_CURRENT_PARTITION)
			continue;			/* the history load repeats the current partition */
		old = zl_meta_find_subgroup(then, nthen, now->subgroup_id);
		arg.added = (old == NULL);
		if (old == NULL)
			read_batch_key_rows(ac, now, collect_concurrent_row, &arg);
		else if (now->masked_rows > old->masked_rows)
			collect_masked_since(ac, now, old, &arg);
	}

	/* removed: sub-groups deleted since (compacted), read as the snapshot sees them */
	arg.added = false;
	for (int i = 0; i < nthen; i++)
		if (read_subgroup(ac, then[i].subgroup_id) == NULL && then[i].placed &&
			then[i].partition_end == ZL_CURRENT_PARTITION)
			deleted_current = true;
	if (deleted_current)
		zl_meta_load_key_directories(storage_id, snapshot, then, nthen, NULL);
	for (int i = 0; i < nthen; i++)
		if (read_subgroup(ac, then[i].subgroup_id) == NULL &&
			then[i].masked_rows < then[i].row_count)
			read_batch_key_rows(ac, &then[i], collect_concurrent_row, &arg);
	UnregisterSnapshot(snapshot);

	/* a key changed unless its added and removed rows are the same versions */
	qsort(arg.rows, arg.nrows, sizeof(ConcurrentRow), concurrent_row_cmp);
	changed = palloc(sizeof(KeyState *) * Max(arg.nrows, 1));
	for (int i = 0; i < arg.nrows; i++)
	{
		ConcurrentRow *r = &arg.rows[i];

		for (int j = i + 1; !r->paired && j < arg.nrows && arg.rows[j].ks == r->ks &&
			 arg.rows[j].from == r->from; j++)
		{
			ConcurrentRow *s = &arg.rows[j];

			if (!s->paired && s->added != r->added && s->to == r->to &&
				values_equal(ac, r->values, r->isnull, s->values, s->isnull))
				r->paired = s->paired = true;
		}
		if (!r->paired && (nchanged == 0 || changed[nchanged - 1] != r->ks))
			changed[nchanged++] = r->ks;
	}
	if (nchanged == 0)
		return;

	/* name the first changed key in the batch's order */
	qsort(changed, nchanged, sizeof(KeyState *), pointer_cmp);
	for (int k = 0; k < ac->nkeys; k++)
		if (bsearch(&ac->keys[k], changed, nchanged, sizeof(KeyState *), pointer_cmp))
			report_concurrent_change(ac, describe_key_values(ac, ac->keys[k]->values,
															 ac->keys[k]->isnull));
}

static int
version_cmp(const void *a, const void *b)
{
	const Version *va = a;
	const Version *vb = b;

	return va->from < vb->from ? -1 : (va->from > vb->from ? 1 : 0);
}

static void write_version(ApplyContext *ac, ZLWriteState *state, Version *v);

/* ---------- the change record ---------- */

/*
 * What the table remembers besides its versions, read once per batch
 * under the writer lock: the newest change applied (late data, the
 * horizon) and the instants of every key (snapshots with deletes,
 * truncates).
 */
static void
load_record_head(ApplyContext *ac)
{
	ac->head_loaded = true;
	ac->newest_change = PG_INT64_MIN;
	ac->table_instants.stored = NULL;
	ac->table_instants.nstored = 0;
	if (ac->record_on)
	{
		MemoryContext old = MemoryContextSwitchTo(ac->batch_context);

		(void) zl_meta_record_head(RelationGetRelid(ac->rel), ac->snapshot, &ac->newest_change,
								   &ac->table_instants.stored, &ac->table_instants.nstored);
		MemoryContextSwitchTo(old);
	}
	ac->table_deletes_late = ac->ntable_deletes > 0 &&
		ac->table_deletes[0].time < ac->newest_change;
}

/*
 * Changes the table no longer accepts: at or before its history cut
 * (README "Lifecycle"), or, with a late_horizon, older than the newest
 * change applied before the batch minus the horizon (README "Late data"):
 * a key's earliest change, or (ks NULL) the time of a snapshot with
 * deletes.
 */
static void
check_horizon(ApplyContext *ac, KeyState *ks)
{
	int64		cutoff;
	int64		time = ks != NULL ? ks->min_time : ac->table_deletes[0].time;

	if (ks != NULL && ks->nchanges == 0)
		return;
	/* README "Lifecycle": history up to the cut was dropped */
	if (time <= ac->opts.history_cut)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 ks != NULL ?
				 errmsg("change for key %s at %s is before the history cut",
						describe_key_values(ac, ks->values, ks->isnull),
						time_text(ac, time)) :
				 errmsg("snapshot at %s is before the history cut", time_text(ac, time)),
				 errdetail("Zipper table \"%s\" dropped the history that ended at or before %s (zipper_lake.drop_history or its retention); it accepts changes after that.",
						   RelationGetRelationName(ac->rel), time_text(ac, ac->opts.history_cut)),
				 errhint("Drop the change; nothing was applied.")));
	if (ac->opts.late_horizon <= 0 || ac->newest_change == PG_INT64_MIN)
		return;
	cutoff = ac->newest_change - ac->opts.late_horizon;
	if (time < cutoff)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 ks != NULL ?
				 errmsg("change for key %s at %s is beyond the late horizon",
						describe_key_values(ac, ks->values, ks->isnull),
						time_text(ac, time)) :
				 errmsg("snapshot at %s is beyond the late horizon", time_text(ac, time)),
				 errdetail("Zipper table \"%s\" accepts changes from %s on (its newest change, %s, minus its late_horizon).",
						   RelationGetRelationName(ac->rel), time_text(ac, cutoff),
						   time_text(ac, ac->newest_change)),
				 errhint("Drop the change, or widen the horizon with zipper_lake.set_late_horizon(); nothing was applied.")));
}

/* a record entry of a batch key: it replaces what older pieces said from its since on */
static void
collect_record_entry(void *arg, const ZLRecordEntry *e)
{
	ApplyContext *ac = arg;
	KeyState   *ks;
	int			kept = 0;

	if (bsearch(&e->hash, ac->hashes, ac->nhashes, sizeof(uint32), zl_key_hash_cmp) == NULL)
		return;
	ks = key_lookup(ac, e->key, NULL, false);
	if (ks == NULL || ks->nchanges == 0)
		return;
	for (int i = 0; i < ks->nrecord; i++)
		if (ks->record[i].time < e->since)
			ks->record[kept++] = ks->record[i];
	ks->nrecord = kept;
	for (int i = 0; i < e->ninstants; i++)
	{
		if (e->instants[i].time < ks->record_from)
			continue;
		grow_array((void **) &ks->record, &ks->maxrecord, ks->nrecord + 1,
				   sizeof(ZLRecordInstant));
		ks->record[ks->nrecord++] = *zl_record_copy_instants(ac->record_codec, &e->instants[i], 1);
	}
}

/*
 * The remembered instants of the chunk's keys at or after their earliest
 * change: only segments of the chunk's hash range holding such an instant
 * are read, so an in-order batch reads none.
 */
static void
find_record_instants(ApplyContext *ac)
{
	int64		from = PG_INT64_MAX;

	if (!ac->record_on)
		return;
	for (int k = 0; k < ac->nkeys; k++)
	{
		KeyState   *ks = ac->keys[k];

		/*
		 * README "Tracked columns": a version shows the untracked values of
		 * its last instant, so a change anywhere in it concerns every
		 * instant of it: the key's record is read from its start.
		 */
		qsort(ks->versions, ks->nversions, sizeof(Version), version_cmp);
		ks->record_from = ks->min_time;
		if (ac->opts.some_untracked && ks->nversions > 0)
			ks->record_from = Min(ks->min_time, ks->versions[0].from);
		if (ks->nchanges > 0)
			from = Min(from, ks->record_from);
	}
	if (from == PG_INT64_MAX)
		return;
	/* the keys now include those apply_snapshot found missing from its image */
	ac->hashes = key_hashes(ac, false, &ac->nhashes);
	zl_record_read(ac->record_codec, RelationGetRelid(ac->rel), ac->snapshot,
				   ac->chunk_lo, ac->chunk_hi, from, collect_record_entry, ac);
	for (int k = 0; k < ac->nkeys; k++)
	{
		KeyState   *ks = ac->keys[k];

		ks->record_newest = ks->nrecord > 0 ? ks->record[ks->nrecord - 1].time : PG_INT64_MIN;
	}
}

static int
key_hash_order(const void *a, const void *b)
{
	const KeyState *ka = *(KeyState *const *) a;
	const KeyState *kb = *(KeyState *const *) b;

	return ka->hash < kb->hash ? -1 : (ka->hash > kb->hash);
}

/*
 * Sort the chunk's keys by hash.  Those of the batch came in hash order
 * (the batch is sorted so); keys found only among stored rows (deletes of
 * keys an image lacks) follow in storage order: sort just those and merge.
 */
static void
sort_keys_by_hash(ApplyContext *ac)
{
	int			sorted = 1;
	KeyState  **merged;
	int			a,
				b,
				n = 0;

	while (sorted < ac->nkeys && ac->keys[sorted - 1]->hash <= ac->keys[sorted]->hash)
		sorted++;
	if (sorted >= ac->nkeys)
		return;
	qsort(ac->keys + sorted, ac->nkeys - sorted, sizeof(KeyState *), key_hash_order);
	merged = palloc(sizeof(KeyState *) * ac->nkeys);
	for (a = 0, b = sorted; a < sorted || b < ac->nkeys;)
		merged[n++] = (b >= ac->nkeys ||
					   (a < sorted && ac->keys[a]->hash <= ac->keys[b]->hash)) ?
			ac->keys[a++] : ac->keys[b++];
	memcpy(ac->keys, merged, sizeof(KeyState *) * ac->nkeys);
	pfree(merged);
}

/* ---------- folding the changes in ---------- */

/*
 * One key: its changes folded into its stored versions and remembered
 * instants (zl_fold.c); new versions go to the write state, the record
 * entry to the record writer.
 */
static void
fold_key(ApplyContext *ac, ZLWriteState *state, KeyState *ks)
{
	ZLFoldKey	fk;
	ZLFoldCounts counts = {0};
	ZLFoldChange *changes = palloc(sizeof(ZLFoldChange) * Max(1, ks->nchanges));
	ZLFoldChange **ordered = palloc(sizeof(ZLFoldChange *) * Max(1, ks->nchanges));

	for (int i = 0; i < ks->nchanges; i++)
	{
		Change	   *c = ks->changes[i];

		changes[i].time = c->time;
		changes[i].has_seq = c->has_seq;
		changes[i].seq = c->seq;
		changes[i].is_delete = c->op == OP_DELETE;
		changes[i].missing_key = c->missing_key;
		changes[i].values = c->values;
		changes[i].isnull = c->isnull;
		changes[i].given = c->given;
		ordered[i] = &changes[i];
	}
	memset(&fk, 0, sizeof(fk));
	fk.since = ac->record_on ? ks->record_from : ks->min_time;
	fk.versions = ks->versions;
	fk.nversions = ks->nversions;
	fk.record = ks->record;
	fk.nrecord = ks->nrecord;
	fk.changes = ordered;
	fk.nchanges = ks->nchanges;
	zl_fold_key(&ac->fold_context, &fk, &counts);

	ac->counts.inserted += counts.inserted;
	ac->counts.closed += counts.closed;
	ac->counts.deleted += counts.deleted;
	ac->counts.unchanged += counts.unchanged;
	ac->counts.late += counts.late;
	ac->batch_newest = Max(ac->batch_newest, ks->changes[ks->nchanges - 1]->time);

	for (int i = 0; i < fk.nresult; i++)
	{
		if (fk.result[i].stored != NULL)
			fk.result[i].stored->survives = true;
		else
			write_version(ac, state, &fk.result[i]);
	}
	if (fk.record_changed && ac->record_on)
	{
		ZLRecordEntry e;

		e.hash = ks->hash;
		e.key = ks->values;
		e.since = ks->record_from;
		e.overridden = ks->record_newest;
		e.ninstants = fk.nremember;
		e.instants = fk.remember;
		zl_record_writer_add(ac->record_writer, &e);
	}
}

/* ---------- writing the outcome ---------- */

static void
write_version(ApplyContext *ac, ZLWriteState *state, Version *v)
{
	Datum	   *values = palloc(sizeof(Datum) * ac->tupdesc->natts);
	HeapTuple	tuple;

	memcpy(values, v->values, sizeof(Datum) * ac->tupdesc->natts);
	values[ac->opts.from_attnum - 1] = zl_instant_to_datum(v->from, ac->opts.period_type);
	values[ac->opts.to_attnum - 1] = zl_instant_to_datum(v->to, ac->opts.period_type);
	v->isnull[ac->opts.from_attnum - 1] = false;
	v->isnull[ac->opts.to_attnum - 1] = false;
	tuple = zl_row_check(ac->row_check, heap_form_tuple(ac->tupdesc, values, v->isnull),
						 values, v->isnull);
	if (tuple->t_len > TOAST_TUPLE_THRESHOLD)
		tuple = zl_toast_version(ac->rel, tuple);
	zl_write_place(state, tuple, v->from, v->to);
	heap_freetuple(tuple);
	pfree(values);
}


/* the index of a sub-group among those the batch retired rows of */
static int
touched_index(ApplyContext *ac, const ZLSubGroup *sg)
{
	MemoryContext old;

	/* the stored rows of a chunk come sub-group by sub-group: try the last first */
	if (ac->ntouched > 0 && ac->touched[ac->last_touched].subgroup_id == sg->subgroup_id)
		return ac->last_touched;
	for (int i = ac->ntouched - 1; i >= 0; i--)
		if (ac->touched[i].subgroup_id == sg->subgroup_id)
			return ac->last_touched = i;
	old = MemoryContextSwitchTo(ac->batch_context);
	grow_array((void **) &ac->touched, &ac->maxtouched, ac->ntouched + 1,
			   sizeof(TouchedSubGroup));
	if (ac->retired == NULL)
		ac->retired = tuplesort_begin_datum(INT8OID, Int8LessOperator, InvalidOid, false,
											ZL_RETIRED_SORT_KB, NULL, TUPLESORT_NONE);
	MemoryContextSwitchTo(old);
	ac->touched[ac->ntouched].subgroup_id = sg->subgroup_id;
	ac->touched[ac->ntouched].current = sg->partition_end == ZL_CURRENT_PARTITION;
	ac->touched[ac->ntouched].row_count = sg->row_count;
	ac->touched[ac->ntouched].masked_rows = sg->masked_rows;
	ac->last_touched = ac->ntouched;
	return ac->ntouched++;
}

/*
 * The stored versions of a chunk that did not survive are remembered; no
 * catalog row is written before the batch is applied (a writing statement
 * would flush the rows pending in the write state, chunk by chunk).
 */
static void
remember_retired(ApplyContext *ac)
{
	for (int i = 0; i < ac->nstored; i++)
	{
		StoredVersion *s = ac->stored[i];

		if (!s->survives)
		{
			int			index = touched_index(ac, s->sg);	/* begins the sort */

			tuplesort_putdatum(ac->retired,
							   Int64GetDatum(((int64) index << 32) | (uint32) s->position),
							   false);
		}
	}
}

/*
 * After the last chunk, retire the rows the batch replaced: one mask row
 * per sub-group lists them, unless the sub-group is in the current
 * partition and would be more than half masked: then it is compacted
 * (zl_compact.c), so the cost of a batch does not grow with history.
 * Masks are inserted together (in pieces of ZL_MASKS_PER_INSERT positions
 * at most), so that the rows the batch left pending are written once.
 */
static void
retire_rows(ApplyContext *ac)
{
	uint64		storage_id = zl_storage_id(ac->rel);
	ZLWriteState *state;
	Snapshot	snapshot;
	ZLSubGroup *current = NULL;
	int			ncurrent = 0;
	int64	   *mask_subgroups;
	int32	  **mask_positions;
	int		   *mask_counts;
	int			nmasks = 0;
	int64		pending = 0;
	int32	   *positions;
	int			npositions = 0;
	int			maxpositions = 1024;
	int			index = -1;
	Datum		d;
	bool		isnull;
	bool		more;

	if (ac->retired == NULL)
		return;
	state = zl_write_state_get(ac->rel);
	tuplesort_performsort(ac->retired);
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	mask_subgroups = palloc(sizeof(int64) * ac->ntouched);
	mask_positions = palloc(sizeof(int32 *) * ac->ntouched);
	mask_counts = palloc(sizeof(int) * ac->ntouched);
	positions = palloc(sizeof(int32) * maxpositions);
	do
	{
		int64		item = 0;

		more = tuplesort_getdatum(ac->retired, true, &d, &isnull, NULL);
		if (more)
			item = DatumGetInt64(d);
		if (npositions > 0 && (!more || (int) (item >> 32) != index))
		{
			const TouchedSubGroup *t = &ac->touched[index];
			ZLSubGroup *sg = NULL;

			/* the current partition (masks and all) is read if one is compacted */
			if (t->current && zl_compaction_due(t->row_count, t->masked_rows, npositions))
			{
				if (current == NULL)
					current = zl_meta_load_subgroups(storage_id, snapshot, ZL_CURRENT_PARTITION,
													 &ncurrent);
				sg = zl_meta_find_subgroup(current, ncurrent, t->subgroup_id);
			}
			if (sg == NULL || !zl_compact_subgroup(ac->rel, state, sg, positions, npositions))
			{
				/* a copy of its own size: positions is the scratch buffer */
				mask_subgroups[nmasks] = t->subgroup_id;
				mask_positions[nmasks] = palloc(sizeof(int32) * npositions);
				memcpy(mask_positions[nmasks], positions, sizeof(int32) * npositions);
				mask_counts[nmasks++] = npositions;
				pending += npositions;
			}
			npositions = 0;
			if (pending >= ZL_MASKS_PER_INSERT || (!more && nmasks > 0))
			{
				zl_meta_insert_masks(ac->rel, nmasks, mask_subgroups, mask_positions, mask_counts);
				for (int i = 0; i < nmasks; i++)
					pfree(mask_positions[i]);
				nmasks = 0;
				pending = 0;
			}
		}
		if (more)
		{
			index = (int) (item >> 32);
			if (npositions == maxpositions)
			{
				maxpositions *= 2;
				positions = repalloc(positions, sizeof(int32) * maxpositions);
			}
			positions[npositions++] = (int32) (uint32) item;
		}
	} while (more);
	UnregisterSnapshot(snapshot);
	tuplesort_end(ac->retired);
	ac->retired = NULL;
}

static void
apply_batch(ApplyContext *ac)
{
	uint64		storage_id = zl_storage_id(ac->rel);
	ZLWriteState *state;
	MemoryContext old;

	add_truncates_to_batch_keys(ac);
	order_changes(ac);

	/*
	 * Serialize with other writers, then read what they committed (and
	 * what this transaction's earlier statements left pending).  Later
	 * chunks need not see the versions earlier ones wrote (other keys'),
	 * and no catalog row is written before the end of the batch (masks
	 * and compaction: retire_rows).
	 */
	if (!ac->later_chunk)
		zl_write_flush_relation(RelationGetRelid(ac->rel));
	zl_key_directory_cache_trim();	/* the chunk's directories stay till its end */
	(void) zl_write_lock_table(storage_id, false);
	CommandCounterIncrement();
	ac->snapshot = RegisterSnapshot(GetLatestSnapshot());
	if (!ac->head_loaded)
	{
		ZLTableOptions now;

		/* the history cut as the last writer left it (README "Lifecycle") */
		if (zl_meta_load_options(ac->rel, &now, true))
			ac->opts.history_cut = now.history_cut;
		load_record_head(ac);
		if (ac->ntable_deletes > 0)
			check_horizon(ac, NULL);	/* changes of every key */
	}
	for (int k = 0; k < ac->nkeys; k++)
		check_horizon(ac, ac->keys[k]);
	find_stored_versions(ac);
	find_record_instants(ac);
	UnregisterSnapshot(ac->snapshot);
	if (IsolationUsesXactSnapshot())
		check_concurrent_changes(ac);

	/* keys in hash order: the record's entries are written in that order */
	state = zl_write_state_get(ac->rel);
	sort_keys_by_hash(ac);
	for (int k = 0; k < ac->nkeys; k++)
	{
		KeyState   *ks = ac->keys[k];

		if (ks->nchanges == 0)
			continue;
		qsort(ks->versions, ks->nversions, sizeof(Version), version_cmp);
		old = MemoryContextSwitchTo(ac->key_context);
		fold_key(ac, state, ks);
		MemoryContextSwitchTo(old);
		MemoryContextReset(ac->key_context);
	}
	remember_retired(ac);
}


/*
 * The table instants after the batch: the stored ones and the batch's, one
 * per time — the one that follows in fold order (the batch's at equal
 * seq) — less those before forget_before.
 */
static void
save_table_instants(ApplyContext *ac, Oid relid, int64 forget_before)
{
	const ZLTableInstants *t = &ac->table_instants;
	ZLTableInstant *merged = palloc(sizeof(ZLTableInstant) * Max(1, t->nstored + t->nbatch));
	int			n = 0;
	int			i = 0,
				j = 0;

	while (i < t->nstored || j < t->nbatch)
	{
		const ZLTableInstant *next;

		if (j >= t->nbatch || (i < t->nstored && t->stored[i].time < t->batch[j].time))
			next = &t->stored[i++];
		else
			next = &t->batch[j++];
		if (next->time < forget_before)
			continue;
		if (n > 0 && merged[n - 1].time == next->time)
		{
			if (!zl_fold_precedes(next->time, next->has_seq, next->seq, merged[n - 1].time,
								  merged[n - 1].has_seq, merged[n - 1].seq))
				merged[n - 1] = *next;
		}
		else
			merged[n++] = *next;
	}
	zl_meta_record_save_head(relid, ac->batch_newest, merged, n);
}

/*
 * After the batch's rows: its record entries as the table's newest piece,
 * merged with older ones as they accumulate, and the newest change time
 * and (apply_snapshot with deletes) the snapshot's table-wide instant.
 */
static void
save_record(ApplyContext *ac)
{
	Oid			relid = RelationGetRelid(ac->rel);

	int64		forget_before = PG_INT64_MIN;

	if (!ac->record_on)
		return;
	zl_record_writer_finish(ac->record_writer, relid);
	for (int i = 0; i < ac->ntable_deletes; i++)
		ac->batch_newest = Max(ac->batch_newest, ac->table_deletes[i].time);
	/* README "Late data": what no accepted change can reach any more */
	if (ac->opts.late_horizon > 0)
		forget_before = Max(ac->newest_change, ac->batch_newest) - ac->opts.late_horizon;
	/* README "Lifecycle": nor what the history cut refuses */
	if (ac->opts.history_cut != ZL_NO_HISTORY_CUT)
		forget_before = Max(forget_before, ac->opts.history_cut + 1);
	if (ac->batch_newest != PG_INT64_MIN)
		save_table_instants(ac, relid, forget_before);
	zl_record_merge(ac->record_codec, relid, forget_before);
}

/* ---------- applying the sorted batch a chunk of keys at a time ---------- */

/* the per-key state of a chunk starts empty (its memory was reset) */
static void
chunk_begin(ApplyContext *ac)
{
	ac->keys = NULL;
	ac->nkeys = ac->maxkeys = 0;
	ac->nbuckets = 1024;
	ac->buckets = palloc(sizeof(KeyBucket) * ac->nbuckets);
	memset(ac->buckets, -1, sizeof(KeyBucket) * ac->nbuckets);
	ac->current = ac->history = NULL;
	ac->ncurrent = ac->nhistory = 0;
	ac->hashes = NULL;
	ac->nhashes = 0;
	ac->stored = NULL;
	ac->nstored = ac->maxstored = 0;
}

/*
 * Keys are independent: the batch is applied as consecutive chunks of its
 * keys in hash order, each as a batch of its own (apply_batch), so that
 * the keys, changes and stored versions in memory at once stay within
 * work_mem (a chunk ends at the first new hash once work_mem is used —
 * changes held in memory count in the batch's work_mem instead; the
 * changes of one key are never split).  A chunk covers the hash range
 * from its first key to the next chunk's: apply_snapshot deletes the open
 * keys of that range missing from it.  Since it reads every open key of
 * the range, with deletes a chunk also covers at most a share of the hash
 * space that holds about work_mem of open rows (hashes are uniform), so
 * an image much smaller than the table (or an empty one, allow_empty) is
 * still applied in bounded memory, as chunks with few or no image rows.
 */
/*
 * The open rows of the table (an estimate: committed state, no lock), for
 * apply_snapshot with deletes, which reads every open key of a chunk's
 * hash range whether the image has it or not.
 */
static int64
count_open_rows(ApplyContext *ac)
{
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	int			nsgs;
	ZLSubGroup *sgs = zl_meta_load_subgroups(zl_storage_id(ac->rel), snapshot,
											 ZL_CURRENT_PARTITION, &nsgs);
	int64		rows = 0;

	UnregisterSnapshot(snapshot);
	for (int i = 0; i < nsgs; i++)
		rows += sgs[i].row_count - sgs[i].masked_rows;
	return rows;
}

static void
apply_chunks(ApplyContext *ac)
{
	Size		limit = (Size) work_mem * 1024;
	uint64		span = (uint64) PG_UINT32_MAX + 1;	/* hashes a chunk may cover */
	uint64		lo = 0;

	ac->batch_context = CurrentMemoryContext;
	if (ac->delete_missing)
	{
		ZLTableInstant snapshot = {ac->delete_time, false, 0};

		add_table_delete(ac, snapshot);
	}

	/*
	 * Key hashes are uniform: with changes of every key, a chunk covers a
	 * share of the hash space that holds about work_mem of open rows.
	 */
	if (ac->ntable_deletes > 0)
	{
		int64		open_rows = count_open_rows(ac);
		int64		rows_per_chunk = Max(1, (int64) (limit / ZL_OPEN_ROW_BYTES));

		if (open_rows > rows_per_chunk)
			span = Max(1, (uint64) ((((uint64) PG_UINT32_MAX + 1) / open_rows) * rows_per_chunk));
	}
	if (ac->ntable_deletes > 1)
		qsort(ac->table_deletes, ac->ntable_deletes, sizeof(ZLTableInstant), table_instant_cmp);
	ac->table_instants.batch = ac->table_deletes;
	ac->table_instants.nbatch = ac->ntable_deletes;
	ac->fold_context.comparer = ac->value_comparer;
	ac->fold_context.tracked = ac->tracked_comparer;
	ac->fold_context.opts = &ac->opts;
	ac->fold_context.tupdesc = ac->tupdesc;
	ac->fold_context.open_end = ac->opts.open_end;
	ac->fold_context.table = &ac->table_instants;
	ac->fold_context.natts = ac->tupdesc->natts;
	if (ac->record_on)
		ac->record_writer = zl_record_writer_begin(ac->record_codec);
	/* packing would read sub-groups before retire_rows masks them */
	zl_write_hold_packing(RelationGetRelid(ac->rel), true);
	ac->chunk_context = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake apply chunk",
											  ALLOCSET_DEFAULT_SIZES);
	ac->key_context = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake apply key",
											ALLOCSET_DEFAULT_SIZES);
	do
	{
		MemoryContext old = MemoryContextSwitchTo(ac->chunk_context);
		uint64		range_end = Min(lo + span - 1, (uint64) PG_UINT32_MAX);
		uint64		hi = range_end;
		uint32		last = 0;
		uint32		hash;

		chunk_begin(ac);
		while (next_change_hash(ac, &hash))
		{
			Change	   *c;

			if (hash > range_end)
				break;			/* a later chunk's */
			if (ac->nkeys > 0 && hash != last &&
				MemoryContextMemAllocated(ac->chunk_context, true) >= limit)
			{
				hi = (uint64) hash - 1;
				break;
			}
			c = next_change(ac);
			add_change(key_lookup_hashed(ac, c->values, c->isnull, hash, true), c);
			last = hash;
		}
		ac->chunk_lo = (uint32) lo;
		ac->chunk_hi = (uint32) hi;
		elog(DEBUG2, "zipper_lake: chunk of %d keys, hashes %u..%u", ac->nkeys, ac->chunk_lo, ac->chunk_hi);
		apply_batch(ac);
		ac->later_chunk = true;
		lo = hi + 1;
		MemoryContextSwitchTo(old);
		MemoryContextReset(ac->chunk_context);
	} while (lo <= PG_UINT32_MAX);
	retire_rows(ac);
	zl_write_hold_packing(RelationGetRelid(ac->rel), false);
	zl_write_flush_relation(RelationGetRelid(ac->rel));
	drop_batch(ac);
	MemoryContextDelete(ac->chunk_context);
	MemoryContextDelete(ac->key_context);
	save_record(ac);
}

/* ---------- SQL entry points ---------- */

/*
 * The privileges applying needs on the zipper table: INSERT and UPDATE,
 * and SELECT (on the table, or on every column of it), since the counts
 * tell whether a change equals what a key holds — at any instant with a
 * late change, a column at a time with ignore_nulls — and heap's UPDATE
 * never lets a role compare a value it may not read.
 */
static void
check_apply_privileges(Relation rel)
{
	static const struct
	{
		AclMode		mode;
		const char *name;
	}			privileges[] = {{ACL_SELECT, "SELECT"}, {ACL_INSERT, "INSERT"}, {ACL_UPDATE, "UPDATE"}};
	Oid			relid = RelationGetRelid(rel);
	Oid			userid = GetUserId();
	AclMode		needed = ACL_SELECT | ACL_INSERT | ACL_UPDATE;
	AclMode		missing = needed & ~pg_class_aclmask(relid, userid, needed, ACLMASK_ALL);
	StringInfoData lacks;

	if ((missing & ACL_SELECT) &&
		pg_attribute_aclcheck_all(relid, userid, ACL_SELECT, ACLMASK_ALL) == ACLCHECK_OK)
		missing &= ~ACL_SELECT;
	if (missing == 0)
		return;
	initStringInfo(&lacks);
	for (int i = 0; i < lengthof(privileges); i++)
		if (missing & privileges[i].mode)
			appendStringInfo(&lacks, "%s%s", lacks.len > 0 ? ", " : "", privileges[i].name);
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to apply changes to table \"%s\"",
					RelationGetRelationName(rel)),
			 errdetail("Role \"%s\" lacks %s on table %s.",
					   GetUserNameFromId(userid, false), lacks.data, zl_qualified_name(rel)),
			 errhint("Applying changes needs SELECT (on the table or every column), INSERT and UPDATE on the zipper table: the counts tell whether a change equals what the table holds.")));
}

/*
 * Open the zipper table and the relation of changes (its argument named
 * source_argument) for applying.
 */
static void
apply_begin(ApplyContext *ac, Oid relid, Oid source_relid, const char *source_argument)
{
	memset(ac, 0, sizeof(*ac));
	ac->rel = zl_open_zipper_table(relid, RowExclusiveLock);
	ac->tupdesc = RelationGetDescr(ac->rel);
	ac->source_name = zl_relation_arg_name(source_relid, source_argument);
	check_apply_privileges(ac->rel);
	zl_refuse_row_security(ac->rel);
	zl_load_registration(ac->rel, &ac->opts, true,
						 "Changes are placed by the key and period columns named at registration.",
						 "Register it with zipper_lake.register().");
	prepare_comparisons(ac);
	ac->row_check = zl_row_check_begin(ac->rel, &ac->opts);
	ac->batch_newest = PG_INT64_MIN;
	ac->record_on = zl_meta_record_exists();
	if (ac->record_on)
		ac->record_codec = zl_record_codec_create(ac->tupdesc, &ac->opts, ac->hasher);
}

static Datum
apply_result(FunctionCallInfo fcinfo, ApplyContext *ac, int64 skipped)
{
	TupleDesc	tupdesc;
	Datum		values[7];
	bool		nulls[7] = {0};

	zl_row_check_end(ac->row_check);
	table_close(ac->rel, NoLock);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = Int64GetDatum(ac->counts.changes);
	values[1] = Int64GetDatum(ac->counts.inserted);
	values[2] = Int64GetDatum(ac->counts.closed);
	values[3] = Int64GetDatum(ac->counts.deleted);
	values[4] = Int64GetDatum(ac->counts.unchanged);
	values[5] = Int64GetDatum(ac->counts.late);
	values[6] = Int64GetDatum(skipped); /* apply_events only */
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls));
}

static ZLMissingColumns
parse_missing_columns(const char *mode)
{
	if (mode == NULL || strcmp(mode, "error") == 0)
		return MISSING_ERROR;
	if (strcmp(mode, "null") == 0)
		return MISSING_NULL;
	if (strcmp(mode, "keep") == 0)
		return MISSING_KEEP;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid missing_columns \"%s\"", mode),
			 errdetail("A value column the changes lack is an error, NULL, or kept from what the key holds."),
			 errhint("Pass 'error', 'null' or 'keep'.")));
	return MISSING_ERROR;		/* keep compiler quiet */
}

/* ignore_nulls and missing_columns, at argno and argno + 1 (0.2 only) */
static void
partial_options(FunctionCallInfo fcinfo, ApplyContext *ac, int argno)
{
	char	   *mode;

	if (PG_NARGS() <= argno + 1)
		return;
	ac->ignore_nulls = !PG_ARGISNULL(argno) && PG_GETARG_BOOL(argno);
	mode = PG_ARGISNULL(argno + 1) ? "error" : text_to_cstring(PG_GETARG_TEXT_PP(argno + 1));
	ac->missing_columns = parse_missing_columns(mode);
}

static char *
name_arg(FunctionCallInfo fcinfo, int argno)
{
	return PG_ARGISNULL(argno) ? NULL : pstrdup(NameStr(*PG_GETARG_NAME(argno)));
}

/*
 * The SQL entry points.  The install script of 0.1 binds apply_changes and
 * apply_snapshot to the first two symbols; 0.2's script binds them to the
 * _v2 ones.  A 0.1 installation running this library keeps 0.1's meaning
 * until ALTER EXTENSION UPDATE: its op argument defaults to 'op', which
 * must not become a required column, and its apply_snapshot has no
 * allow_empty, so an empty image is applied.
 */
static Datum
apply_changes(FunctionCallInfo fcinfo, bool op_defaults_to_op)
{
	ApplyContext ac;
	char	   *time_column = name_arg(fcinfo, 2);
	char	   *op_column = name_arg(fcinfo, 3);

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || time_column == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table, changes and change_time must not be null"),
				 errdetail("Argument %s is null.", PG_ARGISNULL(0) ? "tbl" : PG_ARGISNULL(1) ? "changes" : "change_time"),
				 errhint("Pass the zipper table, the relation holding the changes and its change-time column.")));
	if (op_defaults_to_op && op_column != NULL && strcmp(op_column, "op") == 0)
		op_column = NULL;
	apply_begin(&ac, PG_GETARG_OID(0), PG_GETARG_OID(1), "changes");
	partial_options(fcinfo, &ac, 5);
	read_batch(&ac, PG_GETARG_OID(1), time_column, op_column, name_arg(fcinfo, 4), 0);
	apply_chunks(&ac);
	return apply_result(fcinfo, &ac, -1);
}

static Datum
apply_snapshot(FunctionCallInfo fcinfo, bool allow_empty)
{
	ApplyContext ac;
	int64		snapshot_time;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table, snapshot, snapshot_time and deletes must not be null"),
				 errdetail("Argument %s is null.", PG_ARGISNULL(0) ? "tbl" : PG_ARGISNULL(1) ? "snapshot" :
						   PG_ARGISNULL(2) ? "snapshot_time" : "deletes"),
				 errhint("Pass the zipper table, the relation holding the image and the time it was taken.")));
	apply_begin(&ac, PG_GETARG_OID(0), PG_GETARG_OID(1), "snapshot");

	/* snapshot_time arrives as timestamptz: take it in the column's terms */
	snapshot_time = zl_instant_to_precision(&ac.opts,
											zl_timestamptz_to_instant(&ac.opts, PG_GETARG_TIMESTAMPTZ(2)));
	ac.delete_missing = PG_GETARG_BOOL(3);
	ac.delete_time = snapshot_time;
	partial_options(fcinfo, &ac, 5);
	read_batch(&ac, PG_GETARG_OID(1), NULL, NULL, NULL, snapshot_time);
	if (ac.counts.changes == 0 && !allow_empty)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("snapshot \"%s\" is empty", ac.source_name),
				 ac.delete_missing ?
				 errdetail("Applied with deletes, an empty image would delete every key of zipper table \"%s\" at %s.",
						   RelationGetRelationName(ac.rel), time_text(&ac, snapshot_time)) :
				 errdetail("An empty image changes nothing in zipper table \"%s\".",
						   RelationGetRelationName(ac.rel)),
				 errhint("Pass allow_empty => true if the source really is empty; nothing was applied.")));
	apply_chunks(&ac);
	return apply_result(fcinfo, &ac, -1);
}

/* 0.1: apply_changes(tbl, changes, change_time, op DEFAULT 'op', seq) */
Datum
zipper_lake_apply_changes(PG_FUNCTION_ARGS)
{
	return apply_changes(fcinfo, true);
}

/* 0.1: apply_snapshot(tbl, snapshot, snapshot_time, deletes) */
Datum
zipper_lake_apply_snapshot(PG_FUNCTION_ARGS)
{
	return apply_snapshot(fcinfo, true);
}

/* 0.2: apply_changes(tbl, changes, change_time, op DEFAULT NULL, seq) */
Datum
zipper_lake_apply_changes_v2(PG_FUNCTION_ARGS)
{
	return apply_changes(fcinfo, false);
}

/* 0.2: apply_snapshot(tbl, snapshot, snapshot_time, deletes, allow_empty) */
Datum
zipper_lake_apply_snapshot_v2(PG_FUNCTION_ARGS)
{
	return apply_snapshot(fcinfo, !PG_ARGISNULL(4) && PG_GETARG_BOOL(4));
}

/* ---------- a batch from another source of changes (zl_events.c) ---------- */

/*
 * The changes of a batch can come from elsewhere than a relation of typed
 * rows: zl_apply_batch_begin() opens the table as apply_changes does, the
 * source adds its changes one by one (row-shaped values, already of the
 * columns' types; given: the columns a partial change gives, NULL for
 * all), and zl_apply_batch_finish() applies them and returns the counts.
 */
ZLApplyBatch *
zl_apply_batch_begin(Oid relid, Oid source_relid, const char *source_argument,
					 bool ignore_nulls, const char *missing_columns)
{
	ApplyContext *ac = palloc(sizeof(ApplyContext));

	apply_begin(ac, relid, source_relid, source_argument);
	ac->ignore_nulls = ignore_nulls;
	ac->missing_columns = parse_missing_columns(missing_columns);
	ac->batch_context = CurrentMemoryContext;
	begin_batch(ac);
	return ac;
}

Relation
zl_apply_batch_relation(ZLApplyBatch *ac, const ZLTableOptions **opts)
{
	*opts = &ac->opts;
	return ac->rel;
}

/* missing_columns for a change that lacks columns of the table */
bool
zl_apply_batch_keeps_missing(ZLApplyBatch *ac, const char *column, const char *change)
{
	if (ac->missing_columns == MISSING_ERROR)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" is missing from %s", column, change),
				 errdetail("Zipper table \"%s\" needs every value column in every change.",
						   RelationGetRelationName(ac->rel)),
				 errhint("Pass missing_columns => 'null' or 'keep'; nothing was applied.")));
	return ac->missing_columns == MISSING_KEEP;
}

void
zl_apply_batch_add(ZLApplyBatch *ac, const ZLBatchChange *bc)
{
	int			ncols = ac->tupdesc->natts;
	Change	   *c = palloc0(sizeof(Change));

	c->values = palloc(sizeof(Datum) * (ncols + 3));
	c->isnull = palloc(sizeof(bool) * (ncols + 3));
	memcpy(c->values, bc->values, sizeof(Datum) * ncols);
	memcpy(c->isnull, bc->isnull, sizeof(bool) * ncols);
	c->time = zl_instant_to_precision(&ac->opts, zl_timestamptz_to_instant(&ac->opts, bc->time));
	c->op = bc->op == 'u' ? OP_UPSERT : bc->op == 'd' ? OP_DELETE : OP_TRUNCATE;
	c->has_seq = bc->has_seq;
	c->seq = bc->seq;
	c->arrival = (uint32) ac->counts.changes;
	check_change(ac, c, false, "change time");
	if (c->op == OP_UPSERT)
	{
		c->given = given_columns(ac, c);
		if (bc->given != NULL)
		{
			int			nbytes = (ncols + 7) / 8;

			if (c->given == NULL)
			{
				c->given = palloc(nbytes);
				memset(c->given, 0xFF, nbytes);
			}
			for (int i = 0; i < nbytes; i++)
				c->given[i] &= bc->given[i];
			/* every column given: a full upsert */
			for (int col = 0; col < ncols && c->given != NULL; col++)
				if ((c->given[col >> 3] & (1 << (col & 7))) == 0)
					break;
				else if (col == ncols - 1)
					c->given = NULL;
		}
	}
	take_change(ac, c, ac->batch_context);
}

Datum
zl_apply_batch_finish(ZLApplyBatch *ac, FunctionCallInfo fcinfo, int64 skipped)
{
	end_batch(ac);
	apply_chunks(ac);
	return apply_result(fcinfo, ac, skipped);
}
