/*-------------------------------------------------------------------------
 *
 * zl_scan_internal.h
 *	  The scan descriptor, shared by the scan core (zl_scan.c), its key
 *	  probes (zl_scan_probe.c) and its columnar stepping
 *	  (zl_scan_columnar.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_SCAN_INTERNAL_H
#define ZL_SCAN_INTERNAL_H

#include "access/zl_access_internal.h"

#include "access/relscan.h"
#include "catalog/pg_type_d.h"

/* a scan of a zipper table: the TableScanDesc the access method hands out */
typedef struct ZLScanDescData
{
	TableScanDescData base;
	MemoryContext context;
	Snapshot	metadata_snapshot;
	bool		unregister_snapshot;

	MemoryContext metadata_context;	/* the loaded list; reset on reload */
	MemoryContext probe_context;	/* a key probe's finds; reset per probe */
	bool		loaded;
	bool		metadata_from_catalog;	/* the list, not from the cache */
	bool		attached;		/* the list is a parallel leader's (zl_scan.c) */
	int64		masked_reported;	/* rows_masked added to it so far */
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
	struct ZLTidMap *tid_map;	/* a bitmap scan's (zl_tidfetch.c) */
	BlockNumber bitmap_block;	/* the TID block it stands on, */
	int			bitmap_next;	/* and the next of its offsets to try */
	ItemPointerData tid_range_min;	/* a TID range scan's (zl_tidfetch.c) */
	ItemPointerData tid_range_max;
	BlockNumber tid_base;		/* the TID block of the sub-group's position 0 */
	int64		tid_position;	/* the row whose TID was made last, -2 none, */
	BlockNumber tid_block;		/* its block */
	uint32		tid_index;		/* and index in it, of */
	uint32		tid_per_block;	/* the sub-group's rows per TID block */
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
	 * Columns of the rows as written, when the relation descriptor already
	 * has a rewriting ALTER TABLE's new ones (zl_rewrite_reads_old_rows):
	 * its caller's slot's, taken at the first row asked for.  NULL: the
	 * relation's.
	 */
	bool		old_columns;
	TupleDesc	row_desc;

	/* TABLESAMPLE: the blocks it chooses from, and the block it stands on */
	BlockNumber sample_nblocks;
	BlockNumber sample_block;	/* InvalidBlockNumber before the first */

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

typedef enum ZLPageStep
{
	ZL_STEP_ROW,				/* a row is in the slot */
	ZL_STEP_PAGE_DONE,			/* no further row on this page */
	ZL_STEP_SUBGROUP_DONE		/* no further row in this sub-group */
} ZLPageStep;

typedef enum ZLChunkStep
{
	ZL_CHUNK_READ,				/* its rows are checked */
	ZL_CHUNK_ALL,				/* the bounds keep every row: none checked */
	ZL_CHUNK_SKIP,
	ZL_CHUNK_LAST				/* skip it and the rest of the sub-group */
} ZLChunkStep;

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

/* ---------- zl_scan.c ---------- */

extern void zl_scan_read_block(ZLScanDesc scan, BlockNumber block, bool forward);
extern int64 zl_scan_tuple_instant(ZLScanDesc scan, HeapTuple tuple, AttrNumber attnum);
extern bool zl_scan_uses_sort_order(ZLScanDesc scan);

/* ---------- zl_scan_columnar.c ---------- */

extern void zl_scan_open_columnar(ZLScanDesc scan);
extern void zl_scan_store_columnar_row(ZLScanDesc scan, TupleTableSlot *slot, int64 position);
extern ZLChunkStep zl_scan_enter_chunk(ZLScanDesc scan, int chunk, bool forward);
extern ZLPageStep zl_scan_step_columnar(ZLScanDesc scan, TupleTableSlot *slot, bool forward);

/* ---------- zl_scan_probe.c ---------- */

extern void zl_scan_probe_keys(ZLScanDesc scan);
extern ZLPageStep zl_scan_step_probe(ZLScanDesc scan, TupleTableSlot *slot, bool forward);

#endif							/* ZL_SCAN_INTERNAL_H */
