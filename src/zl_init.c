/*-------------------------------------------------------------------------
 *
 * zl_mod.c
 *	  Module entry point: GUCs and executor hooks.
 *
 * The ExecutorStart hook refuses UPDATE, DELETE and MERGE on zipper tables
 * before any row is touched; the ExecutorFinish hook flushes the rows an
 * INSERT buffered (zl_write.c) once the statement has produced them all
 * (not at the end of zipper_lake's own catalog statements, which run while
 * a writer is between its changes: zl_meta_statement_running).
 * DDL goes through the object access hook of zl_ddl.c (dropped tables,
 * registered columns, row-level AFTER triggers).  The planner hooks live
 * in zl_customscan.c (pruned scans) and zl_inline.c (read helpers inlined
 * into scans).
 *
 *-------------------------------------------------------------------------
 */
#include "zipper_lake.h"

#include "access/table.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "catalog/pg_class.h"
#include "utils/syscache.h"
#include "commands/defrem.h"
#include "catalog/pg_inherits.h"
#include "nodes/parsenodes.h"
#include "parser/parsetree.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

PG_MODULE_MAGIC;

bool		zipper_lake_enable_pruning = true;
bool		zipper_lake_enable_scan_aggregates = true;
int			zipper_lake_columnar_chunk_rows = ZL_CHUNK_ROWS_DEFAULT;
int			zipper_lake_columnar_compression = ZL_COMPRESSION_ZSTD;
int			zipper_lake_key_cache_kb = ZL_KEY_CACHE_KB_DEFAULT;

static const struct config_enum_entry compression_options[] = {
	{"zstd", ZL_COMPRESSION_ZSTD, false},
	{"lz4", ZL_COMPRESSION_LZ4, false},
	{NULL, 0, false}
};

static ExecutorStart_hook_type prev_ExecutorStart = NULL;
static ExecutorFinish_hook_type prev_ExecutorFinish = NULL;

void		_PG_init(void);

static void
refuse_row_changes(QueryDesc *queryDesc)
{
	PlannedStmt *stmt = queryDesc->plannedstmt;
	ListCell   *lc;

	if (stmt->commandType != CMD_UPDATE && stmt->commandType != CMD_DELETE &&
		stmt->commandType != CMD_MERGE)
		return;

	foreach(lc, stmt->resultRelations)
	{
		RangeTblEntry *rte = rt_fetch(lfirst_int(lc), stmt->rtable);
		Relation	rel;

		if (rte->rtekind != RTE_RELATION)
			continue;
		rel = table_open(rte->relid, NoLock);
		if (zl_is_zipper_relation(rel))
			zl_refuse_row_change(rel, stmt->commandType);
		table_close(rel, NoLock);
	}
}

/*
 * INSERT ... ON CONFLICT: the executor inserts speculatively only into
 * tables with indexes, so on a zipper table the clause would be ignored
 * and its speculative callbacks never run.  Refuse it before the
 * statement writes anything, on a zipper table or on a partitioned table
 * with zipper partitions, at the top of the plan or in a WITH query
 * (by the ExecutorStart hook).
 */
static void
refuse_on_conflict(PlannedStmt *stmt)
{
	List	   *plans;
	ListCell   *lc;
	Oid			am = InvalidOid;

	if (stmt->commandType != CMD_INSERT && !stmt->hasModifyingCTE)
		return;
	plans = lcons(stmt->planTree, list_copy(stmt->subplans));
	foreach(lc, plans)
	{
		ModifyTable *mt = (ModifyTable *) lfirst(lc);
		ListCell   *lc2;

		if (mt == NULL || !IsA(mt, ModifyTable) || mt->onConflictAction == ONCONFLICT_NONE)
			continue;
		if (!OidIsValid(am))
			am = get_am_oid(ZL_AM_NAME, false);
		foreach(lc2, mt->resultRelations)
		{
			RangeTblEntry *rte = rt_fetch(lfirst_int(lc2), stmt->rtable);
			List	   *relids = list_make1_oid(rte->relid);
			ListCell   *lc3;

			if (rte->relkind == RELKIND_PARTITIONED_TABLE)
				relids = find_all_inheritors(rte->relid, NoLock, NULL);
			foreach(lc3, relids)
			{
				HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(lfirst_oid(lc3)));
				bool		zipper;

				if (!HeapTupleIsValid(tuple))
					continue;
				zipper = ((Form_pg_class) GETSTRUCT(tuple))->relam == am;
				ReleaseSysCache(tuple);
				if (zipper)
					ereport(ERROR,
							(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							 errmsg("zipper_lake tables do not support INSERT ... ON CONFLICT"),
							 errdetail("Table \"%s\" has no unique index for the clause to act on.",
									   get_rel_name(lfirst_oid(lc3))),
							 errhint("Load versions with a plain INSERT or COPY, which refuses overlapping ones, or apply changes with zipper_lake.apply_changes().")));
			}
		}
	}
}

static void
zl_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	refuse_row_changes(queryDesc);
	refuse_on_conflict(queryDesc->plannedstmt);
	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

static void
zl_ExecutorFinish(QueryDesc *queryDesc)
{
	if (prev_ExecutorFinish)
		prev_ExecutorFinish(queryDesc);
	else
		standard_ExecutorFinish(queryDesc);

	if ((queryDesc->operation != CMD_SELECT ||
		 queryDesc->plannedstmt->hasModifyingCTE) && !zl_meta_statement_running())
		zl_write_flush_all();
}

void
_PG_init(void)
{
	DefineCustomBoolVariable("zipper_lake.enable_pruning",
							 "Prunes partitions, file groups and sub-groups of zipper tables by their period metadata.",
							 "Turn off only to compare results with unpruned scans.",
							 &zipper_lake_enable_pruning,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("zipper_lake.enable_scan_aggregates",
							 "Computes count, sum, min, max and avg of a zipper table's rows in its scan.",
							 "Turn off only to compare results with the executor's Agg node.",
							 &zipper_lake_enable_scan_aggregates,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("zipper_lake.columnar_chunk_rows",
							"Rows of a chunk of columnar sub-groups written from now on.",
							"For tests of chunk skipping on small tables; keep the default otherwise.",
							&zipper_lake_columnar_chunk_rows,
							ZL_CHUNK_ROWS_DEFAULT, 16, 65535,
							PGC_USERSET,
							GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
	DefineCustomEnumVariable("zipper_lake.columnar_compression",
							 "Compression of the chunks of columnar sub-groups written from now on.",
							 "zstd (the default) stores history smaller; lz4 decompresses faster.",
							 &zipper_lake_columnar_compression,
							 ZL_COMPRESSION_ZSTD,
							 compression_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("zipper_lake.retained_memory",
							"Freed memory a backend keeps for reuse instead of giving it back to the operating system.",
							"Applies take their memory again without page faults; 0 sets the C library's initial thresholds.",
							&zipper_lake_retained_memory_kb,
							ZL_RETAINED_MEMORY_KB_DEFAULT, 0, INT_MAX / 1024,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, zl_assign_retained_memory, NULL);
	DefineCustomIntVariable("zipper_lake.key_cache_memory",
							"Memory a backend keeps key directories in, and as much again for merged key indexes.",
							"Key lookups of a table whose merged key index would need more probe each sub-group's directory.",
							&zipper_lake_key_cache_kb,
							ZL_KEY_CACHE_KB_DEFAULT, 64, MAX_KILOBYTES,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
	MarkGUCPrefixReserved("zipper_lake");

	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = zl_ExecutorStart;
	prev_ExecutorFinish = ExecutorFinish_hook;
	ExecutorFinish_hook = zl_ExecutorFinish;

	zl_write_register_callbacks();
	zl_ddl_init();
	zl_customscan_init();
	zl_aggregate_init();
	zl_inline_init();
}
