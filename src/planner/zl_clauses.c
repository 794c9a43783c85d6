/*-------------------------------------------------------------------------
 *
 * zl_clauses.c
 *	  Which expressions a zipper scan can evaluate when it starts.
 *
 * The custom scan's bounds (zl_customscan.c), its chunk predicates
 * (zl_chunkfilter.c) and its key probes (zl_keyprobe.c) all compare a
 * column with such an expression.
 *
 *-------------------------------------------------------------------------
 */
#include "planner/zl_planner_internal.h"

#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"

static bool
references_rel(Node *node, Index *rti)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
		return ((Var *) node)->varno == *rti && ((Var *) node)->varlevelsup == 0;
	return expression_tree_walker(node, references_rel, rti);
}

/*
 * An expression the scan can evaluate when it starts (or restarts, in a
 * parameterized scan): none of the scanned relation's own columns, no
 * volatile function, no sub-plan.  Columns of other relations become
 * parameters of a nested loop.
 */
bool
zl_is_scan_constant(Node *expr, Index rti)
{
	return !references_rel(expr, &rti) && !contain_volatile_functions(expr) &&
		!contain_subplans(expr);
}
