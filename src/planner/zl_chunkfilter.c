/*-------------------------------------------------------------------------
 *
 * zl_chunkfilter.c
 *	  Skipping chunks of columnar sub-groups by predicates on any column:
 *	  which restriction clauses can.
 *
 * A restriction clause "column op expression" (either side), with
 * op a btree operator of the column type's default btree operator class
 * (its family, for the class's input type) — the ordering its chunks'
 * min/max were taken under —
 * and, for collatable types, the column's own collation, and an
 * expression the scan can evaluate when it starts (zl_is_scan_constant),
 * becomes a chunk predicate; so does "column IS [NOT] NULL".  The clauses
 * stay in the filter: a chunk predicate only decides which chunks cannot
 * hold a matching row, so rows of the chunks read are checked as always.
 * The executor's side, which skips the chunks, is
 * access/zl_chunkfilter_exec.c.
 *
 *-------------------------------------------------------------------------
 */
#include "access/zl_access.h"
#include "planner/zl_planner_internal.h"

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
		Oid			opfamily;
		Oid			opclass_input;
		Oid			left_type,
					right_type;
		Oid			proc;
		int			strategy;

		if (var == NULL || !OidIsValid(opno) || !zl_is_scan_constant(value, rti))
			continue;
		att = TupleDescAttr(desc, var->varattno - 1);
		opfamily = zl_default_opfamily(att->atttypid, BTREE_AM_OID, &opclass_input);
		if (!OidIsValid(opfamily))
			continue;
		strategy = get_op_opfamily_strategy(opno, opfamily);
		if (strategy == 0)
			continue;
		/*
		 * The min/max were taken under the operator class (its input type
		 * may be the column's base type, text for varchar, or polymorphic:
		 * enums, arrays, records) and the column's collation.
		 */
		op_input_types(opno, &left_type, &right_type);
		if (left_type != opclass_input ||
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
