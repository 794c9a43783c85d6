/*-------------------------------------------------------------------------
 *
 * zl_relocate.c
 *	  VACUUM gives back the free space inside the file: moving sub-groups
 *	  off its end into free blocks further down, then cutting the end.
 *
 * Compaction, packing and retention delete sub-groups; their blocks become
 * free extents that later writes take (src/write/zl_freespace.c), but
 * nothing shrinks the file unless the free blocks happen to be at its
 * end.  A table whose current partition churns keeps a third of its file
 * free after the day's VACUUM (README "Performance").  So VACUUM's worker
 * (zl_retention.c) also moves sub-groups down:
 *
 *   1. The end of the file that a packed file would not need: if every
 *      visible sub-group's blocks followed the metapage, the file would end
 *      at 1 + their blocks.  When more than that is worth truncating
 *      (zl_free_space_worth_truncating, with at least an eighth of the
 *      file free and zipper_lake.relocate_min_blocks, 128: small tables
 *      are left alone), the sub-groups reaching past it are moved, the highest
 *      first, each into a free extent below it that holds it (best fit, as
 *      writers take extents), until none is left that fits.  A columnar
 *      sub-group larger than any of them is cut into pieces that each fit
 *      one, when those below hold it with room to spare (worth_cutting:
 *      fragmented free space, as the current partition's churn leaves it,
 *      may have no extent as large as a full sub-group).
 *   2. Moving is compaction without masks: the sub-group's live rows are
 *      written again in its format (zl_rewrite_subgroup; masked rows are
 *      left behind; a sub-group whose format the table no longer writes
 *      stays),
 *      alone (packing held: it would add neighbours' rows, which might not
 *      fit), by a flush that may take only free blocks below the sub-group
 *      (zl_write_state_reuse_below), and its catalog row is deleted, its
 *      blocks recorded as a free extent.  A reader whose snapshot predates
 *      the move reads the old blocks, which stay until no snapshot can see
 *      them; readers never see a row twice or miss one, since the new and
 *      the old sub-group are never visible to the same snapshot.  The
 *      worker holds the table's writer lock: no write runs meanwhile; when
 *      a writer waits for it, the worker stops after a move (the next
 *      VACUUM goes on, zl_maintenance_gives_way).  It
 *      all commits or rolls back with the worker's transaction; a crash
 *      before the commit leaves the old sub-groups (the blocks written for
 *      the new ones belong to nothing; reclaim or a later move reuses them).
 *   3. The next VACUUM, once no snapshot can see the moved sub-groups, gives
 *      the free extents at the end of the file up (zl_free_space_reclaim,
 *      which logs the standby conflict first) and truncates the end
 *      (zl_free_space_truncate).  So the file shrinks over two VACUUMs, as
 *      autovacuum runs them.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "common/zl_guc.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write.h"
#include "lifecycle/zl_lifecycle.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/snapmgr.h"

/* nor less than this share of the file (and zipper_lake.relocate_min_blocks) */
#define ZL_RELOCATE_FRACTION	8

/* where the file would end if every visible sub-group's blocks were packed */
static BlockNumber
packed_end(const ZLSubGroup *sgs, int nsgs)
{
	BlockNumber end = ZL_METAPAGE_BLKNO + 1;

	for (int i = 0; i < nsgs; i++)
		end += sgs[i].blocks;
	return end;
}

/*
 * Is the file so much larger than its sub-groups that VACUUM's worker should
 * move sub-groups down (or give up the end they left, step 3)?
 */
bool
zl_relocation_due(Relation rel, const ZLSubGroup *sgs, int nsgs, int min_blocks)
{
	BlockNumber nblocks = RelationGetNumberOfBlocks(rel);
	BlockNumber end = packed_end(sgs, nsgs);
	BlockNumber spare = nblocks > end ? nblocks - end : 0;

	return spare >= (BlockNumber) min_blocks && spare >= nblocks / ZL_RELOCATE_FRACTION &&
		zl_free_space_worth_truncating(rel, spare);
}

static int
highest_first(const void *a, const void *b)
{
	const ZLSubGroup *x = a;
	const ZLSubGroup *y = b;

	return x->first_block < y->first_block ? 1 : (x->first_block > y->first_block ? -1 : 0);
}

/*
 * Would writing the sub-group again keep its format, and so about its
 * size?  History is written in the table's history format, the current
 * partition in rows or, when asked, columnar (where history is columnar):
 * a sub-group of the other format (written before set_history_format)
 * stays where it is.
 */
static bool
rewrite_keeps_format(ZLWriteState *state, const ZLSubGroup *sg)
{
	bool		history_columnar = zl_write_state_history_format(state) == ZL_FORMAT_COLUMNAR;
	bool		columnar = sg->format == ZL_FORMAT_COLUMNAR;

	if (sg->partition_end == ZL_CURRENT_PARTITION)
		return !columnar || history_columnar;
	return columnar == history_columnar;
}

/*
 * May a sub-group that no free extent below it holds move there in pieces
 * (step 2 above)?  When the free blocks below hold it with a quarter to
 * spare and the largest takes a quarter of it at least.  Not a row
 * sub-group of the current partition, whose runs writers never cut (apply
 * probes the key directory of each current sub-group); columnar ones
 * VACUUM gathers again (zl_retention.c, "A columnar current partition").
 * Nor one of history with fewer than half of ZL_FILL_ROWS live rows: its
 * file group is one VACUUM merges (zl_merge.c), which would join the
 * pieces again, maybe at the end of the file.
 */
static bool
worth_cutting(const ZLSubGroup *sg, BlockNumber largest, BlockNumber total)
{
	BlockNumber blocks = (BlockNumber) sg->blocks;

	if (sg->partition_end == ZL_CURRENT_PARTITION ? sg->format == ZL_FORMAT_ROWS :
		(sg->row_count - sg->masked_rows) * 2 < ZL_FILL_ROWS)
		return false;
	return total >= blocks + blocks / 4 && largest >= Max(blocks / 4, 8);
}

/*
 * Step 1 and 2 above, holding the writer lock; returns the blocks of the
 * sub-groups moved.
 */
int64
zl_relocate_tail(Relation rel, int min_blocks)
{
	uint64		storage_id = zl_storage_id(rel);
	ZLWriteState *state = zl_write_state_get(rel);
	Snapshot	snapshot;
	ZLSubGroup *sgs;
	int			nsgs;
	BlockNumber end;
	BlockNumber largest;
	BlockNumber total;
	int64		moved = 0;

	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	sgs = zl_meta_load_subgroups(storage_id, snapshot, DATEVAL_NOBEGIN, &nsgs);
	UnregisterSnapshot(snapshot);
	if (!zl_relocation_due(rel, sgs, nsgs, min_blocks))
		return 0;
	end = packed_end(sgs, nsgs);
	qsort(sgs, nsgs, sizeof(ZLSubGroup), highest_first);
	/* a move writes the sub-group's rows alone: packing would add others' */
	zl_write_hold_packing(RelationGetRelid(rel), true);

	for (int i = 0; i < nsgs; i++)
	{
		const ZLSubGroup *sg = &sgs[i];

		if (sg->first_block + sg->blocks <= end)
			break;
		if (!sg->placed || !rewrite_keeps_format(state, sg))
			continue;			/* unplaced: register() places them first */
		zl_free_space_below(rel, storage_id, sg->first_block, &largest, &total);
		if (largest < (BlockNumber) sg->blocks && !worth_cutting(sg, largest, total))
			break;
		CHECK_FOR_INTERRUPTS();
		if (moved > 0 && zl_maintenance_gives_way(rel))
			break;
		zl_write_state_reuse_below(state, sg->first_block);
		zl_write_state_fit_free_extents(state, largest < (BlockNumber) sg->blocks ?
										(double) sg->row_count / sg->blocks : 0);
		zl_write_set_current_columnar(state, sg->partition_end == ZL_CURRENT_PARTITION &&
									  sg->format == ZL_FORMAT_COLUMNAR);
		zl_rewrite_subgroup(rel, state, sg, NULL, 0);
		zl_write_flush_relation(RelationGetRelid(rel));
		CommandCounterIncrement();
		moved += sg->blocks;
	}
	zl_write_state_reuse_below(state, 0);
	zl_write_state_fit_free_extents(state, 0);
	zl_write_set_current_columnar(state, false);
	zl_write_hold_packing(RelationGetRelid(rel), false);
	if (sgs != NULL)			/* none when every row was erased */
		pfree(sgs);
	return moved;
}
