/*-------------------------------------------------------------------------
 *
 * zl_freespace.c
 *	  Reusing the blocks of deleted sub-groups.
 *
 * Sub-groups are immutable, but they are deleted: compaction rewrites a
 * current-partition sub-group that is mostly masked (apply_changes and
 * loads, zl_compact.c), and
 * registration rewrites unplaced ones (zl_write.c).  Deleting a sub-group's
 * metadata row also records its block range in zipper_lake.free_extent,
 * with the id of the deleting transaction (zl_meta_delete_subgroup).
 *
 * When free blocks may be written again
 * -------------------------------------
 * A reader takes the list of sub-groups from its snapshot, so a reader
 * whose snapshot predates the deletion may still read the old blocks.
 * They may be overwritten once no snapshot can see the deleted row any
 * more: once freed_by is older than the horizon that
 * GlobalVisCheckRemovableFullXid() tests for the table, the test btree uses
 * to recycle pages.  The horizon covers the snapshots of this database's
 * sessions and those that standbys report with hot_standby_feedback.  Other queries on
 * standbys are cancelled by a recovery conflict: before reusing an extent
 * the writer logs a WAL record whose replay resolves conflicts with
 * snapshots that could see a transaction (freed_by) in a relation.  Core
 * has exactly such a record, btree's REUSE_PAGE, which modifies no page;
 * we log it for our relation, so pg_waldump shows "Btree REUSE_PAGE"
 * records for zipper tables.  The record precedes the full-page images of
 * the reused blocks in WAL.
 *
 * How extents are taken
 * ---------------------
 * A flush (zl_subgroup_write.c) loads the table's reusable extents once.  Each
 * sub-group it writes knows its size in pages before writing (a page
 * counter runs the page writer's packing over the rows' lengths), and
 * takes the smallest free extent that holds it — extents that touch count
 * as one.  At the end of the flush the catalog rows of what it took are
 * deleted and the remainders inserted again, in one statement for all
 * (zl_free_space_end; a write that fails rolls back anyway).  If none holds it, the largest is filled with as many of the
 * (sorted) rows as fit, if that makes a sub-group of a useful size, and the
 * rest goes on as further sub-groups; so a table whose batches keep
 * growing still reuses what earlier, smaller batches freed.  Otherwise the
 * sub-group is appended at the end of the file.
 * Writers of a table are serialized (zl_write_lock_table), so no two take
 * the same extent.  A writer that aborts gives its extents back with its
 * catalog changes; the pages it wrote into them are unreachable, which is
 * harmless.
 *
 * Blocks appended by transactions that aborted belong to no sub-group and
 * to no free extent.  zipper_lake.reclaim() finds them: holding the
 * writer lock, so that no write is in progress, it records every block
 * that no visible sub-group and no free extent covers as free.  Their
 * freed_by is the next transaction id: nothing should be able to see
 * those blocks, but should a snapshot older than the call reach them after
 * all, they are not reused before it ends.
 *
 * Giving space back
 * -----------------
 * Blocks at the end of the file that the catalog does not refer to are
 * truncated by VACUUM (zl_free_space_truncate); reclaim() leaves the free
 * space it finds at the end of the file in that state rather than
 * recording it, where VACUUM would cut it (zl_free_space_worth_truncating).
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write_internal.h"

#include "access/nbtxlog.h"
#include "access/table.h"
#include "access/xlog.h"
#include "access/xloginsert.h"
#include "catalog/storage.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "utils/rel.h"
#include "utils/wait_event.h"
#include "utils/snapmgr.h"

struct ZLFreeSpace
{
	Relation	rel;
	uint64		storage_id;
	ZLFreeExtent *extents;		/* reusable now */
	int			nextents;
	ZLFreeExtent *taken;		/* ranges taken, recorded at the end */
	int			ntaken;
	int			maxtaken;
};

/*
 * The free extents of a table that no snapshot can reach any more, those
 * that touch merged into one (freed_by: the newest of them).
 */
ZLFreeSpace *
zl_free_space_begin(Relation rel, uint64 storage_id)
{
	ZLFreeSpace *fs = palloc0(sizeof(ZLFreeSpace));
	int			n;
	ZLFreeExtent *all = zl_meta_load_free_extents(storage_id, GetLatestSnapshot(), &n);

	fs->rel = rel;
	fs->storage_id = storage_id;
	fs->extents = palloc(sizeof(ZLFreeExtent) * Max(n, 1));
	for (int i = 0; i < n; i++)		/* by first block */
	{
		ZLFreeExtent *last = fs->nextents > 0 ? &fs->extents[fs->nextents - 1] : NULL;

		if (!GlobalVisCheckRemovableFullXid(rel, all[i].freed_by))
			continue;
		if (last && last->first_block + last->blocks == all[i].first_block)
		{
			last->blocks += all[i].blocks;
			if (FullTransactionIdFollows(all[i].freed_by, last->freed_by))
				last->freed_by = all[i].freed_by;
		}
		else
			fs->extents[fs->nextents++] = all[i];
	}
	if (all)
		pfree(all);
	return fs;
}

/* keep only the free blocks below a block */
void
zl_free_space_limit(ZLFreeSpace *fs, BlockNumber below)
{
	int			kept = 0;

	for (int i = 0; i < fs->nextents; i++)
	{
		ZLFreeExtent extent = fs->extents[i];

		if (extent.first_block >= below)
			continue;
		extent.blocks = Min(extent.blocks, below - extent.first_block);
		fs->extents[kept++] = extent;
	}
	fs->nextents = kept;
}

/*
 * The free blocks below a block that a write could take now (a flush
 * limited by zl_write_state_reuse_below): those of the largest run, and
 * all of them.
 */
void
zl_free_space_below(Relation rel, uint64 storage_id, BlockNumber below,
					BlockNumber *largest, BlockNumber *total)
{
	ZLFreeSpace *fs = zl_free_space_begin(rel, storage_id);

	zl_free_space_limit(fs, below);
	*largest = zl_free_space_largest(fs);
	*total = 0;
	for (int i = 0; i < fs->nextents; i++)
		*total += fs->extents[i].blocks;
	pfree(fs->extents);
	pfree(fs);
}

/* blocks of the largest free extent, 0 if none */
BlockNumber
zl_free_space_largest(const ZLFreeSpace *fs)
{
	BlockNumber largest = 0;

	for (int i = 0; i < fs->nextents; i++)
		largest = Max(largest, fs->extents[i].blocks);
	return largest;
}

/*
 * Make standbys cancel queries whose snapshots could still see what
 * freed_by deleted, before the blocks it freed are overwritten (or, for
 * VACUUM's index pass, before the entries of rows hidden by then go).
 * Like btree's, the conflict is resolved for the whole database, not just
 * this table.
 */
#if PG_VERSION_NUM >= 160000
#error "the btree REUSE_PAGE record changed in PostgreSQL 16: port zl_log_standby_conflict()"
#endif
void
zl_log_standby_conflict(Relation rel, BlockNumber block, FullTransactionId freed_by)
{
	xl_btree_reuse_page xlrec;

	if (!RelationNeedsWAL(rel) || !XLogStandbyInfoActive())
		return;
	xlrec.node = rel->rd_node;
	xlrec.block = block;
	xlrec.latestRemovedFullXid = freed_by;
	XLogBeginInsert();
	XLogRegisterData((char *) &xlrec, SizeOfBtreeReusePage);
	(void) XLogInsert(RM_BTREE_ID, XLOG_BTREE_REUSE_PAGE);
}

/*
 * Take blocks consecutive free blocks (best fit): returns the first, or
 * InvalidBlockNumber if no free extent is large enough.
 */
BlockNumber
zl_free_space_take(ZLFreeSpace *fs, BlockNumber blocks)
{
	int			best = -1;
	ZLFreeExtent *extent;
	BlockNumber first;

	for (int i = 0; i < fs->nextents; i++)
		if (fs->extents[i].blocks >= blocks &&
			(best < 0 || fs->extents[i].blocks < fs->extents[best].blocks))
			best = i;
	if (best < 0 || blocks == 0)
		return InvalidBlockNumber;

	extent = &fs->extents[best];
	first = extent->first_block;
	if (fs->ntaken == fs->maxtaken)
	{
		fs->maxtaken = Max(16, fs->maxtaken * 2);
		fs->taken = fs->taken == NULL ? palloc(sizeof(ZLFreeExtent) * fs->maxtaken) :
			repalloc(fs->taken, sizeof(ZLFreeExtent) * fs->maxtaken);
	}
	fs->taken[fs->ntaken].first_block = first;
	fs->taken[fs->ntaken++].blocks = blocks;
	zl_log_standby_conflict(fs->rel, first, extent->freed_by);

	extent->first_block += blocks;
	extent->blocks -= blocks;
	if (extent->blocks == 0)
		*extent = fs->extents[--fs->nextents];
	return first;
}

/*
 * Zero the pages of the free extents no snapshot can reach any more (the
 * bytes of erased rows, zl_scrub.c), each page logged as a full-page image
 * after the standby conflict a reuse logs first.  *complete: no free
 * extent waits for older snapshots.  The caller holds the writer lock, so
 * no writer is taking these blocks meanwhile.  Returns the pages zeroed.
 */
int64
zl_free_space_wipe(Relation rel, BufferAccessStrategy strategy, bool *complete)
{
	int			n;
	ZLFreeExtent *all = zl_meta_load_free_extents(zl_storage_id(rel), GetLatestSnapshot(), &n);
	int64		wiped = 0;

	*complete = true;
	for (int i = 0; i < n; i++)
	{
		bool		conflict_logged = false;

		if (!GlobalVisCheckRemovableFullXid(rel, all[i].freed_by))
		{
			*complete = false;
			continue;
		}
		for (BlockNumber block = all[i].first_block;
			 block < all[i].first_block + all[i].blocks; block++)
		{
			Buffer		buffer = ReadBufferExtended(rel, MAIN_FORKNUM, block, RBM_NORMAL, strategy);
			Page		page = BufferGetPage(buffer);

			CHECK_FOR_INTERRUPTS();
			LockBuffer(buffer, BUFFER_LOCK_EXCLUSIVE);
			if (!zl_bytes_are_zero(page, BLCKSZ))
			{
				if (!conflict_logged)
					zl_log_standby_conflict(rel, block, all[i].freed_by);
				conflict_logged = true;
				START_CRIT_SECTION();
				memset(page, 0, BLCKSZ);
				MarkBufferDirty(buffer);
				if (RelationNeedsWAL(rel))
					log_newpage_buffer(buffer, false);
				END_CRIT_SECTION();
				wiped++;
			}
			UnlockReleaseBuffer(buffer);
		}
	}
	return wiped;
}

static int
extent_cmp(const void *a, const void *b)
{
	const ZLFreeExtent *x = a;
	const ZLFreeExtent *y = b;

	return x->first_block < y->first_block ? -1 : (x->first_block > y->first_block);
}

/*
 * The flush is written: the catalog loses what it took, in one statement.
 * Takes from one extent come from its start, one after the other, so
 * ranges that touch are merged into one first (extents never touch).
 */
void
zl_free_space_end(ZLFreeSpace *fs)
{
	BlockNumber *firsts = palloc(sizeof(BlockNumber) * Max(fs->ntaken, 1));
	BlockNumber *counts = palloc(sizeof(BlockNumber) * Max(fs->ntaken, 1));
	int			n = 0;

	if (fs->ntaken > 1)
		qsort(fs->taken, fs->ntaken, sizeof(ZLFreeExtent), extent_cmp);
	for (int i = 0; i < fs->ntaken; i++)
	{
		if (n > 0 && firsts[n - 1] + counts[n - 1] == fs->taken[i].first_block)
			counts[n - 1] += fs->taken[i].blocks;
		else
		{
			firsts[n] = fs->taken[i].first_block;
			counts[n++] = fs->taken[i].blocks;
		}
	}
	zl_meta_take_free_extents(fs->storage_id, n, firsts, counts);
	pfree(firsts);
	pfree(counts);
	if (fs->taken)
		pfree(fs->taken);
	pfree(fs->extents);
	pfree(fs);
}

/*
 * The block ranges that the catalog refers to, by first block: visible
 * sub-groups and free extents (*free_extents, also by first block).  Call
 * holding the writer lock: with no write in progress, every other block of
 * the file after the metapage was written by a transaction that aborted,
 * or was given up by reclaim.
 */
static ZLFreeExtent *
referenced_ranges(uint64 storage_id, int *nranges, ZLFreeExtent **free_extents, int *nfree)
{
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	int			nsgs;
	ZLSubGroup *sgs = zl_meta_load_subgroups(storage_id, snapshot, DATEVAL_NOBEGIN, &nsgs);
	ZLFreeExtent *ranges;

	*free_extents = zl_meta_load_free_extents(storage_id, snapshot, nfree);
	UnregisterSnapshot(snapshot);

	ranges = palloc(sizeof(ZLFreeExtent) * Max(nsgs + *nfree, 1));
	*nranges = 0;
	for (int i = 0; i < nsgs; i++)
		if (sgs[i].blocks > 0)
		{
			ranges[*nranges].first_block = sgs[i].first_block;
			ranges[(*nranges)++].blocks = sgs[i].blocks;
		}
	for (int i = 0; i < *nfree; i++)
		ranges[(*nranges)++] = (*free_extents)[i];
	qsort(ranges, *nranges, sizeof(ZLFreeExtent), extent_cmp);
	if (sgs)
		pfree(sgs);
	return ranges;
}

/* like heap: truncate at least 1000 blocks or a sixteenth of the file */
#define ZL_TRUNCATE_MINIMUM		1000
#define ZL_TRUNCATE_FRACTION	16

/*
 * Whether VACUUM truncates an unreferenced tail of that many blocks: if
 * the table's vacuum_truncate allows it and the tail is worth the lock.
 */
bool
zl_free_space_worth_truncating(Relation rel, BlockNumber tail_blocks)
{
	if (rel->rd_options != NULL && !((StdRdOptions *) rel->rd_options)->vacuum_truncate)
		return false;
	return tail_blocks > 0 &&
		(tail_blocks >= ZL_TRUNCATE_MINIMUM ||
		 tail_blocks >= RelationGetNumberOfBlocks(rel) / ZL_TRUNCATE_FRACTION);
}

/*
 * The blocks after the metapage that no range in used (sorted) covers,
 * up to nblocks; the catalog counts blocks in int4, so a gap is cut into
 * pieces of at most PG_INT32_MAX blocks.
 */
static ZLFreeExtent *
unreferenced_gaps(const ZLFreeExtent *used, int nused, BlockNumber nblocks, int *ngaps)
{
	ZLFreeExtent *gaps = palloc(sizeof(ZLFreeExtent) * 2 * (nused + 1));
	BlockNumber next = ZL_METAPAGE_BLKNO + 1;

	*ngaps = 0;
	for (int i = 0; i <= nused; i++)
	{
		BlockNumber until = i < nused ? used[i].first_block : nblocks;

		while (until > next)
		{
			BlockNumber blocks = Min(until - next, (BlockNumber) PG_INT32_MAX);

			gaps[*ngaps].first_block = next;
			gaps[(*ngaps)++].blocks = blocks;
			next += blocks;
		}
		if (i < nused)
			next = Max(next, used[i].first_block + used[i].blocks);
	}
	return gaps;
}

/*
 * The end of the file made of gaps and of free extents no snapshot can
 * reach: returns where it begins, and how many gaps (*gaps_kept) and free
 * extents (*extents_kept, both sorted) come before it; *newest is the
 * newest freed_by among the extents in it.
 */
static BlockNumber
reclaimable_tail(Relation rel, BlockNumber nblocks, const ZLFreeExtent *gaps, int ngaps,
				 const ZLFreeExtent *extents, int nextents, int *gaps_kept,
				 int *extents_kept, FullTransactionId *newest)
{
	BlockNumber tail = nblocks;
	int			last_gap = ngaps - 1;
	int			last_extent = nextents - 1;

	*newest = InvalidFullTransactionId;
	for (;;)
	{
		if (last_gap >= 0 && gaps[last_gap].first_block + gaps[last_gap].blocks == tail)
			tail = gaps[last_gap--].first_block;
		else if (last_extent >= 0 &&
				 extents[last_extent].first_block + extents[last_extent].blocks == tail &&
				 GlobalVisCheckRemovableFullXid(rel, extents[last_extent].freed_by))
		{
			const ZLFreeExtent *extent = &extents[last_extent--];

			if (!FullTransactionIdIsValid(*newest) ||
				FullTransactionIdFollows(extent->freed_by, *newest))
				*newest = extent->freed_by;
			tail = extent->first_block;
		}
		else
			break;
	}
	*gaps_kept = last_gap + 1;
	*extents_kept = last_extent + 1;
	return tail;
}

/*
 * zipper_lake.reclaim()'s work (zl_reclaim.c), holding the writer lock:
 * record the blocks written by aborted transactions as free extents;
 * returns how many blocks it made reusable or left to VACUUM.
 *
 * Free blocks at the end of the file are better given back to the file
 * system, but truncating is not transactional and the catalog is: a
 * reclaim that truncated and then rolled back would leave free extents
 * past the end of the file.  So reclaim only makes such blocks
 * unreferenced (no free extent, and it drops those of the free extents
 * there that no snapshot can reach any more), and VACUUM, which truncates
 * what nothing refers to, gives them back.  The conflict record it logs
 * for those extents makes standby queries that could still see their
 * sub-groups end before the truncation is replayed.  Where VACUUM would
 * not truncate (vacuum_truncate = false, or a tail too small to be worth
 * its lock) they are recorded as free extents instead.  If VACUUM cannot
 * lock the table, the blocks wait for a later VACUUM (or, once a write
 * appended after them, for a later reclaim).
 */
int64
zl_free_space_reclaim(Relation rel)
{
	uint64		storage_id = zl_storage_id(rel);
	ZLFreeExtent *extents;
	ZLFreeExtent *used;
	ZLFreeExtent *gaps;
	int			nextents,
				nused,
				ngaps,
				gaps_kept,
				extents_kept;
	BlockNumber nblocks;
	BlockNumber tail;
	FullTransactionId newest;
	int64		reclaimed = 0;

	/* 1. the blocks nothing refers to */
	used = referenced_ranges(storage_id, &nused, &extents, &nextents);
	nblocks = RelationGetNumberOfBlocks(rel);
	gaps = unreferenced_gaps(used, nused, nblocks, &ngaps);
	for (int i = 0; i < ngaps; i++)
		reclaimed += gaps[i].blocks;

	/* 2. the end of the file among them is left to VACUUM, if it cuts it */
	tail = reclaimable_tail(rel, nblocks, gaps, ngaps, extents, nextents,
							&gaps_kept, &extents_kept, &newest);
	if (!zl_free_space_worth_truncating(rel, nblocks - tail))
	{
		gaps_kept = ngaps;		/* it stays in the file: record it as reusable */
		extents_kept = nextents;
		newest = InvalidFullTransactionId;
	}

	/* 3. record: the tail's extents go (after the conflict record), the other gaps become extents */
	if (FullTransactionIdIsValid(newest))
		zl_log_standby_conflict(rel, tail, newest);
	for (int i = extents_kept; i < nextents; i++)
	{
		zl_meta_take_free_extent(storage_id, extents[i].first_block, extents[i].blocks);
		reclaimed += extents[i].blocks;
	}
	zl_meta_insert_free_extents(storage_id, gaps, gaps_kept, ReadNextFullTransactionId());
	return reclaimed;
}

/* the end of the last block range the catalog refers to (holding the writer lock) */
static BlockNumber
referenced_end(uint64 storage_id)
{
	ZLFreeExtent *free_extents;
	int			nranges,
				nfree;
	ZLFreeExtent *ranges = referenced_ranges(storage_id, &nranges, &free_extents, &nfree);
	BlockNumber end = ZL_METAPAGE_BLKNO + 1;

	for (int i = 0; i < nranges; i++)
		end = Max(end, ranges[i].first_block + ranges[i].blocks);
	pfree(ranges);
	if (free_extents)
		pfree(free_extents);
	return end;
}

/* how long VACUUM tries for the exclusive lock, like heap's truncation */
#define ZL_TRUNCATE_LOCK_WAIT_MS	50
#define ZL_TRUNCATE_LOCK_TIMEOUT_MS 5000

/*
 * Blocks at the end of the file that the catalog does not refer to, or -1
 * if a write is in progress.  The writer lock keeps the end from moving
 * while it is measured; with keep_lock, it is held on return (unless -1).
 */
static int64
unreferenced_tail(Relation rel, bool keep_lock)
{
	uint64		storage_id = zl_storage_id(rel);
	BlockNumber end;
	BlockNumber nblocks;

	if (!zl_write_lock_table(storage_id, true))
		return -1;
	end = referenced_end(storage_id);
	nblocks = RelationGetNumberOfBlocks(rel);
	if (!keep_lock)
		zl_write_unlock_table(storage_id);
	return nblocks > end ? nblocks - end : 0;
}

/*
 * VACUUM: give the blocks at the end of the file that the catalog does not
 * refer to back to the file system.  Those were written by transactions
 * that aborted, or reclaim gave them up; no snapshot can read them, on
 * this server or (after reclaim's conflict record) on a standby.
 *
 * Like heap's truncation it needs the exclusive lock, which is WAL-logged
 * and makes standby queries on the table wait: so the tail is measured
 * first, and the lock asked for only if the tail is worth it.  It is tried
 * for a few seconds without queueing for it (nor blocking writers: the
 * writer lock is not held meanwhile).  Every writer holds a lock on the
 * table that conflicts with it until the writer ends, so with it held the
 * writer lock is free; under both, the tail is measured again and cut off.
 * Returns the blocks truncated, or -1 if a lock was not free.
 */
int64
zl_free_space_truncate(Relation rel)
{
	int64		freeable = unreferenced_tail(rel, false);
	int			waited_ms = 0;

	if (freeable < 0)
		return -1;
	if (!zl_free_space_worth_truncating(rel, (BlockNumber) freeable))
		return 0;

	while (!ConditionalLockRelation(rel, AccessExclusiveLock))
	{
		if (waited_ms >= ZL_TRUNCATE_LOCK_TIMEOUT_MS)
			return -1;
		CHECK_FOR_INTERRUPTS();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 ZL_TRUNCATE_LOCK_WAIT_MS, WAIT_EVENT_VACUUM_TRUNCATE);
		ResetLatch(MyLatch);
		waited_ms += ZL_TRUNCATE_LOCK_WAIT_MS;
	}
	freeable = unreferenced_tail(rel, true);
	if (freeable > 0)
		RelationTruncate(rel, RelationGetNumberOfBlocks(rel) - (BlockNumber) freeable);
	if (freeable >= 0)
		zl_write_unlock_table(zl_storage_id(rel));
	UnlockRelation(rel, AccessExclusiveLock);
	return freeable;
}
