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

/* ---------- the change record's rows (zl_metadata.c) ---------- */

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

#endif							/* ZL_CATALOG_INTERNAL_H */
