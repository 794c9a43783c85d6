/*-------------------------------------------------------------------------
 *
 * zl_inspect.c
 *	  zipper_lake.inspect(): one row per sub-group; inspect_record(): one
 *	  row per piece of the change record.
 *
 * Lists every visible sub-group of a table — partition, file group,
 * window, first and last start, rows, masked rows, blocks, format, and for
 * columnar ones the bytes of their directory and chunks as stored
 * (compressed) and as encoded before compression (raw) — unplaced ones
 * (loaded before registration) first, then by partition, window, file
 * group and sub-group, each row naming its table (leaf).  It reads the
 * metadata on the caller's behalf after checking SELECT on the table
 * (zl_open_readable_zipper_table), and flushes the transaction's pending
 * rows first so it shows them.  On a zipper parent (README "Scaling out")
 * inspect() lists each leaf's sub-groups and inspect_bytes() adds up the
 * leaves; inspect_record() takes one table.
 *
 * inspect_bytes() adds up what the table costs: its file's pages (those of
 * its sub-groups, its free extents, the rest: metapage, rows not yet
 * placed, space not yet reclaimed) and its catalog rows part by part
 * (zl_meta_bytes.c), so README "Performance"'s bytes can be read per part.
 *
 * inspect_record() shows the change record (README "Change semantics")
 * piece by piece: segments, key-hash range, newest instant, instants and
 * bytes.  The same check first — by the caller, in C: a SECURITY DEFINER
 * function would check its owner instead — then the record is read as the
 * extension's owner like every catalog statement (zl_metadata.c).
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "remote/zl_remote.h"
#include "write/zl_write.h"

#include "access/table.h"
#include "fmgr.h"
#include "funcapi.h"
#include "storage/bufmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

PG_FUNCTION_INFO_V1(zipper_lake_inspect);
PG_FUNCTION_INFO_V1(zipper_lake_inspect_record);
PG_FUNCTION_INFO_V1(zipper_lake_newest_change);
PG_FUNCTION_INFO_V1(zipper_lake_inspect_bytes);

/* inspect()'s columns (0.1's definition has all but the last, leaf) */
#define INSPECT_COLUMNS 14

static int
inspect_order(const void *a, const void *b)
{
	const ZLSubGroup *x = *(ZLSubGroup *const *) a;
	const ZLSubGroup *y = *(ZLSubGroup *const *) b;

	if (x->placed != y->placed)
		return x->placed ? 1 : -1;	/* unplaced first */
	if (x->partition_end != y->partition_end)
		return x->partition_end < y->partition_end ? -1 : 1;
	if (x->window_start != y->window_start)
		return x->window_start < y->window_start ? -1 : 1;
	if (x->file_group != y->file_group)
		return x->file_group < y->file_group ? -1 : 1;
	return x->subgroup_id < y->subgroup_id ? -1 : (x->subgroup_id > y->subgroup_id);
}

/* one row per visible sub-group of a zipper table into the result (arg) */
static void
inspect_table(Relation rel, void *arg)
{
	ReturnSetInfo *rsinfo = arg;
	ZLSubGroup *sgs;
	ZLSubGroup **order;
	int			nsgs;

	zl_write_flush_relation(RelationGetRelid(rel));
	sgs = zl_meta_load_subgroups(zl_storage_id(rel), GetActiveSnapshot(),
								 DATEVAL_NOBEGIN, &nsgs);
	order = palloc(sizeof(ZLSubGroup *) * Max(nsgs, 1));
	for (int i = 0; i < nsgs; i++)
		order[i] = &sgs[i];
	qsort(order, nsgs, sizeof(ZLSubGroup *), inspect_order);

	for (int i = 0; i < nsgs; i++)
	{
		ZLSubGroup *sg = order[i];
		Datum		values[INSPECT_COLUMNS];
		bool		nulls[INSPECT_COLUMNS] = {0};

		values[0] = DateADTGetDatum(sg->partition_end);
		values[1] = Int64GetDatum(sg->file_group);
		values[2] = Int64GetDatum(sg->subgroup_id);
		values[3] = TimestampTzGetDatum(sg->window_start);
		values[4] = TimestampTzGetDatum(sg->first_start);
		values[5] = TimestampTzGetDatum(sg->last_start);
		values[6] = Int64GetDatum(sg->row_count);
		values[7] = Int64GetDatum(sg->masked_rows);
		values[8] = Int64GetDatum((int64) sg->first_block);
		values[9] = Int32GetDatum(sg->blocks);
		values[10] = CStringGetTextDatum(sg->format == ZL_FORMAT_COLUMNAR ? "columnar" : "rows");
		nulls[11] = nulls[12] = true;
		if (sg->format == ZL_FORMAT_COLUMNAR)
		{
			ZLColumnarReader *reader = zl_columnar_open(rel, sg, NULL);
			int64		stored,
						raw,
						directory;

			zl_columnar_sizes(reader, &stored, &raw, &directory);
			zl_columnar_close(reader);
			values[11] = Int64GetDatum(directory + stored);
			values[12] = Int64GetDatum(directory + raw);
			nulls[11] = nulls[12] = false;
		}
		values[13] = ObjectIdGetDatum(RelationGetRelid(rel));	/* not in 0.1's columns */
		if (!sg->placed)
			nulls[0] = nulls[3] = nulls[4] = nulls[5] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/*
 * Call fn on a zipper table, or on each leaf of a zipper parent (README
 * "Scaling out") in partition order, shard_fn on each of its shards
 * (src/remote: the same function on the shard's server); SELECT on the
 * table named suffices, as for reading it.
 */
static void
for_table_or_leaves(Oid relid, void (*fn) (Relation table, void *arg),
					void (*shard_fn) (Oid shard, void *arg), void *arg)
{
	Relation	rel;

	if (zl_is_partitioned_table(relid))
	{
		ZLParent   *parent;

		rel = zl_open_readable_parent(relid);
		parent = zl_parent_open(relid, AccessShareLock);
		for (int i = 0; i < zl_parent_nleaves(parent); i++)
		{
			Relation	leaf;

			if (zl_parent_leaf_is_shard(parent, i))
			{
				shard_fn(zl_parent_leaf(parent, i), arg);
				continue;
			}
			leaf = zl_open_zipper_table(zl_parent_leaf(parent, i), AccessShareLock);
			fn(leaf, arg);
			table_close(leaf, AccessShareLock);
		}
		zl_parent_close(parent);
	}
	else
	{
		rel = zl_open_readable_zipper_table(relid);
		fn(rel, arg);
	}
	table_close(rel, AccessShareLock);
}

/* a shard's sub-groups, as its server's inspect() shows them */
static void
inspect_shard(Oid shard, void *arg)
{
	ZLRemoteRows *rows = zl_remote_call_rows(shard, "SELECT * FROM zipper_lake.inspect($1::pg_catalog.regclass)",
											 0, NULL);

	zl_remote_put_rows(arg, rows, "leaf", ObjectIdGetDatum(shard));
}

/* inspect(tbl): the sub-groups of a zipper table, or of each leaf of a zipper parent */
Datum
zipper_lake_inspect(PG_FUNCTION_ARGS)
{
	InitMaterializedSRF(fcinfo, 0);
	for_table_or_leaves(PG_GETARG_OID(0), inspect_table, inspect_shard, fcinfo->resultinfo);
	return (Datum) 0;
}

Datum
zipper_lake_inspect_record(PG_FUNCTION_ARGS)
{
	Relation	rel;

	InitMaterializedSRF(fcinfo, 0);
	if (zl_is_partitioned_table(PG_GETARG_OID(0)))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("inspect_record() shows one zipper table's change record"),
				 errdetail("Table \"%s\" is a zipper parent: each of its partitions has a record of its own.",
						   get_rel_name(PG_GETARG_OID(0))),
				 errhint("Call it on a partition; inspect(), inspect_bytes() and verify() take the parent.")));
	rel = zl_open_readable_zipper_table(PG_GETARG_OID(0));
	zl_meta_record_inspect(RelationGetRelid(rel), (ReturnSetInfo *) fcinfo->resultinfo);
	table_close(rel, AccessShareLock);
	return (Datum) 0;
}

/*
 * _newest_change(tbl): the newest change applied to a zipper table, an
 * instant in the terms of its period columns (NULL: none); a zipper
 * parent's server reads it from each shard for the parent's late horizon
 * (src/apply/zl_apply_remote.c).
 */
Datum
zipper_lake_newest_change(PG_FUNCTION_ARGS)
{
	Relation	rel = zl_open_readable_zipper_table(PG_GETARG_OID(0));
	int64		newest = PG_INT64_MIN;
	ZLTableInstant *instants;
	int			ninstants;

	if (zl_meta_record_exists())
		(void) zl_meta_record_head(RelationGetRelid(rel), GetActiveSnapshot(), &newest,
								   &instants, &ninstants);
	table_close(rel, AccessShareLock);
	if (newest == PG_INT64_MIN)
		PG_RETURN_NULL();
	PG_RETURN_INT64(newest);
}

static void
put_bytes_row(ReturnSetInfo *rsinfo, const char *kind, const char *part, int64 bytes)
{
	Datum		values[3] = {CStringGetTextDatum(kind), CStringGetTextDatum(part),
							 Int64GetDatum(bytes)};
	bool		nulls[3] = {0};

	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* what inspect_bytes() adds up: three parts of the file, then the catalog's */
typedef struct TableBytes
{
	int64		file[3];		/* sub-groups, free extents, other pages */
	ZLCatalogBytes catalog[ZL_CATALOG_PARTS];
	int			ncatalog;
} TableBytes;

static void
add_table_bytes(Relation rel, void *arg)
{
	TableBytes *sum = arg;
	ZLSubGroup *sgs;
	int			nsgs;
	ZLCatalogBytes parts[ZL_CATALOG_PARTS];
	int64		file_bytes,
				subgroup_bytes = 0,
				free_bytes;

	zl_write_flush_relation(RelationGetRelid(rel));
	sgs = zl_meta_load_subgroups(zl_storage_id(rel), GetActiveSnapshot(),
								 DATEVAL_NOBEGIN, &nsgs);
	for (int i = 0; i < nsgs; i++)
		subgroup_bytes += (int64) sgs[i].blocks * BLCKSZ;
	sum->ncatalog = zl_meta_catalog_bytes(RelationGetRelid(rel), parts, ZL_CATALOG_PARTS,
										  &free_bytes);
	file_bytes = (int64) RelationGetNumberOfBlocks(rel) * BLCKSZ;
	sum->file[0] += subgroup_bytes;
	sum->file[1] += free_bytes;
	sum->file[2] += Max(file_bytes - subgroup_bytes - free_bytes, 0);
	for (int i = 0; i < sum->ncatalog; i++)
	{
		sum->catalog[i].part = parts[i].part;
		sum->catalog[i].bytes += parts[i].bytes;
	}
}

/* a shard's bytes, as its server's inspect_bytes() counts them */
static void
add_shard_bytes(Oid shard, void *arg)
{
	static const char *const file_parts[3] = {"sub-groups", "free extents", "other pages"};
	TableBytes *sum = arg;
	ZLRemoteRows *rows = zl_remote_call_rows(shard, "SELECT * FROM zipper_lake.inspect_bytes($1::pg_catalog.regclass)",
											 0, NULL);

	for (int r = 0; r < rows->nrows; r++)
	{
		const char *part = zl_remote_value(rows, r, "part");
		int64		bytes = pg_strtoint64(zl_remote_value(rows, r, "bytes"));
		int			i;

		if (strcmp(zl_remote_value(rows, r, "kind"), "table file") == 0)
		{
			for (i = 0; i < 3; i++)
				if (strcmp(file_parts[i], part) == 0)
					sum->file[i] += bytes;
			continue;
		}
		for (i = 0; i < sum->ncatalog; i++)
			if (strcmp(sum->catalog[i].part, part) == 0)
				break;
		if (i == sum->ncatalog && sum->ncatalog < ZL_CATALOG_PARTS)
			sum->catalog[sum->ncatalog++].part = pstrdup(part);
		if (i < ZL_CATALOG_PARTS)
			sum->catalog[i].bytes += bytes;
	}
}

/*
 * inspect_bytes(tbl): what a zipper table costs, or a zipper parent's
 * leaves together (README "Scaling out").
 */
Datum
zipper_lake_inspect_bytes(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TableBytes	sum = {0};

	InitMaterializedSRF(fcinfo, 0);
	for_table_or_leaves(PG_GETARG_OID(0), add_table_bytes, add_shard_bytes, &sum);
	put_bytes_row(rsinfo, "table file", "sub-groups", sum.file[0]);
	put_bytes_row(rsinfo, "table file", "free extents", sum.file[1]);
	put_bytes_row(rsinfo, "table file", "other pages", sum.file[2]);
	for (int i = 0; i < sum.ncatalog; i++)
		put_bytes_row(rsinfo, "catalog", sum.catalog[i].part, sum.catalog[i].bytes);
	return (Datum) 0;
}
