/*-------------------------------------------------------------------------
 *
 * zl_metaread.c
 *	  Reading sub-group metadata on hot paths, without SPI.
 *
 * Every scan, point lookup and apply batch starts by reading which
 * sub-groups its snapshot sees, with their masks and, for key lookups,
 * their key directories.  Through SPI that cost an executor start-up, a
 * sort and a bitmap scan per statement — most of a point lookup's time.
 * So these reads scan the catalog's indexes directly (systable scans)
 * with the reader's own MVCC snapshot, which decides visibility exactly as
 * the SPI statements did (zl_metadata.c, "Visibility"): a sub-group row
 * or mask row counts when that snapshot sees it.  The primary key of
 * zipper_lake.subgroup, (storage_id, subgroup_id), hands sub-groups out in
 * id order, which is creation order; masks come through
 * (storage_id, subgroup_id) of zipper_lake.mask, one descent per
 * sub-group when only some sub-groups are wanted, so a batch that touches
 * the current partition never reads the masks of the whole history.
 *
 * These are C-level scans: no privilege check runs (the callers checked
 * the caller's rights on the zipper table) and no search_path is read.
 * The registration a table's first scan in a backend needs is read the same
 * way (zl_meta_registration.c).  Writes and cold paths (reclaim, verify's
 * own statements) stay SPI statements in zl_metadata.c.
 *
 * The catalog's OIDs and owner are looked up once per backend and kept
 * until a relcache invalidation of any of them (DROP or ALTER of the
 * extension's tables) or of everything.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog_internal.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

/* columns of zipper_lake.subgroup and zipper_lake.mask, as created */
enum
{
	SG_STORAGE_ID = 1,
	SG_SUBGROUP_ID,
	SG_FILE_GROUP,
	SG_ROLLOVER_SEQ,
	SG_PARTITION_END,
	SG_WINDOW_START,
	SG_FIRST_START,
	SG_LAST_START,
	SG_ROW_COUNT,
	SG_FIRST_BLOCK,
	SG_BLOCKS,
	SG_KEY_DIRECTORY,
	SG_NATTS = SG_KEY_DIRECTORY,
	SG_FORMAT,					/* 0.2: absent until ALTER EXTENSION UPDATE */
	SG_WINDOW_END,				/* 0.2 too */
	SG_FIRST_TID_BLOCK			/* 0.2 too */
};

enum
{
	MASK_STORAGE_ID = 1,
	MASK_SUBGROUP_ID,
	MASK_POSITIONS,
	MASK_NATTS = MASK_POSITIONS
};

static ZLCatalog catalog;
static bool catalog_valid = false;

static void
catalog_invalidate(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) || relid == catalog.subgroup || relid == catalog.subgroup_pkey ||
		relid == catalog.subgroup_window_index || relid == catalog.subgroup_tid_index ||
		relid == catalog.mask ||
		relid == catalog.mask_index || relid == catalog.registration ||
		relid == catalog.registration_pkey)
		catalog_valid = false;
}

static Oid
catalog_relation(Oid nspid, const char *name)
{
	Oid			relid = get_relname_relid(name, nspid);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zipper_lake metadata table \"%s\" is missing", name),
				 errdetail("The schema %s has no relation \"%s\".", ZL_SCHEMA, name),
				 errhint("Recreate the extension with CREATE EXTENSION zipper_lake.")));
	return relid;
}

/* the metadata catalog's OIDs and owner, cached per backend */
const ZLCatalog *
zl_meta_catalog(void)
{
	static bool callback_registered = false;
	Oid			nspid;
	HeapTuple	tuple;

	if (catalog_valid)
		return &catalog;
	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(catalog_invalidate, (Datum) 0);
		callback_registered = true;
	}
	nspid = get_namespace_oid(ZL_SCHEMA, false);
	catalog.subgroup = catalog_relation(nspid, "subgroup");
	catalog.subgroup_pkey = catalog_relation(nspid, "subgroup_pkey");
	catalog.subgroup_window_index = catalog_relation(nspid, "subgroup_window_idx");
	/* a catalog of 0.1 lacks it, and has no TIDs to look up (zl_meta_has_tids) */
	catalog.subgroup_tid_index = get_relname_relid("subgroup_tid_idx", nspid);
	catalog.mask = catalog_relation(nspid, "mask");
	catalog.mask_index = catalog_relation(nspid, "mask_subgroup_idx");
	catalog.registration = catalog_relation(nspid, "registration");
	catalog.registration_pkey = catalog_relation(nspid, "registration_pkey");
	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(catalog.subgroup));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for relation %u", catalog.subgroup);
	catalog.owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	/* an invalidation that came while looking them up leaves this false */
	catalog_valid = true;
	return &catalog;
}

ZLStorageKey
zl_meta_storage_key(uint64 storage_id)
{
	ZLStorageKey key;

	key.catalog = zl_meta_catalog()->subgroup;
	key.storage_id = storage_id;
	return key;
}

/* ---------- scanning ---------- */

static Relation
open_catalog(Oid relid, int natts)
{
	Relation	rel = table_open(relid, AccessShareLock);

	if (RelationGetDescr(rel)->natts < natts)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zipper_lake metadata table \"%s\" has an unexpected layout",
						RelationGetRelationName(rel)),
				 errdetail("It has %d columns, %d expected.",
						   RelationGetDescr(rel)->natts, natts),
				 errhint("Update the extension with ALTER EXTENSION zipper_lake UPDATE.")));
	return rel;
}

/* scan keys for (storage_id [, subgroup_id]) of either catalog */
static void
storage_keys(ScanKeyData *keys, uint64 storage_id, int64 subgroup_id, int nkeys)
{
	ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT8EQ,
				Int64GetDatum((int64) storage_id));
	if (nkeys > 1)
		ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_INT8EQ,
					Int64GetDatum(subgroup_id));
}

static int64
int64_or_zero(Datum *values, bool *isnull, int attnum)
{
	return isnull[attnum - 1] ? 0 : DatumGetInt64(values[attnum - 1]);
}

/*
 * Does a sub-group pass a filter (zl_bounds_filter) or, without one, lie
 * in partition min_partition or later?  Unplaced ones always do.
 */
bool
zl_meta_subgroup_passes(const ZLSubGroup *sg, const ZLSubGroupFilter *filter,
						DateADT min_partition)
{
	bool		starts_meet;

	if (!sg->placed)
		return true;
	if (filter == NULL)
		return sg->partition_end >= min_partition;
	starts_meet = sg->first_start <= filter->from_hi && sg->last_start >= filter->from_lo;
	if (filter->either)
		return (sg->partition_end >= filter->min_partition &&
				sg->partition_end <= filter->max_partition) ||
			(sg->partition_end >= filter->from_min_partition && starts_meet);
	return sg->partition_end >= filter->min_partition &&
		sg->partition_end <= filter->max_partition && starts_meet;
}

/* the columns of zipper_lake.subgroup: 0.2 added some (SG_FORMAT on) */
static int
subgroup_catalog_natts(void)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(zl_meta_catalog()->subgroup));
	int			natts;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for zipper_lake.subgroup");
	natts = ((Form_pg_class) GETSTRUCT(tuple))->relnatts;
	ReleaseSysCache(tuple);
	return natts;
}

/*
 * Does the catalog have subgroup.window_end (0.2), so that history file
 * groups may span several base windows (README "Storage")?  A 0.1 catalog
 * not updated yet keeps one base window a file group.
 */
bool
zl_meta_has_window_end(void)
{
	return subgroup_catalog_natts() >= SG_WINDOW_END;
}

/*
 * Does the catalog number the rows of sub-groups (subgroup.first_tid_block,
 * 0.2), so that TIDs name rows (README "Row identifiers")?  A 0.1 catalog
 * not updated yet has TIDs that name pages, and no TID access.
 */
bool
zl_meta_has_tids(void)
{
	return subgroup_catalog_natts() >= SG_FIRST_TID_BLOCK;
}

static void
subgroup_from_row(ZLSubGroup *sg, Datum *values, bool *isnull, int natts)
{
	memset(sg, 0, sizeof(ZLSubGroup));
	sg->subgroup_id = int64_or_zero(values, isnull, SG_SUBGROUP_ID);
	sg->file_group = int64_or_zero(values, isnull, SG_FILE_GROUP);
	sg->placed = !isnull[SG_PARTITION_END - 1];
	if (sg->placed)
		sg->partition_end = DatumGetDateADT(values[SG_PARTITION_END - 1]);
	sg->window_start = int64_or_zero(values, isnull, SG_WINDOW_START);
	sg->first_start = int64_or_zero(values, isnull, SG_FIRST_START);
	sg->last_start = int64_or_zero(values, isnull, SG_LAST_START);
	sg->row_count = int64_or_zero(values, isnull, SG_ROW_COUNT);
	sg->first_block = (BlockNumber) int64_or_zero(values, isnull, SG_FIRST_BLOCK);
	sg->blocks = isnull[SG_BLOCKS - 1] ? 0 : DatumGetInt32(values[SG_BLOCKS - 1]);
	sg->window_end = natts < SG_WINDOW_END || isnull[SG_WINDOW_END - 1] ? ZL_NO_WINDOW_END :
		DatumGetTimestampTz(values[SG_WINDOW_END - 1]);
	sg->format = natts < SG_FORMAT || isnull[SG_FORMAT - 1] ? ZL_FORMAT_ROWS :
		DatumGetChar(values[SG_FORMAT - 1]);
	sg->first_tid_block = natts < SG_FIRST_TID_BLOCK || isnull[SG_FIRST_TID_BLOCK - 1] ? -1 :
		DatumGetInt64(values[SG_FIRST_TID_BLOCK - 1]);
}

/* OR a mask row's positions into its sub-group's mask (allocated in context) */
void
zl_meta_or_mask(ZLSubGroup *sg, const int32 *positions, int npositions,
				MemoryContext context)
{
	int64		limit = zl_subgroup_positions(sg);
	int64		added = 0;

	if (sg->mask == NULL)
		sg->mask = MemoryContextAllocZero(context, (limit + 7) / 8);
	for (int k = 0; k < npositions; k++)
	{
		int32		pos = positions[k];
		uint8		bit = (uint8) (1 << (pos & 7));

		if (pos < 0 || pos >= limit)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("mask of sub-group " INT64_FORMAT " names position %d outside its %d blocks",
							sg->subgroup_id, pos, sg->blocks)));
		/* a position masked twice counts once */
		added += (sg->mask[pos >> 3] & bit) == 0;
		sg->mask[pos >> 3] |= bit;
	}
	sg->masked_rows += added;
}

/* the same for a mask row's positions (zl_maskcodec.c; compact: not 0.1's array) */
static void
apply_mask(ZLSubGroup *sg, Datum positions_datum, bool compact, MemoryContext context)
{
	int			n;
	int32	   *positions = zl_mask_positions(positions_datum, compact, sg->subgroup_id, &n);

	zl_meta_or_mask(sg, positions, n, context);
	pfree(positions);
}

/*
 * Is a catalog row found under SnapshotAny still there for someone: not
 * dead by oldest_xmin, or (every_snapshot) seen by every snapshot, i.e.
 * inserted by a transaction that committed before oldest_xmin and not
 * deleted?
 */
static bool
row_status(SysScanDesc scan, HeapTuple tuple, TransactionId oldest_xmin, bool every_snapshot)
{
	Buffer		buffer = ((BufferHeapTupleTableSlot *) scan->slot)->buffer;
	HTSV_Result status;

	LockBuffer(buffer, BUFFER_LOCK_SHARE);
	status = HeapTupleSatisfiesVacuum(tuple, oldest_xmin, buffer);
	LockBuffer(buffer, BUFFER_LOCK_UNLOCK);
	if (!every_snapshot)
		return status != HEAPTUPLE_DEAD;
	return status == HEAPTUPLE_LIVE &&
		TransactionIdPrecedes(HeapTupleHeaderGetXmin(tuple->t_data), oldest_xmin);
}

/*
 * The masks of the loaded sub-groups: every mask row of the storage in one
 * scan when all sub-groups were loaded, else one descent per sub-group.
 * With oldest_xmin valid (and SnapshotAny), only those every snapshot sees.
 */
static void
load_masks(uint64 storage_id, Snapshot snapshot, ZLSubGroup *sgs, int n, bool all,
		   MemoryContext context, TransactionId oldest_xmin)
{
	Relation	rel;
	Datum	   *values;
	bool	   *isnull;
	bool		compact;

	if (n == 0)
		return;
	rel = open_catalog(zl_meta_catalog()->mask, MASK_NATTS);
	compact = zl_mask_compact_desc(RelationGetDescr(rel));
	values = palloc(sizeof(Datum) * RelationGetDescr(rel)->natts);
	isnull = palloc(sizeof(bool) * RelationGetDescr(rel)->natts);
	for (int i = 0; i < (all ? 1 : n); i++)
	{
		ScanKeyData keys[2];
		SysScanDesc scan;
		HeapTuple	tuple;

		storage_keys(keys, storage_id, sgs[i].subgroup_id, all ? 1 : 2);
		scan = systable_beginscan(rel, catalog.mask_index, true, snapshot, all ? 1 : 2, keys);
		while ((tuple = systable_getnext(scan)) != NULL)
		{
			ZLSubGroup *sg;

			if (TransactionIdIsValid(oldest_xmin) && !row_status(scan, tuple, oldest_xmin, true))
				continue;
			heap_deform_tuple(tuple, RelationGetDescr(rel), values, isnull);
			sg = all ? zl_meta_find_subgroup(sgs, n, DatumGetInt64(values[MASK_SUBGROUP_ID - 1]))
				: &sgs[i];
			if (sg != NULL && !isnull[MASK_POSITIONS - 1])	/* NULL: a sub-group it lacks */
				apply_mask(sg, values[MASK_POSITIONS - 1], compact, context);
		}
		systable_endscan(scan);
	}
	table_close(rel, AccessShareLock);
}

/* the masks of some sub-groups, ORed into them: one descent each */
void
zl_meta_load_masks(uint64 storage_id, Snapshot snapshot, ZLSubGroup *sgs, int n)
{
	load_masks(storage_id, snapshot, sgs, n, false, CurrentMemoryContext, InvalidTransactionId);
}

/* ---------- rows one by one, for the cache (zl_metacache.c) ---------- */

struct ZLMetaRowReader
{
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tuple;
	Datum	   *values;
	bool	   *isnull;
};

/* the rows of a storage in one catalog, through the given index */
ZLMetaRowReader *
zl_meta_row_reader_begin(Oid catalog, Oid index, uint64 storage_id, Snapshot snapshot)
{
	ZLMetaRowReader *reader = palloc0(sizeof(ZLMetaRowReader));
	ScanKeyData keys[1];

	reader->rel = open_catalog(catalog, catalog == zl_meta_catalog()->mask ? MASK_NATTS : SG_NATTS);
	reader->values = palloc(sizeof(Datum) * RelationGetDescr(reader->rel)->natts);
	reader->isnull = palloc(sizeof(bool) * RelationGetDescr(reader->rel)->natts);
	storage_keys(keys, storage_id, 0, 1);
	reader->scan = systable_beginscan(reader->rel, index, true, snapshot, 1, keys);
	return reader;
}

/* the next row; its header and values stay valid until the next call */
HeapTuple
zl_meta_row_reader_next(ZLMetaRowReader *reader)
{
	reader->tuple = systable_getnext(reader->scan);
	if (reader->tuple != NULL)
		heap_deform_tuple(reader->tuple, RelationGetDescr(reader->rel), reader->values,
						  reader->isnull);
	return reader->tuple;
}

Relation
zl_meta_row_reader_relation(ZLMetaRowReader *reader)
{
	return reader->rel;
}

void
zl_meta_row_reader_end(ZLMetaRowReader *reader)
{
	systable_endscan(reader->scan);
	table_close(reader->rel, AccessShareLock);
}

/* the current row of zipper_lake.subgroup as a sub-group (no mask, no directory) */
void
zl_meta_row_subgroup(ZLMetaRowReader *reader, ZLSubGroup *sg)
{
	subgroup_from_row(sg, reader->values, reader->isnull, RelationGetDescr(reader->rel)->natts);
}

/* the current row of zipper_lake.mask: its sub-group and (if asked) a copy of its positions */
void
zl_meta_row_mask(ZLMetaRowReader *reader, int64 *subgroup_id, int32 **positions,
				 int *npositions)
{
	*subgroup_id = DatumGetInt64(reader->values[MASK_SUBGROUP_ID - 1]);
	if (positions == NULL)
		return;
	*positions = zl_mask_positions(reader->values[MASK_POSITIONS - 1],
								   zl_mask_compact_desc(RelationGetDescr(reader->rel)),
								   *subgroup_id, npositions);
}

static int
subgroup_id_cmp(const void *a, const void *b)
{
	int64		x = ((const ZLSubGroup *) a)->subgroup_id;
	int64		y = ((const ZLSubGroup *) b)->subgroup_id;

	return x < y ? -1 : (x > y);
}

/*
 * The sub-group rows of a storage that one scan of the catalog finds
 * (keys: storage id and more), those passing the filter appended to
 * *sgs.
 */
static void
collect_subgroups(Relation rel, Oid index, Snapshot snapshot, ScanKey keys, int nkeys,
				  const ZLSubGroupFilter *filter, DateADT min_partition,
				  ZLSubGroup **sgs, int *n, int *max)
{
	SysScanDesc scan = systable_beginscan(rel, index, true, snapshot, nkeys, keys);
	Datum	   *values = palloc(sizeof(Datum) * RelationGetDescr(rel)->natts);
	bool	   *isnull = palloc(sizeof(bool) * RelationGetDescr(rel)->natts);
	HeapTuple	tuple;

	while ((tuple = systable_getnext(scan)) != NULL)
	{
		heap_deform_tuple(tuple, RelationGetDescr(rel), values, isnull);
		if (*n == *max)
		{
			*max = Max(16, *max * 2);
			*sgs = *sgs == NULL ? palloc(sizeof(ZLSubGroup) * *max) :
				repalloc(*sgs, sizeof(ZLSubGroup) * *max);
		}
		subgroup_from_row(&(*sgs)[*n], values, isnull, RelationGetDescr(rel)->natts);
		if (zl_meta_subgroup_passes(&(*sgs)[*n], filter, min_partition))
			(*n)++;
	}
	systable_endscan(scan);
	pfree(values);
	pfree(isnull);
}

/*
 * The sub-groups a snapshot sees in a storage — passing filter, or with
 * no filter those of partition min_partition or later — and the unplaced
 * ones, in id (creation) order, with their masks ORed together.  When the
 * partitions wanted have a lower bound, the window index finds those
 * partitions' rows (up to the filter's upper bound, if it has one) and,
 * in a second scan, the unplaced ones (its
 * partition_end is NULL), so that a table's long history costs nothing to
 * an apply that needs the current partition; otherwise (or when the index
 * cannot be used: ignore_system_indexes, which cannot search for NULLs)
 * every row of the storage is read.
 */
static ZLSubGroup *
load_subgroups(uint64 storage_id, Snapshot snapshot, const ZLSubGroupFilter *filter,
			   DateADT min_partition, int *nsubgroups)
{
	MemoryContext context = CurrentMemoryContext;
	Relation	rel = open_catalog(zl_meta_catalog()->subgroup, SG_NATTS);
	DateADT		lowest = filter == NULL ? min_partition :
		filter->either ? Min(filter->min_partition, filter->from_min_partition) :
		filter->min_partition;
	ScanKeyData keys[3];
	ZLSubGroup *sgs = NULL;
	int			n = 0,
				max = 0;

	storage_keys(keys, storage_id, 0, 1);
	if (lowest == DATEVAL_NOBEGIN || IgnoreSystemIndexes ||
		ReindexIsProcessingIndex(catalog.subgroup_window_index))
		collect_subgroups(rel, catalog.subgroup_pkey, snapshot, keys, 1, filter, min_partition,
						  &sgs, &n, &max);
	else
	{
		/* a filter without its "either" part bounds the partitions above too */
		bool		bounded = filter != NULL && !filter->either;

		ScanKeyInit(&keys[1], SG_PARTITION_END, BTGreaterEqualStrategyNumber, F_DATE_GE,
					DateADTGetDatum(lowest));
		if (bounded)
			ScanKeyInit(&keys[2], SG_PARTITION_END, BTLessEqualStrategyNumber, F_DATE_LE,
						DateADTGetDatum(filter->max_partition));
		collect_subgroups(rel, catalog.subgroup_window_index, snapshot, keys, bounded ? 3 : 2,
						  filter, min_partition, &sgs, &n, &max);
		ScanKeyEntryInitialize(&keys[1], SK_ISNULL | SK_SEARCHNULL, SG_PARTITION_END,
							   InvalidStrategy, InvalidOid, InvalidOid, InvalidOid, (Datum) 0);
		collect_subgroups(rel, catalog.subgroup_window_index, snapshot, keys, 2, filter,
						  min_partition, &sgs, &n, &max);
	}
	table_close(rel, AccessShareLock);
	/* by id: the primary key's order; the window index's needs the sort */
	for (int i = 1; i < n; i++)
		if (sgs[i - 1].subgroup_id > sgs[i].subgroup_id)
		{
			qsort(sgs, n, sizeof(ZLSubGroup), subgroup_id_cmp);
			break;
		}

	load_masks(storage_id, snapshot, sgs, n,
			   filter == NULL && min_partition == DATEVAL_NOBEGIN, context, InvalidTransactionId);
	*nsubgroups = n;
	return sgs;
}

/*
 * The sub-groups of a storage visible to the snapshot whose partition is
 * min_partition or later (DATEVAL_NOBEGIN: all), and the unplaced ones, in
 * creation order, with their masks ORed together.  Masks hold row
 * positions (zl_subgroup_read.c).
 */
ZLSubGroup *
zl_meta_load_subgroups(uint64 storage_id, Snapshot snapshot, DateADT min_partition,
					   int *nsubgroups)
{
	return load_subgroups(storage_id, snapshot, NULL, min_partition, nsubgroups);
}

/*
 * Like zl_meta_load_subgroups, but only the sub-groups that pass a filter
 * (zl_bounds_filter) and the unplaced ones, and only their masks.
 */
ZLSubGroup *
zl_meta_load_filtered_subgroups(uint64 storage_id, Snapshot snapshot,
								const ZLSubGroupFilter *filter, int *nsubgroups)
{
	return load_subgroups(storage_id, snapshot, filter, DATEVAL_NOBEGIN, nsubgroups);
}

/* sub-groups as loaded here are sorted by id: binary search */
ZLSubGroup *
zl_meta_find_subgroup(ZLSubGroup *sgs, int n, int64 subgroup_id)
{
	int			lo = 0,
				hi = n - 1;

	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;

		if (sgs[mid].subgroup_id == subgroup_id)
			return &sgs[mid];
		if (sgs[mid].subgroup_id < subgroup_id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

/*
 * The totals of ZLPruneStats: every sub-group visible to the snapshot,
 * its partitions (unplaced rows count as one) and file groups.
 */
void
zl_meta_count_subgroups(uint64 storage_id, Snapshot snapshot, ZLPruneStats *stats)
{
	Relation	rel = open_catalog(zl_meta_catalog()->subgroup, SG_NATTS);
	ScanKeyData keys[1];
	SysScanDesc scan;
	HeapTuple	tuple;
	int64	   *partitions = NULL,
			   *file_groups = NULL;
	int			n = 0,
				max = 0;
	Datum	   *values = palloc(sizeof(Datum) * RelationGetDescr(rel)->natts);
	bool	   *isnull = palloc(sizeof(bool) * RelationGetDescr(rel)->natts);

	storage_keys(keys, storage_id, 0, 1);
	scan = systable_beginscan(rel, catalog.subgroup_pkey, true, snapshot, 1, keys);
	while ((tuple = systable_getnext(scan)) != NULL)
	{
		heap_deform_tuple(tuple, RelationGetDescr(rel), values, isnull);
		if (n == max)
		{
			max = Max(64, max * 2);
			partitions = partitions ? repalloc(partitions, sizeof(int64) * max) :
				palloc(sizeof(int64) * max);
			file_groups = file_groups ? repalloc(file_groups, sizeof(int64) * max) :
				palloc(sizeof(int64) * max);
		}
		/* unplaced rows count as one partition */
		partitions[n] = isnull[SG_PARTITION_END - 1] ? PG_INT64_MIN :
			DatumGetDateADT(values[SG_PARTITION_END - 1]);
		file_groups[n] = int64_or_zero(values, isnull, SG_FILE_GROUP);
		n++;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	stats->subgroups_total = n;
	stats->partitions_total = n == 0 ? 0 : zl_count_distinct(partitions, n);
	stats->file_groups_total = n == 0 ? 0 : zl_count_distinct(file_groups, n);
}

/*
 * A sub-group's key directory in its stored form, detoasted into the
 * current memory context; NULL if it has none.  rel is the sub-group
 * catalog; detoasting needs an active snapshot.
 */
static bytea *
read_key_directory(Relation rel, uint64 storage_id, int64 subgroup_id, Snapshot snapshot)
{
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tuple;
	bytea	   *stored = NULL;

	storage_keys(keys, storage_id, subgroup_id, 2);
	scan = systable_beginscan(rel, zl_meta_catalog()->subgroup_pkey, true, snapshot, 2, keys);
	if ((tuple = systable_getnext(scan)) != NULL)
	{
		bool		isnull;
		Datum		directory = heap_getattr(tuple, SG_KEY_DIRECTORY, RelationGetDescr(rel), &isnull);

		if (!isnull)
			stored = DatumGetByteaPCopy(directory);
	}
	systable_endscan(scan);
	return stored;
}

/*
 * The key directories (zl_keys.c) of the given sub-groups that have one
 * (with decisions, of those not ZL_SKIP): from the per-backend cache, or
 * read (and cached) through the primary key, one descent per sub-group not
 * cached yet.  They stay valid until the cache is next trimmed, which its
 * users do where they hold no directory (zl_key_directory_cache_trim).
 */
void
zl_meta_load_key_directories(uint64 storage_id, Snapshot snapshot,
							 ZLSubGroup *sgs, int nsubgroups, const uint8 *decisions)
{
	const ZLCatalog *cat = zl_meta_catalog();
	Relation	rel = NULL;

	for (int i = 0; i < nsubgroups; i++)
	{
		ZLSubGroup *sg = &sgs[i];
		bytea	   *stored;

		if (decisions != NULL && decisions[i] == ZL_SKIP)
			continue;
		sg->key_directory = zl_key_directory_cached(cat->subgroup, sg->subgroup_id,
													&sg->key_filter);
		if (sg->key_directory != NULL || !sg->placed)
			continue;
		if (rel == NULL)
		{
			rel = open_catalog(cat->subgroup, SG_NATTS);
			PushActiveSnapshot(snapshot);
		}
		/* immutable: fetched (and decoded) once per backend */
		stored = read_key_directory(rel, storage_id, sg->subgroup_id, snapshot);
		if (stored != NULL)
		{
			sg->key_directory = zl_key_directory_remember(cat->subgroup, sg->subgroup_id,
														  stored, &sg->key_filter);
			pfree(stored);
		}
	}
	if (rel != NULL)
	{
		PopActiveSnapshot();
		table_close(rel, AccessShareLock);
	}
}

/*
 * The positions (ascending) of the rows of each given sub-group whose key
 * hash is one of hashes[] (sorted, distinct), through its key directory:
 * the cached one, or else its stored form, matched in one pass and not
 * kept (zl_key_directory_match_stored) -- for a first look at many keys,
 * where decoding and caching the directories costs several times more.
 * npositions[i] is their number, -1 for a sub-group without a directory
 * (read it whole) or one skip[i] (skip NULL: none) leaves out; positions[i]
 * is NULL when there are none.  In the current memory context.
 */
void
zl_meta_match_key_directories(uint64 storage_id, Snapshot snapshot, const ZLSubGroup *sgs,
							  int nsubgroups, const bool *skip, const uint32 *hashes,
							  int nhashes, int32 **positions, int *npositions)
{
	const ZLCatalog *cat = zl_meta_catalog();
	Relation	rel = NULL;

	for (int i = 0; i < nsubgroups; i++)
	{
		const ZLKeyFilter *filter;
		bytea	   *dir;

		positions[i] = NULL;
		npositions[i] = -1;		/* no directory */
		if (skip != NULL && skip[i])
			continue;
		dir = zl_key_directory_cached(cat->subgroup, sgs[i].subgroup_id, &filter);
		if (dir != NULL)
		{
			positions[i] = zl_key_directory_probe_ascending(dir, hashes, nhashes, &npositions[i]);
			continue;
		}
		if (!sgs[i].placed)
			continue;
		if (rel == NULL)
		{
			rel = open_catalog(cat->subgroup, SG_NATTS);
			PushActiveSnapshot(snapshot);
		}
		dir = read_key_directory(rel, storage_id, sgs[i].subgroup_id, snapshot);
		if (dir == NULL)
			continue;
		positions[i] = zl_key_directory_match_stored(dir, hashes, nhashes, &npositions[i]);
		pfree(dir);
	}
	if (rel != NULL)
	{
		PopActiveSnapshot();
		table_close(rel, AccessShareLock);
	}
}

/*
 * The end of a sub-group's file-group window: window_end as stored, or,
 * where the catalog has none (0.1's rows, the current partition), the end
 * of the one base window starting at window_start.
 */
int64
zl_subgroup_window_end(const ZLTableOptions *opts, const ZLSubGroup *sg)
{
	return sg->window_end != ZL_NO_WINDOW_END ? sg->window_end :
		zl_window_end(opts, sg->partition_end, sg->window_start);
}

/* what a sub-group of VACUUM's index pass holds in memory, its mask bits at most */
static Size
subgroup_bytes(const ZLSubGroup *sg)
{
	return sizeof(ZLSubGroup) + (Size) (zl_subgroup_positions(sg) + 7) / 8;
}

/*
 * VACUUM's index pass (src/lifecycle/zl_index_vacuum.c), a range of TID
 * blocks at a time: the sub-groups of a storage whose catalog row is not
 * dead by oldest_xmin -- some snapshot may still see them, or a
 * transaction in progress wrote them -- with first_tid_block from lo on,
 * in that order, as many as fit budget bytes with their mask bits (one at
 * least), each with the positions that masks every snapshot sees cover.
 * *next is the first_tid_block of the first sub-group left for the next
 * range, -1 if none is left.
 */
ZLSubGroup *
zl_meta_load_subgroups_not_dead(uint64 storage_id, TransactionId oldest_xmin, int64 lo,
								Size budget, int *n, int64 *next)
{
	Relation	rel = open_catalog(zl_meta_catalog()->subgroup, SG_FIRST_TID_BLOCK);
	Relation	index = index_open(catalog.subgroup_tid_index, AccessShareLock);
	int			natts = RelationGetDescr(rel)->natts;
	Datum	   *values = palloc(sizeof(Datum) * natts);
	bool	   *isnull = palloc(sizeof(bool) * natts);
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tuple;
	ZLSubGroup *sgs = NULL;
	int			max = 0;
	Size		used = 0;

	*n = 0;
	*next = -1;
	ScanKeyInit(&keys[0], SG_STORAGE_ID, BTEqualStrategyNumber, F_INT8EQ,
				Int64GetDatum((int64) storage_id));
	ScanKeyInit(&keys[1], SG_FIRST_TID_BLOCK, BTGreaterEqualStrategyNumber, F_INT8GE,
				Int64GetDatum(lo));
	scan = systable_beginscan_ordered(rel, index, SnapshotAny, 2, keys);
	while ((tuple = systable_getnext_ordered(scan, ForwardScanDirection)) != NULL)
	{
		ZLSubGroup	sg;

		if (!row_status(scan, tuple, oldest_xmin, false))
			continue;
		heap_deform_tuple(tuple, RelationGetDescr(rel), values, isnull);
		subgroup_from_row(&sg, values, isnull, natts);
		/* versions of one catalog row stay together */
		if (*n > 0 && used + subgroup_bytes(&sg) > budget &&
			sg.first_tid_block != sgs[*n - 1].first_tid_block)
		{
			*next = sg.first_tid_block;
			break;
		}
		if (*n == max)
		{
			max = Max(64, max * 2);
			sgs = sgs == NULL ? palloc(sizeof(ZLSubGroup) * max) :
				repalloc(sgs, sizeof(ZLSubGroup) * max);
		}
		sgs[(*n)++] = sg;
		used += subgroup_bytes(&sg);
	}
	systable_endscan_ordered(scan);
	index_close(index, AccessShareLock);
	table_close(rel, AccessShareLock);
	pfree(values);
	pfree(isnull);
	load_masks(storage_id, SnapshotAny, sgs, *n, false, CurrentMemoryContext, oldest_xmin);
	return sgs;
}

/* ---------- one row by TID, outside MVCC ---------- */

/*
 * The sub-group that may own a TID block, as a snapshot that is not MVCC
 * sees the catalog (a unique check's dirty snapshot, SnapshotSelf): the
 * one with the greatest first_tid_block at or below the block -- since
 * blocks are never given twice, the owner if that one covers the block,
 * else the block has none this snapshot sees.  Under a dirty snapshot,
 * *inserting and *deleting name transactions in progress that inserted
 * or delete its catalog row (InvalidTransactionId if none).  False if
 * the storage has no such sub-group.
 */
bool
zl_meta_tid_block_subgroup(uint64 storage_id, int64 tid_block, Snapshot snapshot,
						   ZLSubGroup *sg, TransactionId *inserting, TransactionId *deleting)
{
	Relation	rel = open_catalog(zl_meta_catalog()->subgroup, SG_FIRST_TID_BLOCK);
	Relation	index = index_open(catalog.subgroup_tid_index, AccessShareLock);
	SnapshotData dirty;
	Snapshot	scan_snapshot = snapshot;
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tuple;

	/* a dirty snapshot learns of the last row it judged: ours, not the caller's */
	if (snapshot->snapshot_type == SNAPSHOT_DIRTY)
	{
		InitDirtySnapshot(dirty);
		scan_snapshot = &dirty;
	}
	*inserting = *deleting = InvalidTransactionId;
	ScanKeyInit(&keys[0], SG_STORAGE_ID, BTEqualStrategyNumber, F_INT8EQ,
				Int64GetDatum((int64) storage_id));
	ScanKeyInit(&keys[1], SG_FIRST_TID_BLOCK, BTLessEqualStrategyNumber, F_INT8LE,
				Int64GetDatum(tid_block));
	scan = systable_beginscan_ordered(rel, index, scan_snapshot, 2, keys);
	tuple = systable_getnext_ordered(scan, BackwardScanDirection);
	if (tuple != NULL)
	{
		int			natts = RelationGetDescr(rel)->natts;
		Datum	   *values = palloc(sizeof(Datum) * natts);
		bool	   *isnull = palloc(sizeof(bool) * natts);

		heap_deform_tuple(tuple, RelationGetDescr(rel), values, isnull);
		subgroup_from_row(sg, values, isnull, natts);
		pfree(values);
		pfree(isnull);
		if (scan_snapshot == &dirty)
		{
			*inserting = dirty.xmin;
			*deleting = dirty.xmax;
		}
	}
	systable_endscan_ordered(scan);
	index_close(index, AccessShareLock);
	table_close(rel, AccessShareLock);
	return tuple != NULL;
}

/*
 * Is a row of a sub-group masked, as a snapshot that is not MVCC sees the
 * catalog?  A mask row it sees that lists the position hides the row --
 * unless, under a dirty snapshot, a transaction in progress inserted it:
 * then the row is still there and *masking names that transaction.
 */
bool
zl_meta_position_masked(uint64 storage_id, int64 subgroup_id, int32 position,
						Snapshot snapshot, TransactionId *masking)
{
	Relation	rel = open_catalog(zl_meta_catalog()->mask, MASK_NATTS);
	bool		compact = zl_mask_compact_desc(RelationGetDescr(rel));
	SnapshotData dirty;
	Snapshot	scan_snapshot = snapshot;
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		masked = false;

	if (snapshot->snapshot_type == SNAPSHOT_DIRTY)
	{
		InitDirtySnapshot(dirty);
		scan_snapshot = &dirty;
	}
	*masking = InvalidTransactionId;
	storage_keys(keys, storage_id, subgroup_id, 2);
	scan = systable_beginscan(rel, catalog.mask_index, true, scan_snapshot, 2, keys);
	while (!masked && (tuple = systable_getnext(scan)) != NULL)
	{
		TransactionId in_progress = scan_snapshot == &dirty ? dirty.xmin : InvalidTransactionId;
		bool		isnull;
		Datum		datum = heap_getattr(tuple, MASK_POSITIONS, RelationGetDescr(rel), &isnull);
		int32	   *positions;
		int			n;

		if (isnull)
			continue;			/* a sub-group it lacks */
		positions = zl_mask_positions(datum, compact, subgroup_id, &n);
		for (int i = 0; i < n; i++)
			if (positions[i] == position)
			{
				if (TransactionIdIsValid(in_progress))
					*masking = in_progress;
				else
					masked = true;
				break;
			}
		pfree(positions);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return masked;
}
