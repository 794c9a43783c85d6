/*-------------------------------------------------------------------------
 *
 * zl_inline.c
 *	  Inlining the read helpers into plain scans of the table.
 *
 * As functions, as_of(), current() and changes() return their rows
 * through a tuplestore (zl_read.c).  Before planning, a call in FROM
 *
 *     FROM zipper_lake.as_of(NULL::t, T) a
 *
 * is replaced by the subquery it stands for,
 *
 *     FROM (SELECT * FROM ONLY t WHERE valid_from <= T AND valid_to > T) a
 *
 * (current: valid_to = open end; changes: valid_from in [A, B) OR valid_to
 * in [A, B) and before the open end; on a zipper parent FROM t, each leaf
 * a ZipperScan of its own), which the planner pulls up like any
 * subquery: the rows stream from a ZipperScan (zl_customscan.c) with the
 * same pruning, in parallel when worthwhile, and other quals and joins
 * combine with it as usual.
 *
 * Only calls whose result is certainly the same are inlined: a timestamptz
 * period, time arguments without Vars, sub-selects or volatile functions,
 * no NULL constant (the function raises an error for it), and no
 * row-level security on the table (the rewriter has applied policies
 * already; the function refuses such tables).  Everything
 * else runs the function, and so does everything with
 * zipper_lake.enable_pruning off — which makes the function the unpruned
 * reference the tests compare with.  The caller needs SELECT on the table
 * either way.
 *
 * The hook works once the library is loaded; a session's very first
 * statement may plan before that and run the function (preload the library
 * with session_preload_libraries for uniform plans).
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "common/zl_guc.h"
#include "catalog/zl_catalog.h"
#include "access/zl_access.h"
#include "planner/zl_planner_internal.h"

#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/planner.h"
#include "parser/parse_func.h"
#include "parser/parse_type.h"
#include "utils/builtins.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"

static planner_hook_type prev_planner = NULL;

/* the read helper a function is, or NULL */
static const ZLReadHelper *
read_helper_of(Oid funcid)
{
	Oid			nspid = get_namespace_oid(ZL_SCHEMA, true);

	if (!OidIsValid(nspid) || get_func_namespace(funcid) != nspid)
		return NULL;
	return zl_read_helper(get_func_name(funcid));
}

/* may a time argument move into the subquery unchanged? */
static bool
movable_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var) || IsA(node, PlaceHolderVar) || IsA(node, Aggref) ||
		IsA(node, GroupingFunc) || IsA(node, WindowFunc) || IsA(node, SubLink))
		return true;
	if (IsA(node, Const) && ((Const *) node)->constisnull)
		return true;
	return expression_tree_walker(node, movable_walker, context);
}

static bool
movable(Node *arg)
{
	return !movable_walker(arg, NULL) && !contain_volatile_functions(arg);
}

static Expr *
compare(AttrNumber attnum, Oid opfamily, int strategy, Expr *value)
{
	Oid			opno = get_opfamily_member(opfamily, TIMESTAMPTZOID, TIMESTAMPTZOID, strategy);
	OpExpr	   *op;

	if (!OidIsValid(opno))
		elog(ERROR, "missing timestamptz operator for strategy %d", strategy);
	op = (OpExpr *) make_opclause(opno, BOOLOID, false,
								  (Expr *) makeVar(1, attnum, TIMESTAMPTZOID, -1, InvalidOid, 0),
								  (Expr *) copyObject(value), InvalidOid, InvalidOid);
	set_opfuncid(op);
	return (Expr *) op;
}

/* the WHERE clause a helper stands for (args: the row, then its times) */
static Node *
helper_quals(const ZLReadHelper *helper, const ZLTableOptions *opts, List *args)
{
	Oid			opfamily = zl_default_opfamily(TIMESTAMPTZOID, BTREE_AM_OID, NULL);
	Expr	   *open_end = (Expr *) makeConst(TIMESTAMPTZOID, -1, InvalidOid, sizeof(TimestampTz),
											  TimestampTzGetDatum(opts->open_end), false,
											  FLOAT8PASSBYVAL);
	List	   *on_from = NIL;
	List	   *on_to = NIL;

	for (int i = 0; i < helper->nterms; i++)
	{
		const ZLHelperTerm *term = &helper->terms[i];
		Expr	   *value = term->value == ZL_TERM_OPEN_END ? open_end :
			(Expr *) list_nth(args, term->value);
		Expr	   *cmp = compare(term->on_valid_from ? opts->from_attnum : opts->to_attnum,
								  opfamily, term->strategy, value);

		if (term->on_valid_from)
			on_from = lappend(on_from, cmp);
		else
			on_to = lappend(on_to, cmp);
	}
	if (helper->either)
		return (Node *) make_orclause(list_make2(make_ands_explicit(on_from),
												 make_ands_explicit(on_to)));
	return (Node *) make_ands_explicit(list_concat(on_from, on_to));
}

/*
 * The time arguments wrapped in zipper_lake._time_arg(), which raises the
 * function's error for a NULL instead of letting "valid_from <= NULL"
 * quietly select nothing (parameters can be NULL at run time).
 */
static List *
checked_args(const ZLReadHelper *helper, List *args)
{
	Oid			argtypes[2] = {TIMESTAMPTZOID, TEXTOID};
	Oid			check = LookupFuncName(list_make2(makeString(ZL_SCHEMA), makeString("_time_arg")),
									   2, argtypes, true);
	List	   *checked = list_make1(linitial(args));
	int			i = 0;
	ListCell   *lc;

	if (!OidIsValid(check))
		return NIL;				/* an install script without it: keep the function */

	for_each_from(lc, args, 1)
	{
		Const	   *name = makeConst(TEXTOID, -1, DEFAULT_COLLATION_OID, -1,
									 CStringGetTextDatum(helper->time_names[i++]), false, false);

		checked = lappend(checked, makeFuncExpr(check, TIMESTAMPTZOID,
												list_make2(lfirst(lc), name),
												InvalidOid, DEFAULT_COLLATION_OID,
												COERCE_EXPLICIT_CALL));
	}
	return checked;
}

/* SELECT <every column, by position> FROM ONLY rel WHERE quals */
static Query *
make_subquery(Relation rel, Node *quals)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	Query	   *sub = makeNode(Query);
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	RangeTblRef *rtr = makeNode(RangeTblRef);
	List	   *colnames = NIL;

	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, i);
		Expr	   *expr;

		colnames = lappend(colnames, makeString(pstrdup(att->attisdropped ? "" : NameStr(att->attname))));
		if (att->attisdropped)
			expr = (Expr *) makeNullConst(INT4OID, -1, InvalidOid);
		else
		{
			expr = (Expr *) makeVar(1, att->attnum, att->atttypid, att->atttypmod,
									att->attcollation, 0);
			rte->selectedCols = bms_add_member(rte->selectedCols,
											   att->attnum - FirstLowInvalidHeapAttributeNumber);
		}
		sub->targetList = lappend(sub->targetList,
								  makeTargetEntry(expr, att->attnum,
												  att->attisdropped ? pstrdup("") : pstrdup(NameStr(att->attname)),
												  false));
	}

	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = AccessShareLock;
	rte->inh = rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE;	/* a zipper parent's leaves */
	rte->requiredPerms = ACL_SELECT;
	rte->checkAsUser = InvalidOid;
	rte->eref = makeAlias(RelationGetRelationName(rel), colnames);
	rte->inFromCl = true;

	rtr->rtindex = 1;
	sub->commandType = CMD_SELECT;
	sub->querySource = QSRC_ORIGINAL;
	sub->canSetTag = true;
	sub->rtable = list_make1(rte);
	sub->jointree = makeFromExpr(list_make1(rtr), quals);
	return sub;
}

/* replace a helper call in FROM by its subquery, when that is certainly the same */
static void
try_inline(RangeTblEntry *rte)
{
	RangeTblFunction *rtfunc;
	FuncExpr   *call;
	const ZLReadHelper *helper;
	Const	   *row;
	Oid			relid;
	Relation	rel;
	ZLTableOptions opts;
	bool		ok;
	List	   *args;
	ListCell   *lc;

	if (list_length(rte->functions) != 1 || rte->funcordinality)
		return;
	rtfunc = linitial(rte->functions);
	if (!IsA(rtfunc->funcexpr, FuncExpr))
		return;
	call = (FuncExpr *) rtfunc->funcexpr;
	helper = read_helper_of(call->funcid);
	if (helper == NULL || !IsA(linitial(call->args), Const))
		return;
	row = linitial(call->args);
	relid = typeidTypeRelid(row->consttype);
	if (!OidIsValid(relid) || (get_rel_relkind(relid) != RELKIND_RELATION &&
							   get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE))
		return;
	for_each_from(lc, call->args, 1)
		if (!movable(lfirst(lc)))
			return;

	LockRelationOid(relid, AccessShareLock);
	rel = table_open(relid, NoLock);
	/* no inlining under row-level security, even where it is bypassed now:
	 * the plan could be cached and reused by another role */
	ok = (zl_is_zipper_relation(rel) || rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE) &&
		zl_meta_load_options(rel, &opts, false) &&
		opts.period_type == TIMESTAMPTZOID && !rel->rd_rel->relrowsecurity;
	if (ok && (args = checked_args(helper, call->args)) != NIL)
	{
		rte->rtekind = RTE_SUBQUERY;
		rte->subquery = make_subquery(rel, helper_quals(helper, &opts, args));
		rte->functions = NIL;
		rte->security_barrier = false;
	}
	table_close(rel, NoLock);
}

static bool
inline_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, inline_walker, context,
								 QTW_EXAMINE_RTES_BEFORE);
	if (IsA(node, RangeTblEntry))
	{
		if (((RangeTblEntry *) node)->rtekind == RTE_FUNCTION)
			try_inline((RangeTblEntry *) node);
		return false;
	}
	return expression_tree_walker(node, inline_walker, context);
}

static PlannedStmt *
zl_planner(Query *parse, const char *query_string, int cursorOptions,
		   ParamListInfo boundParams)
{
	if (zipper_lake_enable_pruning)
		inline_walker((Node *) parse, NULL);
	if (prev_planner)
		return prev_planner(parse, query_string, cursorOptions, boundParams);
	return standard_planner(parse, query_string, cursorOptions, boundParams);
}

void
zl_inline_init(void)
{
	prev_planner = planner_hook;
	planner_hook = zl_planner;
}
