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
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "catalog/zl_catalog.h"
#include "planner/zl_planner.h"

#include "access/table.h"
#include "optimizer/plancat.h"
#include "utils/rel.h"

static get_relation_info_hook_type prev_get_relation_info = NULL;

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
	if (inhparent || (rel->indexlist == NIL && !index_build) || !is_zipper_table(relid))
		return;
	foreach(lc, rel->indexlist)
	{
		IndexOptInfo *index = lfirst(lc);

		for (int i = 0; i < index->ncolumns; i++)
			index->canreturn[i] = false;
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
