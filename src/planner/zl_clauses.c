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
#include "catalog/pg_am_d.h"
#include "utils/typcache.h"

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

/*
 * The operator family of a type's default btree or hash operator class,
 * and that class's input type (InvalidOid both when there is none), from
 * the type cache: planning a key probe or a chunk filter must not scan
 * pg_opclass on every query, as GetDefaultOpClass does.
 */
Oid
zl_default_opfamily(Oid type, Oid am, Oid *input_type)
{
	TypeCacheEntry *entry;

	Assert(am == BTREE_AM_OID || am == HASH_AM_OID);
	if (am == BTREE_AM_OID)
	{
		entry = lookup_type_cache(type, TYPECACHE_BTREE_OPFAMILY);
		if (input_type)
			*input_type = entry->btree_opintype;
		return entry->btree_opf;
	}
	entry = lookup_type_cache(type, TYPECACHE_HASH_OPFAMILY);
	if (input_type)
		*input_type = entry->hash_opintype;
	return entry->hash_opf;
}
