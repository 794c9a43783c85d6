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
 *-------------------------------------------------------------------------
 */
#include "zipper_lake.h"

/* rows of a sub-group being compacted that stay: all but the dropped ones */
typedef struct CompactArg
{
	ZLWriteState *state;
	const int32 *dropped;		/* ascending */
	int			ndropped;
} CompactArg;

static void
keep_row(void *arg, const ZLSubGroup *sg, int32 position, HeapTuple tuple)
{
	CompactArg *ca = arg;

	if (bsearch(&position, ca->dropped, ca->ndropped, sizeof(int32), zl_position_cmp) == NULL)
		zl_write_add(ca->state, tuple);
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
		(sg->masked_rows + ndropped) * 2 <= sg->row_count)
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
	CompactArg	arg = {state, dropped, ndropped};

	zl_read_subgroup_rows(rel, sg, false, keep_row, &arg);
	zl_meta_delete_subgroup(rel, sg->subgroup_id);
}
