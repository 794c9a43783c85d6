/*-------------------------------------------------------------------------
 *
 * zl_scrub.c
 *	  Wiping erased bytes: what VACUUM does after zipper_lake.erase().
 *
 * README "Lifecycle".  erase() (zl_erase.c) leaves the bytes of the
 * erased rows in two places, both out of reach of every new snapshot but
 * still in the files: the blocks of the sub-groups it rewrote (now free
 * extents, zl_freespace.c), and the TOAST rows it deleted.  Each erase
 * counts a request on the metapage; VACUUM (zl_tableam.c) wipes while
 * requests are open:
 *
 *  - the pages of every free extent that no snapshot can reach are zeroed
 *    (zl_free_space_wipe), under the writer lock, so that no writer takes
 *    free blocks meanwhile;
 *  - the TOAST relation is vacuumed first (heap's own VACUUM, which
 *    removes the deleted rows once no snapshot can see them; vacuum_rel
 *    visits it again afterwards, finding nothing to do), then the free
 *    space inside each of its pages, where pruning leaves the bytes of the
 *    rows it removed, is zeroed and the page logged as a full-page image
 *    (which stores no free space: a standby's copy is wiped by the replay).
 *
 * The requests are settled only when no free extent waited for an older
 * snapshot and no TOAST page still holds a deleted row (one a snapshot
 * can see, or that VACUUM could not prune without a cleanup lock).  Until
 * then every VACUUM wipes again.  Not wiped: blocks written by aborted
 * transactions (zipper_lake.reclaim() makes them free extents), and WAL
 * and backups written before the wipe, which age out with them.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "write/zl_write.h"
#include "lifecycle/zl_lifecycle.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xloginsert.h"
#include "commands/vacuum.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/bufpage.h"
#include "storage/lmgr.h"
#include "storage/procarray.h"
#include "utils/rel.h"

/* does the page still hold a row deleted but not removed (by VACUUM)? */
static bool
holds_dead_rows(Relation rel, Buffer buffer, Page page, TransactionId oldest_xmin)
{
	OffsetNumber maxoff = PageGetMaxOffsetNumber(page);

	for (OffsetNumber off = FirstOffsetNumber; off <= maxoff; off++)
	{
		ItemId		itemid = PageGetItemId(page, off);
		HeapTupleData tuple;
		HTSV_Result result;

		if (!ItemIdIsNormal(itemid))
			continue;
		tuple.t_data = (HeapTupleHeader) PageGetItem(page, itemid);
		tuple.t_len = ItemIdGetLength(itemid);
		tuple.t_tableOid = RelationGetRelid(rel);
		ItemPointerSet(&tuple.t_self, BufferGetBlockNumber(buffer), off);
		result = HeapTupleSatisfiesVacuum(&tuple, oldest_xmin, buffer);
		if (result == HEAPTUPLE_DEAD || result == HEAPTUPLE_RECENTLY_DEAD ||
			result == HEAPTUPLE_DELETE_IN_PROGRESS)
			return true;
	}
	return false;
}

/*
 * Zero the free space inside every page of a heap relation; returns pages
 * changed.  *complete: no page still holds deleted rows (VACUUM could not
 * remove them yet: a snapshot sees them, or no cleanup lock was had).
 */
static int64
wipe_free_space(Relation rel, BufferAccessStrategy strategy, bool *complete)
{
	BlockNumber nblocks = RelationGetNumberOfBlocks(rel);
	TransactionId oldest_xmin = GetOldestNonRemovableTransactionId(rel);
	int64		wiped = 0;

	*complete = true;
	for (BlockNumber block = 0; block < nblocks; block++)
	{
		Buffer		buffer = ReadBufferExtended(rel, MAIN_FORKNUM, block, RBM_NORMAL, strategy);
		Page		page = BufferGetPage(buffer);

		CHECK_FOR_INTERRUPTS();
		LockBuffer(buffer, BUFFER_LOCK_EXCLUSIVE);
		if (!PageIsNew(page) && holds_dead_rows(rel, buffer, page, oldest_xmin))
			*complete = false;
		if (!PageIsNew(page) && PageGetMaxOffsetNumber(page) <= MaxHeapTuplesPerPage &&
			((PageHeader) page)->pd_lower >= SizeOfPageHeaderData &&
			((PageHeader) page)->pd_upper <= BLCKSZ)
		{
			PageHeader	header = (PageHeader) page;
			Size		hole = header->pd_upper > header->pd_lower ?
				header->pd_upper - header->pd_lower : 0;

			if (!zl_bytes_are_zero((char *) page + header->pd_lower, hole))
			{
				START_CRIT_SECTION();
				memset((char *) page + header->pd_lower, 0, hole);
				MarkBufferDirty(buffer);
				if (RelationNeedsWAL(rel))
					log_newpage_buffer(buffer, true);
				END_CRIT_SECTION();
				wiped++;
			}
		}
		UnlockReleaseBuffer(buffer);
	}
	return wiped;
}

/*
 * VACUUM's part: wipe if erases asked for it (see the header comment).
 */
void
zl_scrub_vacuum(Relation rel, struct VacuumParams *params, BufferAccessStrategy bstrategy,
				int elevel)
{
	uint64		requests = zl_storage_scrub_due(rel);
	uint64		storage_id = zl_storage_id(rel);
	bool		complete;
	int64		pages;
	int64		toast_pages = 0;

	if (requests == 0)
		return;
	if (!zl_write_lock_table(storage_id, true))
	{
		ereport(elevel,
				(errmsg("zipper_lake table \"%s\": erased bytes not wiped: a writer holds the table",
						RelationGetRelationName(rel)),
				 errhint("VACUUM it again.")));
		return;
	}
	pages = zl_free_space_wipe(rel, bstrategy, &complete);
	zl_write_unlock_table(storage_id);	/* writers may take free blocks again */
	if (OidIsValid(rel->rd_rel->reltoastrelid))
	{
		Relation	toast = table_open(rel->rd_rel->reltoastrelid, ShareUpdateExclusiveLock);
		bool		toast_complete;

		table_relation_vacuum(toast, params, bstrategy);
		toast_pages = wipe_free_space(toast, bstrategy, &toast_complete);
		complete &= toast_complete;
		table_close(toast, NoLock);
	}
	if (complete)
		zl_storage_scrub_done(rel, requests);
	ereport(elevel,
			(errmsg("zipper_lake table \"%s\": wiped " INT64_FORMAT " free pages and the free space of " INT64_FORMAT " TOAST pages after erase",
					RelationGetRelationName(rel), pages, toast_pages),
			 complete ? 0 :
			 errdetail("Some free blocks are still visible to older snapshots: the next VACUUM wipes them.")));
}
