/*-------------------------------------------------------------------------
 *
 * zl_customscan.c
 *	  ZipperScan: pruning for plain SQL on zipper tables.
 *
 * Planner
 * -------
 * set_rel_pathlist_hook looks at the restriction clauses of every
 * registered zipper table, queried directly or as a partition or
 * inheritance child of the table queried.  A clause "period_column op expression", with
 * op one of < <= = >= > of the column type's btree family (either side;
 * BETWEEN arrives as two such clauses) and an expression without Vars of
 * the query level or volatile functions — a constant, a parameter of a
 * prepared statement, now() — becomes a pruning bound.  If there is one,
 * a ZipperScan path is added, costed as the sequential scan scaled by the
 * selectivity of the bound clauses, so the planner prefers it exactly
 * when pruning helps.
 *
 * Besides conjuncts, one OR of two arms is recognized — "valid_from in a
 * range OR valid_to in a range", the changes-of-a-window shape — and turned
 * into ORed bounds (ZLScanBounds.either).
 *
 * Plan
 * ----
 * The bound clauses go to custom_exprs (setrefs fixes their Vars, EXPLAIN
 * shows them) with, in custom_private, which side is the column, which
 * column and which strategy.  They leave the filter: the scan core checks
 * them per row, or not at all in sub-groups that match entirely.  Every
 * other clause stays in the plan's qual.
 *
 * Parallel ZipperScans prune once: the leader loads and decides the
 * sub-groups its bounds keep when the Gather sizes the dynamic shared
 * memory, and puts them (with their masks) after the table access
 * method's parallel scan descriptor (zl_scan_share); every participant
 * begins its scan on that list and claims sub-groups from the shared
 * counter, and no worker reads the catalog.  Bounds that use PARAM_EXEC
 * values, or masks too large to copy, fall back to every participant
 * loading and pruning the list itself.  They cost a worker's start-up
 * (worker_start_cost) and get workers only for the pages pruning keeps.
 *
 * Executor
 * --------
 * The bounds are evaluated when the scan starts (parameters are known by
 * then) and again on rescan, then handed to the scan core (zl_scan.c,
 * zl_prune.c), which also scans backward: serial ZipperScans say so
 * (CUSTOMPATH_SUPPORT_BACKWARD_SCAN), so a SCROLL cursor needs no Material
 * node above them.  EXPLAIN shows the bounds and how many partitions, file
 * groups and sub-groups were kept; EXPLAIN ANALYZE adds the masked rows
 * stepped over, EXPLAIN VERBOSE how many sub-groups' catalog rows the scan
 * loaded (only those its bounds can keep: zl_bounds_filter).  A parallel
 * one with a shared list shows where the leader's list came from (cache
 * or catalog) and, with ANALYZE, the sub-groups read and masked rows
 * stepped over by all participants, saved before the Gather detaches the
 * shared memory (zl_shutdown).
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "common/zl_guc.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "access/zl_access.h"
#include "planner/zl_planner_internal.h"

#include "access/parallel.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "commands/defrem.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/restrictinfo.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/snapmgr.h"

#define ZIPPER_SCAN_NAME "ZipperScan"

static set_rel_pathlist_hook_type prev_set_rel_pathlist = NULL;

/* one recognized bound: column side, column and strategy, in custom_private */
typedef struct BoundInfo
{
	int			var_arg;		/* 0 or 1: which argument is the column */
	AttrNumber	attnum;			/* from_attnum or to_attnum */
	int			strategy;		/* BTLessStrategyNumber ... with column on the left */
} BoundInfo;

typedef struct ZipperScanState
{
	CustomScanState css;
	ZLTableOptions opts;
	List	   *bound_args;		/* ExprState of each bound's expression side */
	List	   *bounds_info;	/* int triples from custom_private */
	bool		either;			/* the bounds of the two columns are ORed */
	List	   *key_info;		/* zl_keyprobe_extract's, from custom_private */
	ZLKeyProbe *key_probe;		/* NULL: the scan reads every key */
	List	   *chunk_info;		/* zl_chunkfilter_extract's, from custom_private */
	ZLChunkFilter *chunk_filter;	/* NULL: no chunk predicates */
	MemoryContext chunk_values; /* the chunk predicates' values, per start */
	bool	   *columns;		/* attributes the plan reads */
	TableScanDesc scan;
	ParallelTableScanDesc pscan;	/* shared scan state when parallel */
	TableScanDesc prune_scan;	/* parallel leader: the scan that pruned for all */
	bool		shared_counted; /* parallel, shared list: the counts below */
	int			shared_read;	/* sub-groups read by all participants */
	int64		shared_masked;	/* masked rows they stepped over */
	bool		exec_params;	/* bounds use PARAM_EXEC: unknown before running */
	bool		restart;		/* rescanned: bounds and keys to evaluate again */
} ZipperScanState;

static Plan *zl_plan_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
						  List *tlist, List *clauses, List *custom_plans);
static Node *zl_create_state(CustomScan *cscan);
static void zl_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *zl_exec(CustomScanState *node);
static void zl_end(CustomScanState *node);
static void zl_rescan(CustomScanState *node);
static void zl_explain(CustomScanState *node, List *ancestors, ExplainState *es);
static Size zl_estimate_dsm(CustomScanState *node, ParallelContext *pcxt);
static void zl_initialize_dsm(CustomScanState *node, ParallelContext *pcxt, void *coordinate);
static void zl_reinitialize_dsm(CustomScanState *node, ParallelContext *pcxt, void *coordinate);
static void zl_initialize_worker(CustomScanState *node, shm_toc *toc, void *coordinate);
static void zl_shutdown(CustomScanState *node);

static const CustomPathMethods zl_path_methods = {
	.CustomName = ZIPPER_SCAN_NAME,
	.PlanCustomPath = zl_plan_path,
};

static const CustomScanMethods zl_scan_methods = {
	.CustomName = ZIPPER_SCAN_NAME,
	.CreateCustomScanState = zl_create_state,
};

static const CustomExecMethods zl_exec_methods = {
	.CustomName = ZIPPER_SCAN_NAME,
	.BeginCustomScan = zl_begin,
	.ExecCustomScan = zl_exec,
	.EndCustomScan = zl_end,
	.ReScanCustomScan = zl_rescan,
	.ExplainCustomScan = zl_explain,
	.EstimateDSMCustomScan = zl_estimate_dsm,
	.InitializeDSMCustomScan = zl_initialize_dsm,
	.ReInitializeDSMCustomScan = zl_reinitialize_dsm,
	.InitializeWorkerCustomScan = zl_initialize_worker,
	.ShutdownCustomScan = zl_shutdown,
};

/* ---------- planner ---------- */

/*
 * Is a clause a bound on a period column?  Fills info when it is.
 */
static bool
recognize_bound(Expr *clause, Index rti, const ZLTableOptions *opts, BoundInfo *info)
{
	OpExpr	   *op;
	Oid			opfamily;
	Oid			left_type,
				right_type;

	if (!IsA(clause, OpExpr) || list_length(((OpExpr *) clause)->args) != 2)
		return false;
	op = (OpExpr *) clause;

	for (int side = 0; side < 2; side++)
	{
		Node	   *var = strip_implicit_coercions(list_nth(op->args, side));
		Node	   *other = list_nth(op->args, 1 - side);
		Oid			opno = side == 0 ? op->opno : get_commutator(op->opno);
		int			strategy;

		if (!IsA(var, Var) || ((Var *) var)->varno != rti ||
			((Var *) var)->varlevelsup != 0 ||
			(((Var *) var)->varattno != opts->from_attnum &&
			 ((Var *) var)->varattno != opts->to_attnum) ||
			!OidIsValid(opno) || !zl_is_scan_constant(other, rti))
			continue;

		/* same-type operators of the column type's btree family only */
		op_input_types(opno, &left_type, &right_type);
		if (left_type != opts->period_type || right_type != opts->period_type)
			continue;
		opfamily = zl_default_opfamily(opts->period_type, BTREE_AM_OID, NULL);
		strategy = get_op_opfamily_strategy(opno, opfamily);
		if (strategy == 0)
			continue;

		info->var_arg = side;
		info->attnum = ((Var *) var)->varattno;
		info->strategy = strategy;
		return true;
	}
	return false;
}

/*
 * The bound clauses of a list of RestrictInfos: either every recognized
 * conjunct ("AND" bounds), or — when there is none — one OR of two arms,
 * each arm a conjunction of bounds on one period column, one arm per
 * column (the "began or ended in a window" shape of changes()).  Returns
 * the bound OpExprs, their (column side, column, strategy) triples, the
 * RestrictInfos left over, and whether the bounds are ORed.
 */
typedef struct ExtractedBounds
{
	List	   *exprs;			/* OpExpr */
	List	   *triples;		/* int lists (var_arg, attnum, strategy) */
	List	   *rest;			/* RestrictInfo */
	bool		either;
} ExtractedBounds;

static bool
recognize_arm(Expr *arm, Index rti, const ZLTableOptions *opts,
			  List **exprs, List **triples, AttrNumber *attnum)
{
	List	   *conjuncts = is_andclause(arm) ? ((BoolExpr *) arm)->args : list_make1(arm);
	ListCell   *lc;

	*attnum = InvalidAttrNumber;
	foreach(lc, conjuncts)
	{
		BoundInfo	info;

		if (!recognize_bound(lfirst(lc), rti, opts, &info) ||
			(*attnum != InvalidAttrNumber && info.attnum != *attnum))
			return false;
		*attnum = info.attnum;
		*exprs = lappend(*exprs, lfirst(lc));
		*triples = lappend(*triples, list_make3_int(info.var_arg, info.attnum, info.strategy));
	}
	return *attnum != InvalidAttrNumber;
}

static ExtractedBounds
extract_bounds(List *rinfos, Index rti, const ZLTableOptions *opts)
{
	ExtractedBounds eb = {NIL, NIL, NIL, false};
	ListCell   *lc;

	foreach(lc, rinfos)
	{
		RestrictInfo *rinfo = lfirst(lc);
		BoundInfo	info;

		if (!rinfo->pseudoconstant && recognize_bound(rinfo->clause, rti, opts, &info))
		{
			eb.exprs = lappend(eb.exprs, rinfo->clause);
			eb.triples = lappend(eb.triples, list_make3_int(info.var_arg, info.attnum, info.strategy));
		}
		else
			eb.rest = lappend(eb.rest, rinfo);
	}
	if (eb.exprs != NIL)
		return eb;

	foreach(lc, rinfos)
	{
		RestrictInfo *rinfo = lfirst(lc);
		List	   *exprs = NIL,
				   *triples = NIL;
		AttrNumber	first,
					second;

		if (rinfo->pseudoconstant || !is_orclause(rinfo->clause) ||
			list_length(((BoolExpr *) rinfo->clause)->args) != 2 ||
			!recognize_arm(linitial(((BoolExpr *) rinfo->clause)->args), rti, opts,
						   &exprs, &triples, &first) ||
			!recognize_arm(lsecond(((BoolExpr *) rinfo->clause)->args), rti, opts,
						   &exprs, &triples, &second) ||
			first == second)
			continue;
		eb.exprs = exprs;
		eb.triples = triples;
		eb.either = true;
		eb.rest = list_delete_ptr(list_copy(rinfos), rinfo);
		break;
	}
	return eb;
}

/*
 * The cheapest unparameterized index or bitmap path of rel, as EXPLAIN
 * names it next to the ZipperScan preferred to it (NULL: none).
 */
static Node *
cheapest_index_path(RelOptInfo *rel)
{
	Path	   *best = NULL;
	Path	   *index = NULL;
	ListCell   *lc;

	foreach(lc, rel->pathlist)
	{
		Path	   *path = lfirst(lc);

		if ((IsA(path, IndexPath) || IsA(path, BitmapHeapPath)) && path->param_info == NULL &&
			(best == NULL || path->total_cost < best->total_cost))
			best = path;
	}
	if (best == NULL)
		return NULL;
	index = IsA(best, BitmapHeapPath) ? ((BitmapHeapPath *) best)->bitmapqual : best;
	return (Node *) makeString(psprintf("%s%s (cost=%.2f)",
										IsA(best, BitmapHeapPath) ? "Bitmap Heap Scan" : "Index Scan",
										IsA(index, IndexPath) ?
										psprintf(" using %s",
												 get_rel_name(((IndexPath *) index)->indexinfo->indexoid)) :
										"", best->total_cost));
}

/* the serial sequential scan, whose costs a ZipperScan's are scaled from */
static Path *
plain_seqscan_path(PlannerInfo *root, RelOptInfo *rel)
{
	ListCell   *lc;

	foreach(lc, rel->pathlist)
	{
		Path	   *path = lfirst(lc);

		if (path->pathtype == T_SeqScan && path->parallel_workers == 0)
			return path;
	}
	/* an index path cheaper than it put it out of the list: cost it again */
	return create_seqscan_path(root, rel, NULL, 0);
}

/*
 * What starting one parallel worker costs a ZipperScan, on top of the
 * Gather's parallel_setup_cost: a new process that loads the library,
 * opens the relation and attaches to the shared list of sub-groups the
 * leader pruned (the worker reads no catalog).  Measured at 5-20 ms per
 * worker, against 2-8 ms for the whole scan of a recent day of a deep
 * history, which a Gather then waits for; counted as parallel_setup_cost
 * again per worker, so that settings forcing parallel plans
 * (parallel_setup_cost = 0) force them here too.
 */
static Cost
worker_start_cost(int workers)
{
	return workers * parallel_setup_cost;
}

/*
 * A ZipperScan path: the sequential scan's cost scaled by the selectivity
 * of the bound clauses (pruning reads about that fraction; never more than
 * a sequential scan), split among the participants of a parallel scan,
 * whose start-up adds the workers' (worker_start_cost).  A key probe costs
 * less when it reads fewer rows (keyed_run_cost, below).
 */
static Path *
make_zipper_path(PlannerInfo *root, RelOptInfo *rel, Relids required_outer,
				 Cost seq_startup, Cost seq_total, Selectivity selectivity,
				 Cost keyed_run_cost, List *private, int workers)
{
	CustomPath *cpath = makeNode(CustomPath);
	double		participants = workers + (parallel_leader_participation ? 1 : 0);
	Cost		run_cost = (seq_total - seq_startup) * Min(Max(selectivity, 0.001), 0.999);

	if (keyed_run_cost >= 0)
		run_cost = Min(run_cost, keyed_run_cost);

	cpath->path.pathtype = T_CustomScan;
	cpath->path.parent = rel;
	cpath->path.pathtarget = rel->reltarget;
	/* lateral references and join clauses make the scan depend on outer rows */
	cpath->path.param_info = get_baserel_parampathinfo(root, rel,
													   bms_union(rel->lateral_relids,
																 required_outer));
	cpath->path.parallel_aware = workers > 0;
	cpath->path.parallel_safe = rel->consider_parallel;
	cpath->path.parallel_workers = workers;
	cpath->path.rows = workers > 0 ? clamp_row_est(rel->rows / participants) :
		cpath->path.param_info ? cpath->path.param_info->ppi_rows : rel->rows;
	cpath->path.startup_cost = seq_startup + (workers > 0 ? worker_start_cost(workers) : 0);
	cpath->path.total_cost = cpath->path.startup_cost +
		(workers > 0 ? run_cost / participants : run_cost);
	/* the scan core walks backward too (SCROLL cursors), serially only */
	cpath->flags = workers > 0 ? 0 : CUSTOMPATH_SUPPORT_BACKWARD_SCAN;
	cpath->custom_private = private;
	cpath->methods = &zl_path_methods;
	return &cpath->path;
}

/*
 * What a key probe costs (zl_keyprobe.c): a look at the key filter of
 * each sub-group, counted as one per ZL_MAX_SUBGROUP_ROWS / 4 rows of the
 * table, and a random page read per row of the keys (key_rows).
 */
static Cost
keyed_run_cost(RelOptInfo *rel, double key_rows)
{
	double		subgroups = 1 + rel->tuples / (ZL_MAX_SUBGROUP_ROWS / 4);

	return subgroups * 4 * cpu_operator_cost +
		clamp_row_est(key_rows) * (random_page_cost + cpu_tuple_cost);
}

/*
 * What one probe of a parameterized scan costs, per outer row: a look into
 * the merged key index (zl_keyindex.c) and the rescan's bookkeeping,
 * counted as 40 operators, and the pages of the key's rows, as for an
 * index scan repeated loop_count times: pages read again are cached
 * (index_pages_fetched, which weighs effective_cache_size).
 */
static Cost
probe_cost(PlannerInfo *root, RelOptInfo *rel, double key_rows, Relids outer)
{
	double		loops = 1;
	int			relid = -1;

	/* the outer relations' rows: the largest, as the number of probes */
	while ((relid = bms_next_member(outer, relid)) >= 0)
		if (relid < root->simple_rel_array_size && root->simple_rel_array[relid] != NULL)
			loops = Max(loops, root->simple_rel_array[relid]->rows);
	key_rows = clamp_row_est(key_rows);
	return 40 * cpu_operator_cost +
		index_pages_fetched(key_rows * loops, rel->pages, 0, root) / loops * random_page_cost +
		key_rows * cpu_tuple_cost;
}

/*
 * Rows of columnar history (README "Storage formats") are no heap tuples:
 * they have no xmin, xmax, cmin or cmax to show.  Refused when planned,
 * for the scan of any table whose history is written columnar.
 */
static void
refuse_transaction_columns(RelOptInfo *rel, RangeTblEntry *rte)
{
	bool		wanted = false;
	Relation	relation;
	ZLTableOptions opts;

	if (rte->rtekind != RTE_RELATION || rel->attr_needed == NULL ||
		rel->min_attr > MaxCommandIdAttributeNumber)
		return;
	for (AttrNumber a = MaxCommandIdAttributeNumber; a <= MinTransactionIdAttributeNumber; a++)
		wanted |= !bms_is_empty(rel->attr_needed[a - rel->min_attr]);
	if (!wanted)
		return;
	relation = table_open(rte->relid, NoLock);
	if (zl_is_zipper_relation(relation) && zl_meta_load_options(relation, &opts, false) &&
		opts.history_format == ZL_FORMAT_COLUMNAR)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("columnar history of table \"%s\" has no xmin, xmax, cmin or cmax",
						RelationGetRelationName(relation)),
				 errdetail("Versions that ended are stored column by column, not as heap tuples."),
				 errhint("Select ctid or tableoid, or register the table with history_format => 'rows'.")));
	table_close(relation, NoLock);
}

/*
 * The attributes (a bool each) that Vars collected by pull_varattnos()
 * read, or NULL for the whole row.
 */
static bool *
attributes_of(Bitmapset *attrs, int natts)
{
	bool	   *columns;

	if (bms_is_member(0 - FirstLowInvalidHeapAttributeNumber, attrs))
		return NULL;
	columns = palloc0(sizeof(bool) * Max(natts, 1));
	for (int i = 0; i < natts; i++)
		columns[i] = bms_is_member(i + 1 - FirstLowInvalidHeapAttributeNumber, attrs);
	return columns;
}

/*
 * What share of a sequential scan's work a ZipperScan of a table with
 * columnar history does when it reads only some columns: their share of
 * the columns, a quarter at least (the current partition's rows are read
 * whole).  *chunk_predicates: clauses that can skip chunks exist.
 */
static double
columns_read_share(RelOptInfo *rel, Index rti, TupleDesc desc, List *rest,
				   bool *chunk_predicates)
{
	Bitmapset  *attrs = NULL;
	List	   *info;
	ListCell   *lc;
	bool	   *columns;
	int			natts = 0;
	int			read = 0;

	*chunk_predicates = zl_chunkfilter_extract(rest, rti, desc, &info) != NIL;
	pull_varattnos((Node *) rel->reltarget->exprs, rti, &attrs);
	foreach(lc, rel->baserestrictinfo)
		pull_varattnos((Node *) ((RestrictInfo *) lfirst(lc))->clause, rti, &attrs);
	columns = attributes_of(attrs, desc->natts);
	if (columns == NULL)
		return 1.0;
	for (int i = 0; i < desc->natts; i++)
	{
		if (TupleDescAttr(desc, i)->attisdropped)
			continue;
		natts++;
		read += columns[i] ? 1 : 0;
	}
	return read >= natts ? 1.0 : Max(0.25, (double) read / Max(natts, 1));
}

/*
 * A ZipperScan probing keys whose values come from other relations:
 * parameterized by them, rescanned per outer row of a nested loop.  Its
 * rows and cost are those of one probe; the planner weighs the outer rows.
 */
static void
add_parameterized_path(PlannerInfo *root, RelOptInfo *rel, Index rti,
					   const ZLTableOptions *opts, TupleDesc tupdesc,
					   Cost seq_startup, Cost seq_total)
{
	List	   *join_clauses = zl_keyprobe_join_clauses(root, rel, opts);
	List	   *key_info;
	Relids		outer;
	List	   *terms;

	if (join_clauses == NIL)
		return;
	terms = zl_keyprobe_extract(list_concat(list_copy(rel->baserestrictinfo), join_clauses),
								rti, opts, tupdesc, &key_info, &outer);
	if (terms == NIL || bms_is_empty(outer))
		return;
	add_path(rel, make_zipper_path(root, rel, outer, seq_startup, seq_total, 1.0,
								   probe_cost(root, rel,
											  rel->tuples * clauselist_selectivity(root, terms, rti,
																				   JOIN_INNER, NULL),
											  outer),
								   list_make3(makeInteger(false), NIL, key_info), 0));
}

static void
zl_set_rel_pathlist(PlannerInfo *root, RelOptInfo *rel, Index rti, RangeTblEntry *rte)
{
	Relation	relation;
	ZLTableOptions opts;
	bool		zipper;
	bool		registered = false;
	ExtractedBounds eb;
	List	   *key_terms = NIL;
	List	   *key_info = NIL;
	List	   *private;
	Path	   *seqscan;
	Cost		seq_startup,
				seq_total,
				key_cost = -1;
	Selectivity selectivity;
	double		columnar_share = 1.0;
	bool		chunk_predicates = false;

	if (prev_set_rel_pathlist)
		prev_set_rel_pathlist(root, rel, rti, rte);
	refuse_transaction_columns(rel, rte);

	/*
	 * A table scanned by itself, or as a member of an append relation (a
	 * partition, an inheritance child, a UNION ALL arm), whose clauses the
	 * planner has translated to its own columns; never the parent of an
	 * append relation, whose paths are Appends of its members'.
	 */
	if (!zipper_lake_enable_pruning || rte->rtekind != RTE_RELATION ||
		rte->relkind != RELKIND_RELATION || rte->inh || rte->tablesample != NULL ||
		(rel->reloptkind != RELOPT_BASEREL && rel->reloptkind != RELOPT_OTHER_MEMBER_REL))
		return;

	relation = table_open(rte->relid, NoLock);
	zipper = zl_is_zipper_relation(relation);
	if (zipper)
		registered = zl_meta_load_options(relation, &opts, false);
	if (!zipper || !registered)
	{
		table_close(relation, NoLock);
		return;
	}
	seqscan = plain_seqscan_path(root, rel);
	/* add_path() may free the dominated sequential scan: keep its costs */
	seq_startup = seqscan->startup_cost;
	seq_total = seqscan->total_cost;
	key_terms = zl_keyprobe_extract(rel->baserestrictinfo, rti, &opts,
									RelationGetDescr(relation), &key_info, NULL);
	add_parameterized_path(root, rel, rti, &opts, RelationGetDescr(relation),
						   seq_startup, seq_total);
	eb = extract_bounds(rel->baserestrictinfo, rti, &opts);
	if (opts.history_format == ZL_FORMAT_COLUMNAR)
		columnar_share = columns_read_share(rel, rti, RelationGetDescr(relation),
											eb.rest, &chunk_predicates);
	table_close(relation, NoLock);
	if (eb.exprs == NIL && key_terms == NIL && columnar_share >= 1.0 && !chunk_predicates)
		return;

	private = list_make4(makeInteger(eb.either), eb.triples, key_info, cheapest_index_path(rel));
	selectivity = columnar_share;
	if (eb.exprs != NIL)
		selectivity *= eb.either ?
			clause_selectivity(root, (Node *) make_orclause(eb.exprs), rti, JOIN_INNER, NULL) :
			clauselist_selectivity(root, eb.exprs, rti, JOIN_INNER, NULL);
	if (key_terms != NIL)
		key_cost = keyed_run_cost(rel, rel->tuples *
								  clauselist_selectivity(root, key_terms, rti, JOIN_INNER, NULL));
	add_path(rel, make_zipper_path(root, rel, NULL, seq_startup, seq_total, selectivity,
								   key_cost, private, 0));

	/*
	 * A parallel ZipperScan: participants share out the kept sub-groups.
	 * Workers are counted from the pages pruning keeps, not the table's: a
	 * read of a day of a deep history is a small scan (below
	 * min_parallel_table_scan_size, none).  A key probe reads too little to
	 * share.
	 */
	if (rel->consider_parallel && rel->lateral_relids == NULL && key_terms == NIL)
	{
		int			workers = compute_parallel_worker(rel, rel->pages * Min(selectivity, 1.0),
													  -1, max_parallel_workers_per_gather);

		if (workers > 0)
			add_partial_path(rel, make_zipper_path(root, rel, NULL, seq_startup, seq_total,
												   selectivity, -1, private, workers));
	}
}

static Plan *
zl_plan_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
			 List *tlist, List *clauses, List *custom_plans)
{
	CustomScan *cscan = makeNode(CustomScan);
	ExtractedBounds eb;
	ZLTableOptions opts;
	List	   *key_terms;
	List	   *key_info;
	List	   *chunk_clauses;
	List	   *chunk_info;
	Relation	relation = table_open(planner_rt_fetch(rel->relid, root)->relid, NoLock);

	if (!zl_meta_load_options(relation, &opts, false))
		elog(ERROR, "zipper table \"%s\" lost its registration during planning",
			 RelationGetRelationName(relation));
	key_terms = zl_keyprobe_extract(clauses, rel->relid, &opts, RelationGetDescr(relation),
									&key_info, NULL);

	/*
	 * Bound clauses are enforced by the scan; the rest stay a filter, key
	 * terms and chunk predicates too: they recheck the rows a key probe
	 * returns, and the rows of the chunks read.
	 */
	eb = extract_bounds(clauses, rel->relid, &opts);
	chunk_clauses = opts.history_format == ZL_FORMAT_COLUMNAR ?
		zl_chunkfilter_extract(eb.rest, rel->relid, RelationGetDescr(relation), &chunk_info) : NIL;
	if (chunk_clauses == NIL)
		chunk_info = NIL;
	table_close(relation, NoLock);

	cscan->scan.plan.targetlist = tlist;
	cscan->scan.plan.qual = extract_actual_clauses(eb.rest, false);
	cscan->scan.scanrelid = rel->relid;
	cscan->flags = best_path->flags;
	cscan->custom_exprs = list_concat(list_concat(list_copy(eb.exprs), key_terms), chunk_clauses);
	cscan->custom_private = list_make5(makeInteger(eb.either), eb.triples, key_info, chunk_info,
									   list_length(best_path->custom_private) > 3 ?
									   lfourth(best_path->custom_private) : NULL);
	cscan->methods = &zl_scan_methods;
	return &cscan->scan.plan;
}

/*
 * The cheapest ZipperScan path of rel (partial: of its partial paths)
 * whose rows need no filter: every restriction clause is a bound, none
 * probes keys.  NULL if there is none.  An aggregate computed in the scan
 * (zl_aggregate.c) takes its rows straight from it; *columnar_history
 * says whether the table writes its history columnar.
 */
Path *
zl_unfiltered_scan_path(PlannerInfo *root, RelOptInfo *rel, bool partial,
						bool *columnar_history)
{
	Path	   *best = NULL;
	Relation	relation;
	ZLTableOptions opts;
	bool		registered;
	ListCell   *lc;

	foreach(lc, partial ? rel->partial_pathlist : rel->pathlist)
	{
		Path	   *path = lfirst(lc);

		/*
		 * The grouping target put a projection over the scan (columns in
		 * another order): the node reads the scan's rows, not the projection.
		 */
		if (IsA(path, ProjectionPath))
			path = ((ProjectionPath *) path)->subpath;

		if (IsA(path, CustomPath) && ((CustomPath *) path)->methods == &zl_path_methods &&
			path->param_info == NULL &&
			lthird(((CustomPath *) path)->custom_private) == NIL &&
			(best == NULL || path->total_cost < best->total_cost))
			best = path;
	}
	if (best == NULL)
		return NULL;
	relation = table_open(planner_rt_fetch(rel->relid, root)->relid, NoLock);
	registered = zl_meta_load_options(relation, &opts, false);
	table_close(relation, NoLock);
	if (!registered || extract_bounds(rel->baserestrictinfo, rel->relid, &opts).rest != NIL)
		return NULL;
	*columnar_history = opts.history_format == ZL_FORMAT_COLUMNAR;
	return best;
}

/* ---------- executor ---------- */

static Node *
zl_create_state(CustomScan *cscan)
{
	ZipperScanState *state = (ZipperScanState *) newNode(sizeof(ZipperScanState),
														 T_CustomScanState);

	state->css.methods = &zl_exec_methods;
	state->either = intVal(linitial(cscan->custom_private));
	state->bounds_info = lsecond(cscan->custom_private);
	state->key_info = lthird(cscan->custom_private);
	state->chunk_info = lfourth(cscan->custom_private);
	return (Node *) state;
}

static bool
contains_exec_param(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Param) && ((Param *) node)->paramkind == PARAM_EXEC)
		return true;
	return expression_tree_walker(node, contains_exec_param, context);
}

/* custom_exprs: the bound clauses, then the key terms, then chunk predicates */
static List *
bound_exprs(ZipperScanState *state, CustomScan *cscan)
{
	return list_copy_head(cscan->custom_exprs, list_length(state->bounds_info));
}

static List *
key_terms(ZipperScanState *state, CustomScan *cscan)
{
	return list_copy_head(list_copy_tail(cscan->custom_exprs, list_length(state->bounds_info)),
						  list_length(cscan->custom_exprs) - list_length(state->bounds_info) -
						  list_length(state->chunk_info));
}

static List *
chunk_clauses(ZipperScanState *state, CustomScan *cscan)
{
	return list_copy_tail(cscan->custom_exprs,
						  list_length(cscan->custom_exprs) - list_length(state->chunk_info));
}

/*
 * The attributes the plan reads (its target list and filter, which holds
 * the key terms and chunk predicates too): columnar sub-groups decode only
 * those, and the period columns where the scan checks its bounds
 * (zl_scan_columnar.c).  NULL: all.
 */
static bool *
columns_read(CustomScan *cscan, int natts)
{
	Bitmapset  *attrs = NULL;

	pull_varattnos((Node *) cscan->scan.plan.targetlist, cscan->scan.scanrelid, &attrs);
	pull_varattnos((Node *) cscan->scan.plan.qual, cscan->scan.scanrelid, &attrs);
	return attributes_of(attrs, natts);
}

static void
load_registration(ZipperScanState *state)
{
	zl_load_registration(state->css.ss.ss_currentRelation, &state->opts, false, NULL,
						 "The query was planned while the table was registered; plan it again.");
}

static void
zl_begin(CustomScanState *node, EState *estate, int eflags)
{
	ZipperScanState *state = (ZipperScanState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	ListCell   *lc;
	int			i = 0;

	/*
	 * A parallel-aware scan in a parallel worker takes them from the leader
	 * (zl_initialize_worker); one that is not (a partition's scan under a
	 * Parallel Append, run whole by one process) reads them itself.
	 */
	if (!IsParallelWorker() || !node->ss.ps.plan->parallel_aware)
		load_registration(state);

	/*
	 * PostgreSQL 15 gives a custom scan a virtual scan slot.  Replace it by
	 * the table's own (buffer heap tuple) slot and build the projection and
	 * filter again for it, so rows stay pinned tuples deformed only as far
	 * as the query needs (what PostgreSQL 16's CustomScanState.slotOps does).
	 */
	ExecInitScanTupleSlot(estate, &node->ss, RelationGetDescr(node->ss.ss_currentRelation),
						  table_slot_callbacks(node->ss.ss_currentRelation));
	ExecAssignScanProjectionInfoWithVarno(&node->ss, cscan->scan.scanrelid);
	node->ss.ps.qual = ExecInitQual(cscan->scan.plan.qual, &node->ss.ps);
	foreach(lc, bound_exprs(state, cscan))
	{
		OpExpr	   *op = lfirst(lc);
		List	   *info = list_nth(state->bounds_info, i++);
		Expr	   *arg = list_nth(op->args, 1 - linitial_int(info));

		state->bound_args = lappend(state->bound_args, ExecInitExpr(arg, &node->ss.ps));
		state->exec_params |= contains_exec_param((Node *) arg, NULL);
	}
	if (state->key_info != NIL)
	{
		List	   *terms = key_terms(state, cscan);

		state->key_probe = zl_keyprobe_init(terms, state->key_info, &state->opts,
											RelationGetDescr(node->ss.ss_currentRelation),
											&node->ss.ps);
		state->exec_params |= contains_exec_param((Node *) terms, NULL);
	}
	if (state->chunk_info != NIL)
	{
		List	   *clauses = chunk_clauses(state, cscan);

		state->chunk_filter = zl_chunkfilter_init(clauses, state->chunk_info, &node->ss.ps);
		state->chunk_values = AllocSetContextCreate(CurrentMemoryContext,
													"zipper_lake chunk predicates",
													ALLOCSET_SMALL_SIZES);
		state->exec_params |= contains_exec_param((Node *) clauses, NULL);
	}
	state->columns = columns_read(cscan, RelationGetDescr(node->ss.ss_currentRelation)->natts);
}

/* evaluate the bound expressions into scan bounds */
static ZLScanBounds
evaluate_bounds(ZipperScanState *state)
{
	ExprContext *econtext = state->css.ss.ps.ps_ExprContext;
	ZLScanBounds b = zl_bounds_init(state->either);
	ListCell   *lc1,
			   *lc2;

	forboth(lc1, state->bound_args, lc2, state->bounds_info)
	{
		List	   *info = lfirst(lc2);
		bool		isnull;
		Datum		value = ExecEvalExprSwitchContext(lfirst(lc1), econtext, &isnull);
		bool		is_from = lsecond_int(info) == state->opts.from_attnum;

		if (isnull)
		{
			/* a comparison with NULL is never true: an empty range */
			zl_bounds_narrow(&b, is_from, BTLessStrategyNumber, PG_INT64_MIN);
			continue;
		}
		zl_bounds_narrow(&b, is_from, lthird_int(info),
						 zl_datum_to_instant(value, state->opts.period_type));
	}
	ResetExprContext(econtext);
	return b;
}

static void
start_scan(ZipperScanState *state)
{
	EState	   *estate = state->css.ss.ps.state;
	ZLScanBounds bounds = evaluate_bounds(state);

	if (state->scan == NULL)
	{
		state->scan = state->pscan ?
			table_beginscan_parallel(state->css.ss.ss_currentRelation, state->pscan) :
			table_beginscan(state->css.ss.ss_currentRelation, estate->es_snapshot, 0, NULL);
		/* rescanned with new parameter values: keep the list of sub-groups */
		if (state->exec_params && state->pscan == NULL)
			zl_scan_keep_subgroups(state->scan);
		if (state->columns != NULL)
			zl_scan_set_columns(state->scan, state->columns);
	}
	if (state->chunk_filter != NULL)
	{
		MemoryContextReset(state->chunk_values);
		zl_chunkfilter_evaluate(state->chunk_filter, state->css.ss.ps.ps_ExprContext,
								state->chunk_values);
		zl_scan_set_chunk_filter(state->scan, state->chunk_filter);
	}
	/* with pruning off (since planning), every sub-group is read */
	if (state->key_probe != NULL && zipper_lake_enable_pruning)
	{
		ExprContext *econtext = state->css.ss.ps.ps_ExprContext;
		MemoryContext old = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
		int			nhashes;
		uint32	   *hashes = zl_keyprobe_hashes(state->key_probe, econtext, &nhashes);

		/* too many keys to probe (NULL): the filter finds them */
		zl_scan_set_keys(state->scan, hashes, nhashes);
		MemoryContextSwitchTo(old);
		ResetExprContext(econtext);
	}
	zl_scan_set_bounds(state->scan, &state->opts, &bounds);
}

static TupleTableSlot *
zl_next(ScanState *node)
{
	ZipperScanState *state = (ZipperScanState *) node;

	if (state->scan == NULL || state->restart)
	{
		start_scan(state);
		state->restart = false;
	}
	if (table_scan_getnextslot(state->scan, node->ps.state->es_direction,
							   node->ss_ScanTupleSlot))
		return node->ss_ScanTupleSlot;
	return NULL;
}

static void
check_unfiltered(PlanState *node)
{
	if (!IsA(node, CustomScanState) ||
		((CustomScanState *) node)->methods != &zl_exec_methods || node->qual != NULL)
		elog(ERROR, "zipper_lake aggregate expects an unfiltered ZipperScan below it");
}

/*
 * The next row of a ZipperScan that has no filter, as the scan returns it
 * (no projection), or NULL at the end: for an aggregate above it
 * (zl_aggregate.c), which need not go through the executor per row.
 */
TupleTableSlot *
zl_customscan_next_row(PlanState *node)
{
	check_unfiltered(node);
	return zl_next((ScanState *) node);
}

/* or the rows of a columnar chunk at once (zl_scan_next_batch), forward */
bool
zl_customscan_next_batch(PlanState *node, ZLRowBatch *batch)
{
	ZipperScanState *state = (ZipperScanState *) node;

	check_unfiltered(node);
	return state->scan != NULL && !state->restart &&
		ScanDirectionIsForward(node->state->es_direction) &&
		zl_scan_next_batch(state->scan, batch);
}

static bool
zl_recheck(ScanState *node, TupleTableSlot *slot)
{
	return true;
}

static TupleTableSlot *
zl_exec(CustomScanState *node)
{
	return ExecScan(&node->ss, zl_next, zl_recheck);
}

static void
end_scan(ZipperScanState *state)
{
	if (state->scan != NULL)
		table_endscan(state->scan);
	state->scan = NULL;
}

static void
zl_end(CustomScanState *node)
{
	ZipperScanState *state = (ZipperScanState *) node;

	end_scan(state);
	if (state->prune_scan != NULL)
		table_endscan(state->prune_scan);
	state->prune_scan = NULL;
}

static void
zl_rescan(CustomScanState *node)
{
	ZipperScanState *state = (ZipperScanState *) node;

	/*
	 * Parameters may have changed: evaluate bounds and keys again.  A serial
	 * scan with parameters (the inner side of a nested loop) keeps its scan
	 * and list of sub-groups; others start over.
	 */
	if (state->scan != NULL && state->exec_params && state->pscan == NULL)
	{
		table_rescan(state->scan, NULL);
		state->restart = true;
	}
	else
		end_scan(state);	/* a parallel leader's shared list stays */
	ExecScanReScan(&node->ss);
}

static void
zl_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	ZipperScanState *state = (ZipperScanState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	List	   *context;
	char	   *bounds;
	const ZLPruneStats *stats;

	context = set_deparse_context_plan(es->deparse_cxt, node->ss.ps.plan, ancestors);
	if (state->either)
	{
		/* two arms, one per column, as recognized */
		List	   *arms[2] = {NIL, NIL};
		ListCell   *lc1,
				   *lc2;

		forboth(lc1, cscan->custom_exprs, lc2, state->bounds_info)
		{
			int			arm = lsecond_int((List *) lfirst(lc2)) == state->opts.from_attnum ? 0 : 1;

			arms[arm] = lappend(arms[arm], lfirst(lc1));
		}
		bounds = deparse_expression((Node *) make_orclause(list_make2(make_ands_explicit(arms[0]),
																	  make_ands_explicit(arms[1]))),
									context, es->verbose, false);
	}
	else if (state->bounds_info != NIL)
		bounds = deparse_expression((Node *) make_ands_explicit(bound_exprs(state, cscan)),
									context, es->verbose, false);
	else
		bounds = NULL;
	if (bounds != NULL)
		ExplainPropertyText("Zipper Bounds", bounds, es);
	if (state->key_info != NIL)
		ExplainPropertyText("Key Probe",
							deparse_expression((Node *) make_ands_explicit(key_terms(state, cscan)),
											   context, es->verbose, false),
							es);
	if (state->chunk_info != NIL)
		ExplainPropertyText("Chunk Filter",
							deparse_expression((Node *) make_ands_explicit(chunk_clauses(state, cscan)),
											   context, es->verbose, false),
							es);
	if (!zipper_lake_enable_pruning)
		ExplainPropertyText("Pruning", "off", es);
	/* why not an index: the cheapest index path, which cost more */
	if (es->costs && list_length(cscan->custom_private) > 4 && list_nth(cscan->custom_private, 4) != NULL)
		ExplainPropertyText("Preferred To", strVal(list_nth(cscan->custom_private, 4)), es);

	/*
	 * Without ANALYZE, decide now unless the bounds depend on the run; the
	 * serial stats scan never touches a parallel scan's (gone) shared state.
	 */
	if (state->scan == NULL && !es->analyze && !state->exec_params)
	{
		state->pscan = NULL;
		start_scan(state);
	}
	if (state->scan == NULL && state->prune_scan == NULL)
		return;
	/* a parallel leader: what it pruned for all participants */
	stats = zl_scan_stats(state->prune_scan != NULL ? state->prune_scan : state->scan);
	ExplainPropertyText("Partitions", psprintf("%d of %d", stats->partitions_kept,
											   stats->partitions_total), es);
	ExplainPropertyText("File Groups", psprintf("%d of %d", stats->file_groups_kept,
												stats->file_groups_total), es);
	ExplainPropertyText("Sub-groups", psprintf("%d of %d, %d without row checks",
											   stats->subgroups_kept, stats->subgroups_total,
											   stats->subgroups_unchecked), es);
	if (state->key_info != NIL)
		ExplainPropertyText("Sub-groups by Key",
							stats->subgroups_key_probed + stats->subgroups_key_unindexed == 0 &&
							stats->subgroups_kept > 0 ? "not probed (too many keys)" :
							psprintf("%d of %d probed hold the keys, %d without a key directory",
									 stats->subgroups_key_matched, stats->subgroups_key_probed,
									 stats->subgroups_key_unindexed),
							es);
	if (es->verbose)
		ExplainPropertyInteger("Sub-groups Loaded", NULL, stats->subgroups_loaded, es);
	if (es->verbose && state->key_info != NIL)
		ExplainPropertyInteger("Sub-groups in Merged Key Index", NULL,
							   stats->subgroups_key_merged, es);
	/*
	 * Where the list came from, and how many sub-groups were read: a serial
	 * scan knows once it ran; a parallel one only with the shared list
	 * (else each participant loaded and read its own).
	 */
	if (state->prune_scan != NULL)
		ExplainPropertyText("Metadata",
							stats->metadata_from_catalog ?
							"catalog (leader), shared with workers" :
							"cache (leader), shared with workers", es);
	else if (es->analyze && state->pscan == NULL)
		ExplainPropertyText("Metadata", stats->metadata_from_catalog ?
							"catalog" : "cache", es);
	if (es->analyze && (state->shared_counted || state->pscan == NULL))
		ExplainPropertyInteger("Sub-groups Read", NULL,
							   state->shared_counted ? state->shared_read :
							   stats->subgroups_read, es);
	if (es->analyze)
		ExplainPropertyInteger("Rows Masked", NULL,
							   state->shared_counted ? state->shared_masked :
							   stats->rows_masked, es);
	if (es->analyze && stats->chunks_total > 0)
		ExplainPropertyText("Chunks",
							psprintf(INT64_FORMAT " read, " INT64_FORMAT " skipped by min/max",
									 stats->chunks_total - stats->chunks_skipped,
									 stats->chunks_skipped),
							es);
}

/* ---------- parallel execution: the leader's shared list ---------- */

/*
 * The shared memory of a parallel ZipperScan: the table access method's
 * parallel scan descriptor, then (at a MAXALIGNed offset) the list of
 * sub-groups the leader kept, which it loads and prunes now: parameters
 * other than PARAM_EXEC ones are known.  Without a shared list (bounds
 * that use PARAM_EXEC values, which a rescan may change; masks too large)
 * every participant loads its own, as before.
 */
static Size
zl_estimate_dsm(CustomScanState *node, ParallelContext *pcxt)
{
	ZipperScanState *state = (ZipperScanState *) node;
	Relation	rel = node->ss.ss_currentRelation;
	Snapshot	snapshot = node->ss.ps.state->es_snapshot;
	Size		size = table_parallelscan_estimate(rel, snapshot);
	Size		shared;

	if (state->exec_params)
		return size;
	if (state->prune_scan == NULL)
	{
		ZLScanBounds bounds = evaluate_bounds(state);

		state->prune_scan = table_beginscan(rel, snapshot, 0, NULL);
		zl_scan_set_bounds(state->prune_scan, &state->opts, &bounds);
	}
	shared = zl_scan_shared_size(state->prune_scan);
	if (shared == 0)
	{
		table_endscan(state->prune_scan);
		state->prune_scan = NULL;
		return size;
	}
	return add_size(MAXALIGN(size), shared);
}

static void
zl_initialize_dsm(CustomScanState *node, ParallelContext *pcxt, void *coordinate)
{
	ZipperScanState *state = (ZipperScanState *) node;
	Relation	rel = node->ss.ss_currentRelation;
	Snapshot	snapshot = node->ss.ps.state->es_snapshot;

	state->pscan = coordinate;
	table_parallelscan_initialize(rel, state->pscan, snapshot);
	if (state->prune_scan != NULL)
		zl_scan_share(state->prune_scan, state->pscan,
					  MAXALIGN(table_parallelscan_estimate(rel, snapshot)));
}

/*
 * Before the Gather detaches the shared memory: what all participants
 * read, for EXPLAIN ANALYZE.
 */
static void
zl_shutdown(CustomScanState *node)
{
	ZipperScanState *state = (ZipperScanState *) node;

	if (state->pscan != NULL)
		state->shared_counted = zl_scan_shared_counts(state->pscan, &state->shared_read,
													  &state->shared_masked);
}

static void
zl_reinitialize_dsm(CustomScanState *node, ParallelContext *pcxt, void *coordinate)
{
	table_parallelscan_reinitialize(node->ss.ss_currentRelation, coordinate);
}

static void
zl_initialize_worker(CustomScanState *node, shm_toc *toc, void *coordinate)
{
	ZipperScanState *state = (ZipperScanState *) node;

	state->pscan = coordinate;
	if (!zl_scan_shared_options(state->pscan, &state->opts))
		load_registration(state);
}

void
zl_customscan_init(void)
{
	RegisterCustomScanMethods(&zl_scan_methods);
	prev_set_rel_pathlist = set_rel_pathlist_hook;
	set_rel_pathlist_hook = zl_set_rel_pathlist;
}
