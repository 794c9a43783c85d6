/*-------------------------------------------------------------------------
 *
 * zl_catalog_internal.h
 *	  What stays inside catalog/.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_CATALOG_INTERNAL_H
#define ZL_CATALOG_INTERNAL_H

#include "catalog/zl_catalog.h"

/* ---------- zl_metaread.c ---------- */

/* the metadata catalog's relations and owner (cached per backend) */
typedef struct ZLCatalog
{
	Oid			subgroup;
	Oid			subgroup_pkey;
	Oid			subgroup_window_index;	/* (storage_id, partition_end, window_start) */
	Oid			subgroup_tid_index; /* (storage_id, first_tid_block); 0.2 */
	Oid			mask;
	Oid			mask_index;
	Oid			registration;
	Oid			registration_pkey;	/* (tbl) */
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

/* ---------- zl_meta_record.c ---------- */

/* a segment of the change record, or (zl_meta_record_pieces) a piece */
typedef struct ZLRecordSegment
{
	int64		piece;
	int32		segment;
	int64		bytes;
} ZLRecordSegment;

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

/* ---------- zl_metadata.c: the catalog's statements ---------- */

typedef enum ZLMetaQuery
{
	Q_NEW_STORAGE,
	Q_FORGET_MASKS,
	Q_FORGET_SUBGROUPS,
	Q_FORGET_STORAGE,
	Q_INSERT_REGISTRATION,
	Q_CURRENT_FILE_GROUP,
	Q_NEW_ID,
	Q_INSERT_SUBGROUP,
	Q_INSERT_COLUMNAR_SUBGROUP,
	Q_INSERT_NUMBERED_SUBGROUP,
	Q_INSERT_HISTORY_SUBGROUPS,
	Q_INSERT_HISTORY_WIDE_SUBGROUPS,
	Q_INSERT_HISTORY_COLUMNAR_SUBGROUPS,
	Q_INSERT_HISTORY_NUMBERED_SUBGROUPS,
	Q_TID_BLOCKS_USED,
	Q_DELETE_SUBGROUP,
	Q_FORGET_FREE_EXTENTS,
	Q_LOAD_FREE_EXTENTS,
	Q_INSERT_FREE_EXTENTS,
	Q_TAKE_FREE_EXTENTS,
	Q_DELETE_SUBGROUP_MASKS,
	Q_INSERT_MASK,
	Q_INSERT_MASK_ARRAY,
	Q_TIME_ZONE_EXISTS,
	Q_TABLE_STORAGES,
	Q_STORAGE_OWNER,
	Q_FORGET_REGISTRATION,
	Q_SET_LATE_HORIZON,
	Q_SET_TRACK_COLUMNS,
	Q_SET_HISTORY_FORMAT,
	Q_SET_RETENTION,
	Q_RAISE_HISTORY_CUT,
	Q_COPY_REGISTRATION,
	Q_SAME_REGISTRATION,
	Q_REGISTRATION_TEXT,
	Q_DROP_PARTITIONS,
	Q_HAS_SUBGROUPS,
	Q_RECORD_SEGMENTS,
	Q_RECORD_ENTRIES,
	Q_RECORD_SEGMENT_ROW,
	Q_RECORD_RESERVE_PIECE,
	Q_RECORD_PIECES,
	Q_RECORD_INSERT,
	Q_RECORD_DELETE_PIECE,
	Q_RECORD_HEAD,
	Q_RECORD_SAVE_HEAD,
	Q_RECORD_FORGET,
	Q_RECORD_SIZE,
	Q_RECORD_INSPECT,
	Q_CATALOG_BYTES,
	Q_COUNT
} ZLMetaQuery;

/* state saved across one privileged SPI session */
typedef struct ZLMetaSession
{
	Oid			save_userid;
	int			save_sec_context;
	int			guc_nest_level;
	MemoryContext caller_context;
} ZLMetaSession;

extern void zl_meta_begin(ZLMetaSession *session);
extern void zl_meta_end(ZLMetaSession *session);
extern int	zl_meta_exec(ZLMetaQuery query, Datum *values, const char *nulls,
						 Snapshot snapshot, bool read_only);
extern void zl_meta_run(ZLMetaQuery query, Datum *values, const char *nulls);
extern int64 zl_meta_result_int64(int row, int col);
extern int64 zl_meta_run_int64(ZLMetaQuery query, Datum *values);

/* zl_maskcodec.c */
#define ZL_MASK_POSITIONS_ATTNUM 3	/* zipper_lake.mask.positions */
extern bytea *zl_mask_encode(int32 *positions, int n);
extern int32 *zl_mask_decode(const bytea *bytes, int64 subgroup_id, int *n);
extern bool zl_mask_compact(Oid mask_catalog);
extern bool zl_mask_compact_desc(TupleDesc desc);
extern int32 *zl_mask_positions(Datum datum, bool compact, int64 subgroup_id, int *n);

#endif							/* ZL_CATALOG_INTERNAL_H */
