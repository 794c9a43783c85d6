/*-------------------------------------------------------------------------
 *
 * zl_compact.c
 *	  Compaction: retiring stored rows by rewriting their sub-group.
 *
 * Stored rows that a writer replaced (versions apply_changes edited or
 * deleted, stored versions a load merged with loaded ones, zl_load.c) are
 * retired by a mask row that lists their positions in their sub-group
 * (zl_meta_insert_masks), unless the sub-group is in the current partition
 * and would be more than half masked: then it is compacted, its remaining
 * rows written again (into the same window, through the writer's write
 * state) and its metadata row deleted, masks and all.  Writers ask
 * zl_compact_subgroup first and list in mask rows what it leaves to them.
 * Readers with older snapshots keep seeing the old sub-group, whose blocks
 * later writers reuse once none can (zl_freespace.c); the current
 * partition stays at most about twice its live size, so the cost of a
 * batch does not grow with history.  VACUUM's worker (zl_retention.c)
 * compacts every sub-group more than an eighth masked the same way, and
 * erase (zl_erase.c) the sub-groups of the keys it erases, through
 * zl_rewrite_subgroup.
 *
 * Packing small sub-groups
 * ------------------------
 * Every write into a history partition makes a sub-group per window it
 * touches, and a batch's closed versions start in many windows: batches
 * that end versions on the same day (CDC every few minutes) would leave
 * a window of that day's partition with a small sub-group per batch, each
 * on pages of its own, and every read of the partition would open them
 * all.  So before a flush writes a history run, the run takes in the
 * newest sub-groups of its file group, newest first, while it has
 * gathered fewer than ZL_PACK_ROWS rows and each holds no more live rows
 * than the run has gathered so far (and is in the table's history format):
 * their live rows join the run and they are deleted, as in compaction.
 * Like a binary counter, a window written k times holds about log2(k)
 * small sub-groups, a row is written again about log2(ZL_PACK_ROWS / rows
 * per write) times before its sub-group is no longer small, and a flush
 * writes fewer than 2 * ZL_PACK_ROWS rows again per window.  Masks are
 * applied on the way, so packing compacts too.  The current partition is
 * left alone: its file groups roll over (max_subgroups) and apply
 * compacts them.  Packing of a table waits while a writer has rows it has
 * not masked yet (zl_write_hold_packing), and is left out under REPEATABLE READ and
 * SERIALIZABLE, whose snapshot must not see rows of later transactions
 * copied into the writer's own sub-groups.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write_internal.h"

#include "access/xact.h"
#include "miscadmin.h"

/*
 * A run packs while it has gathered fewer rows (see above): a columnar
 * chunk's worth.
 */
#define ZL_PACK_ROWS			1024

/* rows of a sub-group being compacted that stay: all but the dropped ones */
typedef struct CompactArg
{
	Relation	rel;
	ZLWriteState *state;
	const int32 *dropped;		/* ascending */
	int			ndropped;
} CompactArg;

static void
keep_row(void *arg, const ZLSubGroup *sg, int32 position, HeapTuple tuple)
{
	CompactArg *ca = arg;

	if (bsearch(&position, ca->dropped, ca->ndropped, sizeof(int32), zl_position_cmp) == NULL)
	{
		if (sg->format == ZL_FORMAT_COLUMNAR)
			zl_write_add_decoded(ca->state, ca->rel, tuple);
		else
			zl_write_add(ca->state, tuple);
	}
}

/* would a current sub-group be more than half masked with ndropped more? */
bool
zl_compaction_due(int64 row_count, int64 masked_rows, int64 ndropped)
{
	return (masked_rows + ndropped) * 2 > row_count;
}

/*
 * Retire the stored rows of one sub-group that a writer replaced (dropped,
 * ascending positions) by compacting the sub-group, if it is in the
 * current partition and would be more than half masked (see the header
 * comment): then returns true.  Otherwise returns false, and the caller
 * lists them in a mask row.
 */
bool
zl_compact_subgroup(Relation rel, ZLWriteState *state, const ZLSubGroup *sg,
					const int32 *dropped, int ndropped)
{
	if (sg->partition_end != ZL_CURRENT_PARTITION ||
		!zl_compaction_due(sg->row_count, sg->masked_rows, ndropped))
		return false;
	zl_rewrite_subgroup(rel, state, sg, dropped, ndropped);
	return true;
}

/*
 * Write the live rows of a sub-group but the dropped ones (ascending
 * positions) again, in any partition, and delete it, masks and all (also
 * zl_erase.c).
 */
void
zl_rewrite_subgroup(Relation rel, ZLWriteState *state, const ZLSubGroup *sg,
					const int32 *dropped, int ndropped)
{
	CompactArg	arg = {rel, state, dropped, ndropped};

	zl_read_subgroup_rows(rel, sg, false, keep_row, &arg);
	zl_meta_delete_subgroup(rel, sg);
}

/*
 * Before a flush writes the runs, hand the rows of the small sub-groups
 * they take in to the write state (see "Packing small sub-groups").  The
 * caller has not sorted the rows to place yet; the writer holds the writer
 * lock, and every mask of this transaction is in the catalog (writers
 * flush after masking).  runs are the rows pending per existing file
 * group (zl_place.c, "File-group windows"), sgs the sub-groups of their
 * partitions in creation order, loaded by the caller.
 */
void
zl_pack_small_subgroups(Relation rel, ZLWriteState *state, const ZLPendingRun *runs,
						int nruns, const ZLSubGroup *sgs, int nsgs)
{
	char		history_format = zl_write_state_history_format(state);

	for (int r = 0; r < nruns; r++)
	{
		int64		gathered = runs[r].rows;

		/* the run's sub-groups, newest first: the catalog gives them in creation order */
		for (int i = nsgs - 1; i >= 0 && gathered < ZL_PACK_ROWS; i--)
		{
			const ZLSubGroup *sg = &sgs[i];
			int64		live = sg->row_count - sg->masked_rows;

			if (sg->partition_end != runs[r].partition_end ||
				sg->window_start != runs[r].window_start)
				continue;
			if (live > gathered || sg->format != history_format)
				break;
			CHECK_FOR_INTERRUPTS();
			zl_rewrite_subgroup(rel, state, sg, NULL, 0);
			gathered += live;
		}
	}
}
