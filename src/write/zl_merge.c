/*-------------------------------------------------------------------------
 *
 * zl_merge.c
 *	  Merging runs of small neighbouring history file groups into one.
 *
 * A history partition's file groups cover runs of whole base windows
 * ([window_start, window_end), zl_place.c "File-group windows") that never
 * overlap.  New file groups are coalesced to ZL_FILL_ROWS rows as they are
 * written, but tables written by 0.1 (one base window a file group), late
 * changes into windows no file group held, and masks (replaced versions,
 * drop_history's boundary) leave many small file groups behind, each with
 * its sub-groups, catalog rows and key directories, opened by every scan
 * of the partition.
 *
 * zl_merge_file_groups finds, in each history partition, in window order,
 * runs of neighbouring file groups -- no other file group between them --
 * each less than half of ZL_FILL_ROWS live rows and together at most
 * ZL_FILL_ROWS, that are more than one sub-group; it deletes every
 * sub-group of the run (masks and all; their blocks become free extents)
 * and hands their live rows to the write state, which it flushes run by
 * run.  With those file groups gone from the catalog (the flush reads the
 * windows with the latest snapshot after CommandCounterIncrement), no
 * window holds the run's base windows and none lies between them, so
 * placement opens one window from the first base window with rows to the
 * last (fewer than ZL_FILL_ROWS rows before the last joins) and writes the
 * rows as one sub-group sorted by valid_from, with its key directory and
 * first/last start computed afresh: pruning stays as precise as before.
 * The table's history format is written; masked rows are dropped.
 *
 * Safety is that of compaction (zl_compact.c): the caller holds the
 * table's writer lock, so no writer changes the rows meanwhile; the
 * deletions and insertions are catalog rows of one transaction, so a
 * snapshot sees either the old file groups or the merged one, never both
 * or neither, and a crash before the commit leaves the old ones; the new
 * pages are WAL-logged, and the old blocks are reused only once no
 * snapshot can see them (zl_freespace.c).  VACUUM's worker calls it
 * (src/lifecycle/zl_retention.c).  A catalog of 0.1 not updated yet keeps
 * one base window a file group: nothing is merged there.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write_internal.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "utils/snapmgr.h"

/* a history file group, as its sub-groups describe it */
typedef struct FileGroup
{
	DateADT		partition_end;
	int64		window_start;
	int64		live;			/* unmasked rows */
	int			first;			/* its sub-groups: order[first .. first + nsubgroups) */
	int			nsubgroups;
} FileGroup;

/* a run of neighbouring small file groups: groups[first .. first + ngroups) */
typedef struct MergeRun
{
	int			first;
	int			ngroups;
	int			nsubgroups;
	int64		live;
} MergeRun;

static int
subgroup_window_cmp(const void *a, const void *b)
{
	const ZLSubGroup *x = *(const ZLSubGroup *const *) a;
	const ZLSubGroup *y = *(const ZLSubGroup *const *) b;

	if (x->partition_end != y->partition_end)
		return x->partition_end < y->partition_end ? -1 : 1;
	if (x->window_start != y->window_start)
		return x->window_start < y->window_start ? -1 : 1;
	return x->subgroup_id < y->subgroup_id ? -1 : (x->subgroup_id > y->subgroup_id);
}

/*
 * The history file groups of the sub-groups, in (partition, window)
 * order; *order receives the history sub-groups in that order.
 */
static FileGroup *
history_file_groups(const ZLSubGroup *sgs, int nsgs, const ZLSubGroup ***order_out,
					int *ngroups)
{
	const ZLSubGroup **order = palloc(sizeof(ZLSubGroup *) * Max(nsgs, 1));
	FileGroup  *groups = palloc(sizeof(FileGroup) * Max(nsgs, 1));
	int			n = 0,
				g = 0;

	for (int i = 0; i < nsgs; i++)
		if (sgs[i].placed && sgs[i].partition_end != ZL_CURRENT_PARTITION)
			order[n++] = &sgs[i];
	qsort(order, n, sizeof(ZLSubGroup *), subgroup_window_cmp);
	for (int i = 0; i < n; i++)
	{
		const ZLSubGroup *sg = order[i];

		if (g == 0 || groups[g - 1].partition_end != sg->partition_end ||
			groups[g - 1].window_start != sg->window_start)
		{
			groups[g].partition_end = sg->partition_end;
			groups[g].window_start = sg->window_start;
			groups[g].live = 0;
			groups[g].first = i;
			groups[g++].nsubgroups = 0;
		}
		groups[g - 1].live += sg->row_count - sg->masked_rows;
		groups[g - 1].nsubgroups++;
	}
	*order_out = order;
	*ngroups = g;
	return groups;
}

/* is a run worth writing again as one file group of one sub-group? */
static bool
run_mergeable(const MergeRun *run)
{
	return run->nsubgroups > 1;
}

/*
 * The runs worth merging (see the header comment), in order; returns how
 * many.  A file group takes part while it is small and the run still
 * holds it; a larger one ends the run, as does another partition.
 */
static MergeRun *
find_runs(const FileGroup *groups, int ngroups, int *nruns)
{
	MergeRun   *runs = palloc(sizeof(MergeRun) * Max(ngroups, 1));
	MergeRun	open = {0, 0, 0, 0};
	int			n = 0;

	for (int g = 0; g <= ngroups; g++)
	{
		bool		small = g < ngroups && groups[g].live * 2 < ZL_FILL_ROWS;

		if (open.ngroups > 0 &&
			(!small || groups[g].partition_end != groups[open.first].partition_end ||
			 open.live + groups[g].live > ZL_FILL_ROWS))
		{
			if (run_mergeable(&open))
				runs[n++] = open;
			open.ngroups = 0;
		}
		if (!small)
			continue;
		if (open.ngroups == 0)
		{
			open.first = g;
			open.nsubgroups = 0;
			open.live = 0;
		}
		open.ngroups++;
		open.nsubgroups += groups[g].nsubgroups;
		open.live += groups[g].live;
	}
	*nruns = n;
	return runs;
}

/* the runs of small file groups worth merging among the sub-groups (with masks) */
static MergeRun *
merge_runs(const ZLSubGroup *sgs, int nsgs, const ZLSubGroup ***order,
		   FileGroup **groups, int *nruns)
{
	int			ngroups;

	*groups = history_file_groups(sgs, nsgs, order, &ngroups);
	return find_runs(*groups, ngroups, nruns);
}

/*
 * Would zl_merge_file_groups merge anything among these sub-groups (with
 * masks)?  Not on a catalog of 0.1 not updated yet (see above).
 */
bool
zl_merge_due(const ZLSubGroup *sgs, int nsgs)
{
	const ZLSubGroup **order;
	FileGroup  *groups;
	int			nruns;

	if (!zl_meta_has_window_end())
		return false;
	pfree(merge_runs(sgs, nsgs, &order, &groups, &nruns));
	pfree(order);
	pfree(groups);
	return nruns > 0;
}

/*
 * Merge the runs of small neighbouring history file groups of the table
 * into one file group each (see the header comment).  The caller holds the
 * writer lock and has written its pending rows.  Returns how many file
 * groups went; *subgroups_before counts their sub-groups.
 */
int
zl_merge_file_groups(Relation rel, int *subgroups_before)
{
	Snapshot	snapshot;
	ZLSubGroup *sgs;
	const ZLSubGroup **order;
	FileGroup  *groups;
	MergeRun   *runs;
	int			nsgs,
				nruns,
				merged = 0;

	*subgroups_before = 0;
	if (!zl_meta_has_window_end())
		return 0;
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	sgs = zl_meta_load_subgroups(zl_storage_id(rel), snapshot, DATEVAL_NOBEGIN, &nsgs);	/* and masks */
	UnregisterSnapshot(snapshot);
	runs = merge_runs(sgs, nsgs, &order, &groups, &nruns);
	for (int r = 0; r < nruns; r++)
	{
		const FileGroup *first = &groups[runs[r].first];
		ZLWriteState *state = zl_write_state_get(rel);

		for (int i = 0; i < runs[r].nsubgroups; i++)
		{
			CHECK_FOR_INTERRUPTS();
			zl_rewrite_subgroup(rel, state, order[first->first + i], NULL, 0);
		}
		/* one run a flush: its rows alone make the new window */
		zl_write_flush_relation(RelationGetRelid(rel));
		merged += runs[r].ngroups;
		*subgroups_before += runs[r].nsubgroups;
	}
	pfree(runs);
	pfree(order);
	pfree(groups);
	if (sgs != NULL)
		pfree(sgs);
	return merged;
}
