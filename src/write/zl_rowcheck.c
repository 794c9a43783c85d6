/*-------------------------------------------------------------------------
 *
 * zl_rowcheck.c
 *	  What INSERT enforces, apply_changes and apply_snapshot enforce too.
 *
 * INSERT and COPY reach a zipper table through the executor, which has
 * already done three things before the access method sees a row: every
 * value was converted to its column's type *and typmod* by the assignment
 * rules (char(3) refuses 'ABCD', numeric(5,2) rounds, a domain checks its
 * constraints), stored generated columns were computed, and NOT NULL,
 * CHECK and partition constraints were checked.  apply_changes() and
 * apply_snapshot() build their rows themselves, so they do the same here
 * (README "Guarantees"):
 *
 *  - ZLAssignment converts a batch row's columns to the table's columns
 *    exactly as INSERT ... SELECT would (coerce_to_target_type with
 *    COERCION_ASSIGNMENT and the column's typmod), evaluated per row with
 *    the batch value as a parameter.  Columns whose type and typmod already
 *    match cost nothing.
 *
 *  - ZLRowCheck, given every version apply writes — new ones and the
 *    copies a split or a late change makes of stored ones with a new
 *    period — computes the stored generated columns (their expressions may
 *    read the period columns) and checks NOT NULL, CHECK and, when the
 *    zipper table is a partition, its partition constraint.  Rows a
 *    compaction merely moves to other blocks are byte-identical copies of
 *    checked versions and are not checked again (as heap's VACUUM FULL
 *    does not).
 *
 * Errors are the executor's own, with a context line naming the change or
 * the version (key and period) they come from.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "write/zl_write.h"

#include "access/htup_details.h"
#include "executor/executor.h"
#include "executor/nodeModifyTable.h"
#include "nodes/makefuncs.h"
#include "nodes/params.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

/* ---------- assignment of batch columns ---------- */

struct ZLAssignment
{
	int			ncols;
	ParamListInfo params;		/* one parameter per column: the batch value */
	ExprState **coerce;			/* per column; NULL = taken as is */
	int16	   *typlen;			/* per column: of the target type */
	bool	   *typbyval;
	ExprContext *econtext;
	EState	   *estate;
	int			converting;		/* the column being converted; -1: none */
};

ZLAssignment *
zl_assignment_create(int ncols)
{
	ZLAssignment *a = palloc0(sizeof(ZLAssignment));

	a->ncols = ncols;
	a->converting = -1;
	a->params = makeParamList(ncols);
	a->params->numParams = ncols;
	a->coerce = palloc0(sizeof(ExprState *) * ncols);
	a->typlen = palloc0(sizeof(int16) * ncols);
	a->typbyval = palloc0(sizeof(bool) * ncols);
	a->estate = CreateExecutorState();
	a->econtext = GetPerTupleExprContext(a->estate);
	a->econtext->ecxt_param_list_info = a->params;
	return a;
}

/*
 * Column col (0-based) arrives as source_type(source_typmod) and is stored
 * as target_type(target_typmod).  False if no assignment cast exists.
 */
bool
zl_assignment_add(ZLAssignment *a, int col, Oid source_type, int32 source_typmod,
				  Oid target_type, int32 target_typmod)
{
	Param	   *param = makeNode(Param);
	Node	   *expr;
	MemoryContext old;

	param->paramkind = PARAM_EXTERN;
	param->paramid = col + 1;
	param->paramtype = source_type;
	param->paramtypmod = source_typmod;
	param->paramcollid = get_typcollation(source_type);
	param->location = -1;
	a->params->params[col].ptype = source_type;
	a->params->params[col].pflags = PARAM_FLAG_CONST;

	expr = coerce_to_target_type(NULL, (Node *) param, source_type,
								 target_type, target_typmod,
								 COERCION_ASSIGNMENT, COERCE_IMPLICIT_CAST, -1);
	if (expr == NULL)
		return false;
	/* same type and typmod, or binary compatible (varchar to text): as is */
	if (expr == (Node *) param ||
		(IsA(expr, RelabelType) && ((RelabelType *) expr)->arg == (Expr *) param))
		return true;

	get_typlenbyval(target_type, &a->typlen[col], &a->typbyval[col]);
	old = MemoryContextSwitchTo(a->estate->es_query_cxt);
	a->coerce[col] = ExecInitExprWithParams(expression_planner((Expr *) expr),
											a->params);
	MemoryContextSwitchTo(old);
	return true;
}

/*
 * Convert the columns of one row in place.  Results live in memory_context
 * (the caller's batch memory); errors carry the caller's error context,
 * which may ask for the column that failed (zl_assignment_converting).
 */
void
zl_assignment_apply(ZLAssignment *a, Datum *values, bool *isnull,
					MemoryContext memory_context)
{
	for (int col = 0; col < a->ncols; col++)
	{
		Datum		result;
		bool		result_null;
		MemoryContext old;

		if (a->coerce[col] == NULL)
			continue;
		a->params->params[col].value = values[col];
		a->params->params[col].isnull = isnull[col];
		a->converting = col;
		result = ExecEvalExprSwitchContext(a->coerce[col], a->econtext, &result_null);
		a->converting = -1;
		if (!result_null)
		{
			old = MemoryContextSwitchTo(memory_context);
			result = datumCopy(result, a->typbyval[col], a->typlen[col]);
			MemoryContextSwitchTo(old);
		}
		values[col] = result;
		isnull[col] = result_null;
	}
	ResetExprContext(a->econtext);
}

/* the column whose conversion is under way (in an error context callback); -1: none */
int
zl_assignment_converting(const ZLAssignment *a)
{
	return a->converting;
}

void
zl_assignment_end(ZLAssignment *a)
{
	FreeExecutorState(a->estate);
}

/* ---------- checks of written versions ---------- */

struct ZLRowCheck
{
	Relation	rel;
	const ZLTableOptions *opts;
	EState	   *estate;
	ResultRelInfo *result_rel;
	TupleTableSlot *slot;		/* a version as a tuple */
	TupleTableSlot *values_slot;	/* a version as values (virtual) */
	bool		generated;
	bool		constraints;
	bool		partition;
	HeapTuple	current;		/* the version being checked, for the context */
};

static void
row_check_error_context(void *arg)
{
	ZLRowCheck *rc = arg;

	if (rc->current != NULL)
		errcontext("version with %s written to zipper table \"%s\"",
				   zl_describe_version(rc->opts, RelationGetDescr(rc->rel), rc->current),
				   RelationGetRelationName(rc->rel));
}

/* NULL when the table has nothing to compute or check */
ZLRowCheck *
zl_row_check_begin(Relation rel, const ZLTableOptions *opts)
{
	TupleConstr *constr = RelationGetDescr(rel)->constr;
	ZLRowCheck *rc;

	if ((constr == NULL || (!constr->has_generated_stored && !constr->has_not_null &&
							constr->num_check == 0)) &&
		!rel->rd_rel->relispartition)
		return NULL;

	rc = palloc0(sizeof(ZLRowCheck));
	rc->rel = rel;
	rc->opts = opts;
	rc->generated = constr != NULL && constr->has_generated_stored;
	rc->constraints = constr != NULL && (constr->has_not_null || constr->num_check > 0);
	rc->partition = rel->rd_rel->relispartition;
	rc->estate = CreateExecutorState();
	rc->result_rel = makeNode(ResultRelInfo);
	InitResultRelInfo(rc->result_rel, rel, 0, NULL, 0);
	rc->slot = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsHeapTuple);
	rc->values_slot = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsVirtual);
	return rc;
}

/*
 * Compute the generated columns of a version and check its constraints;
 * returns the version to write: the one given, or, if generated columns
 * were computed, a new tuple (the one given is freed).  values and isnull
 * (row-shaped arrays the tuple was formed from, or NULL) spare the checks
 * deforming it again.
 */
HeapTuple
zl_row_check(ZLRowCheck *rc, HeapTuple tuple, const Datum *values, const bool *isnull)
{
	ErrorContextCallback callback;
	HeapTuple	result = tuple;
	TupleTableSlot *slot;

	if (rc == NULL)
		return tuple;

	rc->current = tuple;
	callback.callback = row_check_error_context;
	callback.arg = rc;
	callback.previous = error_context_stack;
	error_context_stack = &callback;

	if (values != NULL)
	{
		int			natts = RelationGetDescr(rc->rel)->natts;

		slot = rc->values_slot;
		ExecClearTuple(slot);
		memcpy(slot->tts_values, values, sizeof(Datum) * natts);
		memcpy(slot->tts_isnull, isnull, sizeof(bool) * natts);
		ExecStoreVirtualTuple(slot);
	}
	else
		slot = ExecStoreHeapTuple(tuple, rc->slot, false);
	if (rc->generated)
		ExecComputeStoredGenerated(rc->result_rel, rc->estate, slot, CMD_INSERT);
	if (rc->constraints)
		ExecConstraints(rc->result_rel, slot, rc->estate);
	if (rc->partition)
		(void) ExecPartitionCheck(rc->result_rel, slot, rc->estate, true);
	if (rc->generated)
	{
		result = ExecCopySlotHeapTuple(slot);
		heap_freetuple(tuple);	/* the caller gets the computed version instead */
	}
	ExecClearTuple(slot);
	ResetPerTupleExprContext(rc->estate);

	error_context_stack = callback.previous;
	rc->current = NULL;
	return result;
}

void
zl_row_check_end(ZLRowCheck *rc)
{
	if (rc == NULL)
		return;
	ExecDropSingleTupleTableSlot(rc->slot);
	ExecDropSingleTupleTableSlot(rc->values_slot);
	FreeExecutorState(rc->estate);
}
