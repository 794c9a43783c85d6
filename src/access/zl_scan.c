/*-------------------------------------------------------------------------
 *
 * zl_scan.c
 *	  Scanning a zipper table: the scan core shared by every reader.
 *
 * A scan loads, with its own snapshot, the list of visible sub-groups and
 * their masks (zl_metacache.c), then walks each sub-group's block range in
 * order, skipping masked rows.  The list is loaded when first needed: a
 * scan given bounds loads only the sub-groups the bounds can keep
 * (zl_bounds_filter), so that the fixed cost of a selective read does not
 * grow with the history; EXPLAIN's totals are then counted on request.
 * Pages are immutable once reachable, so a pin is all a reader needs: rows
 * are handed out as buffer heap tuples without copying, and no lock of
 * ours is taken.  Columnar sub-groups are read chunk by chunk
 * (zl_scan_columnar.c); a scan given key hashes reads only the rows key
 * directories name for them (zl_scan_probe.c).
 *
 * Rows are identified inside their sub-group by their positions
 * (storage/zl_subgroup_read.c, "Row positions"), which masks list, so any
 * row can be checked from its TID alone (ANALYZE's block sampling)
 * without reading the pages before it.
 *
 * Bounds (zl_prune.c) skip whole sub-groups, and inside a sub-group that
 * is not known to match entirely, rows are checked one by one.  Rows of a
 * sub-group are sorted by valid_from, so a bounded scan starts at the
 * first block that can hold valid_from >= from_lo (binary search over the
 * blocks' last rows) and stops at the first row past from_hi: a point
 * lookup by (key, valid_from) reads one or two pages per sub-group kept.
 *
 * Kept sub-groups lie anywhere in the file, so the kernel's read-ahead of
 * sequential reads stops at the end of each; a forward scan prefetches the
 * heads of the next ones itself (scan_prefetch_next_heads).
 *
 * Parallel scans share out whole sub-groups through an atomic counter in
 * shared memory.  A parallel ZipperScan's leader prunes once and shares
 * the sub-groups it keeps (zl_scan_share, "Shared list" below); other
 * parallel scans (a Parallel Seq Scan) have every participant load the
 * same list and take the same pruning decisions from the leader's
 * snapshot.
 *
 * Direction
 * ---------
 * Serial scans also run backward (SCROLL cursors): sub-groups in reverse
 * list order, blocks and line pointers downward, with the same masks and
 * pruning decisions; a bounded backward scan enters a sub-group at the
 * last block that can hold valid_from <= from_hi (binary search over the
 * blocks' first rows) and stops at the first row before from_lo.  The
 * scan's position is the row it returned last, so it can turn at any row
 * (zl_scan_getnextslot).  Parallel scans run forward only.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "common/zl_guc.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write.h"
#include "access/zl_scan_internal.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/parallel.h"
#include "access/tableam.h"
#include "access/tsmapi.h"
#include "executor/tuptable.h"
#include "nodes/execnodes.h"
#include "miscadmin.h"
#include "pgtime.h"
#include "port/atomics.h"
#include "storage/bufmgr.h"
#include "storage/bufpage.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/spccache.h"

typedef struct ZLParallelScanDescData
{
	ParallelTableScanDescData base;
	pg_atomic_uint32 next_subgroup;
	Size		shared_off;		/* from this struct to a ZLSharedList, 0: none */
} ZLParallelScanDescData;

/*
 * Shared list
 * -----------
 * What a parallel ZipperScan's leader shares with its workers, after the
 * table access method's parallel scan descriptor in the custom scan's
 * dynamic shared memory: the sub-groups its bounds kept, each with its
 * pruning decision and the offset of its mask, then the masks.  Workers
 * read sub-groups from it and never the catalog.  Masks beyond
 * ZL_SHARED_MASK_BYTES in all are not copied: nothing is shared then, and
 * every participant loads its own list (zl_scan_shared_size returns 0).
 * The table's options travel with it (its time zone's name copied in),
 * so that a worker's ZipperScan need not read the registration either.  Participants count the
 * sub-groups they read and the masked rows they step over in it, for the
 * leader's EXPLAIN ANALYZE.
 */
#define ZL_SHARED_MASK_BYTES	((Size) 16 * 1024 * 1024)

typedef struct ZLSharedSubGroup
{
	ZLSubGroup	sg;				/* key_directory, key_filter, mask: NULL */
	Size		mask_off;		/* from the ZLSharedList, 0: none masked */
	uint8		decision;
} ZLSharedSubGroup;

typedef struct ZLSharedList
{
	ZLTableOptions opts;		/* time_zone: NULL, see the next */
	char		time_zone[TZ_STRLEN_MAX + 1];
	ZLScanBounds bounds;
	int			nsubgroups;
	pg_atomic_uint32 subgroups_read;
	pg_atomic_uint64 rows_masked;
	ZLSharedSubGroup subgroups[FLEXIBLE_ARRAY_MEMBER];
} ZLSharedList;

/* the bytes a sub-group's mask takes in the shared list (0: none) */
static Size
shared_mask_bytes(const ZLSubGroup *sg)
{
	return sg->mask == NULL ? 0 : MAXALIGN((zl_subgroup_positions(sg) + 7) / 8);
}

static ZLSharedList *
shared_list_of(ParallelTableScanDesc pscan)
{
	ZLParallelScanDescData *zpscan = (ZLParallelScanDescData *) pscan;

	if (zpscan == NULL || zpscan->shared_off == 0)
		return NULL;
	return (ZLSharedList *) ((char *) zpscan + zpscan->shared_off);
}

static ZLSharedList *
shared_list(ZLScanDesc scan)
{
	return shared_list_of(scan->base.rs_parallel);
}

/*
 * Metadata must be read with an MVCC snapshot.  Scans with another kind
 * (or none, like ANALYZE) use the transaction's current one.
 */
static Snapshot
metadata_snapshot(Snapshot scan_snapshot)
{
	if (scan_snapshot != InvalidSnapshot && IsMVCCSnapshot(scan_snapshot))
		return scan_snapshot;
	return ActiveSnapshotSet() ? GetActiveSnapshot() : GetTransactionSnapshot();
}

static bool subgroup_has_rows(ZLScanDesc scan, int index);

static void
scan_release_buffer(ZLScanDesc scan)
{
	if (BufferIsValid(scan->buffer))
		ReleaseBuffer(scan->buffer);
	scan->buffer = InvalidBuffer;
}

/* stop reading the current sub-group: unpin its page */
static void
scan_release(ZLScanDesc scan)
{
	scan_release_buffer(scan);
	if (scan->columnar != NULL)
		zl_columnar_release(scan->columnar);
	scan->columnar = NULL;
}

/*
 * Load the visible sub-groups: all of them, or (filter given) a superset
 * of those that bounds can keep.  Every participant of a parallel scan
 * loads the same list, in the same order, from the same snapshot.
 */
static void
scan_load_subgroups(ZLScanDesc scan, const ZLSubGroupFilter *filter)
{
	MemoryContext old;
	uint64		catalog_reads = zl_meta_cache_catalog_reads();

	scan_release(scan);
	MemoryContextReset(scan->metadata_context);
	scan->current = NULL;
	scan->current_index = -1;
	scan->prefetched_index = -1;
	scan->decisions = NULL;
	scan->by_block = NULL;
	scan->key_positions = NULL;
	scan->keyed_order = NULL;
	scan->probing = false;
	scan->directories_loaded = false;
	scan->lists_valid = false;
	old = MemoryContextSwitchTo(scan->metadata_context);
	/* a key probe reads the masks of the sub-groups holding its keys only */
	scan->subgroups = zl_meta_cached_subgroups(scan->base.rs_rd, scan->metadata_snapshot,
											   filter, DATEVAL_NOBEGIN,
											   !(scan->keyed && filter != NULL),
											   &scan->nsubgroups);
	MemoryContextSwitchTo(old);
	scan->metadata_from_catalog = zl_meta_cache_catalog_reads() != catalog_reads;
	scan->loaded = true;
	scan->strategy_chosen = false;
	scan->filtered = filter != NULL;
	scan->totals_pending = filter != NULL;
}

/*
 * A participant of a parallel ZipperScan takes the leader's list: the
 * sub-groups kept, their decisions, masks in shared memory (read only).
 */
static void
scan_attach_shared(ZLScanDesc scan, ZLSharedList *shared)
{
	MemoryContext old = MemoryContextSwitchTo(scan->metadata_context);

	scan->nsubgroups = shared->nsubgroups;
	scan->subgroups = palloc(sizeof(ZLSubGroup) * Max(shared->nsubgroups, 1));
	scan->decisions = palloc(Max(shared->nsubgroups, 1));
	for (int i = 0; i < shared->nsubgroups; i++)
	{
		ZLSharedSubGroup *s = &shared->subgroups[i];

		scan->subgroups[i] = s->sg;
		scan->subgroups[i].mask = s->mask_off == 0 ? NULL :
			(uint8 *) ((char *) shared + s->mask_off);
		scan->decisions[i] = s->decision;
	}
	MemoryContextSwitchTo(old);
	scan->loaded = true;
	scan->attached = true;
	scan->current_index = -1;
	scan->prefetched_index = -1;
}

/* an unbounded scan reads every visible sub-group */
static void
scan_ensure_loaded(ZLScanDesc scan)
{
	if (!scan->loaded)
		scan_load_subgroups(scan, NULL);
}

TableScanDesc
zl_scan_begin(Relation rel, Snapshot snapshot, int nkeys, struct ScanKeyData *key,
			  ParallelTableScanDesc pscan, uint32 flags)
{
	ZLScanDesc	scan;
	MemoryContext context;

	/* a transaction reads its own writes */
	if (!IsParallelWorker())
		zl_write_flush_relation(RelationGetRelid(rel));

	context = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake scan",
									ALLOCSET_DEFAULT_SIZES);
	scan = MemoryContextAllocZero(context, sizeof(ZLScanDescData));
	scan->context = context;
	scan->base.rs_rd = rel;
	scan->base.rs_snapshot = snapshot;
	scan->base.rs_nkeys = nkeys;
	scan->base.rs_key = key;
	scan->base.rs_flags = flags;
	scan->base.rs_parallel = pscan;
	scan->buffer = InvalidBuffer;
	scan->sample_block = InvalidBlockNumber;
	scan->old_columns = !IsParallelWorker() && zl_rewrite_reads_old_rows(rel);
	scan->metadata_context = AllocSetContextCreate(context, "zipper_lake scan metadata",
												   ALLOCSET_DEFAULT_SIZES);
	scan->probe_context = AllocSetContextCreate(context, "zipper_lake key probe",
												ALLOCSET_DEFAULT_SIZES);
	scan->io_concurrency = get_tablespace_io_concurrency(rel->rd_rel->reltablespace);

	scan->metadata_snapshot = metadata_snapshot(snapshot);
	if (!(flags & SO_TEMP_SNAPSHOT) && snapshot != scan->metadata_snapshot)
	{
		scan->metadata_snapshot = RegisterSnapshot(scan->metadata_snapshot);
		scan->unregister_snapshot = true;
	}

	scan->allow_strategy = (flags & SO_ALLOW_STRAT) != 0;
	if (shared_list(scan) != NULL)
		scan_attach_shared(scan, shared_list(scan));

	return (TableScanDesc) scan;
}

void
zl_scan_end(TableScanDesc sscan)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;

	scan_release(scan);
	if (scan->tid_map != NULL)
		zl_tid_map_end(scan->tid_map);
	if (scan->strategy)
		FreeAccessStrategy(scan->strategy);
	if (scan->unregister_snapshot)
		UnregisterSnapshot(scan->metadata_snapshot);
	if (scan->base.rs_flags & SO_TEMP_SNAPSHOT)
		UnregisterSnapshot(scan->base.rs_snapshot);
	MemoryContextDelete(scan->context);
}

void
zl_scan_rescan(TableScanDesc sscan, struct ScanKeyData *key, bool set_params,
			   bool allow_strat, bool allow_sync, bool allow_pagemode)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;

	scan_release(scan);
	scan->current = NULL;
	scan->current_index = -1;
	scan->prefetched_index = -1;
	scan->probing = false;
	scan->sample_block = InvalidBlockNumber;
	if (set_params)
	{
		scan->allow_strategy = allow_strat;
		scan->strategy_chosen = false;
	}
}

/*
 * Restrict the scan to rows within bounds.  Call before the first row and
 * again after a rescan whose bound values changed.  With pruning on, only
 * the sub-groups that can matter are loaded (again, for new bounds); with
 * it off, all of them, each checked row by row.
 */
void
zl_scan_set_bounds(TableScanDesc sscan, const ZLTableOptions *opts,
				   const ZLScanBounds *bounds)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;
	MemoryContext old;

	scan->bounded = true;
	scan->bounds = *bounds;
	scan->opts = *opts;
	if (scan->attached)
	{
		/* the leader's decisions, for its bounds: the same */
		scan->bounds = shared_list(scan)->bounds;
		scan->strategy_chosen = false;
		return;
	}
	if (zipper_lake_enable_pruning && !scan->keep_loaded)
	{
		ZLSubGroupFilter filter;

		zl_bounds_filter(opts, bounds, &filter);
		scan_load_subgroups(scan, &filter);
	}
	else if (!scan->loaded || scan->filtered)
		scan_load_subgroups(scan, NULL);

	old = MemoryContextSwitchTo(scan->metadata_context);
	if (scan->decisions == NULL)
		scan->decisions = palloc(Max(scan->nsubgroups, 1));
	if (scan->keyed)
		zl_scan_probe_keys(scan);	/* decides only where the keys may be */
	else
		zl_prune(opts, bounds, zipper_lake_enable_pruning, scan->subgroups,
				 scan->nsubgroups, scan->decisions, &scan->stats);
	scan->stats_pending = scan->keyed;
	scan->groups_counted = false;
	MemoryContextSwitchTo(old);
	scan->strategy_chosen = false;
}

/*
 * Keep the list of sub-groups across zl_scan_set_bounds calls: load all of
 * them once instead of those each set of bounds can keep.  For a scan
 * rescanned with new bounds or keys per outer row.
 */
void
zl_scan_keep_subgroups(TableScanDesc sscan)
{
	((ZLScanDesc) sscan)->keep_loaded = true;
}

/*
 * What the bounds kept of the visible sub-groups, partitions and file
 * groups.  A filtered load saw only part of them: count the totals now.
 */
const ZLPruneStats *
zl_scan_stats(TableScanDesc sscan)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;

	if (scan->stats_pending)
	{
		/* a key probe decided only where its keys may be: decide all now */
		uint8	   *decisions = palloc(Max(scan->nsubgroups, 1));
		ZLPruneStats key_stats = scan->stats;

		zl_prune(&scan->opts, &scan->bounds, zipper_lake_enable_pruning, scan->subgroups,
				 scan->nsubgroups, decisions, &scan->stats);
		zl_prune_count_groups(scan->subgroups, scan->nsubgroups, decisions, &scan->stats);
		scan->stats.rows_masked = key_stats.rows_masked;
		scan->stats.subgroups_key_matched = key_stats.subgroups_key_matched;
		for (int i = 0; i < scan->nsubgroups; i++)
			if (decisions[i] != ZL_SKIP)
			{
				if (scan->has_directory[i])
					scan->stats.subgroups_key_probed++;
				if (scan->in_key_index != NULL && scan->in_key_index[i])
					scan->stats.subgroups_key_merged++;
				else if (!scan->has_directory[i])
					scan->stats.subgroups_key_unindexed++;
			}
		pfree(decisions);
		scan->stats_pending = false;
		scan->groups_counted = true;
	}
	if (scan->bounded && scan->decisions != NULL && !scan->groups_counted)
	{
		zl_prune_count_groups(scan->subgroups, scan->nsubgroups, scan->decisions,
							  &scan->stats);
		scan->groups_counted = true;
	}
	if (scan->totals_pending)
	{
		zl_meta_count_subgroups(zl_storage_id(scan->base.rs_rd), scan->metadata_snapshot,
								&scan->stats);
		scan->totals_pending = false;
	}
	scan->stats.metadata_from_catalog = scan->metadata_from_catalog;
	return &scan->stats;
}

/* does a sub-group have anything for this scan? */
static bool
subgroup_has_rows(ZLScanDesc scan, int index)
{
	const ZLSubGroup *sg = &scan->subgroups[index];

	if (scan->bounded && scan->decisions[index] == ZL_SKIP)
		return false;
	if (scan->key_positions != NULL && scan->nkey_positions[index] == 0)
		return false;			/* a key probe found none of its keys */
	return sg->blocks > 0 && sg->masked_rows < sg->row_count;
}

/*
 * Like a heap sequential scan, a scan that reads more than a quarter of
 * shared buffers goes through a small ring of them, so as not to evict
 * everything else.  What counts is what this scan reads, not the size of
 * the file: a pruned scan of a large table reads few pages, and caches
 * them like an index scan would.  Chosen once the kept sub-groups are
 * known; every participant of a parallel scan makes the same choice.
 * Sub-groups checked row by row count whole, though a bounded one may be
 * read only in part: an upper bound.  Freeing a ring whose buffer is still
 * pinned is fine: the buffer stays valid, it just is no longer recycled.
 */
static void
scan_choose_strategy(ZLScanDesc scan)
{
	uint64		blocks = 0;

	if (scan->allow_strategy && scan->keyed_order != NULL)
		for (int k = 0; k < scan->nkeyed_order; k++)
		{
			int			i = scan->keyed_order[k];

			blocks += scan->nkey_positions[i] >= 0 ?
				Min(scan->nkey_positions[i], scan->subgroups[i].blocks) :
				scan->subgroups[i].blocks;
		}
	else if (scan->allow_strategy)
		for (int i = 0; i < scan->nsubgroups; i++)
			if (subgroup_has_rows(scan, i))
				blocks += scan->subgroups[i].blocks;

	if (blocks > (uint64) (NBuffers / 4))
	{
		if (scan->strategy == NULL)
			scan->strategy = GetAccessStrategy(BAS_BULKREAD);
	}
	else if (scan->strategy != NULL)
	{
		FreeAccessStrategy(scan->strategy);
		scan->strategy = NULL;
	}
	scan->strategy_chosen = true;
}

/*
 * Move to the next sub-group this participant should read, in the scan's
 * direction: from none, the first or the last one.  False when there is
 * none left; the scan then stands nowhere again.  Parallel scans go
 * forward only.
 */
static bool
scan_next_subgroup(ZLScanDesc scan, bool forward)
{
	scan_ensure_loaded(scan);
	if (!scan->strategy_chosen)
		scan_choose_strategy(scan);
	for (;;)
	{
		int			index;

		if (scan->base.rs_parallel != NULL)
		{
			ZLParallelScanDescData *pscan =
				(ZLParallelScanDescData *) scan->base.rs_parallel;

			index = (int) pg_atomic_fetch_add_u32(&pscan->next_subgroup, 1);
		}
		else if (scan->keyed_order != NULL)
		{
			/* a key probe walks just the sub-groups it reads */
			int			pos = scan->current_index < 0 ?
				(forward ? 0 : scan->nkeyed_order - 1) :
				scan->keyed_pos + (forward ? 1 : -1);

			if (pos < 0 || pos >= scan->nkeyed_order)
				index = -1;
			else
			{
				index = scan->keyed_order[pos];
				scan->keyed_pos = pos;
			}
		}
		else if (scan->current_index < 0)
			index = forward ? 0 : scan->nsubgroups - 1;
		else
			index = scan->current_index + (forward ? 1 : -1);

		if (scan->columnar != NULL)
			scan_release(scan);
		if (index < 0 || index >= scan->nsubgroups)
		{
			if (scan->attached)
			{
				/* this participant is done: its masked rows, for EXPLAIN */
				pg_atomic_fetch_add_u64(&shared_list(scan)->rows_masked,
										scan->stats.rows_masked - scan->masked_reported);
				scan->masked_reported = scan->stats.rows_masked;
			}
			scan->current = NULL;
			scan->current_index = -1;
			return false;
		}
		scan->current_index = index;
		if (subgroup_has_rows(scan, index))
		{
			if (scan->attached)
				pg_atomic_fetch_add_u32(&shared_list(scan)->subgroups_read, 1);
			scan->stats.subgroups_read++;
			scan->current = &scan->subgroups[index];
			scan->row = forward ? -1 : scan->current->row_count;
			scan->current_decision = scan->bounded ? scan->decisions[index] : ZL_ALL_MATCH;
			scan->probing = scan->key_positions != NULL && scan->nkey_positions[index] >= 0;
			zl_scan_open_columnar(scan);
			if (scan->probing)
				scan->probe_index = forward ? -1 : scan->nkey_positions[index];
			return true;
		}
	}
}

/* pin a block and stand just outside its rows, on the side we enter from */
void
zl_scan_read_block(ZLScanDesc scan, BlockNumber block, bool forward)
{
	scan_release_buffer(scan);
	scan->buffer = ReadBufferExtended(scan->base.rs_rd, MAIN_FORKNUM, block,
									  RBM_NORMAL, scan->strategy);
	scan->block = block;
	scan->max_offset = PageGetMaxOffsetNumber(BufferGetPage(scan->buffer));
	scan->offset = forward ? InvalidOffsetNumber : OffsetNumberNext(scan->max_offset);
}

/* read-ahead across sub-groups: how many, and how much of each */
#define ZL_PREFETCH_SUBGROUPS	4
#define ZL_PREFETCH_HEAD_BLOCKS	32

/*
 * A scan that starts a sub-group asks the kernel for the heads of the next
 * kept ones it will read whole, so that their I/O overlaps the reading of
 * this one; inside a sub-group, reads are sequential and the kernel's own
 * read-ahead does better than block-by-block advice.  Sub-groups whose rows
 * are checked are not prefetched: a binary search and an early stop may
 * read only a page or two of them.  In a parallel scan the next sub-groups
 * go to whichever participant claims them, and the page cache they are
 * read into is shared by all.  effective_io_concurrency = 0 turns it off.
 */
static void
scan_prefetch_next_heads(ZLScanDesc scan)
{
	int			next = scan->current_index;

	if (scan->io_concurrency == 0)
		return;
	for (int n = 0; n < ZL_PREFETCH_SUBGROUPS; n++)
	{
		const ZLSubGroup *sg;

		do
			next++;
		while (next < scan->nsubgroups && !subgroup_has_rows(scan, next));
		if (next >= scan->nsubgroups)
			return;
		if (next <= scan->prefetched_index ||
			(scan->bounded && scan->decisions[next] != ZL_ALL_MATCH) ||
			(scan->key_positions != NULL && scan->nkey_positions[next] >= 0))
			continue;			/* asked for already, or may not be read whole */
		sg = &scan->subgroups[next];
		for (int i = 0; i < Min(sg->blocks, ZL_PREFETCH_HEAD_BLOCKS); i++)
			(void) PrefetchBuffer(scan->base.rs_rd, MAIN_FORKNUM, sg->first_block + i);
		scan->prefetched_index = next;
	}
}

int64
zl_scan_tuple_instant(ZLScanDesc scan, HeapTuple tuple, AttrNumber attnum)
{
	bool		isnull;
	Datum		d = heap_getattr(tuple, attnum, RelationGetDescr(scan->base.rs_rd), &isnull);

	return isnull ? PG_INT64_MIN : zl_datum_to_instant(d, scan->opts.period_type);
}

/* valid_from of the first or the last row of a block */
static int64
block_edge_from(ZLScanDesc scan, BlockNumber block, bool last)
{
	Buffer		buffer = ReadBufferExtended(scan->base.rs_rd, MAIN_FORKNUM, block,
											RBM_NORMAL, scan->strategy);
	Page		page = BufferGetPage(buffer);
	ItemId		itemid = PageGetItemId(page, last ? PageGetMaxOffsetNumber(page) :
									   FirstOffsetNumber);
	HeapTupleData tuple;
	int64		from;

	tuple.t_data = (HeapTupleHeader) PageGetItem(page, itemid);
	tuple.t_len = ItemIdGetLength(itemid);
	from = zl_scan_tuple_instant(scan, &tuple, scan->opts.from_attnum);
	ReleaseBuffer(buffer);
	return from;
}

/*
 * Are the rows of the current sub-group checked against a valid_from range
 * they are sorted by?  Then a scan can skip the blocks before the range and
 * stop at the first row past it, in either direction.
 */
bool
zl_scan_uses_sort_order(ZLScanDesc scan)
{
	return scan->current_decision == ZL_CHECK && !scan->bounds.either &&
		scan->current->placed;
}

/*
 * The block to enter the current sub-group at: going forward, the first
 * that can hold a row with valid_from >= from_lo (binary search over the
 * blocks' last rows); going backward, the last that can hold one with
 * valid_from <= from_hi (over the blocks' first rows).
 */
static BlockNumber
scan_entry_block(ZLScanDesc scan, bool forward)
{
	const ZLSubGroup *sg = scan->current;
	BlockNumber lo = sg->first_block;
	BlockNumber hi = sg->first_block + sg->blocks - 1;

	if (!zl_scan_uses_sort_order(scan) ||
		(forward ? sg->first_start >= scan->bounds.from_lo :
		 sg->last_start <= scan->bounds.from_hi))
		return forward ? lo : hi;
	while (lo < hi)
	{
		if (forward)
		{
			BlockNumber mid = lo + (hi - lo) / 2;

			if (block_edge_from(scan, mid, true) < scan->bounds.from_lo)
				lo = mid + 1;
			else
				hi = mid;
		}
		else
		{
			BlockNumber mid = hi - (hi - lo) / 2;

			if (block_edge_from(scan, mid, false) > scan->bounds.from_hi)
				hi = mid - 1;
			else
				lo = mid;
		}
	}
	return lo;
}

/* point the scan's tuple at the row of the current page at offset */
static inline void
scan_point_at_row(ZLScanDesc scan, Page page, OffsetNumber offset, ItemId itemid)
{
	scan->tuple.t_data = (HeapTupleHeader) PageGetItem(page, itemid);
	scan->tuple.t_len = ItemIdGetLength(itemid);
	scan->tuple.t_tableOid = RelationGetRelid(scan->base.rs_rd);
	zl_page_item_tid(scan->current, scan->block, offset, &scan->tuple.t_self);
}

/*
 * Next unmasked row of the current page, in the scan's direction, into
 * the slot.
 */
static ZLPageStep
scan_step_on_page(ZLScanDesc scan, TupleTableSlot *slot, bool forward, double *masked)
{
	Page		page = BufferGetPage(scan->buffer);

	while (forward ? scan->offset < scan->max_offset : scan->offset > FirstOffsetNumber)
	{
		OffsetNumber offset = forward ? ++scan->offset : --scan->offset;
		ItemId		itemid = PageGetItemId(page, offset);

		if (!ItemIdIsNormal(itemid))
			continue;
		if (ZL_ROW_MASKED(scan->current, zl_page_position(scan->current, scan->block, offset)))
		{
			if (masked)
				(*masked) += 1;
			scan->stats.rows_masked++;
			continue;
		}
		scan_point_at_row(scan, page, offset, itemid);
		if (scan->current_decision == ZL_CHECK)
		{
			int64		from = zl_scan_tuple_instant(scan, &scan->tuple, scan->opts.from_attnum);

			if (!zl_bounds_match(&scan->bounds, from,
								 zl_scan_tuple_instant(scan, &scan->tuple, scan->opts.to_attnum)))
			{
				/* sorted by valid_from: nothing further in the sub-group qualifies */
				if (zl_scan_uses_sort_order(scan) &&
					(forward ? from > scan->bounds.from_hi : from < scan->bounds.from_lo))
					return ZL_STEP_SUBGROUP_DONE;
				continue;
			}
		}
		ExecStoreBufferHeapTuple(&scan->tuple, slot, scan->buffer);
		return ZL_STEP_ROW;
	}
	return ZL_STEP_PAGE_DONE;
}

/*
 * The next row in either direction.  Between calls the scan stands on the
 * row it returned last, or nowhere (not started, or run off either end):
 * then, as a heap scan does, it starts at the first row going forward and
 * at the last going backward.  So a change of direction returns the row
 * before (after) the one returned last, and a backward call after the end
 * the last row.  Only forward scans prefetch.
 */
bool
zl_scan_getnextslot(TableScanDesc sscan, ScanDirection direction, TupleTableSlot *slot)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;
	bool		forward = ScanDirectionIsForward(direction);

	if (ScanDirectionIsNoMovement(direction) ||
		(!forward && scan->base.rs_parallel != NULL))
		elog(ERROR, "unexpected zipper_lake scan direction %d%s", (int) direction,
			 scan->base.rs_parallel != NULL ? " in a parallel scan" : "");
	if (scan->old_columns && scan->row_desc == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(scan->context);

		scan->row_desc = CreateTupleDescCopyConstr(slot->tts_tupleDescriptor);
		MemoryContextSwitchTo(old);
	}

	for (;;)
	{
		ZLPageStep	step = ZL_STEP_SUBGROUP_DONE;

		CHECK_FOR_INTERRUPTS();

		if (scan->current != NULL && scan->probing)
			step = zl_scan_step_probe(scan, slot, forward);
		else if (scan->columnar != NULL)
			step = zl_scan_step_columnar(scan, slot, forward);
		else if (BufferIsValid(scan->buffer))
			step = scan_step_on_page(scan, slot, forward, NULL);
		if (step == ZL_STEP_ROW)
			return true;

		if (step == ZL_STEP_PAGE_DONE && scan->columnar == NULL &&
			(forward ? scan->block + 1 < scan->current->first_block + scan->current->blocks :
			 scan->block > scan->current->first_block))
			zl_scan_read_block(scan, forward ? scan->block + 1 : scan->block - 1, forward);
		else if (scan_next_subgroup(scan, forward))
		{
			if (forward && !scan->probing)
				scan_prefetch_next_heads(scan);
			if (scan->probing || scan->columnar != NULL)
				continue;		/* rows come from positions or chunks */
			zl_scan_read_block(scan, scan_entry_block(scan, forward), forward);
		}
		else
		{
			scan_release(scan);
			ExecClearTuple(slot);
			return false;
		}
	}
}

/* ---------- parallel scans ---------- */

Size
zl_parallelscan_estimate(Relation rel)
{
	return sizeof(ZLParallelScanDescData);
}

Size
zl_parallelscan_initialize(Relation rel, ParallelTableScanDesc pscan)
{
	ZLParallelScanDescData *zpscan = (ZLParallelScanDescData *) pscan;

	zpscan->base.phs_relid = RelationGetRelid(rel);
	zpscan->base.phs_syncscan = false;
	pg_atomic_init_u32(&zpscan->next_subgroup, 0);
	zpscan->shared_off = 0;
	return sizeof(ZLParallelScanDescData);
}

void
zl_parallelscan_reinitialize(Relation rel, ParallelTableScanDesc pscan)
{
	ZLParallelScanDescData *zpscan = (ZLParallelScanDescData *) pscan;

	pg_atomic_write_u32(&zpscan->next_subgroup, 0);
}

/*
 * The bytes of the shared list (see above) of what a scan's bounds kept
 * (zl_scan_set_bounds first), or 0 when it is not to be shared: no bounds
 * set, or masks too large.
 */
Size
zl_scan_shared_size(TableScanDesc sscan)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;
	Size		size = offsetof(ZLSharedList, subgroups);
	Size		masks = 0;

	if (!scan->bounded || scan->keyed || scan->attached)
		return 0;
	for (int i = 0; i < scan->nsubgroups; i++)
	{
		const ZLSubGroup *sg = &scan->subgroups[i];

		if (!subgroup_has_rows(scan, i))
			continue;
		size += sizeof(ZLSharedSubGroup);
		masks += shared_mask_bytes(sg);
	}
	return masks > ZL_SHARED_MASK_BYTES ? 0 : MAXALIGN(size) + masks;
}

/*
 * Write the shared list of a scan into space of zl_scan_shared_size bytes
 * at offset from a parallel scan descriptor (in the same shared memory),
 * for the participants that begin a scan with that descriptor.
 */
void
zl_scan_share(TableScanDesc sscan, ParallelTableScanDesc pscan, Size offset)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;
	ZLSharedList *shared = (ZLSharedList *) ((char *) pscan + offset);
	Size		mask_off;
	int			n = 0;

	for (int i = 0; i < scan->nsubgroups; i++)
		n += subgroup_has_rows(scan, i) ? 1 : 0;
	shared->opts = scan->opts;
	shared->opts.time_zone = NULL;
	strlcpy(shared->time_zone, scan->opts.time_zone, sizeof(shared->time_zone));
	shared->bounds = scan->bounds;
	shared->nsubgroups = n;
	pg_atomic_init_u32(&shared->subgroups_read, 0);
	pg_atomic_init_u64(&shared->rows_masked, 0);
	mask_off = MAXALIGN(offsetof(ZLSharedList, subgroups) + sizeof(ZLSharedSubGroup) * n);
	n = 0;
	for (int i = 0; i < scan->nsubgroups; i++)
	{
		const ZLSubGroup *sg = &scan->subgroups[i];
		ZLSharedSubGroup *s = &shared->subgroups[n];

		if (!subgroup_has_rows(scan, i))
			continue;
		n++;
		s->sg = *sg;
		s->sg.key_directory = NULL;
		s->sg.key_filter = NULL;
		s->sg.mask = NULL;
		s->decision = scan->decisions[i];
		s->mask_off = 0;
		if (sg->mask != NULL)
		{
			memcpy((char *) shared + mask_off, sg->mask, (zl_subgroup_positions(sg) + 7) / 8);
			s->mask_off = mask_off;
			mask_off += shared_mask_bytes(sg);
		}
	}
	((ZLParallelScanDescData *) pscan)->shared_off = offset;
}

/* the table's options in a shared list: false when there is none */
bool
zl_scan_shared_options(ParallelTableScanDesc pscan, ZLTableOptions *opts)
{
	ZLSharedList *shared = shared_list_of(pscan);

	if (shared == NULL)
		return false;
	*opts = shared->opts;
	opts->time_zone = pstrdup(shared->time_zone);
	return true;
}

/*
 * What the participants of a parallel scan with a shared list read of it,
 * so far: false for other parallel scans.
 */
bool
zl_scan_shared_counts(ParallelTableScanDesc pscan, int *subgroups_read, int64 *rows_masked)
{
	ZLSharedList *shared = shared_list_of(pscan);

	if (shared == NULL)
		return false;
	*subgroups_read = (int) pg_atomic_read_u32(&shared->subgroups_read);
	*rows_masked = (int64) pg_atomic_read_u64(&shared->rows_masked);
	return true;
}

/* ---------- ANALYZE ---------- */

/* the visible sub-group holding a block, or NULL */
static ZLSubGroup *
subgroup_of_block(ZLScanDesc scan, BlockNumber block)
{
	int			lo,
				hi;

	scan_ensure_loaded(scan);
	lo = 0;
	hi = scan->nsubgroups - 1;
	if (scan->by_block == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(scan->metadata_context);

		scan->by_block = zl_subgroups_by_block(scan->subgroups, scan->nsubgroups);
		MemoryContextSwitchTo(old);
	}
	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;
		ZLSubGroup *sg = scan->by_block[mid];

		if (block < sg->first_block)
			hi = mid - 1;
		else if (block >= sg->first_block + sg->blocks)
			lo = mid + 1;
		else
			return sg;
	}
	return NULL;
}

/*
 * Stand on a block to read its rows in order: a block of a row sub-group
 * is read; one of a columnar sub-group stands for its share of the rows
 * (zl_position_page_item), scan->row before the first of them and analyze_end
 * after the last.  False for a block of no visible sub-group: the metapage,
 * free space, space of aborted writes.
 */
static bool
scan_stand_on_block(ZLScanDesc scan, BlockNumber blockno, BufferAccessStrategy bstrategy)
{
	ZLSubGroup *sg = subgroup_of_block(scan, blockno);

	if (sg != scan->current || sg == NULL)
		scan_release(scan);
	scan->current = sg;
	scan->current_decision = ZL_ALL_MATCH;
	if (scan->current == NULL)
		return false;
	if (sg->format == ZL_FORMAT_COLUMNAR)
	{
		int64		per_block = zl_columnar_rows_per_block(sg);

		if (scan->columnar == NULL)
		{
			scan->strategy = bstrategy;
			zl_scan_open_columnar(scan);
			scan->strategy = NULL;
		}
		scan->row = (blockno - sg->first_block) * per_block - 1;
		scan->analyze_end = Min(sg->row_count, scan->row + 1 + per_block);
		scan->chunk_checks = false;
		return true;
	}
	scan->strategy = bstrategy;
	zl_scan_read_block(scan, blockno, true);
	scan->strategy = NULL;
	return true;
}

bool
zl_scan_analyze_next_block(TableScanDesc sscan, BlockNumber blockno,
						   BufferAccessStrategy bstrategy)
{
	return scan_stand_on_block((ZLScanDesc) sscan, blockno, bstrategy);
}

bool
zl_scan_analyze_next_tuple(TableScanDesc sscan, TransactionId OldestXmin,
						   double *liverows, double *deadrows,
						   TupleTableSlot *slot)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;

	while (scan->columnar != NULL && scan->row + 1 < scan->analyze_end)
	{
		scan->row++;
		if (ZL_ROW_MASKED(scan->current, scan->row))
		{
			*deadrows += 1;
			continue;
		}
		zl_scan_store_columnar_row(scan, slot, scan->row);
		*liverows += 1;
		return true;
	}
	if (BufferIsValid(scan->buffer) &&
		scan_step_on_page(scan, slot, true, deadrows) == ZL_STEP_ROW)
	{
		*liverows += 1;
		return true;
	}
	scan_release_buffer(scan);
	ExecClearTuple(slot);
	return false;
}

/* ---------- TABLESAMPLE ---------- */

/*
 * A sample scan (README "Sampling") goes over the blocks of the
 * file as the sampling method picks them -- SYSTEM some blocks whole,
 * BERNOULLI every block, some rows of each -- and over a block's rows as
 * ANALYZE does (scan_stand_on_block): a row sub-group's at their line
 * pointers, a columnar one's share numbered 1, 2, ... in position order.
 * The method picks offsets; masked rows and blocks of no visible
 * sub-group give nothing, as heap skips tuples its snapshot cannot see.
 * Which sub-groups and masks count is the scan's snapshot's business
 * (scan_ensure_loaded), as for every scan.
 *
 * Offsets stop at MaxOffsetNumber, and a columnar block's share can be
 * larger (narrow rows compress well): the share is offered in slices of
 * at most SAMPLE_SLICE_ROWS rows, each numbered from 1, the method
 * starting over on the block for each (BERNOULLI's choice thus repeats
 * from slice to slice of one block; SYSTEM takes every slice of a block
 * it picks).
 */
#define SAMPLE_SLICE_ROWS	MaxOffsetNumber

/* the offsets of the columnar slice that begins after scan->row */
static OffsetNumber
sample_slice_rows(ZLScanDesc scan)
{
	return (OffsetNumber) Min(Max(scan->analyze_end - (scan->row + 1), 0), SAMPLE_SLICE_ROWS);
}

bool
zl_scan_sample_next_block(TableScanDesc sscan, SampleScanState *scanstate)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;
	TsmRoutine *tsm = scanstate->tsmroutine;
	BlockNumber blockno;

	if (scan->sample_block == InvalidBlockNumber)
		scan->sample_nblocks = RelationGetNumberOfBlocks(scan->base.rs_rd);
	if (tsm->NextSampleBlock)
		blockno = tsm->NextSampleBlock(scanstate, scan->sample_nblocks);
	else if (scan->sample_block == InvalidBlockNumber)
		blockno = scan->sample_nblocks > 0 ? 0 : InvalidBlockNumber;
	else
		blockno = scan->sample_block + 1 < scan->sample_nblocks ?
			scan->sample_block + 1 : InvalidBlockNumber;
	if (!BlockNumberIsValid(blockno))
	{
		scan_release(scan);
		scan->current = NULL;
		scan->sample_block = InvalidBlockNumber;
		return false;
	}
	scan->sample_block = blockno;
	if (!scan_stand_on_block(scan, blockno, NULL))
		scan_release(scan);
	return true;
}

bool
zl_scan_sample_next_tuple(TableScanDesc sscan, SampleScanState *scanstate,
						  TupleTableSlot *slot)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;
	TsmRoutine *tsm = scanstate->tsmroutine;
	bool		columnar = scan->current != NULL && scan->columnar != NULL;
	OffsetNumber max_offset = 0;

	if (columnar)
		max_offset = sample_slice_rows(scan);
	else if (scan->current != NULL && BufferIsValid(scan->buffer))
		max_offset = scan->max_offset;

	for (;;)
	{
		OffsetNumber offset = tsm->NextSampleTuple(scanstate, scan->sample_block, max_offset);

		CHECK_FOR_INTERRUPTS();
		if (columnar && offset == InvalidOffsetNumber &&
			scan->row + 1 + max_offset < scan->analyze_end)
		{
			/* the method is done with this slice: on to the next */
			scan->row += max_offset;
			max_offset = sample_slice_rows(scan);
			continue;
		}
		if (!OffsetNumberIsValid(offset) || offset > max_offset)
			break;
		if (columnar)
		{
			int64		position = scan->row + offset;

			if (ZL_ROW_MASKED(scan->current, position))
				continue;
			zl_scan_store_columnar_row(scan, slot, position);
			return true;
		}
		else
		{
			Page		page = BufferGetPage(scan->buffer);
			ItemId		itemid = PageGetItemId(page, offset);

			if (!ItemIdIsNormal(itemid) ||
				ZL_ROW_MASKED(scan->current, zl_page_position(scan->current, scan->block, offset)))
				continue;
			scan_point_at_row(scan, page, offset, itemid);
			ExecStoreBufferHeapTuple(&scan->tuple, slot, scan->buffer);
			return true;
		}
	}
	ExecClearTuple(slot);
	return false;
}
