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
 * A writer enters its rows before its sub-group's catalog row exists, so
 * while one is in progress its entries could look dead.  So the pass
 * takes the table's writer lock (zl_write_lock_table) -- when a writer
 * holds it, the pass is skipped and VACUUM says so; the next VACUUM does
 * it -- notes the first TID block not taken yet and lets the lock go:
 * writers after that take blocks from there on (the counter is only
 * moved under the lock), and the pass judges no entry of such a block.
 * Writes go on while the pass runs, as heap's go on during its index
 * vacuuming; what they mask or delete meanwhile is not dead by the
 * horizon the pass took, so its entries stay for the next VACUUM.
 * The sub-groups still there, with the bits of their masked positions,
 * are held in memory: as many as fit maintenance_work_mem (autovacuum's
 * autovacuum_work_mem), a range of TID blocks at a time, each range one
 * pass over every index that judges only the entries in it -- as heap
 * makes a pass per memory-full of dead TIDs.  Before the first entry goes,
 * the pass logs a standby conflict with its horizon: a hot standby's query
 * whose snapshot still sees a masked row must not lose its entry (heap
 * gets this from pruning its rows first).  Each entry is judged by
 * zl_index_entry_dead (src/write/zl_index_hidden.c), which btree's
 * bottom-up deletion also asks between VACUUMs.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write.h"
#include "lifecycle/zl_lifecycle.h"

#include "access/genam.h"
#include "access/multixact.h"
#include "commands/vacuum.h"
#include "miscadmin.h"
#include "postmaster/autovacuum.h"
#include "storage/procarray.h"
#include "utils/memutils.h"
#include "utils/rel.h"

/*
 * VACUUM's pass over the indexes of a zipper table; rows: the live rows,
 * for the index AMs' statistics.
 */
void
zl_index_vacuum(Relation rel, BufferAccessStrategy bstrategy, int64 rows, int elevel)
{
	uint64		storage_id = zl_storage_id(rel);
	/* the sub-groups' catalog rows are seen from this database only */
	TransactionId oldest_xmin = GetOldestNonRemovableTransactionId(rel);
	Size		budget = (Size) (IsAutoVacuumWorkerProcess() && autovacuum_work_mem != -1 ?
								 autovacuum_work_mem : maintenance_work_mem) * 1024;
	Relation   *indexes;
	int			nindexes;
	ZLDeadEntries d;
	IndexVacuumInfo info;
	IndexBulkDeleteResult **stats;
	MemoryContext pass_context;

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
	d.taken = zl_storage_next_tid_block(rel, zl_meta_tid_blocks_used);
	d.unowned_dead = true;
	zl_write_unlock_table(storage_id);
	d.conflict_rel = rel;
	d.conflict_horizon = zl_full_xid_before(oldest_xmin);
	d.conflict_logged = false;

	stats = palloc0(sizeof(IndexBulkDeleteResult *) * nindexes);
	memset(&info, 0, sizeof(info));
	info.estimated_count = true;
	info.message_level = elevel;
	info.num_heap_tuples = (double) rows;
	info.strategy = bstrategy;
	pass_context = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake index vacuum pass",
										 ALLOCSET_DEFAULT_SIZES);
	d.next = 0;
	do
	{
		MemoryContext old = MemoryContextSwitchTo(pass_context);

		d.lo = d.next;
		d.sgs = zl_meta_load_subgroups_not_dead(storage_id, oldest_xmin, d.lo, budget,
												&d.n, &d.next);
		d.starts = zl_tid_block_starts(d.sgs, d.n);
		MemoryContextSwitchTo(old);		/* the AMs' statistics outlive the pass */
		for (int i = 0; i < nindexes; i++)
		{
			info.index = indexes[i];
			stats[i] = index_bulk_delete(&info, stats[i], zl_index_entry_dead, &d);
		}
		MemoryContextReset(pass_context);
	} while (d.next >= 0);
	MemoryContextDelete(pass_context);

	for (int i = 0; i < nindexes; i++)
	{
		info.index = indexes[i];
		stats[i] = index_vacuum_cleanup(&info, stats[i]);
		if (stats[i] == NULL)
			continue;
		ereport(elevel,
				(errmsg("zipper_lake table \"%s\": index \"%s\" now has %.0f entries, %.0f of hidden rows removed",
						RelationGetRelationName(rel), RelationGetRelationName(indexes[i]),
						stats[i]->num_index_tuples, stats[i]->tuples_removed)));
		if (!stats[i]->estimated_count)
			vac_update_relstats(indexes[i], stats[i]->num_pages, stats[i]->num_index_tuples, 0,
								false, InvalidTransactionId, InvalidMultiXactId,
								NULL, NULL, false);
		pfree(stats[i]);
	}
	pfree(stats);
	vac_close_indexes(nindexes, indexes, NoLock);
}
