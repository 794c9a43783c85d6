/*-------------------------------------------------------------------------
 *
 * zl_storage.h
 *	  The storage layer: pages, sub-groups, columnar format, key directories.
 *
 * What the layers above use of the file's pages (zl_storage.c), the
 * columnar sub-group format (columnar/), key hashes and directories
 * (zl_keys.c) and reading one sub-group's rows (zl_subgroup_read.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_STORAGE_H
#define ZL_STORAGE_H

#include "common/zl_common.h"

/* the metapage, the file's first block (zl_storage.c) */
#define ZL_METAPAGE_BLKNO		0

/*
 * Largest sub-group written in one piece; bigger runs are split.  Columnar
 * TIDs number a block's rows from 1 (zl_position_tid), so at most 65535.
 */
#define ZL_MAX_SUBGROUP_ROWS	(64 * 1024 - 1)

/* ---------- sub-group metadata ---------- */

typedef struct ZLKeyFilter ZLKeyFilter;

/* window_end of a file group whose window is one base window (NULL in the catalog) */
#define ZL_NO_WINDOW_END		PG_INT64_MIN

typedef struct ZLSubGroup
{
	int64		subgroup_id;
	int64		file_group;
	bool		placed;			/* false: loaded before registration */
	char		format;			/* ZL_FORMAT_ROWS or ZL_FORMAT_COLUMNAR */
	DateADT		partition_end;	/* ZL_CURRENT_PARTITION for open versions */
	int64		window_start;
	int64		window_end;		/* history: end of a wide window (README "Storage") */
	int64		first_start;
	int64		last_start;
	int64		row_count;
	BlockNumber first_block;
	int32		blocks;
	int64		first_tid_block;	/* TID block of position 0; -1 before 0.2's
									 * catalog (TIDs then name pages) */
	int64		masked_rows;	/* distinct positions in visible masks */
	bytea	   *key_directory;	/* (zl_keys.c) loaded on demand */
	const struct ZLKeyFilter *key_filter;	/* in front of a cached directory */
	uint8	   *mask;			/* bit per row position, NULL if none masked */
} ZLSubGroup;

/*
 * Positions (zl_subgroup_read.c, "Row positions"): in a row sub-group
 * (block - first_block) * MaxHeapTuplesPerPage + (offset - 1); in a
 * columnar one the row's ordinal.  zl_subgroup_positions() bounds them
 * (mask bits).
 */
static inline int64
zl_subgroup_positions(const ZLSubGroup *sg)
{
	return sg->format == ZL_FORMAT_COLUMNAR ? sg->row_count :
		(int64) sg->blocks * MaxHeapTuplesPerPage;
}

/*
 * Row identifiers (src/access/README.md, "Row identifiers"): a sub-group
 * owns zl_subgroup_tid_blocks() TID blocks from first_tid_block on, taken
 * from the table's counter when it is written and never given again, and
 * position p is the TID (first_tid_block + p / MaxHeapTuplesPerPage,
 * p % MaxHeapTuplesPerPage + 1): offsets stay within what bitmaps hold, a
 * row sub-group's offsets are its line pointers, and a TID never names
 * another row, whatever happens to the blocks.
 */
static inline int64
zl_subgroup_tid_blocks(const ZLSubGroup *sg)
{
	return Max((zl_subgroup_positions(sg) + MaxHeapTuplesPerPage - 1) / MaxHeapTuplesPerPage, 1);
}

static inline int64
zl_columnar_rows_per_block(const ZLSubGroup *sg)
{
	return sg->blocks > 0 ? (sg->row_count + sg->blocks - 1) / sg->blocks : 1;
}

/*
 * The page item of a position: a row sub-group's block and line pointer;
 * for a columnar sub-group the ordinals spread evenly over its blocks, so
 * that a block sampled by ANALYZE or TABLESAMPLE holds its share of them.
 */
static inline void
zl_position_page_item(const ZLSubGroup *sg, int64 position, ItemPointer item)
{
	/* positions and blocks of a sub-group fit 32 bits */
	uint32		per_block = sg->format == ZL_FORMAT_COLUMNAR ?
		(uint32) zl_columnar_rows_per_block(sg) : MaxHeapTuplesPerPage;

	ItemPointerSet(item, sg->first_block + (uint32) position / per_block,
				   (OffsetNumber) ((uint32) position % per_block) + 1);
}

/* the position of a page item (zl_position_page_item) */
static inline int64
zl_page_position(const ZLSubGroup *sg, BlockNumber block, OffsetNumber offset)
{
	int64		per_block = sg->format == ZL_FORMAT_COLUMNAR ?
		zl_columnar_rows_per_block(sg) : MaxHeapTuplesPerPage;

	return (int64) (block - sg->first_block) * per_block + (offset - 1);
}

/* the TID of the row at a position */
static inline void
zl_position_tid(const ZLSubGroup *sg, int64 position, ItemPointer tid)
{
	if (sg->first_tid_block < 0)
		zl_position_page_item(sg, position, tid);
	else
		ItemPointerSet(tid, (BlockNumber) (sg->first_tid_block + position / MaxHeapTuplesPerPage),
					   (OffsetNumber) (position % MaxHeapTuplesPerPage) + 1);
}

/* the TID of the row of a page item of a row sub-group */
static inline void
zl_page_item_tid(const ZLSubGroup *sg, BlockNumber block, OffsetNumber offset, ItemPointer tid)
{
	if (sg->first_tid_block < 0)
		ItemPointerSet(tid, block, offset);
	else
		ItemPointerSet(tid, (BlockNumber) (sg->first_tid_block + (block - sg->first_block)), offset);
}

/* the position a TID names in a sub-group, or -1 if none of its rows */
static inline int64
zl_tid_position(const ZLSubGroup *sg, ItemPointer tid)
{
	int64		block = ItemPointerGetBlockNumber(tid);
	int64		position;

	if (sg->first_tid_block < 0 || block < sg->first_tid_block ||
		block >= sg->first_tid_block + zl_subgroup_tid_blocks(sg))
		return -1;
	position = (block - sg->first_tid_block) * MaxHeapTuplesPerPage +
		ItemPointerGetOffsetNumber(tid) - 1;
	return position < zl_subgroup_positions(sg) ? position : -1;
}

#define ZL_ROW_MASKED(sg, pos) \
	((sg)->mask != NULL && ((sg)->mask[(pos) >> 3] & (1 << ((pos) & 7))) != 0)

/* ---------- zl_storage.c ---------- */

typedef struct ZLPageWriter ZLPageWriter;

extern void zl_storage_init(Relation rel, SMgrRelation srel, ForkNumber fork,
							uint64 storage_id);
extern uint64 zl_storage_id(Relation rel);
extern bool zl_storage_try_id(Relation rel, uint64 *storage_id);
extern ZLPageWriter *zl_page_writer_begin(Relation rel, BlockNumber first_block,
										  BlockNumber blocks);
extern ZLPageWriter *zl_page_counter_begin(void);
extern BlockNumber zl_page_writer_pages(const ZLPageWriter *writer);
extern int32 zl_page_writer_add(ZLPageWriter *writer, HeapTuple tuple);
extern void zl_page_counter_add_length(ZLPageWriter *counter, uint32 len);
extern void zl_page_writer_finish(ZLPageWriter *writer, BlockNumber *first_block,
								  int32 *blocks);
extern uint64 zl_storage_metadata_changes(Relation rel);
extern void zl_storage_count_metadata_change(Relation rel);
extern void zl_storage_request_scrub(Relation rel);
extern uint64 zl_storage_scrub_due(Relation rel);
extern void zl_storage_scrub_done(Relation rel, uint64 requests);
extern bool zl_write_lock_table(uint64 storage_id, bool nowait);
extern int64 zl_storage_next_tid_block(Relation rel, int64 (*counted_before) (uint64 storage_id));
extern int64 zl_storage_take_tid_blocks(Relation rel, int64 n,
										int64 (*counted_before) (uint64 storage_id));
extern bool zl_write_lock_has_waiters(uint64 storage_id);
extern bool zl_write_lock_held(uint64 storage_id);
extern void zl_write_unlock_table(uint64 storage_id);

/* ---------- zl_columnar_write.c, zl_columnar_read.c ---------- */

typedef struct ZLColumnarWriter ZLColumnarWriter;
typedef struct ZLColumnarReader ZLColumnarReader;

extern ZLColumnarWriter *zl_columnar_writer_begin(TupleDesc desc, int compression);
extern int32 zl_columnar_writer_add(ZLColumnarWriter *w, HeapTuple tuple);
extern BlockNumber zl_columnar_writer_finish(ZLColumnarWriter *w);
extern void zl_columnar_writer_write(ZLColumnarWriter *w, ZLPageWriter *pages);
extern void zl_columnar_writer_end(ZLColumnarWriter *w);
extern ZLColumnarReader *zl_columnar_open(Relation rel, const ZLSubGroup *sg,
										  BufferAccessStrategy strategy);
extern ZLColumnarReader *zl_columnar_open_as(Relation rel, TupleDesc desc, const ZLSubGroup *sg,
											  BufferAccessStrategy strategy);
extern void zl_columnar_reset(ZLColumnarReader *r, const ZLSubGroup *sg,
							  BufferAccessStrategy strategy);
extern void zl_columnar_release(ZLColumnarReader *r);
extern void zl_columnar_set_columns(ZLColumnarReader *r, const bool *needed);
extern void zl_columnar_set_sparse(ZLColumnarReader *r, bool sparse);
extern void zl_columnar_close(ZLColumnarReader *r);
extern uint32 zl_columnar_chunk_start(const ZLColumnarReader *r, int chunk);
extern int	zl_columnar_chunk_of(const ZLColumnarReader *r, uint32 row);
extern bool zl_columnar_chunk_range(const ZLColumnarReader *r, int chunk, AttrNumber attnum,
									bool *all_null, bool *has_nulls, Datum *min, Datum *max);
extern void zl_columnar_row(ZLColumnarReader *r, uint32 row, Datum *values, bool *isnull);
extern bool zl_columnar_chunk_values(ZLColumnarReader *r, int chunk, AttrNumber attnum,
									 const Datum **values, const bool **isnull);
extern bool zl_columnar_defaults_needed(const ZLColumnarReader *r);
extern void zl_columnar_sizes(const ZLColumnarReader *r, int64 *stored, int64 *raw,
							  int64 *directory);
extern char *zl_columnar_check_chunks(Relation rel, const ZLSubGroup *sg);

/* ---------- zl_keys.c ---------- */

typedef struct ZLKeyHasher ZLKeyHasher;

/*
 * An entry of a key directory as readers have it (zl_key_directory_cached
 * and _remember): a bytea of them, sorted by hash.  The catalog stores
 * another form (zl_key_directory_build).
 */
typedef struct ZLKeyDirEntry
{
	uint32		hash;
	int32		position;
} ZLKeyDirEntry;

#define ZL_KEY_DIRECTORY_ENTRIES(dir)	((const ZLKeyDirEntry *) VARDATA_ANY(dir))
#define ZL_KEY_DIRECTORY_SIZE(dir)		((int) (VARSIZE_ANY_EXHDR(dir) / sizeof(ZLKeyDirEntry)))
extern int	zl_key_directory_range_entries(const bytea *dir, uint32 lo, uint32 hi,
										   const ZLKeyDirEntry **range);

extern ZLKeyHasher *zl_key_hasher_create(TupleDesc tupdesc, const ZLTableOptions *opts);
extern uint32 zl_key_hash(const ZLKeyHasher *h, const Datum *values);
extern bool zl_keys_equal(const ZLKeyHasher *h, const Datum *a, const Datum *b);
extern int	zl_key_hash_cmp(const void *a, const void *b);
extern void zl_key_extract(const ZLKeyHasher *h, HeapTuple tuple, TupleDesc tupdesc,
						   Datum *values);
extern bytea *zl_key_directory_build(const uint32 *hashes, const int32 *positions, int n);
extern void zl_key_directory_cache_trim(void);
extern uint64 zl_key_directory_cache_generation(void);
extern bytea *zl_key_directory_cached(Oid catalog, int64 subgroup_id,
									  const ZLKeyFilter **filter);
extern bytea *zl_key_directory_remember(Oid catalog, int64 subgroup_id, const bytea *stored,
										const ZLKeyFilter **filter);
extern int32 *zl_key_directory_probe_ascending(const bytea *dir, const uint32 *hashes,
											   int nhashes, int *npositions);
extern int32 *zl_key_directory_match_stored(const bytea *stored, const uint32 *hashes,
											int nhashes, int *npositions);
extern void zl_key_filter_prefetch(const ZLKeyFilter *f, const uint32 *hashes, int nhashes);
extern bool zl_key_filter_may_hold(const ZLKeyFilter *f, const uint32 *hashes, int nhashes);
extern int32 *zl_key_directory_probe(const bytea *dir, const uint32 *hashes,
									 int nhashes, int *npositions);

typedef struct ZLValueComparer ZLValueComparer;

extern ZLValueComparer *zl_value_comparer_create(TupleDesc tupdesc,
												 const ZLTableOptions *opts,
												 bool tracked_only);
extern bool zl_values_equal(const ZLValueComparer *c, const Datum *a, const bool *anull,
							const Datum *b, const bool *bnull);

/* ---------- zl_subgroup_read.c ---------- */

typedef void (*ZLRowCallback) (void *arg, const ZLSubGroup *sg, int32 position,
							   HeapTuple tuple);
extern void zl_check_position(const ZLSubGroup *sg, int64 position);
extern ZLSubGroup **zl_subgroups_by_block(ZLSubGroup *sgs, int n);
extern int	zl_position_cmp(const void *a, const void *b);
extern void zl_sort_by_tid_block(ZLSubGroup *sgs, int n);
extern int64 *zl_tid_block_starts(const ZLSubGroup *sgs, int n);
extern int	zl_tid_block_candidate(const int64 *starts, int n, int64 block);
extern void zl_read_subgroup_positions(Relation rel, const ZLSubGroup *sg,
									   const int32 *positions, int npositions,
									   ZLRowCallback callback, void *arg);
extern void zl_read_subgroup_rows(Relation rel, const ZLSubGroup *sg,
								  bool include_masked, ZLRowCallback callback,
								  void *arg);
extern void zl_read_subgroup_keys(Relation rel, const ZLSubGroup *sg,
								  const uint32 *hashes, int nhashes,
								  ZLRowCallback callback, void *arg);
extern void zl_read_subgroup_key_range(Relation rel, const ZLSubGroup *sg, uint32 lo,
									   uint32 hi, ZLRowCallback callback, void *arg);

#endif							/* ZL_STORAGE_H */
