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
 * leaf only.  apply_events() decodes events on the shard: every event goes
 * there, and the call takes only its keys' changes (zipper_lake.shard_rows,
 * the remainders of the parent's hash partitioning that are the shard's).
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
#include "catalog/partition.h"
#include "partitioning/partbounds.h"
#include "partitioning/partdesc.h"
#include "access/xact.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/partcache.h"
#include "utils/typcache.h"
#include "utils/varlena.h"

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
 * A shard's call on behalf of a zipper parent that sends it every row --
 * apply_events(), whose events are decoded there -- takes only the
 * changes of its keys: those whose partition key hashes, as PostgreSQL's
 * hash partitioning of the parent does, to one of its remainders of the
 * greatest modulus.  zipper_lake.shard_rows, set by the parent's server
 * for the call, says which: "modulus/first/r1,r2,.../column, column";
 * first: this leaf counts the changes of no key (truncates, -U).
 */
static int64
count_of(const ZLRemoteRows *rows, const char *column)
{
	const char *value = zl_remote_value(rows, 0, column);

	return value ? pg_strtoint64(value) : 0;
}

/*
 * A shard's counts into *total, less the truncates it counted that the
 * first leaf counts (uncounted); skipped only apply_events() returns.
 */
static void
add_shard_counts(ApplyCounts *total, const ZLRemoteRows *counts, int64 uncounted)
{
	ApplyCounts leaf = {0};
	bool		has_skipped = false;

	for (int c = 0; c < counts->ncols; c++)
		has_skipped |= strcmp(counts->names[c], "skipped") == 0;
	leaf.changes = count_of(counts, "changes") - uncounted;
	leaf.inserted = count_of(counts, "inserted");
	leaf.closed = count_of(counts, "closed");
	leaf.deleted = count_of(counts, "deleted");
	leaf.unchanged = count_of(counts, "unchanged");
	leaf.late = count_of(counts, "late");
	leaf.skipped = has_skipped ? count_of(counts, "skipped") : 0;
	zl_apply_add_counts(total, &leaf);
}

typedef struct ZLShardRows
{
	int			modulus;
	bool		first;
	bool	   *takes;			/* [modulus]: is the remainder the shard's? */
	int			nkeys;
	AttrNumber	attnums[PARTITION_MAX_KEYS];
	FmgrInfo	hash[PARTITION_MAX_KEYS];
	Oid			collations[PARTITION_MAX_KEYS];
} ZLShardRows;

static void
refuse_shard_rows(const char *value)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid zipper_lake.shard_rows \"%s\"", value),
			 errdetail("It is set by a zipper parent's server for its calls on a shard."),
			 errhint("Reset it; it is not meant to be set by hand.")));
}

/* the filter zipper_lake.shard_rows asks of a call on a table of desc, or NULL */
ZLShardRows *
zl_apply_shard_rows(TupleDesc desc)
{
	const char *value = zipper_lake_shard_rows;
	char	   *copy;
	char	   *modulus;
	char	   *first;
	char	   *remainders;
	char	   *columns;
	List	   *names;
	ListCell   *lc;
	ZLShardRows *rows;

	if (value == NULL || value[0] == '\0')
		return NULL;
	copy = pstrdup(value);
	modulus = strtok(copy, "/");
	first = strtok(NULL, "/");
	remainders = strtok(NULL, "/");
	columns = strtok(NULL, "");
	if (columns == NULL || !SplitIdentifierString(columns, ',', &names) ||
		list_length(names) > PARTITION_MAX_KEYS)
		refuse_shard_rows(value);
	rows = palloc0(sizeof(ZLShardRows));
	rows->modulus = pg_strtoint32(modulus);
	rows->first = strcmp(first, "1") == 0;
	if (rows->modulus <= 0)
		refuse_shard_rows(value);
	rows->takes = palloc0(sizeof(bool) * rows->modulus);
	for (char *r = strtok(remainders, ","); r != NULL; r = strtok(NULL, ","))
	{
		int			remainder = pg_strtoint32(r);

		if (remainder < 0 || remainder >= rows->modulus)
			refuse_shard_rows(value);
		rows->takes[remainder] = true;
	}
	foreach(lc, names)
	{
		int			k = rows->nkeys++;

		rows->attnums[k] = InvalidAttrNumber;
		for (int a = 0; a < desc->natts; a++)
			if (!TupleDescAttr(desc, a)->attisdropped &&
				strcmp(NameStr(TupleDescAttr(desc, a)->attname), lfirst(lc)) == 0)
				rows->attnums[k] = a + 1;
		if (rows->attnums[k] == InvalidAttrNumber)
			refuse_shard_rows(value);
		fmgr_info_copy(&rows->hash[k],
					   &lookup_type_cache(TupleDescAttr(desc, rows->attnums[k] - 1)->atttypid,
										  TYPECACHE_HASH_EXTENDED_PROC_FINFO)->hash_extended_proc_finfo,
					   CurrentMemoryContext);
		rows->collations[k] = TupleDescAttr(desc, rows->attnums[k] - 1)->attcollation;
	}
	return rows;
}

/* does the shard's call take change c, and count it (*counted)? */
bool
zl_apply_shard_takes(ZLShardRows *rows, Change *c, bool *counted)
{
	Datum		keys[PARTITION_MAX_KEYS];
	bool		nulls[PARTITION_MAX_KEYS];

	if (c->op == OP_TRUNCATE || c->op == OP_IGNORE)
	{
		*counted = rows->first;
		return c->op == OP_TRUNCATE || rows->first;
	}
	for (int k = 0; k < rows->nkeys; k++)
	{
		keys[k] = c->values[rows->attnums[k] - 1];
		nulls[k] = c->isnull[rows->attnums[k] - 1];
	}
	return rows->takes[compute_partition_hash_value(rows->nkeys, rows->hash, rows->collations,
													keys, nulls) % (uint64) rows->modulus];
}

/*
 * zipper_lake.shard_rows for the leaf-th leaf of a parent; the parent's
 * partition key must use its types' default hash functions, which the
 * shard looks up by type.
 */
static char *
shard_rows_setting(ZLParent *parent, int leaf, bool first)
{
	Relation	rel = zl_parent_relation(parent);
	PartitionKey key = RelationGetPartitionKey(rel);
	PartitionDesc pd = RelationGetPartitionDesc(rel, true);
	int			modulus = pd->boundinfo->nindexes;
	StringInfoData value;
	char	  **names;
	int			nkeys = zl_parent_key_columns(parent, &names);
	bool		any = false;

	initStringInfo(&value);
	appendStringInfo(&value, "%d/%d/", modulus, first ? 1 : 0);
	for (int r = 0; r < modulus; r++)
		if (pd->boundinfo->indexes[r] == leaf)
		{
			appendStringInfo(&value, "%s%d", any ? "," : "", r);
			any = true;
		}
	appendStringInfoChar(&value, '/');
	for (int k = 0; k < nkeys; k++)
	{
		TypeCacheEntry *type = lookup_type_cache(key->parttypid[k], TYPECACHE_HASH_EXTENDED_PROC);

		if (key->partsupfunc[k].fn_oid != type->hash_extended_proc)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("apply_events() cannot reach the shards of zipper parent \"%s\"",
							RelationGetRelationName(rel)),
					 errdetail("Its partition key column \"%s\" hashes with an operator class other than its type's default.",
							   names[k]),
					 errhint("Apply the events on each shard's server, or partition by the default operator classes.")));
		appendStringInfo(&value, "%s%s", k > 0 ? "," : "", quote_identifier(names[k]));
	}
	return value.data;
}

/* set the settings of a call on a shard: the parent's newest change, the rows it takes */
static void
set_call_settings(ZLShard *shard, ZLApplyLeaves *leaves, const char *shard_rows)
{
	const char *params[2] = {NULL, shard_rows};

	if (leaves->newest != PG_INT64_MIN)
		params[0] = psprintf(INT64_FORMAT, leaves->newest);
	(void) zl_remote_query(shard, "SELECT pg_catalog.set_config('zipper_lake.parent_newest_change',"
						   " COALESCE($1::pg_catalog.text, ''), true),"
						   " pg_catalog.set_config('zipper_lake.shard_rows', COALESCE($2::pg_catalog.text, ''), true)",
						   2, params);
}

/*
 * The pass of a shard in apply_events(): every event goes to the shard,
 * which takes the changes of its keys (zipper_lake.shard_rows).
 */
void
zl_apply_remote_events_pass(const ZLApplyCall *call, ZLApplyLeaves *leaves, int leaf,
							ApplyCounts *total)
{
	Oid			leaf_relid = zl_parent_leaf(leaves->parent, leaf);
	ZLShard    *shard = zl_remote_shard_for_write(leaf_relid);
	Relation	source = relation_open(call->source_relid, AccessShareLock);
	char	   *columns = zl_remote_columns(RelationGetDescr(source), false);
	const char *params[8] = {zl_remote_table_name(leaf_relid)};
	ZLRemoteRows *counts;

	params[1] = zl_remote_stage_create(shard, leaf_relid, call->source_relid, leaf);
	(void) zl_remote_stage_rows(shard, params[1], columns,
								psprintf("SELECT %s FROM %s", columns, zl_qualified_name(source)),
								0, NULL, NULL);
	relation_close(source, AccessShareLock);
	set_call_settings(shard, leaves, shard_rows_setting(leaves->parent, leaf, leaf == 0));
	params[2] = NameStr(call->format);
	params[3] = NameStr(call->event_column);
	params[4] = call->has_seq ? NameStr(call->seq_column) : NULL;
	params[5] = call->has_source_table ? call->source_table : NULL;
	params[6] = call->ignore_nulls ? "true" : "false";
	params[7] = zl_apply_missing_columns_name(call->missing_columns);
	counts = zl_remote_query(shard, "SELECT * FROM zipper_lake.apply_events($1::pg_catalog.regclass,"
							 " $2::pg_catalog.regclass, $3, $4::pg_catalog.name, $5::pg_catalog.name, $6,"
							 " $7::pg_catalog.bool, $8)", 8, params);
	set_call_settings(shard, leaves, NULL);
	zl_remote_stage_drop(shard, params[1]);
	add_shard_counts(total, counts, 0);
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
	params[2] = call->ignore_nulls ? "true" : "false";
	params[3] = zl_apply_missing_columns_name(call->missing_columns);
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



/*
 * The pass of a shard: the leaf-th leaf of a zipper parent, a foreign
 * table.  Adds its counts to *total; returns how many rows the batch has.
 */
int64
zl_apply_remote_pass(const ZLApplyCall *call, ZLApplyLeaves *leaves, int leaf, ApplyCounts *total)
{
	Oid			leaf_relid = zl_parent_leaf(leaves->parent, leaf);
	ZLShard    *shard = zl_remote_shard_for_write(leaf_relid);
	Relation	source = relation_open(call->source_relid, AccessShareLock);
	const char *op_column = call->has_op ? NameStr(call->op_column) :
		(!call->snapshot && get_attnum(call->source_relid, "op") != InvalidAttrNumber ? "op" : NULL);
	const char *params[7] = {zl_remote_table_name(leaf_relid)};
	TupleDesc	key_desc;
	char	   *query = batch_query(leaves->parent, source, call->snapshot ? NULL : op_column,
									&key_desc);
	LeafRows	lr = {leaves->parent, leaf, key_desc->natts, 0};
	int64		read;
	ZLRemoteRows *counts;

	params[1] = zl_remote_stage_create(shard, leaf_relid, call->source_relid, leaf);
	zl_parent_route_rows_of(leaves->parent, key_desc);
	read = zl_remote_stage_rows(shard, params[1], zl_remote_columns(RelationGetDescr(source), false),
								query, key_desc->natts + 1, leaf_takes_row, &lr);
	relation_close(source, AccessShareLock);
	set_call_settings(shard, leaves, NULL);
	counts = zl_remote_query(shard, remote_call_sql(call, params), call->snapshot ? 6 : 7, params);
	zl_remote_stage_drop(shard, params[1]);
	add_shard_counts(total, counts, leaf > 0 ? lr.truncates : 0);
	return read;
}
