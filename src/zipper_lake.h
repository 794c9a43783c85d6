/*-------------------------------------------------------------------------
 *
 * zipper_lake.h
 *	  Private declarations of the zipper_lake table access method.
 *
 * Constants and limits first, then the in-memory forms of the table's
 * registration and of sub-group metadata, then the functions of each
 * source file, grouped by file in layer order: time and relation helpers,
 * storage and metadata at the bottom, then writing (free space, row
 * checks, rows in sorts, the write state, compaction, and the checks of
 * loaded rows, which a flush runs before it places them), then reading
 * and planning (pruning, scans, the custom scan, inlining), then the
 * hooks.  The SQL entry points (register, create_table, apply, read
 * helpers, inspect, verify, reclaim) are called only by SQL and declare
 * nothing here.  See the design comments at the top of zl_storage.c
 * (pages), zl_metadata.c (catalog and visibility), zl_write.c (placement
 * and the write path), zl_load.c (checks of loaded rows) and zl_scan.c
 * (reads).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZIPPER_LAKE_H
#define ZIPPER_LAKE_H

#include "postgres.h"

#include "access/htup.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/sdir.h"
#include "access/transam.h"
#include "executor/tuptable.h"
#include "storage/lockdefs.h"
#include "storage/smgr.h"
#include "datatype/timestamp.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "storage/block.h"
#include "utils/array.h"
#include "utils/date.h"
#include "utils/rel.h"
#include "utils/snapshot.h"

/* ask the CPU to fetch a cache line that is about to be read */
#if defined(__GNUC__) || defined(__clang__)
#define ZL_PREFETCH(address)	__builtin_prefetch(address)
#else
#define ZL_PREFETCH(address)	((void) (address))
#endif

/* ---------- constants ---------- */

#define ZL_MAGIC				0x5A4C4D31	/* "ZLM1" */
#define ZL_FORMAT_VERSION		1
#define ZL_METAPAGE_BLKNO		0

#define ZL_SCHEMA				"zipper_lake"
#define ZL_HINT_APPLY			"Change a zipper table with zipper_lake.apply_changes() or zipper_lake.apply_snapshot()."
#define ZL_AM_NAME				"zipper_lake"

/* partition_end of the current partition (open versions) */
#define ZL_CURRENT_PARTITION	DATEVAL_NOEND

/*
 * Largest sub-group written in one piece; bigger runs are split.  Columnar
 * TIDs number a block's rows from 1 (zl_position_tid), so at most 65535.
 */
#define ZL_MAX_SUBGROUP_ROWS	(64 * 1024 - 1)

/* sub-group formats (README "Storage formats"), as the catalog records them */
#define ZL_FORMAT_ROWS			'r'
#define ZL_FORMAT_COLUMNAR		'c'

/* bytes of a columnar sub-group's stream on each of its pages */
#define ZL_STREAM_PAGE_BYTES	(BLCKSZ - SizeOfPageHeaderData)

/*
 * Memory (kB) of the sorts and buffers of a flush (zl_write.c, "Memory"):
 * each of the two sorts of pending rows (loaded rows by key, rows to
 * place) half of work_mem, 8 MB at least; every other sort or buffer 1 MB.
 */
#define ZL_MAIN_SORT_KB			Max(work_mem / 2, 8192)
#define ZL_SIDE_KB				1024

/* ---------- GUCs (zl_mod.c) ---------- */

extern bool zipper_lake_enable_pruning;
extern int	zipper_lake_columnar_chunk_rows;
extern int	zipper_lake_key_cache_kb;	/* zipper_lake.key_cache_memory */
extern int	zipper_lake_columnar_compression;

/* zipper_lake.key_cache_memory: key directories, and as much for indexes */
#define ZL_KEY_CACHE_KB_DEFAULT		(256 * 1024)
#define ZL_KEY_CACHE_BYTES			((Size) zipper_lake_key_cache_kb * 1024)

/* zipper_lake.retained_memory (zl_malloc.c) */
extern int	zipper_lake_retained_memory_kb;
#define ZL_RETAINED_MEMORY_KB_DEFAULT	(64 * 1024)
extern void zl_assign_retained_memory(int newval, void *extra);

/* zipper_lake.columnar_compression */
typedef enum ZLCompression
{
	ZL_COMPRESSION_ZSTD,
	ZL_COMPRESSION_LZ4
} ZLCompression;

/*
 * Rows of a chunk of columnar sub-groups (zl_columnar_write.c): small
 * enough that reading one row (a key probe) decodes little, large enough
 * for zstd and the directory (measured: README "Storage formats").
 */
#define ZL_CHUNK_ROWS_DEFAULT	1024

/* ---------- registration ---------- */

typedef enum ZLPartitionUnit
{
	ZL_UNIT_DAY,
	ZL_UNIT_MONTH,
	ZL_UNIT_YEAR
} ZLPartitionUnit;

/*
 * A file-group window: either a whole number of months, or a fixed length
 * in microseconds (days and time).  register() refuses mixed spans.
 */
typedef struct ZLSpan
{
	int32		months;
	int64		usecs;
} ZLSpan;

/*
 * The registration of a zipper table, resolved against its tuple
 * descriptor.  Period values are handled as int64 microseconds
 * ("instants"): timestamptz as is, timestamp as if UTC, date at midnight.
 * Only timestamptz columns are cut into dates in time_zone.
 */
typedef struct ZLTableOptions
{
	Oid			relid;
	int			nkeys;
	AttrNumber	key_attnums[INDEX_MAX_KEYS];
	AttrNumber	from_attnum;
	AttrNumber	to_attnum;
	Oid			period_type;
	int32		period_typmod;	/* timestamp(p) / timestamptz(p): p, else -1 */
	ZLPartitionUnit unit;
	ZLSpan		history_span;
	ZLSpan		current_span;
	int			max_subgroups;
	int64		open_end;
	char	   *time_zone;
	bool		zone_is_utc;
	int64		late_horizon;	/* microseconds; 0: none (README "Late data") */
	char		history_format; /* ZL_FORMAT_*: of new history sub-groups */
	int64		history_cut;	/* README "Lifecycle": dropped up to here, or
								 * ZL_NO_HISTORY_CUT */
	bool		has_retention;	/* README "Lifecycle": keep history for ... */
	Interval	retention;
	bool		some_untracked; /* track_columns names only some (README "Tracked columns") */
	uint8		tracked[(MaxHeapAttributeNumber + 7) / 8];	/* a bit per attribute */
} ZLTableOptions;

#define ZL_NO_HISTORY_CUT		PG_INT64_MIN

#define ZL_TRACKED(opts, attnum) \
	(!(opts)->some_untracked || \
	 ((opts)->tracked[((attnum) - 1) >> 3] & (1 << (((attnum) - 1) & 7))) != 0)

/* ---------- sub-group metadata ---------- */

typedef struct ZLKeyFilter ZLKeyFilter;

typedef struct ZLSubGroup
{
	int64		subgroup_id;
	int64		file_group;
	bool		placed;			/* false: loaded before registration */
	char		format;			/* ZL_FORMAT_ROWS or ZL_FORMAT_COLUMNAR */
	DateADT		partition_end;	/* ZL_CURRENT_PARTITION for open versions */
	int64		window_start;
	int64		first_start;
	int64		last_start;
	int64		row_count;
	BlockNumber first_block;
	int32		blocks;
	int64		masked_rows;	/* distinct positions in visible masks */
	bytea	   *key_directory;	/* (zl_keys.c) loaded on demand */
	const struct ZLKeyFilter *key_filter;	/* in front of a cached directory */
	uint8	   *mask;			/* bit per row position, NULL if none masked */
} ZLSubGroup;

/*
 * Positions (zl_scan.c, "Row positions"): in a row sub-group
 * (block - first_block) * MaxHeapTuplesPerPage + (offset - 1); in a
 * columnar one the row's ordinal, its TID spreading the ordinals evenly
 * over the blocks.  zl_subgroup_positions() bounds them (mask bits).
 */
static inline int64
zl_subgroup_positions(const ZLSubGroup *sg)
{
	return sg->format == ZL_FORMAT_COLUMNAR ? sg->row_count :
		(int64) sg->blocks * MaxHeapTuplesPerPage;
}

static inline int64
zl_columnar_rows_per_block(const ZLSubGroup *sg)
{
	return sg->blocks > 0 ? (sg->row_count + sg->blocks - 1) / sg->blocks : 1;
}

static inline void
zl_position_tid(const ZLSubGroup *sg, int64 position, ItemPointer tid)
{
	/* positions and blocks of a sub-group fit 32 bits */
	uint32		per_block = sg->format == ZL_FORMAT_COLUMNAR ?
		(uint32) zl_columnar_rows_per_block(sg) : MaxHeapTuplesPerPage;

	ItemPointerSet(tid, sg->first_block + (uint32) position / per_block,
				   (OffsetNumber) ((uint32) position % per_block) + 1);
}

static inline int64
zl_tid_position(const ZLSubGroup *sg, BlockNumber block, OffsetNumber offset)
{
	int64		per_block = sg->format == ZL_FORMAT_COLUMNAR ?
		zl_columnar_rows_per_block(sg) : MaxHeapTuplesPerPage;

	return (int64) (block - sg->first_block) * per_block + (offset - 1);
}

#define ZL_ROW_MASKED(sg, pos) \
	((sg)->mask != NULL && ((sg)->mask[(pos) >> 3] & (1 << ((pos) & 7))) != 0)

/* ---------- pruning bounds ---------- */

/*
 * What a read wants, as inclusive instant ranges on the period columns;
 * "either" ORs the two conditions instead of ANDing them.
 */
typedef struct ZLScanBounds
{
	bool		either;
	int64		from_lo;
	int64		from_hi;
	int64		to_lo;
	int64		to_hi;
} ZLScanBounds;

#define ZL_UNBOUNDED_LO		PG_INT64_MIN
#define ZL_UNBOUNDED_HI		PG_INT64_MAX

/*
 * Which sub-groups a bounded scan loads from the catalog: a superset of
 * those the bounds can keep (partition_end in [min_partition,
 * max_partition] and [first_start, last_start] meeting [from_lo, from_hi]
 * in a partition from from_min_partition on, ANDed or, with either, ORed),
 * so that a selective read never touches the metadata of the rest of the
 * history.
 */
typedef struct ZLSubGroupFilter
{
	bool		either;
	DateADT		min_partition;
	DateADT		max_partition;
	int64		from_lo;
	int64		from_hi;
	DateADT		from_min_partition; /* versions from from_lo end there or later */
} ZLSubGroupFilter;

typedef enum ZLPruneDecision
{
	ZL_SKIP,
	ZL_CHECK,
	ZL_ALL_MATCH
} ZLPruneDecision;

typedef struct ZLPruneStats
{
	int			partitions_total;
	int			partitions_kept;
	int			file_groups_total;
	int			file_groups_kept;
	int			subgroups_total;
	int			subgroups_kept;
	int			subgroups_unchecked;	/* kept with no per-row check */
	int			subgroups_loaded;	/* read from the catalog (see zl_bounds_filter) */
	int			subgroups_key_probed;	/* kept ones whose key directory was probed */
	int			subgroups_key_matched;	/* of those, holding one of the keys' hashes */
	int			subgroups_key_unindexed;	/* kept ones without a directory: read whole */
	int			subgroups_key_merged;	/* probed ones found through the merged key index */
	int64		rows_masked;	/* masked rows stepped over while reading */
	int64		chunks_total;	/* chunks of columnar sub-groups entered */
	int64		chunks_skipped; /* of those, skipped by their min/max */
} ZLPruneStats;

/* ---------- zl_time.c ---------- */

extern int64 zl_datum_to_instant(Datum value, Oid typid);
extern Datum zl_instant_to_datum(int64 instant, Oid typid);
extern bool zl_instant_is_finite(int64 instant);
extern DateADT zl_partition_of(const ZLTableOptions *opts, int64 valid_to);
extern int64 zl_window_of(const ZLTableOptions *opts, DateADT partition_end,
						  int64 valid_from);
extern ZLSpan zl_span_from_interval(const Interval *span);
extern void zl_partition_range(const ZLTableOptions *opts, DateADT partition_end,
							   int64 *valid_to_lo, int64 *valid_to_hi);
extern int64 zl_timestamptz_to_instant(const ZLTableOptions *opts, TimestampTz ts);
extern bool zl_timestamptz_minus_interval(TimestampTz t, const Interval *span,
										  TimestampTz *result);
extern int64 zl_instant_to_precision(const ZLTableOptions *opts, int64 instant);
extern char *zl_instant_to_cstring(int64 instant, Oid typid);
extern bool zl_time_text_reads_clock(const char *str);
extern bool zl_type_reads_time_text(Oid type);

/* ---------- zl_relation.c ---------- */

extern bool zl_is_zipper_relation(Relation rel);
extern char *zl_relation_arg_name(Oid relid, const char *argument);
extern Relation zl_open_zipper_table(Oid relid, LOCKMODE lockmode);
extern Relation zl_open_owned_registered_table(Oid relid, LOCKMODE lockmode,
											   ZLTableOptions *opts,
											   const char *unregistered_hint);
extern void zl_load_registration(Relation rel, ZLTableOptions *opts, bool for_write,
								 const char *detail, const char *hint);
extern Relation zl_open_readable_zipper_table(Oid relid);
extern void zl_refuse_row_security(Relation rel);
extern void zl_refuse_row_change(Relation rel, CmdType command);
extern char *zl_qualified_name(Relation rel);
extern bool zl_is_key_column(const ZLTableOptions *opts, AttrNumber attnum);
extern bool zl_is_value_column(const ZLTableOptions *opts, Form_pg_attribute att);
extern const char *zl_attname(TupleDesc tupdesc, AttrNumber attnum);
extern HeapTuple zl_catalog_row_as_written(Oid catalog, Oid index, int nkeys,
										   struct ScanKeyData *keys);
extern char *zl_describe_key(const ZLTableOptions *opts, TupleDesc tupdesc,
							 HeapTuple tuple);
extern char *zl_describe_version(const ZLTableOptions *opts, TupleDesc tupdesc,
								 HeapTuple tuple);

/* ---------- zl_storage.c ---------- */

typedef struct ZLPageWriter ZLPageWriter;

extern void zl_storage_init(Relation rel, SMgrRelation srel, ForkNumber fork,
							uint64 storage_id);
extern uint64 zl_storage_id(Relation rel);
extern bool zl_storage_try_id(Relation rel, uint64 *storage_id);
/* zl_recentbuf.c */
extern Buffer zl_read_block(Relation rel, BlockNumber block);
extern void zl_remember_block(Relation rel, BlockNumber block, Buffer buffer);

extern ZLPageWriter *zl_page_writer_begin(Relation rel, BlockNumber first_block,
										  BlockNumber blocks);
extern ZLPageWriter *zl_page_counter_begin(void);
extern BlockNumber zl_page_writer_pages(const ZLPageWriter *writer);
extern int32 zl_page_writer_add(ZLPageWriter *writer, HeapTuple tuple);
extern void zl_page_counter_add_length(ZLPageWriter *counter, uint32 len);
extern void zl_page_writer_add_bytes(ZLPageWriter *writer, const char *data, Size len);
extern void zl_page_writer_finish(ZLPageWriter *writer, BlockNumber *first_block,
								  int32 *blocks);

/* ---------- zl_columnar_write.c, zl_columnar_read.c ---------- */

typedef struct ZLColumnarWriter ZLColumnarWriter;
typedef struct ZLColumnarReader ZLColumnarReader;

extern ZLColumnarWriter *zl_columnar_writer_begin(TupleDesc desc);
extern int32 zl_columnar_writer_add(ZLColumnarWriter *w, HeapTuple tuple);
extern BlockNumber zl_columnar_writer_finish(ZLColumnarWriter *w);
extern void zl_columnar_writer_write(ZLColumnarWriter *w, ZLPageWriter *pages);
extern void zl_columnar_writer_end(ZLColumnarWriter *w);
extern ZLColumnarReader *zl_columnar_open(Relation rel, const ZLSubGroup *sg,
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

/* ---------- zl_chunkfilter.c ---------- */

typedef struct ZLChunkFilter ZLChunkFilter;
struct PlanState;
struct ExprContext;

extern List *zl_chunkfilter_extract(List *clauses, Index rti, TupleDesc desc, List **info);
extern ZLChunkFilter *zl_chunkfilter_init(List *clauses, List *info, struct PlanState *parent);
extern void zl_chunkfilter_evaluate(ZLChunkFilter *filter, struct ExprContext *econtext,
									MemoryContext context);
extern bool zl_chunkfilter_may_match(ZLChunkFilter *filter, const ZLColumnarReader *r,
									 int chunk);
extern uint64 zl_storage_metadata_changes(Relation rel);
extern void zl_storage_count_metadata_change(Relation rel);
extern void zl_storage_request_scrub(Relation rel);
extern uint64 zl_storage_scrub_due(Relation rel);
extern void zl_storage_scrub_done(Relation rel, uint64 requests);
extern bool zl_write_lock_table(uint64 storage_id, bool nowait);
extern void zl_write_unlock_table(uint64 storage_id);

/* ---------- zl_metaread.c ---------- */

/* the metadata catalog's relations and owner (cached per backend) */
typedef struct ZLCatalog
{
	Oid			subgroup;
	Oid			subgroup_pkey;
	Oid			subgroup_window_index;	/* (storage_id, partition_end, window_start) */
	Oid			mask;
	Oid			mask_index;
	Oid			owner;
} ZLCatalog;

extern const ZLCatalog *zl_meta_catalog(void);

/*
 * A storage in per-backend caches: its id with the catalog's OID, since a
 * new CREATE EXTENSION starts ids over.  All 64-bit: no padding to hash.
 */
typedef struct ZLStorageKey
{
	uint64		catalog;
	uint64		storage_id;
} ZLStorageKey;

extern ZLStorageKey zl_meta_storage_key(uint64 storage_id);
extern bool zl_meta_subgroup_passes(const ZLSubGroup *sg, const ZLSubGroupFilter *filter,
									DateADT min_partition);
extern void zl_meta_or_mask(ZLSubGroup *sg, const int32 *positions, int npositions,
							MemoryContext context);
extern void zl_meta_load_masks(uint64 storage_id, Snapshot snapshot, ZLSubGroup *sgs, int n);

typedef struct ZLMetaRowReader ZLMetaRowReader;

extern ZLMetaRowReader *zl_meta_row_reader_begin(Oid catalog, Oid index, uint64 storage_id,
												 Snapshot snapshot);
extern HeapTuple zl_meta_row_reader_next(ZLMetaRowReader *reader);
extern Relation zl_meta_row_reader_relation(ZLMetaRowReader *reader);
extern void zl_meta_row_reader_end(ZLMetaRowReader *reader);
extern void zl_meta_row_subgroup(ZLMetaRowReader *reader, ZLSubGroup *sg);
extern void zl_meta_row_mask(ZLMetaRowReader *reader, int64 *subgroup_id, int32 **positions,
							 int *npositions);
extern ZLSubGroup *zl_meta_load_subgroups(uint64 storage_id, Snapshot snapshot,
										  DateADT min_partition, int *nsubgroups);
extern ZLSubGroup *zl_meta_load_filtered_subgroups(uint64 storage_id, Snapshot snapshot,
												   const ZLSubGroupFilter *filter,
												   int *nsubgroups);
extern ZLSubGroup *zl_meta_find_subgroup(ZLSubGroup *sgs, int n, int64 subgroup_id);
extern void zl_meta_count_subgroups(uint64 storage_id, Snapshot snapshot,
									ZLPruneStats *stats);
extern void zl_meta_load_key_directories(uint64 storage_id, Snapshot snapshot,
										 ZLSubGroup *sgs, int nsubgroups,
										 const uint8 *decisions);

/* ---------- zl_metacache.c ---------- */

extern int64 zl_meta_cached_rows(Relation rel, Snapshot snapshot);
extern ZLSubGroup *zl_meta_cached_subgroups(Relation rel, Snapshot snapshot,
											const ZLSubGroupFilter *filter,
											DateADT min_partition, bool with_masks,
											int *nsubgroups);
extern void zl_meta_cached_masks(Relation rel, Snapshot snapshot, ZLSubGroup *sgs, int n);
extern void zl_meta_cache_forget(uint64 storage_id);

/* ---------- zl_metadata.c ---------- */

extern uint64 zl_meta_new_storage(Oid relid);
extern void zl_meta_forget_storage(uint64 storage_id);
extern bool zl_meta_forget_table(Oid relid);
extern Oid	zl_meta_storage_owner(uint64 storage_id);
extern void zl_meta_insert_registration(Datum *values);
extern void zl_meta_set_late_horizon(Oid relid, Interval *horizon);
extern void zl_meta_set_track_columns(Oid relid, ArrayType *names);
extern void zl_meta_set_history_format(Oid relid, text *format);
extern void zl_meta_set_retention(Oid relid, Interval *keep);
extern void zl_meta_raise_history_cut(Oid relid, int64 cut);
extern int64 zl_meta_drop_partitions(Relation rel, DateADT last_partition);
extern bool zl_meta_has_subgroups(uint64 storage_id);
extern bool zl_meta_time_zone_exists(const char *name);
extern bool zl_meta_load_options(Relation rel, ZLTableOptions *opts, bool for_write);
extern void zl_meta_choose_file_group(uint64 storage_id, DateADT partition_end,
									  int64 window_start, int max_subgroups,
									  int64 *file_group, int32 *rollover_seq);
extern int64 zl_meta_insert_subgroup(Relation rel, const ZLSubGroup *sg,
									 int32 rollover_seq, const bytea *key_directory);
typedef struct ZLHistoryInserts ZLHistoryInserts;
extern ZLHistoryInserts *zl_meta_history_inserts_begin(Relation rel);
extern void zl_meta_history_insert(ZLHistoryInserts *h, const ZLSubGroup *sg,
								   bytea *key_directory);
extern void zl_meta_history_inserts_flush(ZLHistoryInserts *h);
extern void zl_meta_history_inserts_end(ZLHistoryInserts *h);
extern void zl_meta_delete_subgroup(Relation rel, int64 subgroup_id);
extern bool zl_meta_statement_running(void);
extern void zl_meta_insert_masks(Relation rel, int nmasks,
								 const int64 *subgroup_ids, int32 *const *positions,
								 const int *npositions);

/* blocks of deleted sub-groups, free once freed_by is old enough */
/* an instant of every key (zl_fold.c) */
typedef struct ZLTableInstant ZLTableInstant;

/* a segment of the change record, or (zl_meta_record_pieces) a piece */
typedef struct ZLRecordSegment
{
	int64		piece;
	int32		segment;
	int64		bytes;
} ZLRecordSegment;

extern bool zl_meta_record_exists(void);
extern ZLRecordSegment *zl_meta_record_segments(Oid relid, Snapshot snapshot,
												uint32 hash_lo, uint32 hash_hi,
												int64 newest_from, int *nsegments);
extern bytea *zl_meta_record_entries(Oid relid, Snapshot snapshot, int64 piece,
									 int32 segment);
extern ZLRecordSegment *zl_meta_record_pieces(Oid relid, int *npieces);
extern int64 zl_meta_new_id(void);
extern void zl_meta_record_insert(Oid relid, int64 piece, int32 segment, uint32 hash_lo,
								  uint32 hash_hi, int64 newest, int64 instants,
								  bytea *entries);
extern void zl_meta_record_delete_piece(Oid relid, int64 piece);
extern bool zl_meta_record_head(Oid relid, Snapshot snapshot, int64 *newest_change,
								ZLTableInstant **instants, int *ninstants);
extern void zl_meta_record_save_head(Oid relid, int64 newest_change,
									  const ZLTableInstant *instants, int ninstants);
extern void zl_meta_record_forget(Oid relid);
extern void zl_meta_record_size(Oid relid, int64 *pieces, int64 *instants, int64 *bytes);
struct ReturnSetInfo;
extern void zl_meta_record_inspect(Oid relid, struct ReturnSetInfo *rsinfo);

typedef struct ZLFreeExtent
{
	BlockNumber first_block;
	BlockNumber blocks;
	FullTransactionId freed_by;
} ZLFreeExtent;

extern ZLFreeExtent *zl_meta_load_free_extents(uint64 storage_id, Snapshot snapshot,
											   int *nextents);
extern void zl_meta_take_free_extent(uint64 storage_id, BlockNumber first_block,
									 BlockNumber blocks);
extern void zl_meta_take_free_extents(uint64 storage_id, int n, const BlockNumber *first_blocks,
									  const BlockNumber *blocks);
extern void zl_meta_insert_free_extents(uint64 storage_id, const ZLFreeExtent *extents,
										int nextents, FullTransactionId freed_by);

/* ---------- zl_keys.c ---------- */

typedef struct ZLKeyHasher ZLKeyHasher;

/* an entry of a key directory: a bytea of them, sorted by hash */
typedef struct ZLKeyDirEntry
{
	uint32		hash;
	int32		position;
} ZLKeyDirEntry;

#define ZL_KEY_DIRECTORY_ENTRIES(dir)	((const ZLKeyDirEntry *) VARDATA_ANY(dir))
#define ZL_KEY_DIRECTORY_SIZE(dir)		((int) (VARSIZE_ANY_EXHDR(dir) / sizeof(ZLKeyDirEntry)))

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
extern bytea *zl_key_directory_remember(Oid catalog, int64 subgroup_id, Datum directory,
										const ZLKeyFilter **filter);
extern void zl_key_filter_prefetch(const ZLKeyFilter *f, const uint32 *hashes, int nhashes);
extern bool zl_key_filter_may_hold(const ZLKeyFilter *f, const uint32 *hashes, int nhashes);
extern int32 *zl_key_directory_probe(const bytea *dir, const uint32 *hashes,
									 int nhashes, int *npositions);
extern int32 *zl_key_directory_range(const bytea *dir, uint32 lo, uint32 hi,
									 int *npositions);

typedef struct ZLValueComparer ZLValueComparer;

extern ZLValueComparer *zl_value_comparer_create(TupleDesc tupdesc,
												 const ZLTableOptions *opts,
												 bool tracked_only);
extern bool zl_values_equal(const ZLValueComparer *c, const Datum *a, const bool *anull,
							const Datum *b, const bool *bnull);

/* ---------- zl_keyindex.c ---------- */

typedef struct ZLKeyIndex ZLKeyIndex;

typedef enum ZLKeyIndexScope
{
	ZL_KEY_INDEX_ALL,			/* the sub-groups a scan may read */
	ZL_KEY_INDEX_CURRENT		/* the current partition's (apply_changes) */
} ZLKeyIndexScope;

/* sub-groups of a list an index may lack before it is built again */
#define ZL_KEY_INDEX_MISSING(n)	Max(16, (n) / 8)

extern ZLKeyIndex *zl_key_index_get(uint64 storage_id, ZLKeyIndexScope scope,
									uint64 *generation);
extern ZLKeyIndex *zl_key_index_build(uint64 storage_id, ZLKeyIndexScope scope,
									  const ZLSubGroup *sgs, int n, uint64 *generation);
extern ZLKeyIndex *zl_key_index_map(uint64 storage_id, ZLKeyIndexScope scope,
									const ZLSubGroup *sgs, int n, uint64 *generation,
									int **map, bool **in_index);
extern ZLKeyIndex *zl_key_index_map_existing(uint64 storage_id, ZLKeyIndexScope scope,
											 const ZLSubGroup *sgs, int n, uint64 *generation,
											 int **map, bool **in_index);
extern bool zl_key_index_fits(uint64 rows, int nsubgroups);
extern bool zl_key_index_worth_building(uint64 storage_id, ZLKeyIndexScope scope, int probed,
										int64 index_rows);
extern bool zl_key_index_current(uint64 storage_id, ZLKeyIndexScope scope, uint64 generation);
extern int	zl_key_index_subgroups(const ZLKeyIndex *index, const int64 **subgroup_ids);
extern void zl_key_index_prefetch(const ZLKeyIndex *index, uint32 hash);
extern int	zl_key_index_find(const ZLKeyIndex *index, uint32 hash, int *cursor,
							  int32 *position);

/* ---------- zl_freespace.c ---------- */

typedef struct ZLFreeSpace ZLFreeSpace;

extern ZLFreeSpace *zl_free_space_begin(Relation rel, uint64 storage_id);
extern BlockNumber zl_free_space_largest(const ZLFreeSpace *fs);
extern BlockNumber zl_free_space_take(ZLFreeSpace *fs, BlockNumber blocks);
extern void zl_free_space_end(ZLFreeSpace *fs);
extern int64 zl_free_space_truncate(Relation rel);
extern int64 zl_free_space_reclaim(Relation rel);
extern int64 zl_free_space_wipe(Relation rel, BufferAccessStrategy strategy, bool *complete);

/* ---------- zl_scrub.c ---------- */

struct VacuumParams;
extern bool zl_bytes_are_zero(const char *bytes, Size len);
extern void zl_scrub_vacuum(Relation rel, struct VacuumParams *params,
							BufferAccessStrategy bstrategy, int elevel);

/* ---------- zl_rowcheck.c ---------- */

typedef struct ZLAssignment ZLAssignment;
typedef struct ZLRowCheck ZLRowCheck;

extern ZLAssignment *zl_assignment_create(int ncols);
extern bool zl_assignment_add(ZLAssignment *a, int col, Oid source_type,
							  int32 source_typmod, Oid target_type, int32 target_typmod);
extern void zl_assignment_apply(ZLAssignment *a, Datum *values, bool *isnull,
								MemoryContext memory_context);
extern void zl_assignment_end(ZLAssignment *a);
extern ZLRowCheck *zl_row_check_begin(Relation rel, const ZLTableOptions *opts);
extern HeapTuple zl_row_check(ZLRowCheck *rc, HeapTuple tuple, const Datum *values,
							  const bool *isnull);
extern void zl_row_check_end(ZLRowCheck *rc);

/* ---------- zl_rowsort.c ---------- */

/* a buffer for the bytea of a row, grown in context */
typedef struct ZLRowPayload
{
	MemoryContext context;
	bytea	   *buffer;
	Size		size;
} ZLRowPayload;

extern void zl_rowsort_slots(TupleDesc desc, TupleTableSlot **put, TupleTableSlot **read);
extern struct Tuplesortstate *zl_rowsort_begin(TupleDesc desc, int nkeys,
											   const AttrNumber *attnums, int work_mem_kb);
extern void zl_rowsort_put_pending(struct Tuplesortstate *sort, TupleTableSlot *slot);
extern void zl_rowsort_perform_pending(struct Tuplesortstate *sort);
extern Datum zl_rowsort_payload(ZLRowPayload *payload, HeapTuple tuple);
extern int64 zl_rowsort_int8(TupleTableSlot *slot, AttrNumber attnum);
extern uint32 zl_rowsort_row_length(TupleTableSlot *slot, AttrNumber attnum);
extern void zl_rowsort_row_into(TupleTableSlot *slot, AttrNumber attnum, HeapTuple tuple,
								char *buffer);
extern HeapTuple zl_rowsort_row_copy(TupleTableSlot *slot, AttrNumber attnum);

/* a row with its sort keys (zl_intsort_next, zl_sortrow_from_slot) */
#define ZL_SORTROW_MAX_KEYS		5
typedef struct ZLSortRow
{
	int64		keys[ZL_SORTROW_MAX_KEYS];
	HeapTupleData row;
} ZLSortRow;

typedef struct ZLIntSort ZLIntSort;

extern TupleTableSlot *zl_sortrow_to_slot(const int64 *keys, int nkeys, HeapTuple row,
										  TupleTableSlot *slot, ZLRowPayload *payload);
extern void zl_sortrow_from_slot(TupleTableSlot *slot, int nkeys, ZLSortRow *out,
								 ZLRowPayload *buffer);
extern ZLIntSort *zl_intsort_begin(TupleDesc desc, int nkeys, int work_mem_kb, bool pending);
extern void zl_intsort_put(ZLIntSort *s, const int64 *keys, HeapTuple row);
extern void zl_intsort_put_slot(ZLIntSort *s, TupleTableSlot *slot);
extern void zl_intsort_perform(ZLIntSort *s);
extern bool zl_intsort_next(ZLIntSort *s, ZLSortRow *out);
extern void zl_intsort_end(ZLIntSort *s);

/* ---------- zl_write.c ---------- */

typedef struct ZLWriteState ZLWriteState;

extern ZLWriteState *zl_write_state_get(Relation rel);

extern void zl_write_add(ZLWriteState *state, HeapTuple tuple);
extern void zl_write_load(ZLWriteState *state, HeapTuple tuple);
extern void zl_write_place(ZLWriteState *state, HeapTuple tuple, int64 valid_from,
						   int64 valid_to);

extern void zl_write_add_decoded(ZLWriteState *state, Relation rel, HeapTuple tuple);
extern HeapTuple zl_toast_version(Relation rel, HeapTuple tuple);
extern void zl_write_hold_packing(Oid relid, bool hold);
extern char zl_write_state_history_format(const ZLWriteState *state);
extern void zl_write_flush_relation(Oid relid);
extern void zl_write_flush_all(void);
extern void zl_write_discard_relation(Oid relid);
extern void zl_write_place_unplaced(Relation rel);
extern void zl_write_register_callbacks(void);

/* ---------- zl_compact.c ---------- */

extern bool zl_compaction_due(int64 row_count, int64 masked_rows, int64 ndropped);
extern bool zl_compact_subgroup(Relation rel, ZLWriteState *state, const ZLSubGroup *sg,
								const int32 *dropped, int ndropped);
extern void zl_rewrite_subgroup(Relation rel, ZLWriteState *state, const ZLSubGroup *sg,
								const int32 *dropped, int ndropped);

/* rows a flush is about to write into one (history partition, window) */
typedef struct ZLPendingRun
{
	DateADT		partition_end;
	int64		window_start;
	int64		rows;
} ZLPendingRun;

extern void zl_pack_small_subgroups(Relation rel, ZLWriteState *state,
									const ZLPendingRun *runs, int nruns);

/* ---------- zl_retention.c ---------- */

extern int64 zl_drop_history(Relation rel, const ZLTableOptions *opts, int64 cut);
extern void zl_maintenance_vacuum(Relation rel, ZLSubGroup **sgs, int *nsgs, int elevel);
extern bool zl_retention_cut_time(TimestampTz now, const Interval *keep, TimestampTz *cut);

/* ---------- zl_load.c ---------- */

typedef struct ZLLoad ZLLoad;

extern ZLLoad *zl_load_begin(const ZLTableOptions *opts, uint64 storage_id,
							 TupleDesc tupdesc, ZLKeyHasher *hasher, bool may_be_narrow);
extern bool zl_load_add(ZLLoad *load, HeapTuple tuple, int64 valid_from, int64 valid_to);
extern int64 zl_load_taken(const ZLLoad *load);
extern bool zl_load_check(ZLLoad *load, Relation rel, ZLWriteState *writer);
extern void zl_load_end(ZLLoad *load);

/* ---------- zl_prune.c ---------- */

extern ZLScanBounds zl_bounds_init(bool either);
extern void zl_bounds_narrow(ZLScanBounds *bounds, bool on_valid_from, int strategy,
							 int64 value);
extern bool zl_bounds_match(const ZLScanBounds *bounds, int64 from, int64 to);
extern void zl_bounds_filter(const ZLTableOptions *opts, const ZLScanBounds *bounds,
							 ZLSubGroupFilter *filter);
extern void zl_prune(const ZLTableOptions *opts, const ZLScanBounds *bounds,
					 bool prune, const ZLSubGroup *sgs, int n, uint8 *decisions,
					 ZLPruneStats *stats);
extern ZLPruneDecision zl_prune_decide(const ZLTableOptions *opts, const ZLScanBounds *bounds,
									   bool prune, const ZLSubGroup *sg);
extern void zl_prune_count_groups(const ZLSubGroup *sgs, int n, const uint8 *decisions,
								  ZLPruneStats *stats);
extern int	zl_count_distinct(int64 *values, int n);

/* ---------- zl_scan.c ---------- */

extern TableScanDesc zl_scan_begin(Relation rel, Snapshot snapshot, int nkeys,
								   struct ScanKeyData *key,
								   ParallelTableScanDesc pscan, uint32 flags);
extern void zl_scan_end(TableScanDesc scan);
extern void zl_scan_rescan(TableScanDesc scan, struct ScanKeyData *key,
						   bool set_params, bool allow_strat,
						   bool allow_sync, bool allow_pagemode);
extern bool zl_scan_getnextslot(TableScanDesc scan, ScanDirection direction,
								TupleTableSlot *slot);
extern Size zl_parallelscan_estimate(Relation rel);
extern Size zl_parallelscan_initialize(Relation rel, ParallelTableScanDesc pscan);
extern void zl_parallelscan_reinitialize(Relation rel, ParallelTableScanDesc pscan);
extern bool zl_scan_analyze_next_block(TableScanDesc scan, BlockNumber blockno,
									   BufferAccessStrategy bstrategy);
extern bool zl_scan_analyze_next_tuple(TableScanDesc scan,
									   TransactionId OldestXmin,
									   double *liverows, double *deadrows,
									   TupleTableSlot *slot);
extern void zl_scan_set_bounds(TableScanDesc scan, const ZLTableOptions *opts,
							   const ZLScanBounds *bounds);
extern void zl_scan_set_keys(TableScanDesc scan, const uint32 *hashes, int nhashes);
extern void zl_scan_keep_subgroups(TableScanDesc scan);
extern void zl_scan_set_columns(TableScanDesc scan, const bool *needed);
extern void zl_scan_set_chunk_filter(TableScanDesc scan, ZLChunkFilter *filter);
extern const ZLPruneStats *zl_scan_stats(TableScanDesc scan);

/* rows of one columnar chunk a scan returns, for in-scan aggregates */
typedef struct ZLRowBatch
{
	ZLColumnarReader *reader;	/* zl_columnar_chunk_values(reader, chunk, ...) */
	int			chunk;
	const uint32 *rows;			/* the rows' indexes in the chunk, ascending */
	uint32		nrows;
} ZLRowBatch;
extern bool zl_scan_next_batch(TableScanDesc scan, ZLRowBatch *batch);

typedef void (*ZLRowCallback) (void *arg, const ZLSubGroup *sg, int32 position,
							   HeapTuple tuple);
extern ZLSubGroup **zl_subgroups_by_block(ZLSubGroup *sgs, int n);
extern int	zl_position_cmp(const void *a, const void *b);
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

/* ---------- zl_read.c ---------- */

/*
 * What a read helper selects: each term compares a period column with one
 * of the helper's time arguments (1-based) or the open end.  All terms are
 * ANDed, or with either, the valid_from terms ORed with the valid_to ones
 * (as ZLScanBounds.either).
 */
#define ZL_TERM_OPEN_END		(-1)
#define ZL_HELPER_MAX_TIMES		2
#define ZL_HELPER_MAX_TERMS		5

typedef struct ZLHelperTerm
{
	bool		on_valid_from;
	int			strategy;		/* BTLessStrategyNumber ..., column on the left */
	int			value;			/* a time argument, or ZL_TERM_OPEN_END */
} ZLHelperTerm;

typedef struct ZLReadHelper
{
	const char *name;
	int			ntimes;
	const char *time_names[ZL_HELPER_MAX_TIMES];	/* for errors about NULL */
	bool		either;
	int			nterms;
	ZLHelperTerm terms[ZL_HELPER_MAX_TERMS];
} ZLReadHelper;

extern const ZLReadHelper *zl_read_helper(const char *name);

/* ---------- zl_fold.c ---------- */

/*
 * One instant the change record remembers for a key (zl_record.c): what
 * the versions do not show.  is_delete is the winning change's kind, which
 * the versions also imply (verify compares).
 */
/* the change (its seq) that gave a column at an instant (zl_fold.c) */
typedef struct ZLGiver
{
	bool		set;
	bool		has_seq;
	int64		seq;
	bool		earlier;		/* an earlier application's, though of the winner's seq */
} ZLGiver;

/* the untracked values the state after an instant holds (README "Tracked columns") */
typedef struct ZLUntrackedValues
{
	int			n;
	AttrNumber *attnums;
	Datum	   *values;
	bool	   *isnull;
} ZLUntrackedValues;

typedef struct ZLRecordInstant
{
	int64		time;
	bool		has_seq;
	bool		is_delete;
	int64		seq;
	const uint8 *given;			/* a partial change: a bit per column it gave; NULL: all */
	int			ngivers;		/* columns another change there gave than the winner */
	const AttrNumber *giver_attnums;
	const struct ZLGiver *givers;
	const ZLUntrackedValues *untracked; /* when they differ from its version's */
} ZLRecordInstant;

/* a change of one key, as the fold takes it */
typedef struct ZLFoldChange
{
	int64		time;
	bool		has_seq;
	int64		seq;
	bool		is_delete;
	bool		missing_key;	/* apply_snapshot's delete of a key its image lacks */
	Datum	   *values;			/* a full row; period slots unused */
	bool	   *isnull;
	const uint8 *given;			/* partial: a bit per column it gives (keys always); NULL: all */
} ZLFoldChange;

/* a version of a key; stored: the row it is, NULL when new */
typedef struct ZLFoldVersion
{
	int64		from;
	int64		to;
	Datum	   *values;
	bool	   *isnull;
	struct StoredVersion *stored;
} ZLFoldVersion;

typedef struct ZLFoldCounts
{
	int64		inserted;
	int64		closed;
	int64		deleted;
	int64		unchanged;
	int64		late;
} ZLFoldCounts;

/* everything the fold of one key reads and writes */
typedef struct ZLFoldKey
{
	int64		since;			/* the key's earliest change of the batch */
	ZLFoldVersion *versions;	/* sorted; every stored one ending at or after since */
	int			nversions;
	ZLRecordInstant *record;	/* sorted; remembered instants at or after since */
	int			nrecord;
	ZLFoldChange **changes;		/* sorted in fold order, duplicates collapsed */
	int			nchanges;
	/* out */
	ZLFoldVersion *result;		/* replaces versions */
	int			nresult;
	ZLRecordInstant *remember;	/* replaces record */
	int			nremember;
	bool		record_changed;
} ZLFoldKey;

/*
 * An instant of every key (README "Change semantics"): apply_snapshot with
 * deletes, a truncate.  Stored ones are the winners at their times.
 */
struct ZLTableInstant
{
	int64		time;
	bool		has_seq;
	int64		seq;
};

typedef struct ZLTableInstants
{
	ZLTableInstant *stored;		/* sorted by time, one per time */
	int			nstored;
	ZLTableInstant *batch;		/* this batch's */
	int			nbatch;
} ZLTableInstants;

/* what folding a key needs of its table */
typedef struct ZLFoldContext
{
	const ZLValueComparer *comparer;	/* every value column */
	const ZLValueComparer *tracked; /* the tracked ones: they make versions */
	const ZLTableOptions *opts;
	TupleDesc	tupdesc;
	int64		open_end;
	const ZLTableInstants *table;
	int			natts;
} ZLFoldContext;

extern void zl_fold_key(const ZLFoldContext *cx, ZLFoldKey *key, ZLFoldCounts *counts);
extern bool zl_fold_precedes(int64 time, bool has_seq, int64 seq,
							 int64 other_time, bool other_has_seq, int64 other_seq);

/* ---------- zl_record.c ---------- */

/* one key's entry in a piece of the change record */
typedef struct ZLRecordEntry
{
	uint32		hash;
	Datum	   *key;			/* row-shaped: key slots only */
	int64		since;			/* replaces older pieces' instants from here on */
	int64		overridden;		/* the newest instant it replaces, PG_INT64_MIN if none */
	int			ninstants;
	ZLRecordInstant *instants;
} ZLRecordEntry;

typedef struct ZLRecordCodec ZLRecordCodec;
typedef struct ZLRecordWriter ZLRecordWriter;
typedef void (*ZLRecordCallback) (void *arg, const ZLRecordEntry *entry);

extern ZLRecordCodec *zl_record_codec_create(TupleDesc tupdesc, const ZLTableOptions *opts,
											 const ZLKeyHasher *hasher);
extern void zl_record_read(ZLRecordCodec *codec, Oid relid, Snapshot snapshot,
						   uint32 hash_lo, uint32 hash_hi, int64 newest_from,
						   ZLRecordCallback callback, void *arg);
extern ZLRecordInstant *zl_record_copy_instants(const ZLRecordCodec *codec,
												const ZLRecordInstant *instants, int n);
extern ZLRecordWriter *zl_record_writer_begin(ZLRecordCodec *codec);
extern void zl_record_writer_add(ZLRecordWriter *writer, const ZLRecordEntry *entry);
extern void zl_record_writer_finish(ZLRecordWriter *writer, Oid relid);
extern void zl_record_merge(ZLRecordCodec *codec, Oid relid, int64 forget_before);
extern void zl_record_rewrite(ZLRecordCodec *codec, Oid relid, int64 forget_before,
							  bool (*keep) (void *arg, const ZLRecordEntry *entry),
							  void *keep_arg);
extern void zl_record_resolve(ZLRecordCodec *codec, Oid relid, Snapshot snapshot,
							  ZLRecordCallback callback, void *arg);

/* ---------- zl_apply.c: a batch from another source of changes ---------- */

typedef struct ApplyContext ZLApplyBatch;

typedef struct ZLBatchChange
{
	char		op;				/* 'u' upsert, 'd' delete, 't' truncate */
	TimestampTz time;
	bool		has_seq;
	int64		seq;
	Datum	   *values;			/* row-shaped, of the columns' types */
	bool	   *isnull;
	const uint8 *given;			/* a bit per column it gives; NULL: all */
} ZLBatchChange;

extern ZLApplyBatch *zl_apply_batch_begin(Oid relid, Oid source_relid,
										  const char *source_argument, bool ignore_nulls,
										  const char *missing_columns);
extern Relation zl_apply_batch_relation(ZLApplyBatch *batch, const ZLTableOptions **opts);
extern bool zl_apply_batch_keeps_missing(ZLApplyBatch *batch, const char *column,
										 const char *change);
extern void zl_apply_batch_add(ZLApplyBatch *batch, const ZLBatchChange *change);
extern Datum zl_apply_batch_finish(ZLApplyBatch *batch, FunctionCallInfo fcinfo,
								   int64 skipped);
struct NumericData;
extern bool zl_numeric_is_integer(struct NumericData *n);

/* ---------- zl_keyprobe.c ---------- */

typedef struct ZLKeyProbe ZLKeyProbe;
struct PlanState;
struct PlannerInfo;
struct RelOptInfo;
struct ExprContext;

extern List *zl_keyprobe_extract(List *clauses, Index rti, const ZLTableOptions *opts,
								 TupleDesc tupdesc, List **info, Bitmapset **outer);
extern List *zl_keyprobe_join_clauses(struct PlannerInfo *root, struct RelOptInfo *rel,
									  const ZLTableOptions *opts);
extern ZLKeyProbe *zl_keyprobe_init(List *terms, List *info, const ZLTableOptions *opts,
									TupleDesc tupdesc, struct PlanState *parent);
extern uint32 *zl_keyprobe_hashes(ZLKeyProbe *probe, struct ExprContext *econtext,
								  int *nhashes);

/* ---------- zl_customscan.c ---------- */

extern bool zl_is_scan_constant(Node *expr, Index rti);
extern void zl_customscan_init(void);
extern struct Path *zl_unfiltered_scan_path(struct PlannerInfo *root, struct RelOptInfo *rel,
											 bool partial, bool *columnar_history);
extern TupleTableSlot *zl_customscan_next_row(struct PlanState *node);
extern bool zl_customscan_next_batch(struct PlanState *node, ZLRowBatch *batch);

/* ---------- zl_aggregate.c ---------- */

extern bool zipper_lake_enable_scan_aggregates;
extern void zl_aggregate_init(void);

/* ---------- zl_inline.c ---------- */

extern void zl_inline_init(void);

/* ---------- zl_ddl.c ---------- */

extern void zl_ddl_init(void);

/* ---------- zl_triggers.c ---------- */

extern void zl_refuse_new_trigger(Oid trigger_oid);
extern void zl_refuse_after_row_triggers(Relation rel);

/* ---------- zl_tableam.c ---------- */

/* the access method; zl_is_zipper_relation() compares with it */
extern const struct TableAmRoutine zl_table_am_routine;

/* ---------- zl_events_json.c ---------- */

/* a JSON value of an event: of jsonb, or of checked JSON text */
typedef enum ZLJsonType
{
	ZL_JSON_NULL,
	ZL_JSON_BOOL,
	ZL_JSON_NUMBER,
	ZL_JSON_STRING,
	ZL_JSON_OBJECT,
	ZL_JSON_ARRAY
} ZLJsonType;

typedef struct ZLJson
{
	ZLJsonType	type;
	bool		boolean;
	const char *str;			/* a string's bytes (not terminated); a number's or
								 * a container's text (text events) */
	int			len;
	struct NumericData *numeric;	/* a number, once known */
	struct JsonbContainer *jc;	/* a container of a jsonb event */
	uint32		jclen;
	int			count;			/* members or elements once split, else -1 */
	struct ZLJson *kids;		/* object: key, value, key, value ...; array: elements */
	struct ZLJsonIndex *index;	/* where the containers of its text end */
} ZLJson;

extern const char *zl_json_parse_text(const char *text, int len, ZLJson *root, int *error_at);
extern void zl_json_from_jsonb(struct JsonbContainer *root, uint32 len, ZLJson *v);
extern ZLJson *zl_json_member(ZLJson *object, const char *name);
extern int	zl_json_size(ZLJson *container);
extern ZLJson *zl_json_key(ZLJson *object, int i);
extern ZLJson *zl_json_item(ZLJson *container, int i);
extern const char *zl_json_type_name(const ZLJson *v);
extern char *zl_json_text(ZLJson *v);
extern const char *zl_json_bytes(const ZLJson *v, int *len);
extern struct NumericData *zl_json_number(ZLJson *v);
extern char *zl_json_number_text(ZLJson *v);
extern bool zl_json_int64(ZLJson *v, int64 *result);

/* ---------- zl_events.c ---------- */

/* what a change decoded from an event does (_decode_events' op) */
#define ZL_EVENT_UPSERT			'u'
#define ZL_EVENT_DELETE			'd'
#define ZL_EVENT_TRUNCATE		't'	/* no key: every key holding a version then */
#define ZL_EVENT_SKIPPED		's'	/* an event that changes nothing here (counted) */

/*
 * A change decoded from an event (zl_events.c).  Valid during the
 * callback only.  columns lists the table columns the change gives (a
 * delete: the key columns), ascending; values are their text in the input
 * syntax of the column's type, NULL for SQL NULL.  kept lists the columns
 * the event marks unavailable (Debezium's placeholder of an unchanged
 * TOAST value; every column wal2json leaves out): they keep the key's
 * value.  A column in neither list is missing from the event (README
 * "Loading CDC events": missing_columns).  (seq, sub_seq) orders the
 * changes of one time; seq is NULL when neither the seq column nor the
 * format gives one.
 */
typedef struct ZLEventChange
{
	char		op;				/* ZL_EVENT_* */
	TimestampTz time;			/* not for ZL_EVENT_SKIPPED */
	struct NumericData *seq;
	int32		sub_seq;
	const char *event_ref;		/* "seq 123", "ctid (0,5)", "row 7" */
	uint64		event;			/* the event's number in the order read, from 1 */
	int			ncolumns;
	const AttrNumber *attnums;
	char	   *const *values;
	int			nkept;
	const AttrNumber *kept;
} ZLEventChange;

typedef void (*ZLEventCallback) (void *arg, const ZLEventChange *change);

extern void zl_events_decode(Relation rel, const ZLTableOptions *opts, Oid events_relid,
							 const char *format, const char *event_column,
							 const char *seq_column, const char *source_table,
							 ZLEventCallback callback, void *arg);

#endif							/* ZIPPER_LAKE_H */
