/*-------------------------------------------------------------------------
 *
 * zl_chunkfilter.c
 *	  Skipping chunks of columnar sub-groups by predicates on any column.
 *
 * Planner: a restriction clause "column op expression" (either side), with
 * op a btree operator of the column type's default btree operator class
 * (its family, for the class's input type) — the ordering its chunks'
 * min/max were taken under —
 * and, for collatable types, the column's own collation, and an
 * expression the scan can evaluate when it starts (zl_is_scan_constant),
 * becomes a chunk predicate; so does "column IS [NOT] NULL".  The clauses
 * stay in the filter: a chunk predicate only decides which chunks cannot
 * hold a matching row, so rows of the chunks read are checked as always.
 *
 * Executor: the expressions are evaluated when the scan starts, and the
 * scan core asks zl_chunkfilter_may_match() as it enters each chunk
 * (zl_scan.c): a chunk is skipped when one predicate cannot hold for any
 * of its rows, by its min/max and null counts (zl_columnar_read.c).  Comparing
 * with NULL holds for no row; a chunk whose min/max was not kept (wide
 * values, types without an ordering) is read.
 *
 *-------------------------------------------------------------------------
 */
#include "zipper_lake.h"

#include "access/nbtree.h"
#include "access/stratnum.h"
#include "catalog/pg_am.h"
#include "catalog/pg_opfamily.h"
#include "commands/defrem.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/pathnodes.h"
#include "optimizer/optimizer.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

/* what a chunk predicate tests; kept in the plan as an int list */
enum
{
	PRED_ATTNUM,
	PRED_STRATEGY,				/* BT*StrategyNumber, or 0: IS NULL, -1: IS NOT NULL */
	PRED_COMPARE_PROC,			/* btree support proc 1 for (column type, value type) */
	PRED_COLLATION,
	PRED_VALUE_ARG,				/* the argument holding the value */
	PRED_FIELDS
};

#define PRED_IS_NULL		0
#define PRED_IS_NOT_NULL	(-1)

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

/* a column of the scanned relation, under implicit coercions */
static Var *
scan_column(Node *node, Index rti)
{
	node = strip_implicit_coercions(node);
	if (IsA(node, Var) && ((Var *) node)->varno == rti &&
		((Var *) node)->varlevelsup == 0 && ((Var *) node)->varattno > 0)
		return (Var *) node;
	return NULL;
}

/* "column op value": its predicate fields, or NIL */
static List *
recognize_comparison(OpExpr *op, Index rti, TupleDesc desc)
{
	if (list_length(op->args) != 2)
		return NIL;
	for (int side = 0; side < 2; side++)
	{
		Var		   *var = scan_column(list_nth(op->args, side), rti);
		Node	   *value = list_nth(op->args, 1 - side);
		Oid			opno = side == 0 ? op->opno : get_commutator(op->opno);
		Form_pg_attribute att;
		Oid			opclass;
		Oid			opfamily;
		Oid			left_type,
					right_type;
		Oid			proc;
		int			strategy;

		if (var == NULL || !OidIsValid(opno) || !zl_is_scan_constant(value, rti))
			continue;
		att = TupleDescAttr(desc, var->varattno - 1);
		opclass = GetDefaultOpClass(att->atttypid, BTREE_AM_OID);
		if (!OidIsValid(opclass))
			continue;
		opfamily = get_opclass_family(opclass);
		strategy = get_op_opfamily_strategy(opno, opfamily);
		if (strategy == 0)
			continue;
		/*
		 * The min/max were taken under the operator class (its input type
		 * may be the column's base type, text for varchar, or polymorphic:
		 * enums, arrays, records) and the column's collation.
		 */
		op_input_types(opno, &left_type, &right_type);
		if (left_type != get_opclass_input_type(opclass) ||
			(OidIsValid(att->attcollation) && op->inputcollid != att->attcollation))
			continue;
		proc = get_opfamily_proc(opfamily, left_type, right_type, BTORDER_PROC);
		if (!OidIsValid(proc))
			continue;
		return list_make5_int(var->varattno, strategy, (int) proc,
							  (int) att->attcollation, 1 - side);
	}
	return NIL;
}

/*
 * The chunk predicates among restriction clauses (RestrictInfos or bare
 * clauses): returns the clauses, and in *info an int list per clause.
 */
List *
zl_chunkfilter_extract(List *clauses, Index rti, TupleDesc desc, List **info)
{
	List	   *found = NIL;
	ListCell   *lc;

	*info = NIL;
	foreach(lc, clauses)
	{
		Node	   *clause = lfirst(lc);
		List	   *fields = NIL;

		if (IsA(clause, RestrictInfo))
			clause = (Node *) ((RestrictInfo *) clause)->clause;
		if (IsA(clause, OpExpr))
			fields = recognize_comparison((OpExpr *) clause, rti, desc);
		else if (IsA(clause, NullTest) && !((NullTest *) clause)->argisrow)
		{
			Var		   *var = scan_column((Node *) ((NullTest *) clause)->arg, rti);

			if (var != NULL)
				fields = list_make5_int(var->varattno,
										((NullTest *) clause)->nulltesttype == IS_NULL ?
										PRED_IS_NULL : PRED_IS_NOT_NULL,
										(int) InvalidOid, (int) InvalidOid, -1);
		}
		if (fields == NIL)
			continue;
		found = lappend(found, clause);
		*info = lappend(*info, fields);
	}
	return found;
}

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
