/*-------------------------------------------------------------------------
 *
 * zl_aggregate.c
 *	  ZipperAggregate: count, sum, min, max and avg computed in the scan,
 *	  grouped or not.
 *
 * An aggregate of the rows of one zipper table without grouping — "SELECT
 * count(*), sum(balance) FROM t WHERE valid_from <= X AND valid_to > X",
 * the as-of and changes questions of README "Performance" — spends much
 * of its time handing every row up from the scan to an Agg node, which
 * evaluates each aggregate's argument as an expression.  When nothing
 * filters the ZipperScan's rows (every restriction clause is one of its
 * bounds) and every aggregate is a built-in count, sum, min, max or avg of
 * a column of the table (or count(*)), without ORDER BY or FILTER (with
 * DISTINCT: zl_aggregate_distinct.c), this node computes them instead: it
 * takes the rows straight from the scan core and calls the aggregates' own transition and final
 * functions on the columns' values — the same functions, on the same rows
 * in the same order, as the Agg node.
 *
 * GROUP BY columns of the table (one or more; hashable, with a sort
 * operator), with these aggregates (not DISTINCT: that stays with the Agg
 * node, which sorts for it) and HAVING (the node's qual), is computed too:
 * the users' "SELECT branch, count(*), sum(balance) ... GROUP BY branch".
 * Each row's group is found in a hash table keyed by the grouping columns
 * under the GROUP BY clause's equality operators (execGrouping.c, as the
 * hashed Agg node finds it; zl_aggregate_group.c, with a memo of bitwise
 * keys in front: zl_aggregate_memo.c), whose entries carry the groups'
 * transition states.  A columnar chunk's rows are looked up first,
 * from the decoded grouping columns, then each aggregate walks the column
 * it reads stepping each row's group.  Beyond hash_mem the table freezes;
 * rows of other groups are sorted by key (and scan order) and aggregated
 * one group at a time at the end, after the table's groups.  The output
 * is the Agg node's rows, in no order (the path claims no pathkeys: an
 * ORDER BY sorts above it).  No partial (parallel) grouped node: the
 * planner's own parallel plans stay, and on this machine's costs serial
 * plans win anyway.
 *
 * Planner
 * -------
 * create_upper_paths_hook offers, besides the Agg paths of the grouping
 * relation, a CustomPath whose child is the table's unfiltered ZipperScan
 * path (zl_unfiltered_scan_path), and a parallel plan: in every
 * participant a partial one over the parallel ZipperScan, returning
 * transition states (serialized where they are internal), gathered into
 * a Finalize Aggregate (not grouped, no HAVING).  It is charged part of
 * its child's run cost and the transition functions, and grouped a key
 * comparison per row and a tuple per group (grouped_aggregate_path), so
 * the planner takes it over an Agg on the same scan.  The child is the
 * ZipperScan path itself, also where the grouping target put a projection
 * over it: the node reads the scan's own rows.
 *
 * Executor
 * --------
 * The ZipperScan below is an ordinary child plan (EXPLAIN shows its bounds
 * and pruning; it shares out sub-groups in parallel plans), but the node
 * asks it for rows itself and counts them into its instrumentation: the
 * rows of a columnar chunk at once where it can (zl_customscan_next_batch:
 * their indexes in the chunk, no slot filled; each aggregate then walks
 * the decoded column it reads, count(*) adds the number of rows), else one
 * by one from its slot (zl_customscan_next_row, not ExecProcNode).  Transition functions
 * run in a per-row memory context with the node's state memory as their
 * aggregate context (AggCheckCallContext), as nodeAgg.c runs them: a
 * strict one skips NULL input and, with no initial value, starts from the
 * first non-NULL input; pass-by-reference states are copied into the
 * state memory.  Only the built-in aggregates named above are taken: they
 * ask of their context nothing but that memory.
 *
 * zipper_lake.enable_scan_aggregates off leaves aggregation to the Agg
 * node (to compare results).
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_guc.h"
#include "storage/zl_storage.h"
#include "access/zl_access.h"
#include "planner/zl_planner_internal.h"

#include "catalog/objectaccess.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/planner.h"
#include "optimizer/prep.h"
#include "optimizer/tlist.h"
#include "parser/parse_agg.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/selfuncs.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#define ZIPPER_AGGREGATE_NAME "ZipperAggregate"

static create_upper_paths_hook_type prev_create_upper_paths = NULL;

/* an aggregate's transition state in one group */
typedef struct AggTrans
{
	Datum		state;			/* in the state memory */
	bool		statenull;
	bool		nostate;		/* strict, no initial value, no input yet */
} AggTrans;

/* one aggregate the node computes */
typedef struct ScanAggregate
{
	AttrNumber	attnum;			/* its argument's column; 0: count(*) */
	Oid			argtype;		/* the column's type and typmod */
	int32		argtypmod;
	int			spill_column;	/* grouped: its argument in a spilled row */
	bool		count_rows;		/* count(*), int8 by value: a batch of n rows
								 * adds n (else through its function) */
	FmgrInfo	transfn;
	FunctionCallInfo trans_call;	/* (state[, argument]) */
	FmgrInfo	finalfn;		/* fn_oid InvalidOid: none (or partial) */
	FunctionCallInfo final_call;
	FmgrInfo	serialfn;		/* partial, internal state: serializes it */
	FunctionCallInfo serial_call;
	bool		transbyval;
	int16		translen;
	Datum		initval;
	bool		initnull;
	ZLDistinctInput *distinct;	/* DISTINCT: its inputs, until the end */
} ScanAggregate;

/* what exec_aggregate returns next */
typedef enum AggregatePhase
{
	PHASE_INPUT,				/* the scan's rows to take */
	PHASE_SINGLE,				/* not grouped: the one row */
	PHASE_HASHED,				/* the hash table's groups */
	PHASE_SORTED,				/* the groups of the spilled rows */
	PHASE_DONE
} AggregatePhase;

typedef struct ZipperAggregateState
{
	CustomScanState css;
	ScanAggregate *aggs;		/* the aggregates of custom_scan_tlist */
	int			naggs;
	AttrNumber	max_attnum;		/* the rows are deformed this far */
	MemoryContext state_memory; /* transition states and results */
	MemoryContext output_memory;	/* final results of a group */
	AggState   *agg_context;	/* what AggCheckCallContext finds */
	AggregatePhase phase;
	AggTrans   *single;			/* not grouped: the one group's states */

	/* grouped: custom_scan_tlist's first ngroup entries are its columns */
	int			ngroup;
	AttrNumber *group_attnums;
	ZLGroups   *groups;
	int			nspill;			/* columns of a spilled row: keys, arguments */
	AttrNumber *spill_attnums;
	Datum	   *spill_values;
	bool	   *spill_nulls;
	const Datum **batch_values; /* the decoded spilled columns of a batch */
	const bool **batch_nulls;
	AggTrans  **batch_groups;	/* a batch's rows' groups (NULL: spilled) */
	uint32		batch_groups_size;
	AggTrans   *sorted;			/* the current sorted group's states */
	Datum	   *sorted_keys;	/* and its key, in the state memory */
	bool	   *sorted_key_nulls;
	TupleTableSlot *pending_row;	/* a spilled row read: the next group's first */
} ZipperAggregateState;

static Plan *plan_aggregate(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
							List *tlist, List *clauses, List *custom_plans);
static Node *create_aggregate_state(CustomScan *cscan);
static void begin_aggregate(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *exec_aggregate(CustomScanState *node);
static void end_aggregate(CustomScanState *node);
static void rescan_aggregate(CustomScanState *node);
static void explain_aggregate(CustomScanState *node, List *ancestors, ExplainState *es);

static const CustomPathMethods aggregate_path_methods = {
	.CustomName = ZIPPER_AGGREGATE_NAME,
	.PlanCustomPath = plan_aggregate,
};

static const CustomScanMethods aggregate_scan_methods = {
	.CustomName = ZIPPER_AGGREGATE_NAME,
	.CreateCustomScanState = create_aggregate_state,
};

static const CustomExecMethods aggregate_exec_methods = {
	.CustomName = ZIPPER_AGGREGATE_NAME,
	.BeginCustomScan = begin_aggregate,
	.ExecCustomScan = exec_aggregate,
	.EndCustomScan = end_aggregate,
	.ReScanCustomScan = rescan_aggregate,
	.ExplainCustomScan = explain_aggregate,
};

/* ---------- planner ---------- */

static bool exprs_supported(Node *exprs, List *group_vars, Index rti, bool partial);

/*
 * The column an aggregate's argument reads: a Var, also under binary
 * coercions (varchar or a domain read as text or its base type, int4 as
 * oid), which leave the value as stored.  NULL if the argument is anything
 * else.
 */
static Var *
argument_column(Node *node)
{
	while (node != NULL && IsA(node, RelabelType))
		node = (Node *) ((RelabelType *) node)->arg;
	return node != NULL && IsA(node, Var) ? (Var *) node : NULL;
}

static bool
is_column_of(Node *node, Index rti)
{
	Var		   *var = argument_column(node);

	return var != NULL && var->varno == rti && var->varlevelsup == 0 && var->varattno > 0;
}

/*
 * Can the node compute this aggregate?  A built-in count, sum, min, max or
 * avg of a column of the scanned relation, or count(*); as written, or
 * split as a parallel plan's partial aggregate (partial); without ORDER
 * BY or FILTER, and DISTINCT only when not partial (as nodeAgg.c).
 */
static bool
supported_aggregate(Aggref *aggref, Index rti, bool partial)
{
	char	   *name;

	if (aggref->aggsplit != (partial ? AGGSPLIT_INITIAL_SERIAL : AGGSPLIT_SIMPLE) ||
		aggref->aggkind != AGGKIND_NORMAL || aggref->agglevelsup != 0 ||
		(aggref->aggdistinct != NIL &&
		 (partial || !OidIsValid(linitial_node(SortGroupClause, aggref->aggdistinct)->sortop))) ||
		aggref->aggorder != NIL || aggref->aggfilter != NULL ||
		aggref->aggdirectargs != NIL || aggref->aggvariadic ||
		list_length(aggref->args) != (aggref->aggstar ? 0 : 1) ||
		(!aggref->aggstar &&
		 !is_column_of((Node *) ((TargetEntry *) linitial(aggref->args))->expr, rti)) ||
		aggref->aggfnoid >= FirstGenbkiObjectId ||
		get_func_namespace(aggref->aggfnoid) != PG_CATALOG_NAMESPACE)
		return false;
	name = get_func_name(aggref->aggfnoid);
	return name != NULL &&
		(strcmp(name, "count") == 0 || strcmp(name, "sum") == 0 || strcmp(name, "min") == 0 ||
		 strcmp(name, "max") == 0 || strcmp(name, "avg") == 0);
}

/*
 * Can the node compute a grouping target: it has aggregates, each one the
 * node can compute, and needs nothing else of the rows?
 */
static bool
target_supported(PathTarget *target, Index rti, bool partial)
{
	return exprs_supported((Node *) target->exprs, NIL, rti, partial);
}

/*
 * Can the node compute these expressions over its groups: the aggregates
 * in them are ones it computes (none with DISTINCT when grouped), and
 * they read no column but the grouping ones (group_vars)?
 */
static bool
exprs_supported(Node *exprs, List *group_vars, Index rti, bool partial)
{
	List	   *found = pull_var_clause(exprs, PVC_INCLUDE_AGGREGATES | PVC_INCLUDE_WINDOWFUNCS |
										PVC_INCLUDE_PLACEHOLDERS);
	ListCell   *lc;
	bool		any = false;

	foreach(lc, found)
	{
		if (IsA(lfirst(lc), Var) && list_member(group_vars, lfirst(lc)))
			continue;
		if (!IsA(lfirst(lc), Aggref) || !supported_aggregate(lfirst(lc), rti, partial) ||
			(group_vars != NIL && ((Aggref *) lfirst(lc))->aggdistinct != NIL))
			return false;
		any = true;
	}
	return any || group_vars != NIL;
}

/*
 * The grouping columns of a GROUP BY the node can take: each a plain
 * column of the table, its equality hashable and with a sort operator
 * (the sort of spilled groups).  NIL if it cannot take them.
 */
static List *
grouping_columns(Query *parse, Index rti)
{
	List	   *vars = NIL;
	ListCell   *lc;

	foreach(lc, parse->groupClause)
	{
		SortGroupClause *clause = lfirst_node(SortGroupClause, lc);
		Node	   *expr = get_sortgroupclause_expr(clause, parse->targetList);

		if (!clause->hashable || !OidIsValid(clause->sortop) || !IsA(expr, Var) ||
			((Var *) expr)->varno != rti || ((Var *) expr)->varlevelsup != 0 ||
			((Var *) expr)->varattno <= 0)
			return NIL;
		vars = lappend(vars, expr);
	}
	return vars;
}

/*
 * A ZipperAggregate path over a ZipperScan path, producing target: charged
 * as an Agg node over the scan would be (the aggregates' transition and
 * final costs), but only part of the scan's run cost.  Rows of columnar
 * chunks are taken as positions in decoded columns, never formed into
 * tuples and handed up one by one: measured, count(*) and sum() of
 * 200,000 rows as of a time took 10 ms against 18 ms for an Agg node over
 * the same scan (README "Performance"), so half.  Rows of row sub-groups
 * still come one by one through the scan's slot: a table whose history is
 * written in rows took 39 ms against 41 ms, so nineteen twentieths.
 */
static Path *
grouped_aggregate_path(RelOptInfo *rel, PathTarget *target, Path *scan, bool columnar_history,
					   const AggClauseCosts *costs, List *group_clauses, List *having,
					   double groups);

static Path *
aggregate_path(RelOptInfo *rel, PathTarget *target, Path *scan, bool columnar_history,
			   const AggClauseCosts *costs)
{
	return grouped_aggregate_path(rel, target, scan, columnar_history, costs, NIL, NIL, 1);
}

/*
 * The same, grouped by group_clauses (NIL: one group) into about groups
 * groups, with having (HAVING's clauses, evaluated by the node): besides,
 * as a hashed Agg node, an equality per grouping column and input row,
 * and the final functions and a tuple per group.
 */
static Path *
grouped_aggregate_path(RelOptInfo *rel, PathTarget *target, Path *scan, bool columnar_history,
					   const AggClauseCosts *costs, List *group_clauses, List *having,
					   double groups)
{
	CustomPath *cpath = makeNode(CustomPath);
	double		run_share = columnar_history ? 0.5 : 0.95;

	cpath->path.pathtype = T_CustomScan;
	cpath->path.parent = rel;
	cpath->path.pathtarget = target;
	cpath->path.parallel_aware = false;
	/* as create_agg_path: a target that is not parallel-safe keeps it in the leader */
	cpath->path.parallel_safe = rel->consider_parallel && scan->parallel_safe;
	cpath->path.parallel_workers = scan->parallel_workers;
	cpath->path.rows = groups;
	cpath->path.startup_cost =
		scan->startup_cost + (scan->total_cost - scan->startup_cost) * run_share +
		costs->transCost.startup + costs->transCost.per_tuple * scan->rows +
		cpu_operator_cost * list_length(group_clauses) * scan->rows +
		costs->finalCost.startup;
	cpath->path.total_cost = cpath->path.startup_cost +
		(costs->finalCost.per_tuple + cpu_tuple_cost) * groups;
	if (group_clauses == NIL)
		cpath->path.startup_cost = cpath->path.total_cost;
	cpath->custom_paths = list_make1(scan);
	cpath->custom_private = list_make3(group_clauses, having,
									   makeInteger((int) Min(groups, (double) INT_MAX)));
	cpath->methods = &aggregate_path_methods;
	return &cpath->path;
}

/*
 * The parallel plan: a partial ZipperAggregate over the parallel
 * ZipperScan in every participant, gathered, and a Finalize Aggregate
 * combining their states.  PostgreSQL 15 calls no hook for the partially
 * grouped relation, so the chain is built here, on the partial target the
 * planner made for its own partial aggregates (if it made one).
 */
static void
add_parallel_aggregate_path(PlannerInfo *root, RelOptInfo *input_rel, RelOptInfo *grouped_rel,
							GroupPathExtraData *extra)
{
	RelOptInfo *partial_rel;
	Path	   *scan;
	Path	   *partial;
	double		rows;
	Path	   *gather;
	bool		columnar;

	if (extra == NULL || !(extra->flags & GROUPING_CAN_PARTIAL_AGG) ||
		!extra->partial_costs_set || !grouped_rel->consider_parallel ||
		input_rel->partial_pathlist == NIL)
		return;
	partial_rel = fetch_upper_rel(root, UPPERREL_PARTIAL_GROUP_AGG, grouped_rel->relids);
	if (partial_rel->reltarget == NULL)
		return;
	if (!target_supported(partial_rel->reltarget, input_rel->relid, true))
		return;
	scan = zl_unfiltered_scan_path(root, input_rel, true, &columnar);
	if (scan == NULL)
		return;
	partial = aggregate_path(partial_rel, partial_rel->reltarget, scan, columnar,
							 &extra->agg_partial_costs);
	rows = partial->rows * partial->parallel_workers;
	gather = (Path *) create_gather_path(root, partial_rel, partial, partial_rel->reltarget,
										 NULL, &rows);
	add_path(grouped_rel, (Path *) create_agg_path(root, grouped_rel, gather,
												   grouped_rel->reltarget, AGG_PLAIN,
												   AGGSPLIT_FINAL_DESERIAL, NIL, NIL,
												   &extra->agg_final_costs, 1));
}

static void
zl_create_upper_paths(PlannerInfo *root, UpperRelationKind stage, RelOptInfo *input_rel,
					  RelOptInfo *output_rel, void *extra)
{
	Query	   *parse = root->parse;
	Path	   *scan;
	bool		columnar;
	List	   *group_vars;

	if (prev_create_upper_paths)
		prev_create_upper_paths(root, stage, input_rel, output_rel, extra);
	if (stage != UPPERREL_GROUP_AGG || !zipper_lake_enable_scan_aggregates ||
		!zipper_lake_enable_pruning)
		return;
	if (parse->groupingSets != NIL || parse->hasTargetSRFs ||
		input_rel->reloptkind != RELOPT_BASEREL || input_rel->lateral_relids != NULL)
		return;
	group_vars = grouping_columns(parse, input_rel->relid);
	if (parse->groupClause != NIL && group_vars == NIL)
		return;
	if (!exprs_supported((Node *) output_rel->reltarget->exprs, group_vars, input_rel->relid,
						 false) ||
		(parse->havingQual != NULL &&
		 !exprs_supported(parse->havingQual, group_vars, input_rel->relid, false)))
		return;
	scan = zl_unfiltered_scan_path(root, input_rel, false, &columnar);
	if (scan != NULL)
	{
		AggClauseCosts costs;
		double		groups = 1;

		MemSet(&costs, 0, sizeof(costs));	/* get_agg_clause_costs adds to it */
		get_agg_clause_costs(root, AGGSPLIT_SIMPLE, &costs);
		if (group_vars != NIL)
			groups = estimate_num_groups(root, group_vars, scan->rows, NULL, NULL);
		add_path(output_rel, grouped_aggregate_path(output_rel, output_rel->reltarget, scan,
													columnar, &costs, parse->groupClause,
													(List *) parse->havingQual, groups));
	}
	/* the parallel plan: aggregates without grouping or HAVING */
	if (group_vars == NIL && parse->havingQual == NULL)
		add_parallel_aggregate_path(root, input_rel, output_rel, extra);
}

/*
 * The plan: the aggregates, once each, make the node's scan tuple
 * (custom_scan_tlist); the target list is computed from them.
 */
static Plan *
plan_aggregate(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
			   List *tlist, List *clauses, List *custom_plans)
{
	CustomScan *cscan = makeNode(CustomScan);
	List	   *group_clauses = linitial(best_path->custom_private);
	List	   *having = lsecond(best_path->custom_private);
	List	   *scan_tlist = NIL;
	ListCell   *lc;

	/* the grouping columns first, in the clause's order */
	foreach(lc, group_clauses)
		scan_tlist = lappend(scan_tlist,
							 makeTargetEntry((Expr *) get_sortgroupclause_expr(lfirst(lc),
																			   root->parse->targetList),
											 list_length(scan_tlist) + 1, NULL, false));
	/* the aggregates of the path's target (tlist would be NIL if the node could project) and HAVING */
	foreach(lc, pull_var_clause((Node *) list_make2(best_path->path.pathtarget->exprs, having),
								PVC_INCLUDE_AGGREGATES))
		if (IsA(lfirst(lc), Aggref) && tlist_member(lfirst(lc), scan_tlist) == NULL)
			scan_tlist = lappend(scan_tlist, makeTargetEntry(lfirst(lc),
															 list_length(scan_tlist) + 1,
															 NULL, false));
	cscan->scan.plan.targetlist = tlist;
	cscan->scan.plan.qual = having;
	cscan->custom_private = list_make2(copyObject(group_clauses),
									   lthird(best_path->custom_private));
	cscan->scan.scanrelid = 0;
	cscan->custom_scan_tlist = scan_tlist;
	cscan->custom_plans = custom_plans;
	cscan->methods = &aggregate_scan_methods;
	return &cscan->scan.plan;
}

/* ---------- executor ---------- */

static Node *
create_aggregate_state(CustomScan *cscan)
{
	ZipperAggregateState *state = (ZipperAggregateState *) newNode(sizeof(ZipperAggregateState),
																   T_CustomScanState);

	state->css.methods = &aggregate_exec_methods;
	return (Node *) state;
}

/* a function to call with the node as its aggregate context */
static FunctionCallInfo
aggregate_function(ZipperAggregateState *state, Oid fn, Expr *expr, FmgrInfo *info,
				   int nargs, Oid collation)
{
	FunctionCallInfo call = palloc0(SizeForFunctionCallInfo(nargs));

	fmgr_info(fn, info);
	fmgr_info_set_expr((Node *) expr, info);
	InitFunctionCallInfoData(*call, info, nargs, collation, (Node *) state->agg_context, NULL);
	return call;
}

/* look an aggregate up as nodeAgg.c does: its functions and initial value */
static void
init_aggregate(ZipperAggregateState *state, ScanAggregate *agg, Aggref *aggref)
{
	int			nargs = list_length(aggref->args);
	Oid			input_types[FUNC_MAX_ARGS];
	HeapTuple	tuple;
	Form_pg_aggregate form;
	AclResult	acl;
	Expr	   *expr;
	Datum		init_text;

	acl = pg_proc_aclcheck(aggref->aggfnoid, GetUserId(), ACL_EXECUTE);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_AGGREGATE, get_func_name(aggref->aggfnoid));
	InvokeFunctionExecuteHook(aggref->aggfnoid);
	tuple = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(aggref->aggfnoid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for aggregate %u", aggref->aggfnoid);
	form = (Form_pg_aggregate) GETSTRUCT(tuple);

	if (nargs > 0)
	{
		Var		   *var = argument_column((Node *) ((TargetEntry *) linitial(aggref->args))->expr);

		agg->attnum = var->varattno;
		agg->argtype = var->vartype;
		agg->argtypmod = var->vartypmod;
	}
	state->max_attnum = Max(state->max_attnum, agg->attnum);
	for (int i = 0; i < nargs; i++)
		input_types[i] = list_nth_oid(aggref->aggargtypes, i);
	get_typlenbyval(aggref->aggtranstype, &agg->translen, &agg->transbyval);
	agg->count_rows = aggref->aggfnoid == F_COUNT_ && agg->transbyval;

	build_aggregate_transfn_expr(input_types, nargs, 0, false, aggref->aggtranstype,
								 aggref->inputcollid, form->aggtransfn, InvalidOid,
								 &expr, NULL);
	agg->trans_call = aggregate_function(state, form->aggtransfn, expr, &agg->transfn,
										 nargs + 1, aggref->inputcollid);
	if (DO_AGGSPLIT_SKIPFINAL(aggref->aggsplit))
	{
		/* partial: the state goes up as it is, serialized if internal */
		if (aggref->aggtranstype == INTERNALOID)
		{
			build_aggregate_serialfn_expr(form->aggserialfn, &expr);
			agg->serial_call = aggregate_function(state, form->aggserialfn, expr,
												  &agg->serialfn, 1, InvalidOid);
		}
	}
	else if (OidIsValid(form->aggfinalfn))
	{
		int			final_nargs = 1 + (form->aggfinalextra ? nargs : 0);

		build_aggregate_finalfn_expr(input_types, final_nargs, aggref->aggtranstype,
									 aggref->aggtype, aggref->inputcollid, form->aggfinalfn,
									 &expr);
		agg->final_call = aggregate_function(state, form->aggfinalfn, expr, &agg->finalfn,
											 final_nargs, aggref->inputcollid);
	}

	if (aggref->aggdistinct != NIL)
	{
		SortGroupClause *clause = linitial_node(SortGroupClause, aggref->aggdistinct);

		agg->distinct = zl_distinct_create(input_types[0], clause->eqop, clause->sortop,
										   clause->nulls_first, aggref->inputcollid);
	}

	init_text = SysCacheGetAttr(AGGFNOID, tuple, Anum_pg_aggregate_agginitval, &agg->initnull);
	if (!agg->initnull)
	{
		Oid			typinput,
					typioparam;

		getTypeInputInfo(aggref->aggtranstype, &typinput, &typioparam);
		agg->initval = OidInputFunctionCall(typinput, TextDatumGetCString(init_text),
											typioparam, -1);
	}
	ReleaseSysCache(tuple);
}

/* every aggregate of a group to its initial state, in the state memory */
static void
init_states(ZipperAggregateState *state, AggTrans *trans)
{
	MemoryContext old = MemoryContextSwitchTo(state->state_memory);

	for (int i = 0; i < state->naggs; i++)
	{
		ScanAggregate *agg = &state->aggs[i];

		trans[i].statenull = agg->initnull;
		trans[i].nostate = agg->initnull && agg->transfn.fn_strict;
		trans[i].state = agg->initnull ? (Datum) 0 :
			datumCopy(agg->initval, agg->transbyval, agg->translen);
	}
	MemoryContextSwitchTo(old);
}

/* back to the start: no group, no input */
static void
reset_states(ZipperAggregateState *state)
{
	if (state->groups != NULL)
		zl_groups_reset(state->groups);
	else
		MemoryContextReset(state->state_memory);
	MemoryContextReset(state->output_memory);
	if (state->groups == NULL)
		init_states(state, state->single);
	for (int i = 0; i < state->naggs; i++)
		if (state->aggs[i].distinct != NULL)
			zl_distinct_reset(state->aggs[i].distinct);
	state->phase = PHASE_INPUT;
	state->pending_row = NULL;
}

/*
 * Grouped: the grouping columns, their operators (custom_private's
 * SortGroupClauses), the columns a spilled row keeps (the keys, then each
 * aggregate's argument once) and the hash table.
 */
static void
begin_groups(ZipperAggregateState *state, CustomScan *cscan, List *clauses, double ngroups)
{
	TupleDesc	desc = state->css.ss.ss_ScanTupleSlot->tts_tupleDescriptor;
	TupleDesc	row_desc;
	Oid		   *eqops = palloc(sizeof(Oid) * state->ngroup);
	Oid		   *sortops = palloc(sizeof(Oid) * state->ngroup);
	bool	   *nulls_first = palloc(sizeof(bool) * state->ngroup);
	int			i = 0;
	ListCell   *lc;

	state->group_attnums = palloc(sizeof(AttrNumber) * state->ngroup);
	state->spill_attnums = palloc(sizeof(AttrNumber) * (state->ngroup + state->naggs));
	foreach(lc, clauses)
	{
		SortGroupClause *clause = lfirst_node(SortGroupClause, lc);
		Var		   *var = castNode(Var, ((TargetEntry *) list_nth(cscan->custom_scan_tlist, i))->expr);

		state->group_attnums[i] = var->varattno;
		state->spill_attnums[i] = var->varattno;
		state->max_attnum = Max(state->max_attnum, var->varattno);
		eqops[i] = clause->eqop;
		sortops[i] = clause->sortop;
		nulls_first[i] = clause->nulls_first;
		i++;
	}
	state->nspill = state->ngroup;
	for (int a = 0; a < state->naggs; a++)
	{
		ScanAggregate *agg = &state->aggs[a];
		int			k;

		agg->spill_column = -1;
		if (agg->attnum == 0)
			continue;
		for (k = state->ngroup; k < state->nspill; k++)
			if (state->spill_attnums[k] == agg->attnum)
				break;
		if (k == state->nspill)
			state->spill_attnums[state->nspill++] = agg->attnum;
		agg->spill_column = k;
	}

	/* a spilled row: the keys as the scan tuple has them, then the arguments */
	row_desc = CreateTemplateTupleDesc(state->nspill);
	for (int k = 0; k < state->ngroup; k++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, k);

		TupleDescInitEntry(row_desc, k + 1, NULL, att->atttypid, att->atttypmod, 0);
		TupleDescInitEntryCollation(row_desc, k + 1, att->attcollation);
	}
	for (int a = 0; a < state->naggs; a++)
		if (state->aggs[a].spill_column >= 0)
			TupleDescInitEntry(row_desc, state->aggs[a].spill_column + 1, NULL,
							   state->aggs[a].argtype, state->aggs[a].argtypmod, 0);
	state->batch_values = palloc(sizeof(Datum *) * state->nspill);
	state->batch_nulls = palloc(sizeof(bool *) * state->nspill);
	state->spill_values = palloc(sizeof(Datum) * state->nspill);
	state->spill_nulls = palloc(sizeof(bool) * state->nspill);
	state->sorted = palloc0(sizeof(AggTrans) * Max(state->naggs, 1));
	state->sorted_keys = palloc0(sizeof(Datum) * state->ngroup);
	state->sorted_key_nulls = palloc0(sizeof(bool) * state->ngroup);
	state->groups = zl_groups_create(&state->css.ss.ps, row_desc, state->ngroup, eqops, sortops,
									 nulls_first, sizeof(AggTrans) * Max(state->naggs, 1),
									 ngroups);
	state->state_memory = zl_groups_state_memory(state->groups);
}

static void
begin_aggregate(CustomScanState *node, EState *estate, int eflags)
{
	ZipperAggregateState *state = (ZipperAggregateState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	List	   *group_clauses = linitial(cscan->custom_private);
	ListCell   *lc;
	int			i = 0;

	node->custom_ps = list_make1(ExecInitNode(linitial(cscan->custom_plans), estate, eflags));
	state->agg_context = makeNode(AggState);
	state->agg_context->curaggcontext = makeNode(ExprContext);
	state->output_memory = AllocSetContextCreate(CurrentMemoryContext,
												 "zipper_lake aggregate results",
												 ALLOCSET_DEFAULT_SIZES);
	state->ngroup = list_length(group_clauses);
	state->naggs = list_length(cscan->custom_scan_tlist) - state->ngroup;
	state->aggs = palloc0(sizeof(ScanAggregate) * Max(state->naggs, 1));
	foreach(lc, cscan->custom_scan_tlist)
	{
		if (foreach_current_index(lc) >= state->ngroup)
			init_aggregate(state, &state->aggs[i++],
						   castNode(Aggref, ((TargetEntry *) lfirst(lc))->expr));
	}
	if (state->ngroup > 0)
		begin_groups(state, cscan, group_clauses, (double) intVal(lsecond(cscan->custom_private)));
	else
	{
		state->state_memory = AllocSetContextCreate(CurrentMemoryContext,
													"zipper_lake aggregate states",
													ALLOCSET_DEFAULT_SIZES);
		state->single = palloc0(sizeof(AggTrans) * Max(state->naggs, 1));
	}
	state->agg_context->curaggcontext->ecxt_per_tuple_memory = state->state_memory;
	reset_states(state);
}

/* one input into an aggregate's state, as nodeAgg.c advances it */
static inline void
advance(ZipperAggregateState *state, ScanAggregate *agg, AggTrans *trans, Datum value,
		bool isnull)
{
	FunctionCallInfo call = agg->trans_call;
	Datum		result;

	if (agg->transfn.fn_strict)
	{
		if (isnull)
			return;
		if (trans->nostate)
		{
			/* no initial value: the first input is the state */
			MemoryContext old = MemoryContextSwitchTo(state->state_memory);

			trans->state = datumCopy(value, agg->transbyval, agg->translen);
			MemoryContextSwitchTo(old);
			trans->statenull = false;
			trans->nostate = false;
			return;
		}
		if (trans->statenull)
			return;
	}
	call->args[0].value = trans->state;
	call->args[0].isnull = trans->statenull;
	if (call->nargs > 1)
	{
		call->args[1].value = value;
		call->args[1].isnull = isnull;
	}
	call->isnull = false;
	result = FunctionCallInvoke(call);
	if (!agg->transbyval && DatumGetPointer(result) != DatumGetPointer(trans->state))
	{
		/* a new state (or an input) to keep in the state memory */
		if (!call->isnull)
		{
			MemoryContext old = MemoryContextSwitchTo(state->state_memory);

			result = datumCopy(result, agg->transbyval, agg->translen);
			MemoryContextSwitchTo(old);
		}
		if (!trans->statenull)
			pfree(DatumGetPointer(trans->state));
	}
	trans->state = result;
	trans->statenull = call->isnull;
}

/*
 * Grouped: the states of a row's group, the row's values of the spilled
 * columns in spill_values / spill_nulls (the keys at least); NULL when
 * the group is not in the frozen table: then the row is spilled
 * (spill_values complete).
 */
static AggTrans *
row_group(ZipperAggregateState *state, bool complete)
{
	bool		isnew;
	AggTrans   *trans = zl_groups_find(state->groups, state->spill_values, state->spill_nulls,
									   &isnew);

	if (isnew)
		init_states(state, trans);
	if (trans == NULL && complete)
		zl_groups_spill(state->groups, state->spill_values, state->spill_nulls);
	return trans;
}

/* a row from the scan's slot into every aggregate (of its group) */
static void
aggregate_row(ZipperAggregateState *state, TupleTableSlot *row)
{
	ExprContext *econtext = state->css.ss.ps.ps_ExprContext;
	MemoryContext old;
	AggTrans   *trans = state->single;

	if (state->max_attnum > 0)
		slot_getsomeattrs(row, state->max_attnum);
	if (state->groups != NULL)
	{
		for (int k = 0; k < state->nspill; k++)
		{
			state->spill_values[k] = row->tts_values[state->spill_attnums[k] - 1];
			state->spill_nulls[k] = row->tts_isnull[state->spill_attnums[k] - 1];
		}
		trans = row_group(state, true);
		if (trans == NULL)
			return;
	}
	ResetExprContext(econtext);
	old = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
	for (int i = 0; i < state->naggs; i++)
	{
		ScanAggregate *agg = &state->aggs[i];

		if (agg->attnum == 0)
			advance(state, agg, &trans[i], (Datum) 0, false);
		else if (agg->distinct != NULL)
			zl_distinct_add(agg->distinct, row->tts_values[agg->attnum - 1],
							row->tts_isnull[agg->attnum - 1]);
		else
			advance(state, agg, &trans[i], row->tts_values[agg->attnum - 1],
					row->tts_isnull[agg->attnum - 1]);
	}
	MemoryContextSwitchTo(old);
}

/* the decoded values of a column over a batch's chunk */
static void
batch_column(const ZLRowBatch *batch, AttrNumber attnum, const Datum **values,
			 const bool **nulls)
{
	if (!zl_columnar_chunk_values(batch->reader, batch->chunk, attnum, values, nulls))
		elog(ERROR, "zipper_lake columnar chunk lacks column %d", attnum);
}

/*
 * Decode the columns a batch's aggregates (and groups) read, as the scan
 * would decode them for its slot (so that EXPLAIN ANALYZE counts their
 * time and pages as the scan's); aggregate_batch finds them decoded.
 */
static void
decode_batch_columns(ZipperAggregateState *state, const ZLRowBatch *batch)
{
	const Datum *values;
	const bool *nulls;

	if (batch->nrows == 0)
		return;
	for (int i = 0; i < state->naggs; i++)
		if (state->aggs[i].attnum > 0)
			batch_column(batch, state->aggs[i].attnum, &values, &nulls);
	for (int k = 0; k < state->ngroup; k++)
		batch_column(batch, state->group_attnums[k], &values, &nulls);
}

/*
 * Grouped: the group of every row of a batch into batch_groups (NULL:
 * spilled), looked up from the decoded grouping columns; a row of a group
 * the frozen table lacks is spilled with its arguments.
 */
static void
batch_row_groups(ZipperAggregateState *state, const ZLRowBatch *batch)
{
	const Datum **values = state->batch_values;
	const bool **nulls = state->batch_nulls;
	int			ncolumns = state->nspill;
	bool		known;

	if (batch->nrows > state->batch_groups_size)
	{
		state->batch_groups = state->batch_groups == NULL ?
			MemoryContextAlloc(state->css.ss.ps.state->es_query_cxt,
							   sizeof(AggTrans *) * batch->nrows) :
			repalloc(state->batch_groups, sizeof(AggTrans *) * batch->nrows);
		state->batch_groups_size = batch->nrows;
	}
	for (int k = 0; k < ncolumns; k++)
		batch_column(batch, state->spill_attnums[k], &values[k], &nulls[k]);
	/* first the groups the memo knows (a single bitwise key), then the rest */
	known = zl_groups_find_known(state->groups, values[0], nulls[0], batch->rows, batch->nrows,
								 (void **) state->batch_groups);
	for (uint32 i = 0; i < batch->nrows; i++)
	{
		uint32		r = batch->rows[i];
		AggTrans   *trans;

		if (known && state->batch_groups[i] != NULL)
			continue;
		for (int k = 0; k < state->ngroup; k++)
		{
			state->spill_values[k] = values[k][r];
			state->spill_nulls[k] = nulls[k][r];
		}
		trans = row_group(state, false);
		if (trans == NULL)
		{
			for (int k = state->ngroup; k < ncolumns; k++)
			{
				state->spill_values[k] = values[k][r];
				state->spill_nulls[k] = nulls[k][r];
			}
			zl_groups_spill(state->groups, state->spill_values, state->spill_nulls);
		}
		state->batch_groups[i] = trans;
	}
}

/*
 * The rows of a columnar chunk into every aggregate, one aggregate at a
 * time over the decoded column it reads (each sees the rows in the scan's
 * order, as from the slot); count(*) adds the number of rows.  Grouped,
 * the rows' groups are looked up first, and each aggregate then steps
 * the state of each row's group.
 */
static void
aggregate_batch(ZipperAggregateState *state, const ZLRowBatch *batch)
{
	ExprContext *econtext = state->css.ss.ps.ps_ExprContext;
	MemoryContext old;

	if (batch->nrows == 0)
		return;
	if (state->groups != NULL)
		batch_row_groups(state, batch);
	old = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
	for (int i = 0; i < state->naggs; i++)
	{
		ScanAggregate *agg = &state->aggs[i];
		const Datum *values = NULL;
		const bool *nulls = NULL;

		if (agg->count_rows && state->groups == NULL)
		{
			state->single[i].state = Int64GetDatum(DatumGetInt64(state->single[i].state) +
												   batch->nrows);
			continue;
		}
		if (agg->attnum > 0)
			batch_column(batch, agg->attnum, &values, &nulls);
		/* what the transition functions leave behind, a chunk's rows at most */
		ResetExprContext(econtext);
		if (agg->distinct != NULL)
		{
			zl_distinct_add_rows(agg->distinct, values, nulls, batch->rows, batch->nrows);
			continue;
		}
		if (state->groups != NULL)
		{
			for (uint32 k = 0; k < batch->nrows; k++)
			{
				AggTrans   *trans = state->batch_groups[k];
				uint32		r = batch->rows[k];

				if (trans == NULL)
					continue;
				if (agg->count_rows)
					trans[i].state = Int64GetDatum(DatumGetInt64(trans[i].state) + 1);
				else if (agg->attnum == 0)
					advance(state, agg, &trans[i], (Datum) 0, false);
				else
					advance(state, agg, &trans[i], values[r], nulls[r]);
			}
			continue;
		}
		for (uint32 k = 0; k < batch->nrows; k++)
		{
			uint32		r = batch->rows[k];

			if (agg->attnum == 0)
				advance(state, agg, &state->single[i], (Datum) 0, false);
			else
				advance(state, agg, &state->single[i], values[r], nulls[r]);
		}
	}
	MemoryContextSwitchTo(old);
}

/* distinct inputs between resets of the per-row memory */
#define DISTINCT_RESET_EVERY	1024

/*
 * An aggregate with DISTINCT takes its distinct inputs now, in the order
 * of the clause's sort operator, as nodeAgg.c gives them.
 */
static void
advance_distinct(ZipperAggregateState *state, ScanAggregate *agg, AggTrans *trans)
{
	ExprContext *econtext = state->css.ss.ps.ps_ExprContext;
	MemoryContext old = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
	Datum		value;
	bool		isnull;
	int			n = 0;

	zl_distinct_finish(agg->distinct);
	while (zl_distinct_next(agg->distinct, &value, &isnull))
	{
		/* what the transition functions leave behind */
		if (++n % DISTINCT_RESET_EVERY == 0)
			ResetExprContext(econtext);
		advance(state, agg, trans, value, isnull);
	}
	MemoryContextSwitchTo(old);
}

/* an aggregate's result: final function, serialized state or the state */
static void
finish(ScanAggregate *agg, AggTrans *trans, Datum *value, bool *isnull)
{
	FunctionCallInfo call = agg->final_call;

	*value = trans->state;
	*isnull = trans->statenull;
	if (OidIsValid(agg->serialfn.fn_oid))
	{
		if (trans->statenull && agg->serialfn.fn_strict)
			return;
		agg->serial_call->args[0].value = trans->state;
		agg->serial_call->args[0].isnull = trans->statenull;
		agg->serial_call->isnull = false;
		*value = FunctionCallInvoke(agg->serial_call);
		*isnull = agg->serial_call->isnull;
	}
	else if (OidIsValid(agg->finalfn.fn_oid))
	{
		bool		anynull = trans->statenull;

		call->args[0].value = trans->state;
		call->args[0].isnull = trans->statenull;
		for (int i = 1; i < call->nargs; i++)
		{
			/* FINALFUNC_EXTRA: placeholders for the inputs */
			call->args[i].value = (Datum) 0;
			call->args[i].isnull = true;
			anynull = true;
		}
		*value = (Datum) 0;
		*isnull = true;
		if (agg->finalfn.fn_strict && anynull)
			return;
		call->isnull = false;
		*value = FunctionCallInvoke(call);
		*isnull = call->isnull;
	}
}

/* take every row of the scan, a columnar chunk at a time where it can */
static void
take_input(ZipperAggregateState *state)
{
	PlanState  *scan = linitial(state->css.custom_ps);
	TupleTableSlot *row;

	/*
	 * The time spent getting the rows and their number go to the scan's
	 * instrumentation, as ExecProcNode would count them.
	 */
	for (;;)
	{
		ZLRowBatch	batch;
		bool		got_batch;

		if (scan->instrument)
			InstrStartNode(scan->instrument);
		got_batch = zl_customscan_next_batch(scan, &batch);
		if (got_batch)
			decode_batch_columns(state, &batch);
		row = got_batch ? NULL : zl_customscan_next_row(scan);
		if (scan->instrument)
			InstrStopNode(scan->instrument, got_batch ? batch.nrows : row != NULL ? 1 : 0);
		if (got_batch)
			aggregate_batch(state, &batch);
		else if (row != NULL)
			aggregate_row(state, row);
		else
			break;
	}
}

/*
 * A group's row: its key, its aggregates' results (in the output memory),
 * through HAVING and the projection; NULL if HAVING drops it.
 */
static TupleTableSlot *
group_result(ZipperAggregateState *state, const Datum *keys, const bool *key_nulls,
			 AggTrans *trans)
{
	CustomScanState *node = &state->css;
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	TupleTableSlot *out = node->ss.ss_ScanTupleSlot;
	MemoryContext old;

	ExecClearTuple(out);
	for (int k = 0; k < state->ngroup; k++)
	{
		out->tts_values[k] = keys[k];
		out->tts_isnull[k] = key_nulls[k];
	}
	MemoryContextReset(state->output_memory);
	old = MemoryContextSwitchTo(state->output_memory);
	for (int i = 0; i < state->naggs; i++)
		finish(&state->aggs[i], &trans[i], &out->tts_values[state->ngroup + i],
			   &out->tts_isnull[state->ngroup + i]);
	MemoryContextSwitchTo(old);
	ExecStoreVirtualTuple(out);
	ResetExprContext(econtext);
	econtext->ecxt_scantuple = out;
	if (node->ss.ps.qual != NULL && !ExecQual(node->ss.ps.qual, econtext))
	{
		InstrCountFiltered1(node, 1);
		return NULL;
	}
	if (node->ss.ps.ps_ProjInfo == NULL)
		return out;
	return ExecProject(node->ss.ps.ps_ProjInfo);
}

/* a sorted group begins with row: its key copied, its states initial */
static void
begin_sorted_group(ZipperAggregateState *state, TupleTableSlot *row)
{
	MemoryContext old;

	MemoryContextReset(state->state_memory);
	old = MemoryContextSwitchTo(state->state_memory);
	for (int k = 0; k < state->ngroup; k++)
	{
		Form_pg_attribute att = TupleDescAttr(row->tts_tupleDescriptor, k);

		state->sorted_key_nulls[k] = row->tts_isnull[k];
		state->sorted_keys[k] = row->tts_isnull[k] ? (Datum) 0 :
			datumCopy(row->tts_values[k], att->attbyval, att->attlen);
	}
	MemoryContextSwitchTo(old);
	init_states(state, state->sorted);
}

/* a spilled row into its (the current sorted) group */
static void
aggregate_sorted_row(ZipperAggregateState *state, TupleTableSlot *row)
{
	ExprContext *econtext = state->css.ss.ps.ps_ExprContext;
	MemoryContext old;

	ResetExprContext(econtext);
	old = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
	for (int i = 0; i < state->naggs; i++)
	{
		ScanAggregate *agg = &state->aggs[i];

		if (agg->attnum == 0)
			advance(state, agg, &state->sorted[i], (Datum) 0, false);
		else
			advance(state, agg, &state->sorted[i], row->tts_values[agg->spill_column],
					row->tts_isnull[agg->spill_column]);
	}
	MemoryContextSwitchTo(old);
}

/*
 * The next group of the spilled rows (they come sorted by key): its rows
 * aggregated up to the first row of the next group, which stays pending;
 * false after the last.
 */
static bool
next_sorted_group(ZipperAggregateState *state)
{
	TupleTableSlot *row = state->pending_row;
	bool		first;

	if (row == NULL && !zl_groups_next_spilled(state->groups, &row, &first))
		return false;
	state->pending_row = NULL;
	begin_sorted_group(state, row);
	aggregate_sorted_row(state, row);
	while (zl_groups_next_spilled(state->groups, &row, &first))
	{
		if (first)
		{
			state->pending_row = row;
			break;
		}
		aggregate_sorted_row(state, row);
	}
	return true;
}

static TupleTableSlot *
exec_aggregate(CustomScanState *node)
{
	ZipperAggregateState *state = (ZipperAggregateState *) node;

	for (;;)
	{
		TupleTableSlot *result;
		TupleTableSlot *key;
		void	   *data;

		switch (state->phase)
		{
			case PHASE_INPUT:
				take_input(state);
				if (state->groups != NULL)
				{
					zl_groups_input_done(state->groups);
					state->phase = PHASE_HASHED;
				}
				else
					state->phase = PHASE_SINGLE;
				break;
			case PHASE_SINGLE:
				for (int i = 0; i < state->naggs; i++)
					if (state->aggs[i].distinct != NULL)
						advance_distinct(state, &state->aggs[i], &state->single[i]);
				state->phase = PHASE_DONE;
				return group_result(state, NULL, NULL, state->single);
			case PHASE_HASHED:
				if (zl_groups_next_hashed(state->groups, &key, &data))
				{
					result = group_result(state, key->tts_values, key->tts_isnull, data);
					if (result != NULL)
						return result;
					break;
				}
				state->phase = PHASE_SORTED;
				break;
			case PHASE_SORTED:
				if (!next_sorted_group(state))
				{
					state->phase = PHASE_DONE;
					break;
				}
				result = group_result(state, state->sorted_keys, state->sorted_key_nulls,
									  state->sorted);
				if (result != NULL)
					return result;
				break;
			case PHASE_DONE:
				return NULL;
		}
	}
}

static void
end_aggregate(CustomScanState *node)
{
	ZipperAggregateState *state = (ZipperAggregateState *) node;

	ExecEndNode(linitial(node->custom_ps));
	for (int i = 0; i < state->naggs; i++)
		if (state->aggs[i].distinct != NULL)
			zl_distinct_end(state->aggs[i].distinct);
	if (state->groups != NULL)
		zl_groups_end(state->groups);
	else
		MemoryContextDelete(state->state_memory);
	MemoryContextDelete(state->output_memory);
}

static void
rescan_aggregate(CustomScanState *node)
{
	PlanState  *scan = linitial(node->custom_ps);

	/* the scan is not run through ExecProcNode, which would rescan it */
	if (node->ss.ps.chgParam != NULL)
		UpdateChangedParamSet(scan, node->ss.ps.chgParam);
	ExecReScan(scan);
	reset_states((ZipperAggregateState *) node);
}

/* EXPLAIN ANALYZE of a grouped node: the groups hashed, and those sorted */
static void
explain_aggregate(CustomScanState *node, List *ancestors, ExplainState *es)
{
	ZipperAggregateState *state = (ZipperAggregateState *) node;
	int64		hashed,
				sorted,
				spilled;

	if (!es->analyze || state->groups == NULL)
		return;
	zl_groups_counts(state->groups, &hashed, &sorted, &spilled);
	ExplainPropertyInteger("Groups in Memory", NULL, hashed, es);
	if (spilled > 0 || es->format != EXPLAIN_FORMAT_TEXT)
	{
		ExplainPropertyInteger("Groups Sorted", NULL, sorted, es);
		ExplainPropertyInteger("Rows Sorted", NULL, spilled, es);
	}
}


void
zl_aggregate_init(void)
{
	RegisterCustomScanMethods(&aggregate_scan_methods);
	prev_create_upper_paths = create_upper_paths_hook;
	create_upper_paths_hook = zl_create_upper_paths;
}
