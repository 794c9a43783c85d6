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
 * ours is taken.
 *
 * Rows are identified inside their sub-group by their positions
 * (storage/zl_subgroup_read.c, "Row positions"), which masks list, so any
 * row can be checked from its TID alone (ANALYZE's block sampling)
 * without reading the pages before it.
 *
 * Columnar sub-groups
 * -------------------
 * A columnar sub-group (zl_columnar_read.c) is read through a reader
 * kept for the scan, chunk by chunk: a chunk whose min/max the bounds or the chunk
 * filter (zl_chunkfilter.c) exclude is skipped, and past the valid_from
 * range no later one is read.  In a chunk the bounds keep only in part,
 * the rows are checked in one pass over its decoded period columns
 * (scan_check_chunk_rows), not row by row.  Rows are handed out as
 * virtual tuples of the columns the plan reads (zl_scan_set_columns),
 * pointing into the decoded chunk, valid until the scan moves on.
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
 * Parallel scans share out whole sub-groups through an atomic counter in
 * shared memory; every participant loads the same list and takes the same
 * pruning decisions because they all use the leader's snapshot.
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
#include "access/zl_access_internal.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/parallel.h"
#include "access/tableam.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
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
} ZLParallelScanDescData;

typedef struct ZLScanDescData
{
	TableScanDescData base;
	MemoryContext context;
	Snapshot	metadata_snapshot;
	bool		unregister_snapshot;

	MemoryContext metadata_context;	/* the loaded list; reset on reload */
	MemoryContext probe_context;	/* a key probe's finds; reset per probe */
	bool		loaded;
	bool		filtered;		/* only what some bounds can keep */
	bool		totals_pending; /* filtered load: stats totals not counted */
	ZLSubGroup *subgroups;
	int			nsubgroups;
	ZLSubGroup *current;		/* sub-group being read, or NULL */
	int			current_index;	/* its index in subgroups, or -1 */
	int			prefetched_index;	/* last sub-group whose head was prefetched */
	int			io_concurrency; /* effective_io_concurrency of the tablespace */
	ZLPruneDecision current_decision;
	BlockNumber block;			/* block being read */
	OffsetNumber offset;		/* line pointer last looked at on it (just
								 * outside the page on entering it) */
	OffsetNumber max_offset;
	Buffer		buffer;
	ZLColumnarReader *columnar; /* of the current sub-group if columnar */
	ZLColumnarReader *columnar_reader;	/* kept for every columnar one */
	int64		row;			/* its position last looked at */
	int			chunk;			/* the chunk that row is in, -1 none */
	int64		chunk_first;	/* its rows: [chunk_first, chunk_end) */
	int64		chunk_end;
	bool		chunk_excluded; /* a key probe's: that chunk cannot match */
	bool		chunk_checks;	/* its rows are checked against the bounds: */
	bool	   *chunk_pass;		/* by row of the chunk, does it pass them? */
	uint32		chunk_pass_size;	/* allocated */
	int64		chunk_past_end; /* sorted: the first row past from_hi, */
	int64		chunk_before_start; /* the last row before from_lo */
	uint32	   *batch_rows;		/* zl_scan_next_batch's, by chunk row */
	uint32		batch_rows_size;	/* allocated */
	int64		tid_position;	/* the row whose TID was made last, -2 none, */
	BlockNumber tid_block;		/* its block */
	uint32		tid_index;		/* and index in it, of */
	uint32		tid_per_block;	/* the sub-group's rows per block */
	bool	   *columns;		/* attributes the plan reads from columnar ones */
	bool	   *probe_columns;	/* key probes: those and the period columns */
	ZLChunkFilter *chunk_filter;	/* predicates chunks are skipped by */
	bool		allow_strategy; /* SO_ALLOW_STRAT */
	bool		strategy_chosen;	/* for the sub-groups now kept */
	BufferAccessStrategy strategy;
	HeapTupleData tuple;

	/* ANALYZE: sub-groups sorted by first block; a columnar block's rows end */
	ZLSubGroup **by_block;
	int64		analyze_end;

	/*
	 * Key probes (zl_scan_set_keys): per sub-group, the positions its key
	 * directory names for the keys (ascending), or NULL to read it whole
	 * (no directory).  While reading a probed sub-group the scan stands on
	 * probe_index in its positions.
	 */
	bool		keep_loaded;	/* load every sub-group once, for all bounds */
	bool		directories_loaded; /* key directories of the loaded list */
	uint64		directories_generation; /* of the directory cache then */
	bool		keyed;
	uint32	   *key_hashes;
	int			nkey_hashes;
	int32	  **key_positions;
	int		   *nkey_positions; /* -1: read whole (no directory); 0: skip */
	bool	   *has_directory;
	ZLKeyIndex *key_index;		/* the storage's merged index (zl_keyindex.c) */
	uint64		key_index_generation;
	int		   *key_index_map;	/* its sub-group ordinals to list indexes, or -1 */
	bool	   *in_key_index;	/* per list index; NULL: no index used */
	bool		lists_valid;	/* solo and whole are of this list */
	int		   *solo;			/* sub-groups probed through their own directory */
	int			nsolo;
	int		   *whole;			/* sub-groups without a directory */
	int			nwhole;
	int32	   *keyed_order;	/* sub-groups a key probe reads, in list order */
	int			nkeyed_order;
	int			keyed_pos;		/* the current one's place in keyed_order */
	bool		probing;		/* the current sub-group is read by positions */
	int			probe_index;

	/* pruning (zl_prune.c); without bounds every row is returned */
	bool		bounded;
	ZLScanBounds bounds;
	ZLTableOptions opts;
	uint8	   *decisions;		/* ZLPruneDecision per sub-group */
	ZLPruneStats stats;
	bool		stats_pending;	/* a key probe's: counted on request */
	bool		groups_counted; /* stats of partitions and file groups */
} ZLScanDescData;

typedef ZLScanDescData *ZLScanDesc;

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

static void scan_probe_keys(ZLScanDesc scan);
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

/* read the current sub-group, if columnar, through a reader of its own */
static void
scan_open_columnar(ZLScanDesc scan)
{
	MemoryContext old;

	if (scan->current->format != ZL_FORMAT_COLUMNAR)
		return;
	old = MemoryContextSwitchTo(scan->context);
	/* one reader for all, so its buffers are made once */
	if (scan->columnar_reader == NULL)
		scan->columnar_reader = zl_columnar_open(scan->base.rs_rd, scan->current, scan->strategy);
	else
		zl_columnar_reset(scan->columnar_reader, scan->current, scan->strategy);
	scan->columnar = scan->columnar_reader;
	scan->tid_position = -2;
	scan->tid_per_block = (uint32) zl_columnar_rows_per_block(scan->current);
	if (scan->columns != NULL && scan->probing && scan->bounded)
	{
		/* probed rows are checked against the bounds one by one, on these */
		memcpy(scan->probe_columns, scan->columns,
			   sizeof(bool) * RelationGetDescr(scan->base.rs_rd)->natts);
		scan->probe_columns[scan->opts.from_attnum - 1] =
			scan->probe_columns[scan->opts.to_attnum - 1] = true;
		zl_columnar_set_columns(scan->columnar, scan->probe_columns);
	}
	else if (scan->columns != NULL)
		zl_columnar_set_columns(scan->columnar, scan->columns);
	/* a key probe reads a row here and there: no chunk decoded whole */
	zl_columnar_set_sparse(scan->columnar, scan->probing);
	MemoryContextSwitchTo(old);
	scan->chunk = -1;
}

/* skip chunks of columnar sub-groups where the filter says no row matches */
void
zl_scan_set_chunk_filter(TableScanDesc sscan, ZLChunkFilter *filter)
{
	((ZLScanDesc) sscan)->chunk_filter = filter;
}

/*
 * Read only these attributes (a bool per attribute) of columnar
 * sub-groups; the others read as NULL.  For scans whose plan needs no more
 * (zl_customscan.c).
 */
void
zl_scan_set_columns(TableScanDesc sscan, const bool *needed)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;
	int			natts = RelationGetDescr(scan->base.rs_rd)->natts;

	if (scan->columns == NULL)
	{
		scan->columns = MemoryContextAlloc(scan->context, sizeof(bool) * Max(natts, 1));
		scan->probe_columns = MemoryContextAlloc(scan->context, sizeof(bool) * Max(natts, 1));
	}
	memcpy(scan->columns, needed, sizeof(bool) * natts);
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
	scan->loaded = true;
	scan->strategy_chosen = false;
	scan->filtered = filter != NULL;
	scan->totals_pending = filter != NULL;
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

	return (TableScanDesc) scan;
}

void
zl_scan_end(TableScanDesc sscan)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;

	scan_release(scan);
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
		scan_probe_keys(scan);	/* decides only where the keys may be */
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
	return &scan->stats;
}

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
static void
scan_probe_keys(ZLScanDesc scan)
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
			scan->current = NULL;
			scan->current_index = -1;
			return false;
		}
		scan->current_index = index;
		if (subgroup_has_rows(scan, index))
		{
			scan->current = &scan->subgroups[index];
			scan->row = forward ? -1 : scan->current->row_count;
			scan->current_decision = scan->bounded ? scan->decisions[index] : ZL_ALL_MATCH;
			scan->probing = scan->key_positions != NULL && scan->nkey_positions[index] >= 0;
			scan_open_columnar(scan);
			if (scan->probing)
				scan->probe_index = forward ? -1 : scan->nkey_positions[index];
			return true;
		}
	}
}

/* pin a block and stand just outside its rows, on the side we enter from */
static void
scan_read_block(ZLScanDesc scan, BlockNumber block, bool forward)
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

static int64
tuple_instant(ZLScanDesc scan, HeapTuple tuple, AttrNumber attnum)
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
	from = tuple_instant(scan, &tuple, scan->opts.from_attnum);
	ReleaseBuffer(buffer);
	return from;
}

/*
 * Are the rows of the current sub-group checked against a valid_from range
 * they are sorted by?  Then a scan can skip the blocks before the range and
 * stop at the first row past it, in either direction.
 */
static bool
scan_uses_sort_order(ZLScanDesc scan)
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

	if (!scan_uses_sort_order(scan) ||
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

typedef enum ZLPageStep
{
	ZL_STEP_ROW,				/* a row is in the slot */
	ZL_STEP_PAGE_DONE,			/* no further row on this page */
	ZL_STEP_SUBGROUP_DONE		/* no further row in this sub-group */
} ZLPageStep;

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
		if (ZL_ROW_MASKED(scan->current, zl_tid_position(scan->current, scan->block, offset)))
		{
			if (masked)
				(*masked) += 1;
			scan->stats.rows_masked++;
			continue;
		}
		scan->tuple.t_data = (HeapTupleHeader) PageGetItem(page, itemid);
		scan->tuple.t_len = ItemIdGetLength(itemid);
		scan->tuple.t_tableOid = RelationGetRelid(scan->base.rs_rd);
		ItemPointerSet(&scan->tuple.t_self, scan->block, offset);
		if (scan->current_decision == ZL_CHECK)
		{
			int64		from = tuple_instant(scan, &scan->tuple, scan->opts.from_attnum);

			if (!zl_bounds_match(&scan->bounds, from,
								 tuple_instant(scan, &scan->tuple, scan->opts.to_attnum)))
			{
				/* sorted by valid_from: nothing further in the sub-group qualifies */
				if (scan_uses_sort_order(scan) &&
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
 * A period column's value as an instant (NULL: the lowest); timestamps are
 * their own instants.  value_instant: of a deformed row.
 */
static inline int64
period_instant(ZLScanDesc scan, Datum value, bool isnull)
{
	if (isnull)
		return PG_INT64_MIN;
	if (scan->opts.period_type != DATEOID)
		return DatumGetInt64(value);
	return zl_datum_to_instant(value, scan->opts.period_type);
}

static inline int64
value_instant(ZLScanDesc scan, TupleTableSlot *slot, AttrNumber attnum)
{
	return period_instant(scan, slot->tts_values[attnum - 1], slot->tts_isnull[attnum - 1]);
}

/*
 * The TID of a row of the current columnar sub-group (zl_position_tid):
 * the next row's is the last one's, one further, without dividing.
 */
static inline void
scan_columnar_tid(ZLScanDesc scan, int64 position, ItemPointer tid)
{
	if (position != scan->tid_position + 1)
	{
		scan->tid_block = scan->current->first_block + (uint32) position / scan->tid_per_block;
		scan->tid_index = (uint32) position % scan->tid_per_block;
	}
	else if (++scan->tid_index == scan->tid_per_block)
	{
		scan->tid_block++;
		scan->tid_index = 0;
	}
	scan->tid_position = position;
	ItemPointerSet(tid, scan->tid_block, (OffsetNumber) (scan->tid_index + 1));
}

/* the row at a position of the current columnar sub-group into the slot */
static void
scan_store_columnar_row(ZLScanDesc scan, TupleTableSlot *slot, int64 position)
{
	ExecClearTuple(slot);
	zl_columnar_row(scan->columnar, (uint32) position, slot->tts_values, slot->tts_isnull);
	ExecStoreVirtualTuple(slot);
	slot->tts_tableOid = RelationGetRelid(scan->base.rs_rd);
	scan_columnar_tid(scan, position, &slot->tts_tid);
}

/* a period column's values over the current chunk */
static void
chunk_period_values(ZLScanDesc scan, AttrNumber attnum, const Datum **values,
					const bool **isnull)
{
	if (!zl_columnar_chunk_values(scan->columnar, scan->chunk, attnum, values, isnull))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("columnar sub-group " INT64_FORMAT " of table \"%s\" lacks a period column",
						scan->current->subgroup_id, RelationGetRelationName(scan->base.rs_rd)),
				 errdetail("Column %d is not stored in it.", attnum),
				 errhint("Restore the table from a backup; zipper_lake.verify() lists what it finds.")));
}

/*
 * Check the rows of the current chunk against the bounds in one pass over
 * its decoded period columns (NULL the lowest instant), instead of row by
 * row through the slot: chunk_pass says which pass.  Rows of a sub-group
 * sorted by valid_from leave the valid_from range for good, forward at
 * chunk_past_end, backward at chunk_before_start.
 */
static void
scan_check_chunk_rows(ZLScanDesc scan)
{
	const ZLScanBounds *b = &scan->bounds;
	uint32		n = (uint32) (scan->chunk_end - scan->chunk_first);
	const Datum *from_values,
			   *to_values;
	const bool *from_nulls,
			   *to_nulls;

	chunk_period_values(scan, scan->opts.from_attnum, &from_values, &from_nulls);
	chunk_period_values(scan, scan->opts.to_attnum, &to_values, &to_nulls);
	if (n > scan->chunk_pass_size)
	{
		if (scan->chunk_pass != NULL)
			pfree(scan->chunk_pass);
		scan->chunk_pass = MemoryContextAlloc(scan->context, n);
		scan->chunk_pass_size = n;
	}
	scan->chunk_past_end = scan->chunk_end;
	scan->chunk_before_start = scan->chunk_first - 1;
	for (uint32 i = 0; i < n; i++)
	{
		int64		from = period_instant(scan, from_values[i], from_nulls[i]);
		int64		to = period_instant(scan, to_values[i], to_nulls[i]);

		scan->chunk_pass[i] = zl_bounds_match(b, from, to);
		if (from > b->from_hi && scan->chunk_past_end == scan->chunk_end)
			scan->chunk_past_end = scan->chunk_first + i;
		if (from < b->from_lo)
			scan->chunk_before_start = scan->chunk_first + i;
	}
}

/* can a range [lo, hi] of a period column's chunk meet the bound [blo, bhi]? */
static bool
chunk_period_meets(ZLScanDesc scan, int chunk, AttrNumber attnum, int64 blo, int64 bhi,
				   int64 *lo, int64 *hi)
{
	bool		all_null,
				has_nulls;
	Datum		min,
				max;

	*lo = PG_INT64_MIN;
	*hi = PG_INT64_MAX;
	if (!zl_columnar_chunk_range(scan->columnar, chunk, attnum, &all_null, &has_nulls,
								 &min, &max) || all_null || has_nulls)
		return true;
	*lo = zl_datum_to_instant(min, scan->opts.period_type);
	*hi = zl_datum_to_instant(max, scan->opts.period_type);
	return *hi >= blo && *lo <= bhi;
}

typedef enum ZLChunkStep
{
	ZL_CHUNK_READ,				/* its rows are checked */
	ZL_CHUNK_ALL,				/* the bounds keep every row: none checked */
	ZL_CHUNK_SKIP,
	ZL_CHUNK_LAST				/* skip it and the rest of the sub-group */
} ZLChunkStep;

/*
 * A chunk is read: its rows are checked against the bounds (READ), on the
 * period columns decoded with the plan's, or not (ALL), on the plan's only.
 */
static ZLChunkStep
scan_read_chunk(ZLScanDesc scan, ZLChunkStep step)
{
	scan->chunk_checks = step == ZL_CHUNK_READ;
	if (scan->chunk_checks && !scan->probing)
		scan_check_chunk_rows(scan);
	return step;
}

/*
 * Entering a chunk of the current columnar sub-group: can the chunk filter
 * (zl_chunkfilter.c) and the bounds keep any of its rows, going by its
 * min/max?  Past the valid_from range in the scan's direction, no later
 * chunk can either.
 */
static ZLChunkStep
scan_enter_chunk(ZLScanDesc scan, int chunk, bool forward)
{
	const ZLScanBounds *b = &scan->bounds;
	int64		from_lo = PG_INT64_MIN,
				from_hi = PG_INT64_MAX,
				to_lo,
				to_hi;
	bool		from_meets,
				to_meets;

	scan->stats.chunks_total++;
	scan->chunk_checks = false;
	if (scan->chunk_filter != NULL &&
		!zl_chunkfilter_may_match(scan->chunk_filter, scan->columnar, chunk))
	{
		scan->stats.chunks_skipped++;
		return ZL_CHUNK_SKIP;
	}
	if (scan->current_decision != ZL_CHECK)
		return scan_read_chunk(scan, ZL_CHUNK_ALL);
	from_meets = chunk_period_meets(scan, chunk, scan->opts.from_attnum, b->from_lo,
									b->from_hi, &from_lo, &from_hi);
	to_meets = chunk_period_meets(scan, chunk, scan->opts.to_attnum, b->to_lo, b->to_hi,
								  &to_lo, &to_hi);
	if (b->either ? (from_meets || to_meets) : (from_meets && to_meets))
	{
		bool		from_inside = from_lo >= b->from_lo && from_hi <= b->from_hi;
		bool		to_inside = to_lo >= b->to_lo && to_hi <= b->to_hi;

		return scan_read_chunk(scan, (b->either ? from_inside || to_inside :
									  from_inside && to_inside) ?
							   ZL_CHUNK_ALL : ZL_CHUNK_READ);
	}
	scan->stats.chunks_skipped++;
	if (scan_uses_sort_order(scan) &&
		(forward ? from_lo > b->from_hi : from_hi < b->from_lo))
		return ZL_CHUNK_LAST;
	return ZL_CHUNK_SKIP;
}

/*
 * Stand on the chunk holding a row of the current columnar sub-group,
 * entering it (scan_enter_chunk) unless the scan stands in it already
 * (then ZL_CHUNK_READ: its rows are read as decided on entering).  A
 * chunk to skip leaves the scan on its last row in the scan's direction.
 */
static ZLChunkStep
scan_chunk_of_row(ZLScanDesc scan, int64 row, bool forward)
{
	ZLChunkStep step;

	if (scan->chunk >= 0 && row >= scan->chunk_first && row < scan->chunk_end)
		return ZL_CHUNK_READ;
	scan->chunk = zl_columnar_chunk_of(scan->columnar, (uint32) row);
	scan->chunk_first = zl_columnar_chunk_start(scan->columnar, scan->chunk);
	scan->chunk_end = zl_columnar_chunk_start(scan->columnar, scan->chunk + 1);
	step = scan_enter_chunk(scan, scan->chunk, forward);
	if (step == ZL_CHUNK_SKIP)
		scan->row = forward ? scan->chunk_end - 1 : scan->chunk_first;
	return step;
}

/*
 * Next unmasked row of the current columnar sub-group, in the scan's
 * direction, into the slot: chunk by chunk, skipping those the bounds
 * exclude.
 */
static ZLPageStep
scan_step_columnar(ZLScanDesc scan, TupleTableSlot *slot, bool forward)
{
	const ZLSubGroup *sg = scan->current;

	for (;;)
	{
		int64		row = scan->row + (forward ? 1 : -1);

		if (row < 0 || row >= sg->row_count)
			return ZL_STEP_SUBGROUP_DONE;
		scan->row = row;
		switch (scan_chunk_of_row(scan, row, forward))
		{
			case ZL_CHUNK_READ:
			case ZL_CHUNK_ALL:
				break;
			case ZL_CHUNK_SKIP:
				continue;
			case ZL_CHUNK_LAST:
				return ZL_STEP_SUBGROUP_DONE;
		}
		if (ZL_ROW_MASKED(sg, row))
		{
			scan->stats.rows_masked++;
			continue;
		}
		if (scan->chunk_checks && !scan->chunk_pass[row - scan->chunk_first])
		{
			if (scan_uses_sort_order(scan) &&
				(forward ? row >= scan->chunk_past_end : row <= scan->chunk_before_start))
				return ZL_STEP_SUBGROUP_DONE;
			continue;
		}
		scan_store_columnar_row(scan, slot, row);
		return ZL_STEP_ROW;
	}
}

/*
 * The rows of a columnar chunk at once, for aggregates computed in the
 * scan (zl_aggregate.c): from where the scan stands (forward) to the end
 * of the chunk, the indexes in the chunk of the rows zl_scan_getnextslot
 * would return one by one — not masked, passing the bounds — with no
 * slot filled; chunks the bounds or the chunk filter exclude are skipped
 * on the way.  The scan then stands on the chunk's last row.  False when
 * the next rows do not come this way (no sub-group entered yet, its end
 * reached, a row sub-group, a key probe, a column added since the
 * sub-group was written): zl_scan_getnextslot returns the next row.
 */
bool
zl_scan_next_batch(TableScanDesc sscan, ZLRowBatch *batch)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;
	const ZLSubGroup *sg = scan->current;

	if (scan->columnar == NULL || scan->probing ||
		zl_columnar_defaults_needed(scan->columnar))
		return false;
	for (;;)
	{
		int64		row = scan->row + 1;
		int64		end;

		CHECK_FOR_INTERRUPTS();
		if (row >= sg->row_count)
			return false;
		switch (scan_chunk_of_row(scan, row, true))
		{
			case ZL_CHUNK_READ:
			case ZL_CHUNK_ALL:
				break;
			case ZL_CHUNK_SKIP:
				continue;
			case ZL_CHUNK_LAST:
				scan->row = sg->row_count - 1;
				return false;
		}
		if (scan->chunk_end - scan->chunk_first > scan->batch_rows_size)
		{
			if (scan->batch_rows != NULL)
				pfree(scan->batch_rows);
			scan->batch_rows_size = (uint32) (scan->chunk_end - scan->chunk_first);
			scan->batch_rows = MemoryContextAlloc(scan->context,
												  sizeof(uint32) * scan->batch_rows_size);
		}
		/* sorted by valid_from: past from_hi, no later row of the sub-group passes */
		end = scan->chunk_checks && scan_uses_sort_order(scan) ?
			scan->chunk_past_end : scan->chunk_end;
		batch->nrows = 0;
		for (int64 r = row; r < end; r++)
		{
			if (ZL_ROW_MASKED(sg, r))
			{
				scan->stats.rows_masked++;
				continue;
			}
			if (scan->chunk_checks && !scan->chunk_pass[r - scan->chunk_first])
				continue;
			scan->batch_rows[batch->nrows++] = (uint32) (r - scan->chunk_first);
		}
		if (end < scan->chunk_end)
		{
			/* counted as the row-by-row walk counts them: masked ones up to the stop */
			for (int64 r = end; r < scan->chunk_end && ZL_ROW_MASKED(sg, r); r++)
				scan->stats.rows_masked++;
			scan->row = sg->row_count - 1;
		}
		else
			scan->row = end - 1;
		batch->reader = scan->columnar;
		batch->chunk = scan->chunk;
		batch->rows = scan->batch_rows;
		return true;
	}
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

	/* inside its blocks: scan_step_probe checked it */
	zl_position_tid(sg, position, &tid);
	block = ItemPointerGetBlockNumber(&tid);
	offset = ItemPointerGetOffsetNumber(&tid);
	if (!BufferIsValid(scan->buffer) || scan->block != block)
		scan_read_block(scan, block, true);
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
	ItemPointerSet(&scan->tuple.t_self, block, offset);
}

/*
 * Next unmasked row, in the scan's direction, at the probed positions of
 * the current sub-group, into the slot.
 */
static ZLPageStep
scan_step_probe(ZLScanDesc scan, TupleTableSlot *slot, bool forward)
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
				ZLChunkStep step = scan_enter_chunk(scan, chunk, forward);

				scan->chunk = chunk;
				scan->chunk_excluded = step != ZL_CHUNK_READ && step != ZL_CHUNK_ALL;
			}
			if (scan->chunk_excluded)
				continue;
			scan_store_columnar_row(scan, slot, positions[next]);
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
							 tuple_instant(scan, &scan->tuple, scan->opts.from_attnum),
							 tuple_instant(scan, &scan->tuple, scan->opts.to_attnum)))
			continue;
		ExecStoreBufferHeapTuple(&scan->tuple, slot, scan->buffer);
		return ZL_STEP_ROW;
	}
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

	for (;;)
	{
		ZLPageStep	step = ZL_STEP_SUBGROUP_DONE;

		CHECK_FOR_INTERRUPTS();

		if (scan->current != NULL && scan->probing)
			step = scan_step_probe(scan, slot, forward);
		else if (scan->columnar != NULL)
			step = scan_step_columnar(scan, slot, forward);
		else if (BufferIsValid(scan->buffer))
			step = scan_step_on_page(scan, slot, forward, NULL);
		if (step == ZL_STEP_ROW)
			return true;

		if (step == ZL_STEP_PAGE_DONE && scan->columnar == NULL &&
			(forward ? scan->block + 1 < scan->current->first_block + scan->current->blocks :
			 scan->block > scan->current->first_block))
			scan_read_block(scan, forward ? scan->block + 1 : scan->block - 1, forward);
		else if (scan_next_subgroup(scan, forward))
		{
			if (forward && !scan->probing)
				scan_prefetch_next_heads(scan);
			if (scan->probing || scan->columnar != NULL)
				continue;		/* rows come from positions or chunks */
			scan_read_block(scan, scan_entry_block(scan, forward), forward);
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
	return sizeof(ZLParallelScanDescData);
}

void
zl_parallelscan_reinitialize(Relation rel, ParallelTableScanDesc pscan)
{
	ZLParallelScanDescData *zpscan = (ZLParallelScanDescData *) pscan;

	pg_atomic_write_u32(&zpscan->next_subgroup, 0);
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

bool
zl_scan_analyze_next_block(TableScanDesc sscan, BlockNumber blockno,
						   BufferAccessStrategy bstrategy)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;
	ZLSubGroup *sg = subgroup_of_block(scan, blockno);

	/* the metapage and space of aborted writes hold no rows */
	if (sg != scan->current || sg == NULL)
		scan_release(scan);
	scan->current = sg;
	scan->current_decision = ZL_ALL_MATCH;
	if (scan->current == NULL)
		return false;
	if (sg->format == ZL_FORMAT_COLUMNAR)
	{
		/* the block stands for its share of the rows (zl_position_tid) */
		int64		per_block = zl_columnar_rows_per_block(sg);

		if (scan->columnar == NULL)
		{
			scan->strategy = bstrategy;
			scan_open_columnar(scan);
			scan->strategy = NULL;
		}
		scan->row = (blockno - sg->first_block) * per_block - 1;
		scan->analyze_end = Min(sg->row_count, scan->row + 1 + per_block);
		scan->chunk_checks = false;
		return true;
	}
	scan->strategy = bstrategy;
	scan_read_block(scan, blockno, true);
	scan->strategy = NULL;
	return true;
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
		scan_store_columnar_row(scan, slot, scan->row);
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
