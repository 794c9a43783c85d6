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
 * transaction on the shard (src/remote/zl_remote_stage.c), then calls the
 * same apply function there.  The shard applies exactly what one table would apply
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
zl_apply_remote_newest(Oid leaf_relid)
{
	ZLRemoteRows *rows = zl_remote_call_rows(leaf_relid,
											 "SELECT zipper_lake._newest_change($1::pg_catalog.regclass) AS newest",
											 0, NULL);
	const char *newest = zl_remote_value(rows, 0, "newest");

	return newest == NULL ? PG_INT64_MIN : pg_strtoint64(newest);
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
	appendStringInfo(&sql, "%s FROM %s s", zl_remote_columns(RelationGetDescr(source), false),
					 zl_qualified_name(source));
	return sql.data;
}

/* which rows of the batch a leaf takes (zl_remote_stage_rows' filter) */
typedef struct LeafRows
{
	ZLParent   *parent;
	int			leaf;
	int			nkeys;
	int64		truncates;		/* truncates taken */
} LeafRows;

/*
 * The rows of the leaf's keys, every truncate, and (on the first leaf)
 * the -U rows, which are counted only.
 */
static bool
leaf_takes_row(HeapTuple tuple, TupleDesc desc, void *arg)
{
	LeafRows   *lr = arg;
	Datum		keys[PARTITION_MAX_KEYS];
	bool		nulls[PARTITION_MAX_KEYS];
	char	   *op = SPI_getvalue(tuple, desc, lr->nkeys + 1);
	ChangeOp	kind = op ? zl_apply_op_kind(op) : OP_UPSERT;

	if (kind == OP_TRUNCATE)
	{
		lr->truncates++;
		return true;
	}
	if (kind == OP_IGNORE)
		return lr->leaf == 0;
	for (int k = 0; k < lr->nkeys; k++)
		keys[k] = SPI_getbinval(tuple, desc, k + 1, &nulls[k]);
	return zl_parent_leaf_of(lr->parent, keys, nulls) == lr->leaf;
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
		int			nest = zl_remote_fix_output();

		params[4] = DatumGetCString(DirectFunctionCall1(timestamptz_out,
														TimestampTzGetDatum(call->snapshot_time)));
		zl_remote_restore_output(nest);
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
	const char *op_column = call->has_op ? NameStr(call->op_column) :
		(!call->snapshot && get_attnum(call->source_relid, "op") != InvalidAttrNumber ? "op" : NULL);
	const char *params[7] = {zl_remote_table_name(leaf_relid)};
	const char *newest[1] = {NULL};
	TupleDesc	key_desc;
	char	   *query = batch_query(leaves->parent, source, call->snapshot ? NULL : op_column,
									&key_desc);
	LeafRows	lr = {leaves->parent, leaf, key_desc->natts, 0};
	int64		read;
	ZLRemoteRows *counts;
	ApplyCounts leaf_counts = {0};

	params[1] = zl_remote_stage_create(shard, leaf_relid, call->source_relid, leaf);
	zl_parent_route_rows_of(leaves->parent, key_desc);
	read = zl_remote_stage_rows(shard, params[1], zl_remote_columns(RelationGetDescr(source), false),
								query, key_desc->natts + 1, leaf_takes_row, &lr);
	relation_close(source, AccessShareLock);
	if (leaves->newest != PG_INT64_MIN)
		newest[0] = psprintf(INT64_FORMAT, leaves->newest);
	(void) zl_remote_query(shard, "SELECT pg_catalog.set_config('zipper_lake.parent_newest_change',"
						   " COALESCE($1::pg_catalog.text, ''), true)", 1, newest);
	counts = zl_remote_query(shard, remote_call_sql(call, params), call->snapshot ? 6 : 7, params);
	zl_remote_stage_drop(shard, params[1]);
	leaf_counts.changes = count_of(counts, "changes") - (leaf > 0 ? lr.truncates : 0);
	leaf_counts.inserted = count_of(counts, "inserted");
	leaf_counts.closed = count_of(counts, "closed");
	leaf_counts.deleted = count_of(counts, "deleted");
	leaf_counts.unchanged = count_of(counts, "unchanged");
	leaf_counts.late = count_of(counts, "late");
	zl_apply_add_counts(total, &leaf_counts);
	return read;
}
