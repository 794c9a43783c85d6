/*-------------------------------------------------------------------------
 *
 * zl_scan_probe.c
 *	  Scanning a zipper table: key probes.
 *
 * Key probes
 * ----------
 * A scan given key hashes (zl_scan_set_keys, README "Key access") reads,
 * in each sub-group, only the positions its key directory names for them:
 * a walk over those positions instead of the blocks.  Sub-groups whose
 * filter or directory holds none of the keys are skipped before their
 * bounds are even decided.  The merged key index of zl_keyindex.c answers
 * for the sub-groups it covers: at once for a scan that probes many times,
 * and for single probes once the backend's probes have paid for building
 * it (scan_map_key_index).  The inner side of a nested loop keeps its
 * list of sub-groups across rescans (zl_scan_keep_subgroups) and only
 * probes again.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "common/zl_guc.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "access/zl_scan_internal.h"

#include "executor/tuptable.h"
#include "storage/bufmgr.h"
#include "utils/memutils.h"

/*
 * Restrict the scan to the rows of some keys, given their hashes (sorted,
 * distinct; none: no row at all; NULL: every key again).  Call before
 * zl_scan_set_bounds, which
 * then probes each sub-group its bounds keep through its key directory
 * (zl_keys.c): one holding none of the hashes is skipped, the others are
 * read at the positions named, which may hold other keys of the same
 * hash — the caller rechecks the key.  Sub-groups without a directory are
 * read whole.  Only the probed sub-groups' masks are read.
 */
void
zl_scan_set_keys(TableScanDesc sscan, const uint32 *hashes, int nhashes)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;

	if (hashes == NULL)
	{
		/* no keys (any more, on a rescan): every kept sub-group is read */
		scan->keyed = false;
		scan->key_positions = NULL;
		scan->keyed_order = NULL;
		scan->probing = false;
		return;
	}
	scan->keyed = true;
	if (scan->key_hashes != NULL)
		pfree(scan->key_hashes);
	scan->key_hashes = MemoryContextAlloc(scan->context, sizeof(uint32) * Max(nhashes, 1));
	memcpy(scan->key_hashes, hashes, sizeof(uint32) * nhashes);
	scan->nkey_hashes = nhashes;
}

/* the masks of the sub-groups a key probe reads (loaded without masks) */
static void
scan_load_probed_masks(ZLScanDesc scan)
{
	ZLSubGroup *probed = palloc(sizeof(ZLSubGroup) * Max(scan->nkeyed_order, 1));
	int			n = 0;

	for (int k = 0; k < scan->nkeyed_order; k++)
		if (scan->subgroups[scan->keyed_order[k]].mask == NULL)
			probed[n++] = scan->subgroups[scan->keyed_order[k]];
	zl_meta_cached_masks(scan->base.rs_rd, scan->metadata_snapshot, probed, n);
	for (int k = 0, m = 0; k < scan->nkeyed_order; k++)
	{
		ZLSubGroup *sg = &scan->subgroups[scan->keyed_order[k]];

		if (sg->mask == NULL && m < n && probed[m].subgroup_id == sg->subgroup_id)
		{
			sg->mask = probed[m].mask;
			sg->masked_rows = probed[m].masked_rows;
			m++;
		}
	}
	pfree(probed);
}

/* a row a key probe found: its sub-group (index into the list) and position */
typedef struct ProbeHit
{
	int			index;
	int32		position;
} ProbeHit;

static int
probe_hit_cmp(const void *a, const void *b)
{
	const ProbeHit *x = a;
	const ProbeHit *y = b;

	if (x->index != y->index)
		return x->index < y->index ? -1 : 1;
	return x->position < y->position ? -1 : (x->position > y->position);
}

typedef struct ProbeHits
{
	ProbeHit   *hits;
	int			n;
	int			max;
} ProbeHits;

static void
add_hit(ProbeHits *h, int index, int32 position)
{
	if (h->n == h->max)
	{
		h->max = Max(64, h->max * 2);
		h->hits = h->hits ? repalloc(h->hits, sizeof(ProbeHit) * h->max) :
			palloc(sizeof(ProbeHit) * h->max);
	}
	h->hits[h->n].index = index;
	h->hits[h->n++].position = position;
}

/*
 * Where a probe of the list looks: the storage's merged key index
 * (zl_keyindex.c) for the sub-groups it covers, and their own key
 * directories for the others, which are loaded (the index's need not be).
 * Scans that probe many times -- the inner side of a nested loop
 * (keep_loaded), 16 keys or more -- build the index when there is none or
 * it lacks too many of the list's sub-groups (ZL_KEY_INDEX_MISSING).
 * Single probes use the index the backend has, and build it (again) only
 * once the sub-groups they looked at outside an index add up to what
 * building costs (zl_key_index_worth_building).  The index is built from
 * every sub-group the snapshot sees, not only those the bounds keep, so
 * that probes with other bounds find theirs in it.  An index of the table
 * that would be too big is not tried: scans that probe many times index
 * their list alone if that fits, single probes use the directories.
 * Without an index in_key_index is NULL.
 */
static void
scan_map_key_index(ZLScanDesc scan, uint64 storage_id)
{
	Relation	rel = scan->base.rs_rd;
	int			n = scan->nsubgroups;
	bool		probes_many = scan->keep_loaded || scan->nkey_hashes >= 16;
	uint8	   *outside = palloc(Max(n, 1));
	int			missing = 0;
	bool		build = false;
	bool		build_from_list = !scan->filtered;

	zl_key_directory_cache_trim();
	scan->key_index = NULL;
	scan->in_key_index = NULL;
	if (n > 0)
		scan->key_index = zl_key_index_map_existing(storage_id, ZL_KEY_INDEX_ALL, scan->subgroups,
													n, &scan->key_index_generation,
													&scan->key_index_map, &scan->in_key_index);
	for (int i = 0; i < n; i++)
		outside[i] = scan->in_key_index != NULL && scan->in_key_index[i] ? ZL_SKIP : ZL_CHECK;
	zl_meta_load_key_directories(storage_id, scan->metadata_snapshot, scan->subgroups, n,
								 outside);
	for (int i = 0; i < n; i++)
		missing += outside[i] != ZL_SKIP && scan->subgroups[i].key_directory != NULL;

	if (n > 0 && (scan->key_index == NULL || missing > ZL_KEY_INDEX_MISSING(n)))
	{
		int64		list_rows = 0;
		int64		rows = zl_meta_cached_rows(rel, scan->metadata_snapshot);

		for (int i = 0; i < n; i++)
			list_rows += scan->subgroups[i].row_count;
		if (rows < 0)			/* not cached: the list's rows tell */
			rows = list_rows;
		if (zl_key_index_fits(rows, n))
			build = probes_many ||
				zl_key_index_worth_building(storage_id, ZL_KEY_INDEX_ALL,
											scan->key_index == NULL ? n : missing, rows);
		else if (probes_many && zl_key_index_fits(list_rows, n))
			build = build_from_list = true; /* the table's would be too big */
	}
	if (build)
	{
		int			nall = n;
		ZLSubGroup *all = build_from_list ? scan->subgroups :
			zl_meta_cached_subgroups(rel, scan->metadata_snapshot, NULL, DATEVAL_NOBEGIN, false,
									 &nall);

		zl_meta_load_key_directories(storage_id, scan->metadata_snapshot, all, nall, NULL);
		if (zl_key_index_build(storage_id, ZL_KEY_INDEX_ALL, all, nall,
							   &scan->key_index_generation) == NULL)
			zl_meta_load_key_directories(storage_id, scan->metadata_snapshot, scan->subgroups,
										 n, NULL);	/* too big after all */
		if (all != scan->subgroups)
			pfree(all);
		scan->key_index = zl_key_index_map_existing(storage_id, ZL_KEY_INDEX_ALL,
													scan->subgroups, n,
													&scan->key_index_generation,
													&scan->key_index_map, &scan->in_key_index);
	}
	scan->has_directory = palloc(sizeof(bool) * Max(n, 1));
	for (int i = 0; i < n; i++)
		scan->has_directory[i] = scan->subgroups[i].key_directory != NULL ||
			(scan->in_key_index != NULL && scan->in_key_index[i]);
	pfree(outside);
	scan->directories_loaded = true;
	scan->directories_generation = zl_key_directory_cache_generation();
	scan->lists_valid = false;
}

/*
 * The positions of the scan's keys in each sub-group (key_positions), and
 * the sub-groups to read, in list order (keyed_order).  Hits come from the
 * merged key index for the sub-groups it covers (scan_map_key_index), else
 * from each sub-group's filter and directory: a sub-group whose filter
 * rules the keys out is skipped without a look at its directory.  Only
 * sub-groups with hits (and those without a directory) are decided against
 * the bounds; the statistics of what the bounds keep are counted on
 * request (zl_scan_stats).
 */
void
zl_scan_probe_keys(ZLScanDesc scan)
{
	uint64		storage_id = zl_storage_id(scan->base.rs_rd);
	int			n = scan->nsubgroups;
	ProbeHits	hits = {NULL, 0, 0};
	MemoryContext old;

	/* what the list keeps (directories, the index's map) lives with it ... */
	if (!scan->directories_loaded ||
		scan->directories_generation != zl_key_directory_cache_generation() ||
		(scan->key_index != NULL &&
		 !zl_key_index_current(storage_id, ZL_KEY_INDEX_ALL, scan->key_index_generation)))
		scan_map_key_index(scan, storage_id);
	if (!scan->lists_valid)
	{
		/* sub-groups probed one by one, and those read whole */
		scan->solo = palloc(sizeof(int) * Max(n, 1));
		scan->whole = palloc(sizeof(int) * Max(n, 1));
		scan->nsolo = scan->nwhole = 0;
		for (int i = 0; i < n; i++)
			if (!scan->has_directory[i])
				scan->whole[scan->nwhole++] = i;
			else if (scan->in_key_index == NULL || !scan->in_key_index[i])
				scan->solo[scan->nsolo++] = i;
		scan->lists_valid = true;
	}

	/* ... what one probe finds, with the probe (once per outer row) */
	MemoryContextReset(scan->probe_context);
	old = MemoryContextSwitchTo(scan->probe_context);
	scan->key_positions = palloc0(sizeof(int32 *) * Max(n, 1));
	scan->nkey_positions = palloc0(sizeof(int) * Max(n, 1));
	scan->keyed_order = palloc(sizeof(int32) * Max(n, 1));
	scan->nkeyed_order = 0;
	scan->stats.subgroups_key_matched = 0;
	memset(scan->decisions, ZL_SKIP, Max(n, 1));

	/* hits from the merged index */
	if (scan->in_key_index != NULL)
		for (int h = 0; h < scan->nkey_hashes; h++)
		{
			int			cursor = -1;
			int			ordinal;
			int32		position;

			while ((ordinal = zl_key_index_find(scan->key_index, scan->key_hashes[h], &cursor,
												&position)) >= 0)
				if (scan->key_index_map[ordinal] >= 0)
					add_hit(&hits, scan->key_index_map[ordinal], position);
		}

	/* hits of the other sub-groups, through their filters and directories */
	for (int k = 0; k < scan->nsolo; k++)
		zl_key_filter_prefetch(scan->subgroups[scan->solo[k]].key_filter, scan->key_hashes,
							   scan->nkey_hashes);
	for (int k = 0; k < scan->nsolo; k++)
	{
		int			i = scan->solo[k];
		ZLSubGroup *sg = &scan->subgroups[i];
		int32	   *positions;
		int			npositions;

		if (scan->nkey_hashes == 0 ||
			!zl_key_filter_may_hold(sg->key_filter, scan->key_hashes, scan->nkey_hashes))
			continue;
		positions = zl_key_directory_probe(sg->key_directory, scan->key_hashes,
										   scan->nkey_hashes, &npositions);
		for (int p = 0; p < npositions; p++)
			add_hit(&hits, i, positions[p]);
	}

	/* group the hits by sub-group; keep those the bounds keep */
	if (hits.n > 1)
		qsort(hits.hits, hits.n, sizeof(ProbeHit), probe_hit_cmp);
	for (int h = 0; h < hits.n;)
	{
		int			i = hits.hits[h].index;
		int			end = h;

		while (end < hits.n && hits.hits[end].index == i)
			end++;
		scan->decisions[i] = zl_prune_decide(&scan->opts, &scan->bounds,
											 zipper_lake_enable_pruning, &scan->subgroups[i]);
		if (scan->decisions[i] != ZL_SKIP)
		{
			scan->key_positions[i] = palloc(sizeof(int32) * (end - h));
			for (int k = h; k < end; k++)
				scan->key_positions[i][k - h] = hits.hits[k].position;
			scan->nkey_positions[i] = end - h;
			scan->stats.subgroups_key_matched++;
			scan->keyed_order[scan->nkeyed_order++] = i;
		}
		h = end;
	}

	/* sub-groups without a directory: read whole where the bounds keep them */
	for (int k = 0; k < scan->nwhole; k++)
	{
		int			i = scan->whole[k];

		scan->decisions[i] = zl_prune_decide(&scan->opts, &scan->bounds,
											 zipper_lake_enable_pruning, &scan->subgroups[i]);
		scan->nkey_positions[i] = -1;
		if (scan->decisions[i] != ZL_SKIP)
			scan->keyed_order[scan->nkeyed_order++] = i;
	}
	if (scan->nwhole > 0)
		qsort(scan->keyed_order, scan->nkeyed_order, sizeof(int32), zl_position_cmp);
	MemoryContextSwitchTo(old);
	if (scan->filtered)
		scan_load_probed_masks(scan);
}

/* the row at a position of the current row sub-group, pinning its block */
static void
scan_fetch_position(ZLScanDesc scan, int32 position)
{
	const ZLSubGroup *sg = scan->current;
	ItemPointerData tid;
	BlockNumber block;
	OffsetNumber offset;
	ItemId		itemid;

	/* inside its blocks: zl_scan_step_probe checked it */
	zl_position_page_item(sg, position, &tid);
	block = ItemPointerGetBlockNumber(&tid);
	offset = ItemPointerGetOffsetNumber(&tid);
	if (!BufferIsValid(scan->buffer) || scan->block != block)
		zl_scan_read_block(scan, block, true);
	if (offset > scan->max_offset ||
		!ItemIdIsNormal(itemid = PageGetItemId(BufferGetPage(scan->buffer), offset)))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("key directory of sub-group " INT64_FORMAT " names a missing row at position %d",
						sg->subgroup_id, position)));
	scan->offset = offset;
	scan->tuple.t_data = (HeapTupleHeader) PageGetItem(BufferGetPage(scan->buffer), itemid);
	scan->tuple.t_len = ItemIdGetLength(itemid);
	scan->tuple.t_tableOid = RelationGetRelid(scan->base.rs_rd);
	zl_position_tid(sg, position, &scan->tuple.t_self);
}

/*
 * Next unmasked row, in the scan's direction, at the probed positions of
 * the current sub-group, into the slot.
 */
ZLPageStep
zl_scan_step_probe(ZLScanDesc scan, TupleTableSlot *slot, bool forward)
{
	const int32 *positions = scan->key_positions[scan->current_index];
	int			npositions = scan->nkey_positions[scan->current_index];

	for (;;)
	{
		int			next = scan->probe_index + (forward ? 1 : -1);

		if (next < 0 || next >= npositions)
			return ZL_STEP_SUBGROUP_DONE;
		scan->probe_index = next;
		zl_check_position(scan->current, positions[next]);
		if (ZL_ROW_MASKED(scan->current, positions[next]))
		{
			scan->stats.rows_masked++;
			continue;
		}
		if (scan->columnar != NULL)
		{
			int			chunk;

			/* decode no chunk whose min/max exclude it */
			chunk = zl_columnar_chunk_of(scan->columnar, (uint32) positions[next]);
			if (chunk != scan->chunk)
			{
				ZLChunkStep step = zl_scan_enter_chunk(scan, chunk, forward);

				scan->chunk = chunk;
				scan->chunk_excluded = step != ZL_CHUNK_READ && step != ZL_CHUNK_ALL;
			}
			if (scan->chunk_excluded)
				continue;
			zl_scan_store_columnar_row(scan, slot, positions[next]);
			if (scan->chunk_checks &&
				!zl_bounds_match(&scan->bounds,
								 value_instant(scan, slot, scan->opts.from_attnum),
								 value_instant(scan, slot, scan->opts.to_attnum)))
				continue;
			return ZL_STEP_ROW;
		}
		scan_fetch_position(scan, positions[next]);
		if (scan->current_decision == ZL_CHECK &&
			!zl_bounds_match(&scan->bounds,
							 zl_scan_tuple_instant(scan, &scan->tuple, scan->opts.from_attnum),
							 zl_scan_tuple_instant(scan, &scan->tuple, scan->opts.to_attnum)))
			continue;
		ExecStoreBufferHeapTuple(&scan->tuple, slot, scan->buffer);
		return ZL_STEP_ROW;
	}
}
