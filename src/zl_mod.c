/*-------------------------------------------------------------------------
 *
 * zl_mod.c
 *	  Module entry point: GUCs and executor hooks.
 *
 * The ExecutorStart hook refuses UPDATE, DELETE and MERGE on zipper tables
 * before any row is touched; the ExecutorFinish hook flushes the rows an
 * INSERT buffered (zl_write.c) once the statement has produced them all.
 * The ProcessUtility hook refuses retyping registered columns
 * (zl_register.c).  The planner hooks live in zl_customscan.c (pruned scans) and
 * zl_inline.c (read helpers inlined into scans).
 *
 *-------------------------------------------------------------------------
 */
#include "zipper_lake.h"

#include "access/table.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "nodes/parsenodes.h"
#include "parser/parsetree.h"
#include "tcop/utility.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

PG_MODULE_MAGIC;

bool		zipper_lake_enable_pruning = true;

static ExecutorStart_hook_type prev_ExecutorStart = NULL;
static ExecutorFinish_hook_type prev_ExecutorFinish = NULL;
static ProcessUtility_hook_type prev_ProcessUtility = NULL;

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
		bool		zipper;

		if (rte->rtekind != RTE_RELATION)
			continue;
		rel = table_open(rte->relid, NoLock);
		zipper = zl_is_zipper_relation(rel);
		table_close(rel, NoLock);
		if (zipper)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("zipper_lake tables do not support %s",
							stmt->commandType == CMD_UPDATE ? "UPDATE" :
							stmt->commandType == CMD_DELETE ? "DELETE" : "MERGE"),
					 errdetail("Table \"%s\" keeps immutable versions.",
							   get_rel_name(rte->relid)),
					 errhint("Change a zipper table with zipper_lake.apply_changes() or zipper_lake.apply_snapshot().")));
	}
}

static void
zl_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	refuse_row_changes(queryDesc);
	zl_refuse_on_conflict(queryDesc->plannedstmt);
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

	if (queryDesc->operation != CMD_SELECT ||
		queryDesc->plannedstmt->hasModifyingCTE)
		zl_write_flush_all();
}

static void
zl_ProcessUtility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
				  ProcessUtilityContext context, ParamListInfo params,
				  QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	if (IsA(pstmt->utilityStmt, AlterTableStmt))
		zl_refuse_registered_column_retype((AlterTableStmt *) pstmt->utilityStmt);
	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
							queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);
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
	MarkGUCPrefixReserved("zipper_lake");

	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = zl_ExecutorStart;
	prev_ExecutorFinish = ExecutorFinish_hook;
	ExecutorFinish_hook = zl_ExecutorFinish;
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = zl_ProcessUtility;

	zl_write_register_callbacks();
	zl_customscan_init();
	zl_inline_init();
}
