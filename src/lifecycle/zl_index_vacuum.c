/*-------------------------------------------------------------------------
 *
 * zl_index_vacuum.c
 *	  VACUUM removes the index entries of rows no snapshot can see.
 *
 * Writes enter every row of the sub-groups they write into the table's
 * indexes (src/write/zl_index_rows.c) and never take an entry out: a row
 * that a mask hides, or whose sub-group compaction, a merge, relocation,
 * retention or erase replaced, keeps its entry, which fetches then find
 * invisible.  VACUUM's index pass removes those entries: an entry is dead
 * when the TID block it names belongs to no sub-group whose catalog row is
 * still there for someone (not dead by the catalog's oldest xmin: a
 * snapshot may see it, or its writer is in progress), or when a mask that
 * every snapshot sees covers its position.  TIDs are never given twice
 * (README "Row identifiers"), so no entry can come to name another row,
 * and blocks freed by deleted sub-groups need not wait for this pass
 * before writers take them again.
 *
 * The pass holds the table's writer lock (zl_write_lock_table): a writer
 * enters its rows before its sub-group's catalog row exists, so while one
 * is in progress its entries could look dead.  When a writer holds the
 * table, the pass is skipped and VACUUM says so; the next VACUUM does it.
 * The sub-groups still there, with the bits of their masked positions,
 * are held in memory during the pass: a bit per row position of the
 * table's sub-groups.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "lifecycle/zl_lifecycle.h"

#include "access/genam.h"
#include "access/multixact.h"
#include "commands/vacuum.h"
#include "storage/procarray.h"
#include "utils/rel.h"

typedef struct DeadEntries
{
	ZLSubGroup *sgs;			/* still there for someone, by first_tid_block */
	int			n;
} DeadEntries;

/* IndexBulkDeleteCallback: is the entry of this TID dead? */
static bool
entry_is_dead(ItemPointer tid, void *state)
{
	DeadEntries *d = state;
	int64		block = ItemPointerGetBlockNumber(tid);
	int			lo = zl_tid_block_candidate(d->sgs, d->n, block);

	if (lo < 0)
		return true;
	/* sub-groups own disjoint blocks; an updated catalog row leaves two versions */
	for (int i = lo; i >= 0 && d->sgs[i].first_tid_block == d->sgs[lo].first_tid_block; i--)
	{
		int64		position = zl_tid_position(&d->sgs[i], tid);

		if (position >= 0 && !ZL_ROW_MASKED(&d->sgs[i], position))
			return false;
	}
	return true;
}

/*
 * VACUUM's pass over the indexes of a zipper table; rows: the live rows,
 * for the index AMs' statistics.
 */
void
zl_index_vacuum(Relation rel, BufferAccessStrategy bstrategy, int64 rows, int elevel)
{
	uint64		storage_id = zl_storage_id(rel);
	Relation   *indexes;
	int			nindexes;
	DeadEntries d;

	if (!RelationGetForm(rel)->relhasindex)
		return;
	vac_open_indexes(rel, RowExclusiveLock, &nindexes, &indexes);
	if (nindexes == 0)
	{
		vac_close_indexes(nindexes, indexes, NoLock);
		return;
	}
	if (!zl_write_lock_table(storage_id, true))
	{
		ereport(elevel,
				(errmsg("zipper_lake table \"%s\": index entries of hidden rows not removed: a writer holds the table",
						RelationGetRelationName(rel)),
				 errhint("VACUUM it again.")));
		vac_close_indexes(nindexes, indexes, NoLock);
		return;
	}

	d.sgs = zl_meta_load_subgroups_not_dead(storage_id,
											GetOldestNonRemovableTransactionId(NULL), &d.n);
	zl_sort_by_tid_block(d.sgs, d.n);
	for (int i = 0; i < nindexes; i++)
	{
		IndexVacuumInfo info;
		IndexBulkDeleteResult *stats;

		memset(&info, 0, sizeof(info));
		info.index = indexes[i];
		info.estimated_count = true;
		info.message_level = elevel;
		info.num_heap_tuples = (double) rows;
		info.strategy = bstrategy;
		stats = index_bulk_delete(&info, NULL, entry_is_dead, &d);
		stats = index_vacuum_cleanup(&info, stats);
		if (stats == NULL)
			continue;
		ereport(elevel,
				(errmsg("zipper_lake table \"%s\": index \"%s\" now has %.0f entries, %.0f of hidden rows removed",
						RelationGetRelationName(rel), RelationGetRelationName(indexes[i]),
						stats->num_index_tuples, stats->tuples_removed)));
		if (!stats->estimated_count)
			vac_update_relstats(indexes[i], stats->num_pages, stats->num_index_tuples, 0,
								false, InvalidTransactionId, InvalidMultiXactId,
								NULL, NULL, false);
		pfree(stats);
	}
	zl_write_unlock_table(storage_id);
	vac_close_indexes(nindexes, indexes, NoLock);
}
