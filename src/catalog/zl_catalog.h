/*-------------------------------------------------------------------------
 *
 * zl_catalog.h
 *	  The catalog layer: metadata, caches, the change record, opening tables.
 *
 * What the layers above use of the extension's metadata tables
 * (zl_metadata.c, zl_meta_*.c, zl_metaread.c, zl_metacache.c), the
 * merged key index (zl_keyindex.c), the change record (zl_record.c) and
 * opening a relation as a zipper table (zl_relation.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_CATALOG_H
#define ZL_CATALOG_H

#include "storage/zl_storage.h"

/* ---------- what a scan loads and counts ---------- */

/* no bound on an instant range */
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

/* what a read does with a sub-group (access/zl_prune.c) */
typedef enum ZLPruneDecision
{
	ZL_SKIP,
	ZL_CHECK,
	ZL_ALL_MATCH
} ZLPruneDecision;

/* what a scan kept of the partitions, file groups, sub-groups and chunks */
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
	int			subgroups_read; /* kept ones the scan entered (had rows for it) */
	int64		rows_masked;	/* masked rows stepped over while reading */
	int64		chunks_total;	/* chunks of columnar sub-groups entered */
	int64		chunks_skipped; /* of those, skipped by their min/max */
	bool		metadata_from_catalog;	/* the list was read from the catalog, not
										 * the backend's cache */
} ZLPruneStats;

/* ---------- zl_relation.c ---------- */

extern void zl_set_table_am(const struct TableAmRoutine *routine);
extern bool zl_is_zipper_relation(Relation rel);
extern Oid	zl_rewritten_table(Relation rel);
extern char *zl_relation_arg_name(Oid relid, const char *argument);
extern Relation zl_open_zipper_table(Oid relid, LOCKMODE lockmode);
extern Relation zl_open_owned_registered_table(Oid relid, LOCKMODE lockmode,
											   ZLTableOptions *opts,
											   const char *unregistered_hint);
extern void zl_load_registration(Relation rel, ZLTableOptions *opts, bool for_write,
								 const char *detail, const char *hint);
extern Relation zl_open_readable_zipper_table(Oid relid);
extern Relation zl_open_readable_parent(Oid relid);
extern void zl_refuse_row_security(Relation rel);
extern void zl_refuse_row_change(Relation rel, CmdType command);
extern HeapTuple zl_catalog_row_as_written(Oid catalog, Oid index, int nkeys,
										   struct ScanKeyData *keys);

/* ---------- zl_parent.c ---------- */

/* a registered hash-partitioned table whose leaves are zipper tables */
typedef struct ZLParent ZLParent;

extern bool zl_is_partitioned_table(Oid relid);
extern void zl_parent_check(Relation rel, char **key_names, int nkeys);
extern ZLParent *zl_parent_open(Oid relid, LOCKMODE lockmode);
extern void zl_parent_close(ZLParent *p);
extern Relation zl_parent_relation(ZLParent *p);
extern int	zl_parent_nleaves(ZLParent *p);
extern Oid	zl_parent_leaf(ZLParent *p, int i);
extern bool zl_parent_leaf_is_shard(ZLParent *p, int i);
extern char *zl_meta_registration_text(Oid relid);
extern char *zl_shard_registration_text(Oid shard);
extern int	zl_parent_key_columns(ZLParent *p, char ***names);
extern void zl_parent_route_rows_of(ZLParent *p, TupleDesc desc);
extern int	zl_parent_leaf_of(ZLParent *p, const Datum *values, const bool *isnull);
extern char *zl_parent_key_text(ZLParent *p);
extern void zl_parent_register_leaf(Relation parent, Relation leaf);
extern int64 zl_parent_call_per_leaf(FunctionCallInfo fcinfo, PGFunction fn);
extern void zl_refuse_leaf_of_parent(Relation rel, const char *what);
extern bool zl_parent_calling(void);

/* ---------- zl_metaread.c ---------- */

extern int64 zl_subgroup_window_end(const ZLTableOptions *opts, const ZLSubGroup *sg);

extern ZLSubGroup *zl_meta_load_subgroups(uint64 storage_id, Snapshot snapshot,
										  DateADT min_partition, int *nsubgroups);
extern ZLSubGroup *zl_meta_load_filtered_subgroups(uint64 storage_id, Snapshot snapshot,
												   const ZLSubGroupFilter *filter,
												   int *nsubgroups);
extern ZLSubGroup *zl_meta_find_subgroup(ZLSubGroup *sgs, int n, int64 subgroup_id);
extern ZLSubGroup *zl_meta_load_subgroups_not_dead(uint64 storage_id, TransactionId oldest_xmin,
												  int64 lo, Size budget, int *n, int64 *next);
extern bool zl_meta_tid_block_subgroup(uint64 storage_id, int64 tid_block, Snapshot snapshot,
									   ZLSubGroup *sg, TransactionId *inserting,
									   TransactionId *deleting);
extern bool zl_meta_position_masked(uint64 storage_id, int64 subgroup_id, int32 position,
									Snapshot snapshot, TransactionId *masking);
extern void zl_meta_count_subgroups(uint64 storage_id, Snapshot snapshot,
									ZLPruneStats *stats);
extern void zl_meta_load_key_directories(uint64 storage_id, Snapshot snapshot,
										 ZLSubGroup *sgs, int nsubgroups,
										 const uint8 *decisions);
extern void zl_meta_match_key_directories(uint64 storage_id, Snapshot snapshot,
										  const ZLSubGroup *sgs, int nsubgroups,
										  const bool *skip, const uint32 *hashes, int nhashes,
										  int32 **positions, int *npositions);

/* ---------- zl_metacache.c ---------- */

extern int64 zl_meta_cached_rows(Relation rel, Snapshot snapshot);
extern ZLSubGroup *zl_meta_cached_subgroups(Relation rel, Snapshot snapshot,
											const ZLSubGroupFilter *filter,
											DateADT min_partition, bool with_masks,
											int *nsubgroups);
extern void zl_meta_cached_masks(Relation rel, Snapshot snapshot, ZLSubGroup *sgs, int n);
extern void zl_meta_cache_forget(uint64 storage_id);
extern uint64 zl_meta_cache_catalog_reads(void);

/* ---------- zl_metadata.c ---------- */

extern bool zl_meta_statement_running(void);

/* ---------- zl_meta_registration.c ---------- */

extern uint64 zl_meta_new_storage(Oid relid);
extern bool zl_meta_forget_storage(uint64 storage_id);
extern bool zl_meta_forget_table(Oid relid);
extern Oid	zl_meta_storage_owner(uint64 storage_id);
extern void zl_meta_insert_registration(Datum *values);
extern void zl_meta_set_late_horizon(Oid relid, Interval *horizon);
extern void zl_meta_set_track_columns(Oid relid, ArrayType *names);
extern void zl_meta_set_history_format(Oid relid, text *format);
extern void zl_meta_set_retention(Oid relid, Interval *keep);
extern void zl_meta_raise_history_cut(Oid relid, int64 cut);
extern void zl_meta_copy_registration(Oid parent, Oid leaf);
extern bool zl_meta_same_registration(Oid a, Oid b);
extern bool zl_meta_time_zone_exists(const char *name);
extern bool zl_meta_load_options(Relation rel, ZLTableOptions *opts, bool for_write);
extern bool zl_meta_load_options_uncached(Relation rel, ZLTableOptions *opts);
extern bool zl_meta_load_options_any_zone(Relation rel, ZLTableOptions *opts, bool for_write,
										  bool *zone_known);

/* ---------- zl_meta_subgroup.c ---------- */

extern int64 zl_meta_drop_partitions(Relation rel, DateADT last_partition, int64 live_rows);
extern bool zl_meta_has_subgroups(uint64 storage_id);
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
extern bool zl_meta_has_window_end(void);
extern bool zl_meta_has_tids(void);
extern int64 zl_meta_tid_blocks_used(uint64 storage_id);
extern void zl_meta_delete_subgroup(Relation rel, const ZLSubGroup *sg);
extern void zl_meta_insert_masks(Relation rel, int nmasks,
								 const int64 *subgroup_ids, int32 *const *positions,
								 const int *npositions);

/* ---------- zl_meta_freespace.c ---------- */

/* blocks of deleted sub-groups, free once freed_by is old enough */
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

/* ---------- zl_meta_record.c ---------- */

/*
 * An instant of every key (README "Change semantics"): apply_snapshot with
 * deletes, a truncate.  Stored ones are the winners at their times.
 */
typedef struct ZLTableInstant
{
	int64		time;
	bool		has_seq;
	int64		seq;
} ZLTableInstant;

extern bool zl_meta_record_exists(void);
extern bool zl_meta_record_head(Oid relid, Snapshot snapshot, int64 *newest_change,
								ZLTableInstant **instants, int *ninstants);
extern void zl_meta_record_save_head(Oid relid, int64 newest_change,
									  const ZLTableInstant *instants, int ninstants);
struct ReturnSetInfo;
extern void zl_meta_record_forget(Oid relid);
extern void zl_meta_record_export(Oid relid, struct ReturnSetInfo *rsinfo);
extern void zl_meta_record_copy_segment(Oid relid, int64 piece, int32 segment, int64 hash_lo,
										int64 hash_hi, int64 newest, int64 instants, bytea *entries);
extern void zl_meta_record_size(Oid relid, int64 *pieces, int64 *instants, int64 *bytes);
struct ReturnSetInfo;
extern void zl_meta_record_inspect(Oid relid, struct ReturnSetInfo *rsinfo);

/* ---------- zl_meta_bytes.c ---------- */

typedef struct ZLCatalogBytes
{
	const char *part;			/* "sub-group rows", "key directories", ... */
	int64		bytes;
} ZLCatalogBytes;

#define ZL_CATALOG_PARTS 6

extern int	zl_meta_catalog_bytes(Oid relid, ZLCatalogBytes *parts, int max_parts,
								  int64 *free_extent_bytes);

/* ---------- zl_keyindex.c ---------- */

typedef struct ZLKeyIndex ZLKeyIndex;

typedef enum ZLKeyIndexScope
{
	ZL_KEY_INDEX_ALL,			/* the sub-groups a scan may read */
	ZL_KEY_INDEX_CURRENT		/* the current partition's (apply_changes) */
} ZLKeyIndexScope;

/* sub-groups of a list an index may lack before it is built again */
#define ZL_KEY_INDEX_MISSING(n)	Max(16, (n) / 8)

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
extern bool zl_key_index_exists(uint64 storage_id, ZLKeyIndexScope scope);
extern bool zl_key_index_first_look(uint64 storage_id, ZLKeyIndexScope scope);
extern void zl_key_index_prefetch(const ZLKeyIndex *index, uint32 hash);
extern int	zl_key_index_find(const ZLKeyIndex *index, uint32 hash, int *cursor,
							  int32 *position);

/* ---------- zl_record.c ---------- */

/* the change (its seq) that gave a column at an instant (apply/zl_fold.c) */
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

/*
 * One instant the change record remembers for a key (zl_record.c): what
 * the versions do not show.  is_delete is the winning change's kind, which
 * the versions also imply (verify compares).
 */
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

#endif							/* ZL_CATALOG_H */
