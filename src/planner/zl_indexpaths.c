/*-------------------------------------------------------------------------
 *
 * zl_indexpaths.c
 *	  What the planner may do with the indexes of a zipper table.
 *
 * Index scans and bitmap scans fetch rows by TID and check them under the
 * reader's snapshot (src/access/zl_tidfetch.c).  Index-only scans would
 * answer from the index alone wherever the visibility map says a block is
 * all visible; a zipper table keeps no visibility map (visibility is the
 * catalog's), so such a scan would fetch every row anyway, at the costs of
 * an index-only scan.  So, as Citus does for its columnar tables, no index
 * of a zipper table offers to return columns: the planner never chooses
 * an index-only scan.
 *
 * Index builds are serial (src/access/zl_index_build.c): the planning that
 * CREATE INDEX does to choose its workers (plan_create_index_workers, a
 * query of one relation and no join tree) gets none for a zipper table.
 *
 * Costs.  A fetch of a history row decodes the chunk that holds it
 * (1,024 rows, every column); fetches in TID order -- a bitmap scan's, an
 * index scan's over one key value -- decode each chunk once, since the
 * reader keeps the chunk read last.  The index access method's estimate
 * is kept and the decoding added: the rows the index selects, of the
 * history's share of the table (all but the open versions, by the
 * planner's statistics of the period's end column), fall into
 * C (1 - e^(-n/C)) distinct chunks of the C the history holds
 * (zipper_lake.columnar_chunk_rows each), each decoded at
 * ZL_CHUNK_COLUMN_DECODE_COST a column, and each row is formed from its
 * columns (cpu_operator_cost a column).  Measured: a bitmap scan fetching
 * 2% of 200k history rows took 1.3x the ZipperScan's time, one fetching
 * five rows 1/50 of it; these constants put the crossover there.  The planner then
 * weighs index paths against the ZipperScan's pruning (whose EXPLAIN
 * names the cheapest index path it was preferred to, zl_customscan.c).
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "common/zl_guc.h"
#include "catalog/zl_catalog.h"
#include "planner/zl_planner.h"

#include "access/amapi.h"
#include "access/table.h"
#include "catalog/pg_type_d.h"
#include "nodes/makefuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/plancat.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/typcache.h"

/* decoding one column of a 1,024-row chunk, in units of seq_page_cost */
#define ZL_CHUNK_COLUMN_DECODE_COST	1.0

static get_relation_info_hook_type prev_get_relation_info = NULL;

/* the history's share of a table's rows and its columns, per planning */
typedef struct HistoryShape
{
	PlannerInfo *root;			/* with relid, table and tuples: the key */
	Index		relid;
	Oid			table;
	double		tuples;
	double		history_rows;
	int			natts;
} HistoryShape;

static HistoryShape last_shape;

/* the share of the rows that are open versions, by the end column's statistics */
static Selectivity
open_share(PlannerInfo *root, RelOptInfo *rel, const ZLTableOptions *opts)
{
	TypeCacheEntry *type = lookup_type_cache(opts->period_type, TYPECACHE_EQ_OPR);
	int16		typlen;
	bool		typbyval;
	Expr	   *clause;

	if (!OidIsValid(type->eq_opr))
		return 0.0;
	get_typlenbyval(opts->period_type, &typlen, &typbyval);
	clause = make_opclause(type->eq_opr, BOOLOID, false,
						   (Expr *) makeVar(rel->relid, opts->to_attnum, opts->period_type,
											opts->period_typmod, InvalidOid, 0),
						   (Expr *) makeConst(opts->period_type, opts->period_typmod, InvalidOid,
											  typlen, zl_instant_to_datum(opts->open_end,
																		  opts->period_type),
											  false, typbyval),
						   InvalidOid, InvalidOid);
	return clause_selectivity(root, (Node *) clause, rel->relid, JOIN_INNER, NULL);
}

/* how many rows of the table are history written columnar, and its columns */
static const HistoryShape *
history_shape(PlannerInfo *root, RelOptInfo *rel)
{
	Oid			table = planner_rt_fetch(rel->relid, root)->relid;
	Relation	relation;
	ZLTableOptions opts;

	if (last_shape.root == root && last_shape.relid == rel->relid &&
		last_shape.table == table && last_shape.tuples == rel->tuples)
		return &last_shape;
	relation = table_open(table, NoLock);
	last_shape.root = root;
	last_shape.relid = rel->relid;
	last_shape.table = table;
	last_shape.tuples = rel->tuples;
	last_shape.natts = RelationGetDescr(relation)->natts;
	last_shape.history_rows = 0;
	if (zl_meta_load_options(relation, &opts, false) && opts.history_format == ZL_FORMAT_COLUMNAR)
		last_shape.history_rows = rel->tuples * (1.0 - open_share(root, rel, &opts));
	table_close(relation, NoLock);
	return &last_shape;
}

/* the index access method's estimator, by access method (few of them) */
static amcostestimate_function
am_estimator(Oid amoid)
{
	static Oid	amoids[16];
	static amcostestimate_function estimators[16];
	static int	n = 0;
	IndexAmRoutine *routine;

	for (int i = 0; i < n; i++)
		if (amoids[i] == amoid)
			return estimators[i];
	routine = GetIndexAmRoutineByAmId(amoid, false);
	if (n < lengthof(amoids))
	{
		amoids[n] = amoid;
		estimators[n++] = routine->amcostestimate;
	}
	return routine->amcostestimate;
}

/* the access method's estimate, plus decoding the history chunks fetched */
static void
zl_index_cost_estimate(PlannerInfo *root, IndexPath *path, double loop_count,
					   Cost *startup_cost, Cost *total_cost, Selectivity *selectivity,
					   double *correlation, double *pages)
{
	IndexOptInfo *index = path->indexinfo;
	const HistoryShape *shape;
	double		chunks,
				fetched;

	am_estimator(index->relam) (root, path, loop_count, startup_cost, total_cost,
								selectivity, correlation, pages);
	shape = history_shape(root, index->rel);
	if (shape->history_rows < 1)
		return;
	chunks = ceil(shape->history_rows / zipper_lake_columnar_chunk_rows);
	fetched = *selectivity * shape->history_rows;
	*total_cost += chunks * (1.0 - exp(-fetched / chunks)) *
		shape->natts * ZL_CHUNK_COLUMN_DECODE_COST * seq_page_cost +
		fetched * shape->natts * cpu_operator_cost;
}

static bool
is_zipper_table(Oid relid)
{
	Relation	relation = table_open(relid, NoLock);	/* locked by the planner */
	bool		zipper = zl_is_zipper_relation(relation);

	table_close(relation, NoLock);
	return zipper;
}

static void
zl_get_relation_info(PlannerInfo *root, Oid relid, bool inhparent, RelOptInfo *rel)
{
	bool		index_build = root->parse->jointree == NULL;
	ListCell   *lc;

	if (prev_get_relation_info)
		prev_get_relation_info(root, relid, inhparent, rel);
	/* plan_create_index_workers marks its table as an inheritance parent */
	if ((inhparent && !index_build) || (rel->indexlist == NIL && !index_build) ||
		!is_zipper_table(relid))
		return;
	foreach(lc, rel->indexlist)
	{
		IndexOptInfo *index = lfirst(lc);

		for (int i = 0; i < index->ncolumns; i++)
			index->canreturn[i] = false;
		index->amcostestimate = (void (*) ()) zl_index_cost_estimate;
	}
	if (index_build)
		rel->rel_parallel_workers = 0;
}

void
zl_indexpaths_init(void)
{
	prev_get_relation_info = get_relation_info_hook;
	get_relation_info_hook = zl_get_relation_info;
}
