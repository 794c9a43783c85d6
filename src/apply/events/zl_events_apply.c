/*-------------------------------------------------------------------------
 *
 * zl_events_apply.c
 *	  apply_events(): a batch of CDC events applied to a zipper table.
 *
 * README "Loading CDC events".  zl_events.c decodes each event of the
 * events relation into changes (upserts, deletes, truncates, or a skipped
 * event); this file turns each into a change of the batch (zl_apply.c's
 * batch API) and applies the batch like apply_changes: the same fold,
 * counts and guarantees.
 *
 *  - Values arrive as text in the input syntax of their column's type and
 *    are converted by the type's input function with the column's typmod
 *    (as INSERT would convert a literal).
 *  - A column the event marks unavailable (Debezium's placeholder of an
 *    unchanged TOAST value, a column wal2json leaves out) keeps the value
 *    the key holds: a partial change.  A value column the event does not
 *    give at all is missing_columns' case: an error (the default), NULL,
 *    or kept.  ignore_nulls makes NULL values keep too.
 *  - The order among changes of one key at one time is the seq column's
 *    value or the event's own position, the fold's 64-bit seq (positions
 *    are made one 63-bit number where a format composes them).  Changes of
 *    one event share its position; they are of different keys (a key
 *    change: a delete of the old key and an upsert of the new one), except
 *    in Canal's multi-row events: there a seq column's value is followed
 *    by the row's place in the event (fold_seq).  With no seq at all, two
 *    different changes of one key at one time in one batch are an error
 *    like in apply_changes.
 *  - skipped counts events that change nothing here (tombstones, other
 *    tables, DDL, transaction markers); a non-empty batch whose every
 *    event is skipped is an error (a wrong source_table must not pass).
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "apply/events/zl_events_internal.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

PG_FUNCTION_INFO_V1(zipper_lake_apply_events);


typedef struct EventsApply
{
	ZLApplyBatch *batch;
	Relation	rel;
	const ZLTableOptions *opts;
	TupleDesc	tupdesc;
	FmgrInfo   *input;			/* per column */
	Oid		   *ioparam;
	bool	   *value_column;	/* what an upsert must give or keep */
	MemoryContext change_context;
	bool		multi_row;		/* a format of several rows per event (Canal) */
	int64		changes;		/* events that were not skipped */
	int64		skipped;
} EventsApply;

/*
 * The fold's seq of a change: its position; in a format of multi-row
 * events (Canal) whose order comes from a seq column, the position and
 * then the row's place in its event, as position * 2^16 + place.
 */
static int64
fold_seq(const ZLEventChange *ec, bool multi_row, bool *has_seq)
{
	Datum		position = NumericGetDatum((Numeric) ec->seq);
	int64		seq = -1;
	int64		limit = multi_row ? (INT64CONST(1) << 47) - 1 : PG_INT64_MAX;

	*has_seq = ec->seq != NULL;
	if (!*has_seq)
		return 0;

	if (!DatumGetBool(DirectFunctionCall2(numeric_lt, position,
										  NumericGetDatum(int64_to_numeric(0)))) &&
		DatumGetBool(DirectFunctionCall2(numeric_le, position,
										 NumericGetDatum(int64_to_numeric(limit)))))
		seq = DatumGetInt64(DirectFunctionCall1(numeric_int8, position));
	if (seq < 0 || (multi_row && (ec->sub_seq < 0 || ec->sub_seq >= (1 << 16))))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("event position out of range"),
				 errdetail("Event %s has position %s (row %d); positions must be integers from 0 to %s.",
						   ec->event_ref,
						   DatumGetCString(DirectFunctionCall1(numeric_out, position)), ec->sub_seq,
						   multi_row ? "2^47 - 1 with rows below 65536" : "2^63 - 1"),
				 errhint("Pass seq => a column that orders the events; nothing was applied.")));
	return multi_row ? (seq << 16) | ec->sub_seq : seq;
}

/*
 * A value of an event as its column's type.  One the type does not take
 * (not a number, out of range, too long) fails with the type's own error,
 * given a detail naming the event, the column and the value, and a hint
 * (zl_rethrow_conversion_error).
 */
static Datum
event_value(EventsApply *ea, const ZLEventChange *ec, Form_pg_attribute att, char *text)
{
	MemoryContext memory = CurrentMemoryContext;
	Datum		value = (Datum) 0;

	PG_TRY();
	{
		value = InputFunctionCall(&ea->input[att->attnum - 1], text, ea->ioparam[att->attnum - 1],
								  att->atttypmod);
	}
	PG_CATCH();
	{
		zl_rethrow_conversion_error(memory,
									psprintf("Column \"%s\" of event %s has the value %s.",
											 NameStr(att->attname), ec->event_ref,
											 zl_describe_value_text(text)),
									"Correct the event, or leave it out of the batch; nothing was applied.");
	}
	PG_END_TRY();
	return value;
}

static void
take_event_change(void *arg, const ZLEventChange *ec)
{
	EventsApply *ea = arg;
	int			natts = ea->tupdesc->natts;
	MemoryContext old;
	ZLBatchChange bc;
	uint8	   *given;
	bool	   *listed;

	if (ec->op == ZL_EVENT_SKIPPED)
	{
		ea->skipped++;
		return;
	}
	ea->changes++;
	old = MemoryContextSwitchTo(ea->change_context);
	bc.op = ec->op;
	bc.time = ec->time;
	bc.seq = fold_seq(ec, ea->multi_row, &bc.has_seq);
	bc.values = palloc0(sizeof(Datum) * natts);
	bc.isnull = palloc(sizeof(bool) * natts);
	memset(bc.isnull, true, sizeof(bool) * natts);
	given = palloc0((natts + 7) / 8);
	listed = palloc0(sizeof(bool) * natts);
	for (int i = 0; i < ec->ncolumns; i++)
	{
		int			col = ec->attnums[i] - 1;
		Form_pg_attribute att = TupleDescAttr(ea->tupdesc, col);

		listed[col] = true;
		given[col >> 3] |= 1 << (col & 7);
		bc.isnull[col] = ec->values[i] == NULL;
		if (ec->values[i] != NULL)
			bc.values[col] = event_value(ea, ec, att, ec->values[i]);
	}
	for (int i = 0; i < ec->nkept; i++)
		listed[ec->kept[i] - 1] = true; /* kept: not given */
	for (int col = 0; col < natts && ec->op == ZL_EVENT_UPSERT; col++)
	{
		if (!ea->value_column[col])
			given[col >> 3] |= 1 << (col & 7);	/* keys, periods, ... */
		else if (!listed[col] &&
				 !zl_apply_batch_keeps_missing(ea->batch,
											   NameStr(TupleDescAttr(ea->tupdesc, col)->attname),
											   psprintf("event %s", ec->event_ref)))
			given[col >> 3] |= 1 << (col & 7);	/* missing_columns => 'null' */
	}
	bc.given = given;
	zl_apply_batch_add(ea->batch, &bc);
	MemoryContextSwitchTo(old);
	MemoryContextReset(ea->change_context);
}

/* decode the events into the batch of one table or leaf, adding the counts to *total */
static void
apply_events_to(const ZLApplyCall *call, ZLApplyLeaves *leaves, int leaf, ApplyCounts *total)
{
	EventsApply ea = {0};
	ApplyCounts counts = {0};

	ea.multi_row = pg_strcasecmp(NameStr(call->format), "canal") == 0;
	ea.batch = zl_apply_batch_begin(leaves, leaf, call->relid, call->source_relid, "events",
									call->ignore_nulls, call->missing_columns);
	ea.rel = zl_apply_batch_relation(ea.batch, &ea.opts);
	ea.tupdesc = RelationGetDescr(ea.rel);
	ea.input = palloc0(sizeof(FmgrInfo) * ea.tupdesc->natts);
	ea.ioparam = palloc0(sizeof(Oid) * ea.tupdesc->natts);
	ea.value_column = palloc0(sizeof(bool) * ea.tupdesc->natts);
	for (int i = 0; i < ea.tupdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(ea.tupdesc, i);
		Oid			func;

		if (att->attisdropped)
			continue;
		getTypeInputInfo(att->atttypid, &func, &ea.ioparam[i]);
		fmgr_info(func, &ea.input[i]);
		ea.value_column[i] = zl_is_value_column(ea.opts, att);
	}
	ea.change_context = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake event change",
											  ALLOCSET_DEFAULT_SIZES);
	zl_events_decode(ea.rel, ea.opts, call->source_relid, NameStr(call->format),
					 NameStr(call->event_column),
					 call->has_seq ? NameStr(call->seq_column) : NULL,
					 call->has_source_table ? call->source_table : NULL,
					 take_event_change, &ea);
	if (ea.changes == 0 && ea.skipped > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("every event of \"%s\" was skipped", get_rel_name(call->source_relid)),
				 errdetail("None of its " INT64_FORMAT " events is a change of zipper table \"%s\"%s.",
						   ea.skipped, get_rel_name(call->relid),
						   call->has_source_table ? " from the source table named" : ""),
				 errhint("Check format and source_table; nothing was applied.")));
	zl_apply_batch_finish(ea.batch, &counts);
	counts.skipped = ea.skipped;
	zl_apply_add_counts(total, &counts);
}

/*
 * The passes of apply_events over one table, or over the leaves first,
 * first + step, ... of a zipper parent, each taking its leaf's changes
 * (src/apply/zl_apply_leaves.c).
 */
void
zl_events_apply_leaves(const ZLApplyCall *call, ZLApplyLeaves *leaves, int first, int step,
					   ApplyCounts *total)
{
	for (int leaf = first; leaf < zl_apply_leaves_count(leaves); leaf += step)
	{
		MemoryContext pass = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake events pass",
												   ALLOCSET_DEFAULT_SIZES);
		MemoryContext old = MemoryContextSwitchTo(pass);

		if (leaves != NULL && zl_parent_leaf_is_shard(leaves->parent, leaf))
			zl_apply_remote_events_pass(call, leaves, leaf, total);
		else
			apply_events_to(call, leaves, leaf, total);
		MemoryContextSwitchTo(old);
		MemoryContextDelete(pass);
	}
}

/*
 * apply_events(tbl, events, format, event, seq, source_table,
 *				ignore_nulls, missing_columns): as apply_changes, in the
 * caller's transaction or in background workers (zl_apply_call).
 */
Datum
zipper_lake_apply_events(PG_FUNCTION_ARGS)
{
	ZLApplyCall call = {0};

	zl_events_check_arguments(fcinfo);
	call.relid = PG_GETARG_OID(0);
	call.source_relid = PG_GETARG_OID(1);
	call.events = true;
	namestrcpy(&call.format, text_to_cstring(PG_GETARG_TEXT_PP(2)));
	namestrcpy(&call.event_column, NameStr(*PG_GETARG_NAME(3)));
	call.has_seq = !PG_ARGISNULL(4);
	if (call.has_seq)
		namestrcpy(&call.seq_column, NameStr(*PG_GETARG_NAME(4)));
	call.has_source_table = !PG_ARGISNULL(5);
	if (call.has_source_table)
	{
		char	   *source_table = text_to_cstring(PG_GETARG_TEXT_PP(5));

		if (strlen(source_table) >= sizeof(call.source_table))
			ereport(ERROR,
					(errcode(ERRCODE_NAME_TOO_LONG),
					 errmsg("source_table is too long"),
					 errdetail("source_table \"%s\" has more than %d bytes.", source_table,
							   (int) sizeof(call.source_table) - 1),
					 errhint("Pass a database, schema and table name of at most %d bytes each.",
							 NAMEDATALEN - 1)));
		strlcpy(call.source_table, source_table, sizeof(call.source_table));
	}
	call.ignore_nulls = !PG_ARGISNULL(6) && PG_GETARG_BOOL(6);
	call.missing_columns = zl_apply_parse_missing_columns(PG_ARGISNULL(7) ? NULL :
														  text_to_cstring(PG_GETARG_TEXT_PP(7)));
	return zl_apply_call(fcinfo, &call);
}
