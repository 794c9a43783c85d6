/*-------------------------------------------------------------------------
 *
 * zl_apply_remote.c
 *	  Applying a batch to a shard of a zipper parent.
 *
 * A leaf of a zipper parent may be a postgres_fdw foreign table over a
 * zipper table on another server, registered there as the parent is here
 * (README "Scaling out").  Its pass (zl_apply_call_leaves) reads the
 * whole batch as every pass does, takes the rows of the shard's keys --
 * and every truncate, and the ignored -U rows on the first leaf only --
 * and copies them, as they are, into a staging table in the caller's
 * transaction on the shard (an unlogged table in the schema of the
 * shard's table, created and dropped in that transaction: a prepared
 * transaction may not touch temporary tables), then calls the same apply
 * function there.  The shard applies exactly what one table would apply
 * to those keys, with the late horizon counted from the newest change of
 * the whole parent (zipper_lake.parent_newest_change, set for that call),
 * and an image's rows that are all another leaf's are no empty image.
 * Its counts add up as a local leaf's: a truncate is counted by the first
 * leaf only.
 *
 * The shard's part commits with the caller's transaction by two-phase
 * commit (src/remote/zl_remote_xact.c).  Memory: one row at a time.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "common/zl_guc.h"
#include "catalog/zl_catalog.h"
#include "remote/zl_remote.h"
#include "apply/zl_apply_internal.h"

#include "access/relation.h"
#include "access/xact.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

/* the newest change applied to a shard's zipper table, PG_INT64_MIN: none */
int64
zl_apply_remote_newest(Oid leaf_relid, const ZLTableOptions *opts)
{
	const char *params[1] = {zl_remote_table_name(leaf_relid)};
	ZLRemoteRows *rows = zl_remote_query(zl_remote_shard(leaf_relid),
										 "SELECT pg_catalog.max(newest)::pg_catalog.text AS newest"
										 " FROM zipper_lake.inspect_record($1::pg_catalog.regclass)",
										 1, params);
	const char *newest = zl_remote_value(rows, 0, "newest");
	Datum		time;

	if (newest == NULL)
		return PG_INT64_MIN;
	time = DirectFunctionCall3(timestamptz_in, CStringGetDatum(newest),
							   ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
	return zl_instant_to_precision(opts, zl_timestamptz_to_instant(opts, DatumGetTimestampTz(time)));
}

/*
 * On a shard, the newest change of the whole zipper parent, which its
 * router sets for the call (zipper_lake.parent_newest_change, an instant
 * in the table's terms); PG_INT64_MIN when not set.  It only ever moves
 * the late horizon later, as the newest change of any leaf would.
 */
int64
zl_apply_shard_parent_newest(void)
{
	const char *value = zipper_lake_parent_newest_change;

	if (value == NULL || value[0] == '\0')
		return PG_INT64_MIN;
	return pg_strtoint64(value);
}

/* append a value to a line of COPY's text format */
static void
append_copy_value(StringInfo line, const char *value)
{
	if (value == NULL)
	{
		appendStringInfoString(line, "\\N");
		return;
	}
	for (const char *c = value; *c; c++)
	{
		switch (*c)
		{
			case '\\':
				appendStringInfoString(line, "\\\\");
				break;
			case '\t':
				appendStringInfoString(line, "\\t");
				break;
			case '\n':
				appendStringInfoString(line, "\\n");
				break;
			case '\r':
				appendStringInfoString(line, "\\r");
				break;
			default:
				appendStringInfoChar(line, *c);
		}
	}
}

/* the staging table's columns: the source's, with their types */
static char *
staging_columns(TupleDesc source, bool with_types)
{
	StringInfoData columns;

	initStringInfo(&columns);
	for (int i = 0; i < source->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(source, i);

		if (att->attisdropped)
			continue;
		appendStringInfo(&columns, "%s%s", columns.len > 0 ? ", " : "",
						 quote_identifier(NameStr(att->attname)));
		if (with_types)
			appendStringInfo(&columns, " %s",
							 format_type_extended(att->atttypid, att->atttypmod,
												  FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
	}
	return columns.data;
}

/*
 * The query that reads the batch: the partition key cast to the parent's
 * types (which the routing hashes), the op as text (NULL: none), then
 * the source's columns.
 */
static char *
batch_query(ZLParent *parent, Relation source, const char *op_column, TupleDesc *key_desc)
{
	Relation	rel = zl_parent_relation(parent);
	char	  **keys;
	int			nkeys = zl_parent_key_columns(parent, &keys);
	StringInfoData sql;

	*key_desc = CreateTemplateTupleDesc(nkeys);
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (int k = 0; k < nkeys; k++)
	{
		AttrNumber	attnum = get_attnum(RelationGetRelid(rel), keys[k]);
		Oid			type = get_atttype(RelationGetRelid(rel), attnum);

		TupleDescInitEntry(*key_desc, k + 1, keys[k], type, -1, 0);
		appendStringInfo(&sql, "CAST(s.%s AS %s), ", quote_identifier(keys[k]),
						 format_type_be_qualified(type));
	}
	if (op_column != NULL)
		appendStringInfo(&sql, "CAST(s.%s AS pg_catalog.text), ", quote_identifier(op_column));
	else
		appendStringInfoString(&sql, "NULL::pg_catalog.text, ");
	appendStringInfo(&sql, "%s FROM %s s", staging_columns(RelationGetDescr(source), false),
					 zl_qualified_name(source));
	return sql.data;
}

typedef struct ShippedRows
{
	int64		read;			/* rows of the batch */
	int64		truncates;		/* truncates shipped */
} ShippedRows;

/*
 * Copy the rows of the batch this leaf takes into the staging table:
 * the rows of its keys, every truncate, and (on the first leaf) the -U
 * rows, which are counted only.
 */
static ShippedRows
ship_rows(ZLShard *shard, ZLParent *parent, int leaf, Relation source, const char *op_column,
		  const char *staging)
{
	TupleDesc	key_desc;
	char	   *sql = batch_query(parent, source, op_column, &key_desc);
	int			nkeys = key_desc->natts;
	ShippedRows shipped = {0};
	Portal		portal;
	StringInfoData line;
	MemoryContext row_memory = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake shipped row",
													 ALLOCSET_DEFAULT_SIZES);

	zl_parent_route_rows_of(parent, key_desc);
	zl_remote_copy_begin(shard, psprintf("COPY %s (%s) FROM STDIN", staging,
										 staging_columns(RelationGetDescr(source), false)));
	initStringInfo(&line);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	portal = SPI_cursor_open_with_args(NULL, sql, 0, NULL, NULL, NULL, true, 0);
	for (;;)
	{
		SPI_cursor_fetch(portal, true, 1000);
		if (SPI_processed == 0)
			break;
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	tuple = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			MemoryContext old = MemoryContextSwitchTo(row_memory);
			Datum		keys[PARTITION_MAX_KEYS];
			bool		nulls[PARTITION_MAX_KEYS];
			char	   *op = SPI_getvalue(tuple, desc, nkeys + 1);
			ChangeOp	kind = op ? zl_apply_op_kind(op) : OP_UPSERT;
			bool		take;

			for (int k = 0; k < nkeys; k++)
				keys[k] = SPI_getbinval(tuple, desc, k + 1, &nulls[k]);
			shipped.read++;
			if (kind == OP_TRUNCATE)
				take = true;
			else if (kind == OP_IGNORE)
				take = leaf == 0;
			else
				take = zl_parent_leaf_of(parent, keys, nulls) == leaf;
			if (take)
			{
				shipped.truncates += kind == OP_TRUNCATE;
				resetStringInfo(&line);
				for (int c = nkeys + 2; c <= desc->natts; c++)
				{
					if (c > nkeys + 2)
						appendStringInfoChar(&line, '\t');
					append_copy_value(&line, SPI_getvalue(tuple, desc, c));
				}
				appendStringInfoChar(&line, '\n');
				zl_remote_copy_data(shard, line.data, line.len);
			}
			MemoryContextSwitchTo(old);
			MemoryContextReset(row_memory);
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	SPI_finish();
	zl_remote_copy_end(shard);
	MemoryContextDelete(row_memory);
	return shipped;
}

/* the call of the apply function on the shard, its parameters in params */
static char *
remote_call_sql(const ZLApplyCall *call, const char **params)
{
	static const char *const missing[] = {[MISSING_ERROR] = "error",[MISSING_NULL] = "null",
	[MISSING_KEEP] = "keep"};

	params[2] = call->ignore_nulls ? "true" : "false";
	params[3] = missing[call->missing_columns];
	if (call->snapshot)
	{
		params[4] = DatumGetCString(DirectFunctionCall1(timestamptz_out,
														TimestampTzGetDatum(call->snapshot_time)));
		params[5] = call->deletes ? "true" : "false";
		return "SELECT * FROM zipper_lake.apply_snapshot($1::pg_catalog.regclass,"
			" $2::pg_catalog.regclass, $5::pg_catalog.timestamptz, $6::pg_catalog.bool,"
			" allow_empty => true, ignore_nulls => $3::pg_catalog.bool, missing_columns => $4)";
	}
	params[4] = NameStr(call->time_column);
	params[5] = call->has_op ? NameStr(call->op_column) : NULL;
	params[6] = call->has_seq ? NameStr(call->seq_column) : NULL;
	return "SELECT * FROM zipper_lake.apply_changes($1::pg_catalog.regclass,"
		" $2::pg_catalog.regclass, $5::pg_catalog.name, $6::pg_catalog.name, $7::pg_catalog.name,"
		" ignore_nulls => $3::pg_catalog.bool, missing_columns => $4)";
}

static int64
count_of(const ZLRemoteRows *rows, const char *column)
{
	const char *value = zl_remote_value(rows, 0, column);

	return value ? pg_strtoint64(value) : 0;
}

/*
 * The pass of a shard: the leaf-th leaf of a zipper parent, a foreign
 * table.  Adds its counts to *total; returns how many rows the batch has.
 */
int64
zl_apply_remote_pass(const ZLApplyCall *call, ZLApplyLeaves *leaves, int leaf, ApplyCounts *total)
{
	Oid			leaf_relid = zl_parent_leaf(leaves->parent, leaf);
	ZLShard    *shard = zl_remote_shard(leaf_relid);
	Relation	source = relation_open(call->source_relid, AccessShareLock);
	char	   *staging = psprintf("%s.%s", zl_remote_schema_name(leaf_relid),
								   quote_identifier(psprintf("zl_batch_" UINT64_FORMAT "_%d_%d",
															 U64FromFullTransactionId(GetTopFullTransactionId()),
															 MyProcPid, leaf)));
	const char *op_column = call->has_op ? NameStr(call->op_column) :
		(!call->snapshot && get_attnum(call->source_relid, "op") != InvalidAttrNumber ? "op" : NULL);
	const char *params[7] = {zl_remote_table_name(leaf_relid), staging};
	const char *newest[1] = {NULL};
	ShippedRows shipped;
	ZLRemoteRows *counts;
	ApplyCounts leaf_counts = {0};

	(void) zl_remote_query(shard, psprintf("CREATE UNLOGGED TABLE %s (%s)", staging,
										   staging_columns(RelationGetDescr(source), true)),
						   0, NULL);
	shipped = ship_rows(shard, leaves->parent, leaf, source, call->snapshot ? NULL : op_column,
						staging);
	relation_close(source, AccessShareLock);
	if (leaves->newest != PG_INT64_MIN)
		newest[0] = psprintf(INT64_FORMAT, leaves->newest);
	(void) zl_remote_query(shard, "SELECT pg_catalog.set_config('zipper_lake.parent_newest_change',"
						   " COALESCE($1::pg_catalog.text, ''), true)", 1, newest);
	counts = zl_remote_query(shard, remote_call_sql(call, params), call->snapshot ? 6 : 7, params);
	(void) zl_remote_query(shard, psprintf("DROP TABLE %s", staging), 0, NULL);
	leaf_counts.changes = count_of(counts, "changes") - (leaf > 0 ? shipped.truncates : 0);
	leaf_counts.inserted = count_of(counts, "inserted");
	leaf_counts.closed = count_of(counts, "closed");
	leaf_counts.deleted = count_of(counts, "deleted");
	leaf_counts.unchanged = count_of(counts, "unchanged");
	leaf_counts.late = count_of(counts, "late");
	zl_apply_add_counts(total, &leaf_counts);
	return shipped.read;
}
