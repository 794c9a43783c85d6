/*-------------------------------------------------------------------------
 *
 * zl_aggregate.c
 *	  ZipperAggregate: count, sum, min, max and avg computed in the scan.
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
 * Planner
 * -------
 * create_upper_paths_hook offers, besides the Agg paths of the grouping
 * relation, a CustomPath whose child is the table's unfiltered ZipperScan
 * path (zl_unfiltered_scan_path), and a parallel plan: in every
 * participant a partial one over the parallel ZipperScan, returning
 * transition states (serialized where they are internal), gathered into
 * a Finalize Aggregate.  It is charged part of its child's run cost and
 * the transition functions (aggregate_path), so the planner takes it over
 * an Agg on the same scan.
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
#include "utils/memutils.h"
#include "utils/syscache.h"

#define ZIPPER_AGGREGATE_NAME "ZipperAggregate"

static create_upper_paths_hook_type prev_create_upper_paths = NULL;

/* one aggregate the node computes */
typedef struct ScanAggregate
{
	AttrNumber	attnum;			/* its argument's column; 0: count(*) */
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
	Datum		state;			/* in the node's state memory */
	bool		statenull;
	bool		nostate;		/* strict, no initial value, no input yet */
	ZLDistinctInput *distinct;	/* DISTINCT: its inputs, until the end */
} ScanAggregate;

typedef struct ZipperAggregateState
{
	CustomScanState css;
	ScanAggregate *aggs;		/* one per entry of custom_scan_tlist */
	int			naggs;
	AttrNumber	max_attnum;		/* the rows are deformed this far */
	MemoryContext state_memory; /* transition states and results */
	AggState   *agg_context;	/* what AggCheckCallContext finds */
	bool		done;
} ZipperAggregateState;

static Plan *plan_aggregate(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
							List *tlist, List *clauses, List *custom_plans);
static Node *create_aggregate_state(CustomScan *cscan);
static void begin_aggregate(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *exec_aggregate(CustomScanState *node);
static void end_aggregate(CustomScanState *node);
static void rescan_aggregate(CustomScanState *node);

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
};

/* ---------- planner ---------- */

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
	List	   *found = pull_var_clause((Node *) target->exprs,
										PVC_INCLUDE_AGGREGATES | PVC_INCLUDE_WINDOWFUNCS |
										PVC_INCLUDE_PLACEHOLDERS);
	ListCell   *lc;

	foreach(lc, found)
		if (!IsA(lfirst(lc), Aggref) || !supported_aggregate(lfirst(lc), rti, partial))
			return false;
	return found != NIL;
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
aggregate_path(RelOptInfo *rel, PathTarget *target, Path *scan, bool columnar_history,
			   const AggClauseCosts *costs)
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
	cpath->path.rows = 1;
	cpath->path.startup_cost = cpath->path.total_cost =
		scan->startup_cost + (scan->total_cost - scan->startup_cost) * run_share +
		costs->transCost.startup + costs->transCost.per_tuple * scan->rows +
		costs->finalCost.startup + costs->finalCost.per_tuple + cpu_tuple_cost;
	cpath->custom_paths = list_make1(scan);
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

	if (prev_create_upper_paths)
		prev_create_upper_paths(root, stage, input_rel, output_rel, extra);
	if (stage != UPPERREL_GROUP_AGG || !zipper_lake_enable_scan_aggregates ||
		!zipper_lake_enable_pruning)
		return;
	if (parse->groupClause != NIL || parse->groupingSets != NIL ||
		parse->havingQual != NULL || parse->hasTargetSRFs ||
		input_rel->reloptkind != RELOPT_BASEREL || input_rel->lateral_relids != NULL)
		return;
	if (!target_supported(output_rel->reltarget, input_rel->relid, false))
		return;
	scan = zl_unfiltered_scan_path(root, input_rel, false, &columnar);
	if (scan != NULL)
	{
		AggClauseCosts costs;

		MemSet(&costs, 0, sizeof(costs));	/* get_agg_clause_costs adds to it */
		get_agg_clause_costs(root, AGGSPLIT_SIMPLE, &costs);
		add_path(output_rel, aggregate_path(output_rel, output_rel->reltarget, scan, columnar,
											&costs));
	}
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
	List	   *scan_tlist = NIL;
	ListCell   *lc;

	/* from the path's target: tlist would be NIL if the node could project */
	foreach(lc, pull_var_clause((Node *) best_path->path.pathtarget->exprs,
								PVC_INCLUDE_AGGREGATES))
		if (tlist_member(lfirst(lc), scan_tlist) == NULL)
			scan_tlist = lappend(scan_tlist, makeTargetEntry(lfirst(lc),
															 list_length(scan_tlist) + 1,
															 NULL, false));
	cscan->scan.plan.targetlist = tlist;
	cscan->scan.plan.qual = NIL;
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

	agg->attnum = nargs == 0 ? 0 :
		argument_column((Node *) ((TargetEntry *) linitial(aggref->args))->expr)->varattno;
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

/* every aggregate back to its initial state */
static void
reset_states(ZipperAggregateState *state)
{
	MemoryContext old;

	MemoryContextReset(state->state_memory);
	old = MemoryContextSwitchTo(state->state_memory);
	for (int i = 0; i < state->naggs; i++)
	{
		ScanAggregate *agg = &state->aggs[i];

		agg->statenull = agg->initnull;
		agg->nostate = agg->initnull && agg->transfn.fn_strict;
		agg->state = agg->initnull ? (Datum) 0 :
			datumCopy(agg->initval, agg->transbyval, agg->translen);
		if (agg->distinct != NULL)
			zl_distinct_reset(agg->distinct);
	}
	MemoryContextSwitchTo(old);
	state->done = false;
}

static void
begin_aggregate(CustomScanState *node, EState *estate, int eflags)
{
	ZipperAggregateState *state = (ZipperAggregateState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	ListCell   *lc;
	int			i = 0;

	node->custom_ps = list_make1(ExecInitNode(linitial(cscan->custom_plans), estate, eflags));
	state->state_memory = AllocSetContextCreate(CurrentMemoryContext,
												"zipper_lake aggregate states",
												ALLOCSET_DEFAULT_SIZES);
	state->agg_context = makeNode(AggState);
	state->agg_context->curaggcontext = makeNode(ExprContext);
	state->agg_context->curaggcontext->ecxt_per_tuple_memory = state->state_memory;
	state->naggs = list_length(cscan->custom_scan_tlist);
	state->aggs = palloc0(sizeof(ScanAggregate) * Max(state->naggs, 1));
	foreach(lc, cscan->custom_scan_tlist)
		init_aggregate(state, &state->aggs[i++], castNode(Aggref, ((TargetEntry *) lfirst(lc))->expr));
	reset_states(state);
}

/* one input into an aggregate's state, as nodeAgg.c advances it */
static inline void
advance(ZipperAggregateState *state, ScanAggregate *agg, Datum value, bool isnull)
{
	FunctionCallInfo call = agg->trans_call;
	Datum		result;

	if (agg->transfn.fn_strict)
	{
		if (isnull)
			return;
		if (agg->nostate)
		{
			/* no initial value: the first input is the state */
			MemoryContext old = MemoryContextSwitchTo(state->state_memory);

			agg->state = datumCopy(value, agg->transbyval, agg->translen);
			MemoryContextSwitchTo(old);
			agg->statenull = false;
			agg->nostate = false;
			return;
		}
		if (agg->statenull)
			return;
	}
	call->args[0].value = agg->state;
	call->args[0].isnull = agg->statenull;
	if (call->nargs > 1)
	{
		call->args[1].value = value;
		call->args[1].isnull = isnull;
	}
	call->isnull = false;
	result = FunctionCallInvoke(call);
	if (!agg->transbyval && DatumGetPointer(result) != DatumGetPointer(agg->state))
	{
		/* a new state (or an input) to keep in the state memory */
		if (!call->isnull)
		{
			MemoryContext old = MemoryContextSwitchTo(state->state_memory);

			result = datumCopy(result, agg->transbyval, agg->translen);
			MemoryContextSwitchTo(old);
		}
		if (!agg->statenull)
			pfree(DatumGetPointer(agg->state));
	}
	agg->state = result;
	agg->statenull = call->isnull;
}

/* a row from the scan's slot into every aggregate */
static void
aggregate_row(ZipperAggregateState *state, TupleTableSlot *row)
{
	ExprContext *econtext = state->css.ss.ps.ps_ExprContext;
	MemoryContext old;

	if (state->max_attnum > 0)
		slot_getsomeattrs(row, state->max_attnum);
	ResetExprContext(econtext);
	old = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
	for (int i = 0; i < state->naggs; i++)
	{
		ScanAggregate *agg = &state->aggs[i];

		if (agg->attnum == 0)
			advance(state, agg, (Datum) 0, false);
		else if (agg->distinct != NULL)
			zl_distinct_add(agg->distinct, row->tts_values[agg->attnum - 1],
							row->tts_isnull[agg->attnum - 1]);
		else
			advance(state, agg, row->tts_values[agg->attnum - 1],
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
 * Decode the columns a batch's aggregates read, as the scan would decode
 * them for its slot (so that EXPLAIN ANALYZE counts their time and pages
 * as the scan's); aggregate_batch finds them decoded.
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
}

/*
 * The rows of a columnar chunk into every aggregate, one aggregate at a
 * time over the decoded column it reads (each sees the rows in the scan's
 * order, as from the slot); count(*) adds the number of rows.
 */
static void
aggregate_batch(ZipperAggregateState *state, const ZLRowBatch *batch)
{
	ExprContext *econtext = state->css.ss.ps.ps_ExprContext;
	MemoryContext old;

	if (batch->nrows == 0)
		return;
	old = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
	for (int i = 0; i < state->naggs; i++)
	{
		ScanAggregate *agg = &state->aggs[i];
		const Datum *values;
		const bool *nulls;

		if (agg->count_rows)
		{
			agg->state = Int64GetDatum(DatumGetInt64(agg->state) + batch->nrows);
			continue;
		}
		if (agg->attnum > 0)
			batch_column(batch, agg->attnum, &values, &nulls);
		/* what the transition functions leave behind, a chunk's rows at most */
		ResetExprContext(econtext);
		if (agg->distinct != NULL)
		{
			for (uint32 k = 0; k < batch->nrows; k++)
				zl_distinct_add(agg->distinct, values[batch->rows[k]], nulls[batch->rows[k]]);
			continue;
		}
		for (uint32 k = 0; k < batch->nrows; k++)
		{
			uint32		r = batch->rows[k];

			if (agg->attnum == 0)
				advance(state, agg, (Datum) 0, false);
			else
				advance(state, agg, values[r], nulls[r]);
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
advance_distinct(ZipperAggregateState *state, ScanAggregate *agg)
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
		advance(state, agg, value, isnull);
	}
	MemoryContextSwitchTo(old);
}

/* an aggregate's result: final function, serialized state or the state */
static void
finish(ScanAggregate *agg, Datum *value, bool *isnull)
{
	FunctionCallInfo call = agg->final_call;

	*value = agg->state;
	*isnull = agg->statenull;
	if (OidIsValid(agg->serialfn.fn_oid))
	{
		if (agg->statenull && agg->serialfn.fn_strict)
			return;
		agg->serial_call->args[0].value = agg->state;
		agg->serial_call->args[0].isnull = agg->statenull;
		agg->serial_call->isnull = false;
		*value = FunctionCallInvoke(agg->serial_call);
		*isnull = agg->serial_call->isnull;
	}
	else if (OidIsValid(agg->finalfn.fn_oid))
	{
		bool		anynull = agg->statenull;

		call->args[0].value = agg->state;
		call->args[0].isnull = agg->statenull;
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

static TupleTableSlot *
exec_aggregate(CustomScanState *node)
{
	ZipperAggregateState *state = (ZipperAggregateState *) node;
	PlanState  *scan = linitial(node->custom_ps);
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	TupleTableSlot *out = node->ss.ss_ScanTupleSlot;
	TupleTableSlot *row;
	MemoryContext old;

	if (state->done)
		return NULL;
	state->done = true;

	/*
	 * The scan's rows, a columnar chunk at a time where it can; the time
	 * spent getting them and their number go to the scan's instrumentation,
	 * as ExecProcNode would count them.
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

	for (int i = 0; i < state->naggs; i++)
		if (state->aggs[i].distinct != NULL)
			advance_distinct(state, &state->aggs[i]);
	ExecClearTuple(out);
	old = MemoryContextSwitchTo(state->state_memory);
	for (int i = 0; i < state->naggs; i++)
		finish(&state->aggs[i], &out->tts_values[i], &out->tts_isnull[i]);
	MemoryContextSwitchTo(old);
	ExecStoreVirtualTuple(out);
	if (node->ss.ps.ps_ProjInfo == NULL)
		return out;
	ResetExprContext(econtext);
	econtext->ecxt_scantuple = out;
	return ExecProject(node->ss.ps.ps_ProjInfo);
}

static void
end_aggregate(CustomScanState *node)
{
	ZipperAggregateState *state = (ZipperAggregateState *) node;

	ExecEndNode(linitial(node->custom_ps));
	for (int i = 0; i < state->naggs; i++)
		if (state->aggs[i].distinct != NULL)
			zl_distinct_end(state->aggs[i].distinct);
	MemoryContextDelete(state->state_memory);
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

void
zl_aggregate_init(void)
{
	RegisterCustomScanMethods(&aggregate_scan_methods);
	prev_create_upper_paths = create_upper_paths_hook;
	create_upper_paths_hook = zl_create_upper_paths;
}
