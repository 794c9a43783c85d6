/*-------------------------------------------------------------------------
 *
 * zl_chunkfilter_exec.c
 *	  Skipping chunks of columnar sub-groups by predicates on any column:
 *	  the executor's side.
 *
 * The planner turns restriction clauses into chunk predicates
 * (planner/zl_chunkfilter.c), kept in the plan as int lists.  Their
 * expressions are evaluated when the scan starts, and the scan asks
 * zl_chunkfilter_may_match() as it enters each chunk
 * (zl_scan_columnar.c): a chunk is skipped when one predicate cannot hold
 * for any of its rows, by its min/max and null counts
 * (zl_columnar_read.c).  Comparing with NULL holds
 * for no row; a chunk whose min/max was not kept (wide values, types
 * without an ordering) is read.
 *
 *-------------------------------------------------------------------------
 */
#include "storage/zl_storage.h"
#include "access/zl_access_internal.h"

#include "access/stratnum.h"
#include "executor/executor.h"
#include "nodes/nodeFuncs.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"

typedef struct ChunkPredicate
{
	AttrNumber	attnum;
	int			strategy;
	FmgrInfo	compare;
	Oid			collation;
	ExprState  *value_expr;
	Datum		value;
	bool		value_null;
} ChunkPredicate;

struct ZLChunkFilter
{
	int			npredicates;
	ChunkPredicate *predicates;
};

/* the filter of a scan, from the clauses and their int lists in the plan */
ZLChunkFilter *
zl_chunkfilter_init(List *clauses, List *info, PlanState *parent)
{
	ZLChunkFilter *filter = palloc0(sizeof(ZLChunkFilter));
	ListCell   *lc1,
			   *lc2;
	int			i = 0;

	filter->predicates = palloc0(sizeof(ChunkPredicate) * Max(list_length(clauses), 1));
	forboth(lc1, clauses, lc2, info)
	{
		List	   *fields = lfirst(lc2);
		ChunkPredicate *p = &filter->predicates[i++];

		p->attnum = (AttrNumber) list_nth_int(fields, PRED_ATTNUM);
		p->strategy = list_nth_int(fields, PRED_STRATEGY);
		p->collation = (Oid) list_nth_int(fields, PRED_COLLATION);
		if (p->strategy > 0)
		{
			OpExpr	   *op = lfirst(lc1);

			fmgr_info((Oid) list_nth_int(fields, PRED_COMPARE_PROC), &p->compare);
			p->value_expr = ExecInitExpr(list_nth(op->args, list_nth_int(fields, PRED_VALUE_ARG)),
										 parent);
		}
	}
	filter->npredicates = i;
	return filter;
}

/* evaluate the predicates' values (at scan start, and on rescan) */
void
zl_chunkfilter_evaluate(ZLChunkFilter *filter, ExprContext *econtext, MemoryContext context)
{
	for (int i = 0; i < filter->npredicates; i++)
	{
		ChunkPredicate *p = &filter->predicates[i];
		MemoryContext old;

		if (p->value_expr == NULL)
			continue;
		p->value = ExecEvalExprSwitchContext(p->value_expr, econtext, &p->value_null);
		/* outlive the expression context: a copy of its own */
		old = MemoryContextSwitchTo(context);
		if (!p->value_null)
		{
			int16		typlen;
			bool		typbyval;

			get_typlenbyval(exprType((Node *) p->value_expr->expr), &typlen, &typbyval);
			/* detoasted once here, not by every comparison */
			p->value = typlen == -1 ?
				PointerGetDatum(PG_DETOAST_DATUM_COPY(p->value)) :
				datumCopy(p->value, typbyval, typlen);
		}
		MemoryContextSwitchTo(old);
	}
	ResetExprContext(econtext);
}

static int
compare(ChunkPredicate *p, Datum column_value)
{
	return DatumGetInt32(FunctionCall2Coll(&p->compare, p->collation, column_value, p->value));
}

/* can some row of the chunk satisfy the predicate? */
static bool
predicate_may_match(ChunkPredicate *p, const ZLColumnarReader *r, int chunk)
{
	bool		all_null = false,
				has_nulls = true;
	Datum		min = 0,
				max = 0;
	bool		known = zl_columnar_chunk_range(r, chunk, p->attnum, &all_null,
												&has_nulls, &min, &max);

	if (p->strategy == PRED_IS_NULL)
		return !known || has_nulls;
	if (p->strategy == PRED_IS_NOT_NULL)
		return !known || !all_null;
	if (p->value_null)
		return false;			/* a comparison with NULL holds for no row */
	if (!known)
		return true;
	if (all_null)
		return false;
	switch (p->strategy)
	{
		case BTLessStrategyNumber:
			return compare(p, min) < 0;
		case BTLessEqualStrategyNumber:
			return compare(p, min) <= 0;
		case BTEqualStrategyNumber:
			return compare(p, min) <= 0 && compare(p, max) >= 0;
		case BTGreaterEqualStrategyNumber:
			return compare(p, max) >= 0;
		case BTGreaterStrategyNumber:
			return compare(p, max) > 0;
	}
	return true;
}

/* can some row of the chunk satisfy every predicate? */
bool
zl_chunkfilter_may_match(ZLChunkFilter *filter, const ZLColumnarReader *r, int chunk)
{
	for (int i = 0; i < filter->npredicates; i++)
		if (!predicate_may_match(&filter->predicates[i], r, chunk))
			return false;
	return true;
}
