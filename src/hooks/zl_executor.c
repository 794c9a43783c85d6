/*-------------------------------------------------------------------------
 *
 * zl_executor.c
 *	  Executor hooks: statements zipper tables refuse, flushes of INSERT and COPY.
 *
 * The ExecutorStart hook refuses UPDATE, DELETE and MERGE on zipper tables
 * before any row is touched, and INSERT ... ON CONFLICT; the
 * ExecutorFinish hook flushes the rows an INSERT buffered (zl_write.c)
 * once the statement has produced them all (not at the end of
 * zipper_lake's own catalog statements, which run while a writer is
 * between its changes: zl_meta_statement_running).
 *
 * An INSERT into a zipper table with indexes hands its rows over without
 * TIDs, which they get when written: so the ExecutorStart hook closes the
 * indexes the executor opened for such a table, and the flush enters the
 * rows into them, checking unique ones (src/write/zl_index_rows.c); the
 * table is marked as one whose entries writes make until ExecutorEnd.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write.h"
#include "hooks/zl_hooks.h"
#include "remote/zl_remote.h"

#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "commands/defrem.h"
#include "executor/executor.h"
#include "nodes/execnodes.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "parser/parsetree.h"
#include "tcop/utility.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

static ExecutorStart_hook_type prev_ExecutorStart = NULL;
static ExecutorFinish_hook_type prev_ExecutorFinish = NULL;
static ExecutorEnd_hook_type prev_ExecutorEnd = NULL;
static ProcessUtility_hook_type prev_ProcessUtility = NULL;

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
							 errdetail("Rows of table \"%s\" get their index entries when written, at the end of the statement.",
									   get_rel_name(lfirst_oid(lc3))),
							 errhint("Load versions with a plain INSERT or COPY, which refuses overlapping ones, or apply changes with zipper_lake.apply_changes().")));
			}
		}
	}
}

/*
 * A bitmap heap scan prefetches the blocks its bitmap names ahead of
 * reading them.  On a zipper table those are TID blocks (README "Row
 * identifiers"), not blocks of the file, and may lie past its last
 * segment, which the prefetch refuses with an error; the pages a bitmap
 * scan reads are found by the TID map instead.  So bitmap scans of zipper
 * tables do not prefetch (the node reads prefetch_maximum at its first
 * row).
 */
static bool
stop_bitmap_prefetch(PlanState *planstate, void *context)
{
	if (planstate == NULL)
		return false;
	if (IsA(planstate, BitmapHeapScanState))
	{
		BitmapHeapScanState *bhs = (BitmapHeapScanState *) planstate;

		if (zl_is_zipper_relation(bhs->ss.ss_currentRelation))
			bhs->prefetch_maximum = 0;
	}
	return planstate_tree_walker(planstate, stop_bitmap_prefetch, context);
}

/*
 * The indexes of the zipper tables an INSERT writes: closed for the
 * executor, the tables marked as ones whose entries the writes make.
 */
static void
indexes_entered_by_writes(QueryDesc *queryDesc)
{
	ListCell   *lc;

	if (queryDesc->operation != CMD_INSERT && !queryDesc->plannedstmt->hasModifyingCTE)
		return;
	foreach(lc, queryDesc->estate->es_opened_result_relations)
	{
		ResultRelInfo *rri = lfirst(lc);
		Relation	rel = rri->ri_RelationDesc;

		if (!RelationGetForm(rel)->relhasindex || !zl_is_zipper_relation(rel))
			continue;
		/* ExecInsert opens them at its first row unless none are set */
		ExecCloseIndices(rri);
		rri->ri_NumIndices = 0;
		rri->ri_IndexRelationDescs = palloc0(sizeof(Relation));
		rri->ri_IndexRelationInfo = palloc0(sizeof(IndexInfo *));
		zl_index_entries_by_writes(RelationGetRelid(rel), queryDesc);
	}
}

static void
zl_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	ListCell   *lc;

	refuse_row_changes(queryDesc);
	refuse_on_conflict(queryDesc->plannedstmt);
	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
	(void) stop_bitmap_prefetch(queryDesc->planstate, NULL);
	foreach(lc, queryDesc->estate->es_subplanstates)
		(void) stop_bitmap_prefetch((PlanState *) lfirst(lc), NULL);
	if (!(eflags & EXEC_FLAG_EXPLAIN_ONLY))
		indexes_entered_by_writes(queryDesc);
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

static void
zl_ExecutorEnd(QueryDesc *queryDesc)
{
	zl_index_entries_by_writes_end(queryDesc);
	if (prev_ExecutorEnd)
		prev_ExecutorEnd(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
}

/*
 * TRUNCATE of shards this transaction's zipper_lake calls wrote on:
 * refused, as postgres_fdw would wait for those writes for ever
 * (src/remote/README.md).
 */
static void
refuse_shard_truncates_after_writes(TruncateStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->relations)
	{
		RangeVar   *rv = lfirst_node(RangeVar, lc);
		Oid			relid = RangeVarGetRelid(rv, NoLock, true);
		List	   *rels;
		ListCell   *lr;

		if (!OidIsValid(relid))
			continue;			/* TRUNCATE reports it */
		rels = rv->inh ? find_all_inheritors(relid, NoLock, NULL) : list_make1_oid(relid);
		foreach(lr, rels)
			zl_remote_refuse_truncate_after_writes(lfirst_oid(lr));
	}
}

static void
zl_ProcessUtility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
				  ProcessUtilityContext context, ParamListInfo params,
				  QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;

	if (IsA(stmt, TruncateStmt))
		refuse_shard_truncates_after_writes((TruncateStmt *) stmt);
	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params, queryEnv,
							dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params, queryEnv,
								dest, qc);
	if (IsA(stmt, CopyStmt) && ((CopyStmt *) stmt)->is_from && !zl_meta_statement_running())
		zl_write_flush_indexed();
}

void
zl_executor_init(void)
{
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = zl_ExecutorStart;
	prev_ExecutorFinish = ExecutorFinish_hook;
	ExecutorFinish_hook = zl_ExecutorFinish;
	prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = zl_ExecutorEnd;
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = zl_ProcessUtility;
}
