/*-------------------------------------------------------------------------
 *
 * zl_apply_batch.c
 *	  Applying changes: the batch read, checked, and held by key hash.
 *
 * Step 1 of zl_apply.c's design comment: one query selects the batch as
 * the caller (its rows stream to a DestReceiver), every row is converted
 * to the table's types as INSERT assigns them and checked (key, time,
 * op), and the changes are held by key hash -- in memory while they fit
 * work_mem, else in a tuplesort ("The batch by key hash" below) -- from
 * which the chunks take their keys' changes, sorted in fold order.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write.h"
#include "apply/zl_apply_internal.h"
#include "common/zl_radixsort.h"

#include "access/detoast.h"
#include "catalog/pg_operator_d.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

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
 * false if no assignment cast exists.  The column is selected cast to the
 * type it has now, so the query returns exactly the type the conversion
 * is built for even if the relation is altered (or another one takes its
 * name) before the query runs: batch_receive reads the values as that
 * type.
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
	appendStringInfo(sql, "%sCAST(%s AS %s)", col > 0 ? ", " : "",
					 quote_identifier(get_attname(source_relid, attnum, false)),
					 format_type_extended(source_type, source_typmod,
										  FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
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

/* the kind of change an op names; OP_UNKNOWN: none */
ChangeOp
zl_apply_op_kind(const char *op)
{
	static const char *const upserts[] = {"i", "u", "c", "r", "insert", "update", "upsert",
	"+i", "+u"};
	static const char *const deletes[] = {"d", "delete", "-d"};

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
	return OP_UNKNOWN;
}

static ChangeOp
parse_op(ApplyContext *ac, const char *op, Change *c)
{
	ChangeOp	kind = op == NULL ? OP_UPSERT : zl_apply_op_kind(op);

	if (kind != OP_UNKNOWN)
		return kind;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown change operation \"%s\"", op),
			 errdetail("Change for key %s at %s has op \"%s\".",
					   describe_key_values(ac, c->values, c->isnull),
					   time_text(ac, c->time), op),
			 errhint("Use I, U, c, u, r, insert, update, upsert, +I or +U for upserts, D, delete or -D for deletes, -U for an update's before-image (ignored), T or truncate for a truncate.")));
	return OP_UPSERT;			/* keep compiler quiet */
}

/* can a version begin or end at this time: is it finite and before the open end? */
static bool
time_fits(ApplyContext *ac, int64 time)
{
	return zl_instant_is_finite(time) && time < ac->opts.open_end;
}

/* the message of a time that does not fit (time_fits) */
static int
errmsg_time_misfit(ApplyContext *ac, const char *what, int64 time)
{
	return zl_instant_is_finite(time) ?
		errmsg("%s %s is not before the open end %s", what, time_text(ac, time),
			   time_text(ac, ac->opts.open_end)) :
		errmsg("%s %s is not finite", what, time_text(ac, time));
}

void
zl_apply_check_change(ApplyContext *ac, Change *c, bool time_null, const char *time_column)
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
	if (!time_fits(ac, c->time))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg_time_misfit(ac, "change time", c->time),
				 errdetail("Change for key %s in column \"%s\" of changes \"%s\".",
						   describe_key_values(ac, c->values, c->isnull),
						   time_column, ac->source_name),
				 errhint("Change times must be finite and before the table's open end; nothing was applied.")));
}

/*
 * The time of a snapshot, checked before its image is read: an empty one
 * (allow_empty) has no row to check it with, and would stamp its deletes
 * and the change record with it.
 */
void
zl_apply_check_snapshot_time(ApplyContext *ac, int64 snapshot_time)
{
	if (!time_fits(ac, snapshot_time))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg_time_misfit(ac, "snapshot time", snapshot_time),
				 errdetail("Argument snapshot_time of apply_snapshot of \"%s\" into zipper table \"%s\".",
						   ac->source_name, RelationGetRelationName(ac->rel)),
				 errhint("Snapshot times must be finite and before the table's open end; nothing was applied.")));
}

void
zl_apply_add_change(KeyState *ks, Change *c)
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
 * the chunks see the same changes in the same order (zl_apply_next_change_hash,
 * zl_apply_next_change); holding them spares a small batch the sort tuples' forming
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
void
zl_apply_begin_batch(ApplyContext *ac)
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
void
zl_apply_end_batch(ApplyContext *ac)
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
bool
zl_apply_key_in_chunk(ApplyContext *ac, const Datum *key_values)
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
bool
zl_apply_next_change_hash(ApplyContext *ac, uint32 *hash)
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

/* held changes fetched ahead of the one taken */
#define HELD_AHEAD		8

/* that change (from the sort: copied into the current memory); on to the next */
Change *
zl_apply_next_change(ApplyContext *ac)
{
	Change	   *c;

	if (ac->held_context != NULL)
	{
		/*
		 * Held changes were allocated in arrival order and come in hash
		 * order: fetch one a few ahead (and its key's slot in the key
		 * table), or each is a cache miss (a tenth of an end-of-day
		 * apply_snapshot of 150k rows).
		 */
		if (ac->next_held + HELD_AHEAD < ac->nheld)
		{
			const HeldChange *ahead = &ac->held[ac->next_held + HELD_AHEAD];

			ZL_PREFETCH(ahead->change);
			ZL_PREFETCH(&ac->buckets[ahead->hash & (ac->nbuckets - 1)]);
		}
		return ac->held[ac->next_held++].change;
	}
	c = slot_change(ac);
	ac->sort_more = tuplesort_gettupleslot(ac->sort, true, false, ac->sort_slot, NULL);
	return c;
}

/* the batch applied, its memory goes */
void
zl_apply_drop_batch(ApplyContext *ac)
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
uint8 *
zl_apply_given_columns(ApplyContext *ac, Change *c)
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
void
zl_apply_add_table_delete(ApplyContext *ac, ZLTableInstant delete)
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
void
zl_apply_take_change(ApplyContext *ac, Change *c, MemoryContext batch_memory)
{
	bool		counted;

	if (!zl_apply_route_change(ac, c, &counted))
		return;					/* another leaf's (zl_apply_leaves.c) */
	if (c->op == OP_IGNORE)
		ac->counts.unchanged++;
	else if (c->op == OP_TRUNCATE)
	{
		ZLTableInstant truncate = {c->time, c->has_seq, c->seq};
		MemoryContext old = MemoryContextSwitchTo(batch_memory);

		zl_apply_add_table_delete(ac, truncate);
		MemoryContextSwitchTo(old);
	}
	else
		hold_change(ac, c);
	if (counted)
		ac->counts.changes++;
}

/*
 * The batch's rows arrive at a DestReceiver of the query that selects
 * them, one slot at a time (no tuple table, no copy of each row): each is
 * converted and checked in row_memory, reset per row, and taken into the
 * batch (zl_apply_take_change).
 */
typedef struct BatchReceiver
{
	DestReceiver pub;
	ApplyContext *ac;
	const char *time_column;	/* NULL: apply_snapshot */
	bool		has_seq;
	const char *seq_column;
	bool		seq_numeric;	/* read as numeric: may have a fraction */
	Datum		seq_lowest;		/* then: bigint's range, as numerics */
	Datum		seq_highest;
	int64		snapshot_time;
	MemoryContext row_memory;
	MemoryContext batch_memory;
	ErrorContextCallback *outer_context;	/* the caller's, without SPI's */
	uint64		row;			/* the row being read, from 0 */
	TupleTableSlot *slot;		/* it, as selected */
	char	   *misfit;			/* a detail naming the value that failed to convert */
} BatchReceiver;

/* a value of the row as selected, before conversion, for messages */
static char *
selected_value_text(BatchReceiver *br, int col)
{
	Oid			outfunc;
	bool		varlena;

	if (br->slot->tts_isnull[col])
		return "null";
	getTypeOutputInfo(TupleDescAttr(br->slot->tts_tupleDescriptor, col)->atttypid, &outfunc, &varlena);
	return OidOutputFunctionCall(outfunc, br->slot->tts_values[col]);
}

/*
 * The row being read, and if one of its values fails to convert, that
 * value in br->misfit (convert_row puts it into the error's detail).  Made
 * here, as the error is being reported, not for every row.
 */
static void
batch_row_error_context(void *arg)
{
	BatchReceiver *br = arg;
	ApplyContext *ac = br->ac;
	int			col = zl_assignment_converting(ac->assignment);

	if (col >= 0 && br->slot != NULL)
		br->misfit = psprintf("Column \"%s\" of the change for key %s at %s has the value %s.",
							  NameStr(TupleDescAttr(ac->tupdesc, col)->attname),
							  zl_describe_key(&ac->opts, br->slot->tts_tupleDescriptor,
											  heap_form_tuple(br->slot->tts_tupleDescriptor,
															  br->slot->tts_values,
															  br->slot->tts_isnull)),
							  br->time_column == NULL ? time_text(ac, br->snapshot_time) :
							  selected_value_text(br, ac->tupdesc->natts),
							  br->slot->tts_isnull[col] ? "null" :
							  zl_describe_value_text(selected_value_text(br, col)));
	errcontext("row " UINT64_FORMAT " of changes \"%s\" applied to zipper table \"%s\"",
			   br->row + 1, br->ac->source_name, RelationGetRelationName(br->ac->rel));
}

/*
 * Convert the row's values to the table's types as INSERT assigns them
 * (zl_rowcheck.c).  A value that does not convert fails with the
 * conversion's own error (too long, out of range, invalid input, a
 * domain's check); the error gets a detail naming the column, the key and
 * the time of the change, and a hint (zl_rethrow_conversion_error); the
 * detail is made by the error context callback, as the error is reported.
 */
static void
convert_row(BatchReceiver *br, Change *c)
{
	MemoryContext memory = CurrentMemoryContext;

	br->misfit = NULL;
	PG_TRY();
	{
		zl_assignment_apply(br->ac->assignment, c->values, c->isnull, br->row_memory);
	}
	PG_CATCH();
	{
		zl_rethrow_conversion_error(memory, br->misfit,
									"Correct the value in the changes, or convert it in a view over them; "
									"nothing was applied.");
	}
	PG_END_TRY();
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
 * integer, never rounded (README "Change semantics"), within bigint's
 * range.
 */
static int64
numeric_seq(BatchReceiver *br, Change *c, Datum value)
{
	bool		integer = zl_numeric_is_integer(DatumGetNumeric(value));

	if (!integer ||
		DatumGetInt32(DirectFunctionCall2(numeric_cmp, value, br->seq_lowest)) < 0 ||
		DatumGetInt32(DirectFunctionCall2(numeric_cmp, value, br->seq_highest)) > 0)
	{
		char	   *text = DatumGetCString(DirectFunctionCall1(numeric_out, value));

		ereport(ERROR,
				(errcode(integer ? ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE : ERRCODE_INVALID_PARAMETER_VALUE),
				 integer ? errmsg("seq %s is out of range for type bigint", text) :
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
	br->slot = slot;
	convert_row(br, c);
	c->arrival = (uint32) br->row;
	if (br->time_column != NULL)
	{
		time_null = c->isnull[ncols];
		if (!time_null)
			c->time = zl_datum_to_instant(c->values[ncols], ac->opts.period_type);
		c->op = parse_op(ac, c->isnull[ncols + 1] ? NULL :
						 TextDatumGetCString(c->values[ncols + 1]), c);
		zl_apply_check_change(ac, c, time_null, br->time_column);
		c->has_seq = br->has_seq && !c->isnull[ncols + 2];
		if (c->has_seq)
			c->seq = br->seq_numeric ? numeric_seq(br, c, c->values[ncols + 2]) :
				DatumGetInt64(c->values[ncols + 2]);
	}
	else
	{
		c->time = br->snapshot_time;
		c->op = OP_UPSERT;
		zl_apply_check_change(ac, c, false, "snapshot_time");
	}
	if (c->op == OP_UPSERT)
		c->given = zl_apply_given_columns(ac, c);
	zl_apply_take_change(ac, c, br->batch_memory);
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
void
zl_apply_read_batch(ApplyContext *ac, Oid source_relid, const char *time_column,
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

	zl_apply_begin_batch(ac);			/* outside SPI's memory, which SPI_finish frees */
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
	if (seq_numeric)
	{
		receiver.seq_lowest = NumericGetDatum(int64_to_numeric(PG_INT64_MIN));
		receiver.seq_highest = NumericGetDatum(int64_to_numeric(PG_INT64_MAX));
	}
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
	zl_apply_end_batch(ac);
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
void
zl_apply_order_changes(ApplyContext *ac)
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
				if (ac->image)
					ereport(ERROR,
							(errcode(ERRCODE_CARDINALITY_VIOLATION),
							 errmsg("conflicting rows for key %s in snapshot \"%s\"",
									describe_key_values(ac, c->values, c->isnull), ac->source_name),
							 errdetail("Two different rows of the image taken at %s have the same key.",
									   time_text(ac, c->time)),
							 errhint("An image holds one row a key; nothing was applied.")));
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
