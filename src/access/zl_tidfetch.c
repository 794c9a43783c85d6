/*-------------------------------------------------------------------------
 *
 * zl_tidfetch.c
 *	  Rows by TID: TID scans and TID range scans.
 *
 * A TID names one row for good (README "Row identifiers"): the sub-group
 * that owns its TID block -- each sub-group owns the blocks from its
 * first_tid_block on, taken from the table's counter when it was written
 * and never given again -- and the position in it (zl_tid_position).  So a
 * fetch looks the TID up among the sub-groups its snapshot sees, sorted by
 * first_tid_block (a TID map), and returns the row unless a mask that
 * snapshot sees covers its position.  A sub-group moved by VACUUM keeps no
 * TIDs: its rows are written again under new ones, as an update gives a
 * heap row a new TID; the old ones name nothing to a later snapshot.
 *
 * Visibility comes from the catalog, as for every read: only MVCC
 * snapshots are taken.  The transaction's own pending rows are flushed
 * first (read-your-writes).  A TID range scan is the table's scan with the
 * rows outside the range left out.
 *
 * Index scans and bitmap scans fetch through a map kept for their
 * snapshot: rows of a row sub-group are handed out pinned on their page,
 * those of a columnar one formed from a reader kept for the sub-group read
 * last, so consecutive rows of one chunk decode it once.  A bitmap names
 * TID blocks; a lossy one stands for all 291 offsets of its block.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write.h"
#include "access/zl_access_internal.h"
#include "access/zl_scan_internal.h"

#include "access/htup_details.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/tidbitmap.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "storage/bufpage.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

/*
 * Rows of sub-groups into slots: a row sub-group's handed out pinned on
 * their page, a columnar one's formed from a reader kept for the
 * sub-group read last, so consecutive rows of one chunk decode it once.
 */
typedef struct RowFetcher
{
	Relation	rel;
	MemoryContext context;		/* where the reader lives */
	HeapTupleData tuple;		/* the row of a page a slot points at */
	int64		reader_subgroup;	/* the id of the one the reader reads */
	ZLColumnarReader *reader;
	Datum	   *values;
	bool	   *isnull;
} RowFetcher;

struct ZLTidMap
{
	Snapshot	snapshot;
	MemoryContext context;
	ZLSubGroup *sgs;			/* visible ones, by first_tid_block */
	int64	   *starts;			/* their first_tid_blocks */
	int			n;
	RowFetcher	rows;
};

/* rows are found by TID only in a catalog that numbers them */
static void
refuse_without_tids(void)
{
	if (!zl_meta_has_tids())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("zipper_lake tables find rows by TID from version 0.2 of the extension on"),
				 errdetail("The catalog of the extension is still that of version 0.1."),
				 errhint("Run ALTER EXTENSION zipper_lake UPDATE.")));
}

/* the sub-groups and masks a snapshot sees, to find rows by TID in */
ZLTidMap *
zl_tid_map_begin(Relation rel, Snapshot snapshot)
{
	MemoryContext context;
	MemoryContext old;
	ZLTidMap   *map;

	if (snapshot == InvalidSnapshot || !IsMVCCSnapshot(snapshot))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("zipper_lake tables fetch rows by TID with MVCC snapshots only"),
				 errdetail("Table \"%s\" was asked for a row under another kind of snapshot.",
						   RelationGetRelationName(rel)),
				 errhint("Read the table with a sequential scan.")));
	refuse_without_tids();
	zl_write_flush_relation(RelationGetRelid(rel));

	context = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake TID map",
									ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(context);
	map = palloc0(sizeof(ZLTidMap));

	map->snapshot = snapshot;
	map->context = context;
	map->rows.rel = rel;
	map->rows.context = context;
	map->sgs = zl_meta_cached_subgroups(rel, snapshot, NULL, DATEVAL_NOBEGIN, true, &map->n);
	zl_sort_by_tid_block(map->sgs, map->n);
	map->starts = zl_tid_block_starts(map->sgs, map->n);
	MemoryContextSwitchTo(old);
	return map;
}

/* the sub-groups the map's snapshot sees, in TID order */
const ZLSubGroup *
zl_tid_map_subgroups(const ZLTidMap *map, int *n)
{
	*n = map->n;
	return map->sgs;
}

/* the snapshot the map was made for */
Snapshot
zl_tid_map_snapshot(const ZLTidMap *map)
{
	return map->snapshot;
}

void
zl_tid_map_end(ZLTidMap *map)
{
	if (map->rows.reader != NULL)
		zl_columnar_close(map->rows.reader);
	MemoryContextDelete(map->context);
}

/*
 * The visible sub-group owning a TID's block, and the position the TID
 * names in it (-1 past its rows); NULL if none owns the block.
 */
const ZLSubGroup *
zl_tid_map_owner(const ZLTidMap *map, ItemPointer tid, int64 *position)
{
	int64		block = ItemPointerGetBlockNumber(tid);
	int			lo;

	if (!ItemPointerIsValid(tid))
		return NULL;
	lo = zl_tid_block_candidate(map->starts, map->n, block);
	if (lo < 0 || block >= map->sgs[lo].first_tid_block + zl_subgroup_tid_blocks(&map->sgs[lo]))
		return NULL;
	*position = zl_tid_position(&map->sgs[lo], tid);
	return &map->sgs[lo];
}

/*
 * The visible sub-group holding the row a TID names, and its position;
 * NULL if that row is not visible (no such row, or masked).
 */
const ZLSubGroup *
zl_tid_map_find(const ZLTidMap *map, ItemPointer tid, int64 *position)
{
	const ZLSubGroup *sg = zl_tid_map_owner(map, tid, position);

	if (sg == NULL || *position < 0 || ZL_ROW_MASKED(sg, *position))
		return NULL;
	return sg;
}

/* the row at a position of a row sub-group into the slot, if it has one */
static bool
fetch_page_row(RowFetcher *f, const ZLSubGroup *sg, int64 position, TupleTableSlot *slot)
{
	ItemPointerData item;
	HeapTuple	tuple = &f->tuple;
	Buffer		buffer;
	Page		page;
	ItemId		itemid;

	zl_position_page_item(sg, position, &item);
	buffer = ReadBuffer(f->rel, ItemPointerGetBlockNumber(&item));
	page = BufferGetPage(buffer);
	/* a TID may name any offset of its block: not every one is a row */
	if (ItemPointerGetOffsetNumber(&item) > PageGetMaxOffsetNumber(page) ||
		!ItemIdIsNormal(itemid = PageGetItemId(page, ItemPointerGetOffsetNumber(&item))))
	{
		ReleaseBuffer(buffer);
		return false;
	}
	tuple->t_data = (HeapTupleHeader) PageGetItem(page, itemid);
	tuple->t_len = ItemIdGetLength(itemid);
	tuple->t_tableOid = RelationGetRelid(f->rel);
	zl_position_tid(sg, position, &tuple->t_self);
	ExecStoreBufferHeapTuple(tuple, slot, buffer);
	ReleaseBuffer(buffer);		/* the slot holds its own pin */
	return true;
}

/*
 * The row at a position of a columnar sub-group into the slot.  The reader
 * stays for the next fetch: rows of one chunk are decoded once, and
 * scattered ones (index order) only as far as asked (sparse reading).
 */
static void
fetch_columnar_row(RowFetcher *f, const ZLSubGroup *sg, int64 position, TupleTableSlot *slot)
{
	TupleDesc	desc = RelationGetDescr(f->rel);
	HeapTuple	tuple;
	MemoryContext old;

	if (f->reader == NULL)
	{
		old = MemoryContextSwitchTo(f->context);
		f->reader = zl_columnar_open(f->rel, sg, NULL);
		zl_columnar_set_sparse(f->reader, true);
		f->values = palloc(sizeof(Datum) * Max(desc->natts, 1));
		f->isnull = palloc(sizeof(bool) * Max(desc->natts, 1));
		MemoryContextSwitchTo(old);
	}
	else if (f->reader_subgroup != sg->subgroup_id)
		zl_columnar_reset(f->reader, sg, NULL);
	f->reader_subgroup = sg->subgroup_id;
	zl_columnar_row(f->reader, (uint32) position, f->values, f->isnull);
	tuple = heap_form_tuple(desc, f->values, f->isnull);
	tuple->t_tableOid = RelationGetRelid(f->rel);
	zl_position_tid(sg, position, &tuple->t_self);
	ExecForceStoreHeapTuple(tuple, slot, true);
}

/* the row at a position of a sub-group into the slot, if it has one */
static bool
fetch_row(RowFetcher *f, const ZLSubGroup *sg, int64 position, TupleTableSlot *slot)
{
	if (sg->format == ZL_FORMAT_COLUMNAR)
		fetch_columnar_row(f, sg, position, slot);
	else if (!fetch_page_row(f, sg, position, slot))
		return false;
	slot->tts_tableOid = RelationGetRelid(f->rel);
	return true;
}

/* the row a TID names into the slot, if the map's snapshot sees it */
bool
zl_tid_map_fetch(ZLTidMap *map, ItemPointer tid, TupleTableSlot *slot)
{
	int64		position;
	const ZLSubGroup *sg = zl_tid_map_find(map, tid, &position);

	ExecClearTuple(slot);
	return sg != NULL && fetch_row(&map->rows, sg, position, slot);
}

/* table_tuple_fetch_row_version: one row by TID */
bool
zl_fetch_row_version(Relation rel, ItemPointer tid, Snapshot snapshot, TupleTableSlot *slot)
{
	ZLTidMap   *map = zl_tid_map_begin(rel, snapshot);
	bool		found = zl_tid_map_fetch(map, tid, slot);

	zl_tid_map_end(map);
	return found;
}

/* table_scan_set_tidrange: the rows of TIDs from mintid to maxtid */
void
zl_scan_set_tidrange(TableScanDesc sscan, ItemPointer mintid, ItemPointer maxtid)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;

	refuse_without_tids();
	scan->tid_range_min = *mintid;
	scan->tid_range_max = *maxtid;
}

bool
zl_scan_getnextslot_tidrange(TableScanDesc sscan, ScanDirection direction,
							 TupleTableSlot *slot)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;

	while (zl_scan_getnextslot(sscan, direction, slot))
	{
		if (ItemPointerCompare(&slot->tts_tid, &scan->tid_range_min) >= 0 &&
			ItemPointerCompare(&slot->tts_tid, &scan->tid_range_max) <= 0)
			return true;
	}
	return false;
}

/* ---------- index scans ---------- */

typedef struct ZLIndexFetch
{
	IndexFetchTableData base;
	MemoryContext context;		/* the scan's: the map outlives each fetch */
	ZLTidMap   *map;
	RowFetcher	rows;			/* fetches outside MVCC read through this */
} ZLIndexFetch;

IndexFetchTableData *
zl_index_fetch_begin(Relation rel)
{
	ZLIndexFetch *fetch = palloc0(sizeof(ZLIndexFetch));

	fetch->base.rel = rel;
	fetch->context = CurrentMemoryContext;
	fetch->rows.rel = rel;
	fetch->rows.context = CurrentMemoryContext;
	return &fetch->base;
}

void
zl_index_fetch_reset(IndexFetchTableData *scan)
{
}

void
zl_index_fetch_end(IndexFetchTableData *scan)
{
	ZLIndexFetch *fetch = (ZLIndexFetch *) scan;

	if (fetch->map != NULL)
		zl_tid_map_end(fetch->map);
	if (fetch->rows.reader != NULL)
		zl_columnar_close(fetch->rows.reader);
	pfree(fetch);
}

/*
 * The row an index entry points at, under a snapshot that is not MVCC: a
 * unique check's dirty snapshot, which must learn of writers in progress
 * (the row counts as there, and snapshot->xmin / xmax name the
 * transaction writing or hiding it, as heap's HeapTupleSatisfiesDirty
 * does), SnapshotSelf (is the row just entered still there?), or the
 * planner's SnapshotNonVacuumable (get_actual_variable_range reads the
 * rows at an index's ends, as no visibility map says they are visible:
 * a row counts while its sub-group's catalog row and no mask hiding it
 * may be removed, as heap counts a tuple VACUUM may not remove yet).  The
 * catalog is read under that snapshot for the one sub-group owning the
 * TID block and its masks: a map for one check would read all of it.
 * Writes retire a row's old copy before they enter its new one
 * (src/write/zl_index_rows.c), so a check never meets the row it moves.
 */
static bool
fetch_unsnapshotted(ZLIndexFetch *fetch, ItemPointer tid, Snapshot snapshot,
					TupleTableSlot *slot)
{
	uint64		storage_id = zl_storage_id(fetch->base.rel);
	bool		dirty = snapshot->snapshot_type == SNAPSHOT_DIRTY;
	ZLSubGroup	sg;
	TransactionId inserting,
				deleting,
				masking;
	int64		position;

	if (!dirty && snapshot->snapshot_type != SNAPSHOT_SELF &&
		snapshot->snapshot_type != SNAPSHOT_NON_VACUUMABLE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("zipper_lake tables fetch rows by TID under MVCC, dirty, self and non-vacuumable snapshots only"),
				 errdetail("Table \"%s\" was asked for a row under another kind of snapshot.",
						   RelationGetRelationName(fetch->base.rel)),
				 errhint("Read the table with a sequential scan.")));
	refuse_without_tids();
	ExecClearTuple(slot);
	if (dirty)
		snapshot->xmin = snapshot->xmax = InvalidTransactionId;
	if (!ItemPointerIsValid(tid) ||
		!zl_meta_tid_block_subgroup(storage_id, ItemPointerGetBlockNumber(tid), snapshot, &sg,
									&inserting, &deleting) ||
		ItemPointerGetBlockNumber(tid) >= sg.first_tid_block + zl_subgroup_tid_blocks(&sg))
		return false;
	position = zl_tid_position(&sg, tid);
	if (position < 0 ||
		zl_meta_position_masked(storage_id, sg.subgroup_id, (int32) position, snapshot, &masking) ||
		!fetch_row(&fetch->rows, &sg, position, slot))
		return false;
	if (dirty)
	{
		snapshot->xmin = inserting;
		snapshot->xmax = TransactionIdIsValid(deleting) ? deleting : masking;
	}
	return true;
}

/*
 * The row an index entry points at, if the snapshot sees it.  Versions
 * are never updated in place, so there is no chain to follow (call_again)
 * and no entry is reported dead here: VACUUM decides that.
 */
bool
zl_index_fetch_tuple(IndexFetchTableData *scan, ItemPointer tid, Snapshot snapshot,
					 TupleTableSlot *slot, bool *call_again, bool *all_dead)
{
	ZLIndexFetch *fetch = (ZLIndexFetch *) scan;

	*call_again = false;
	if (all_dead)
		*all_dead = false;
	if (!IsMVCCSnapshot(snapshot))
		return fetch_unsnapshotted(fetch, tid, snapshot, slot);
	if (fetch->map == NULL || zl_tid_map_snapshot(fetch->map) != snapshot)
	{
		MemoryContext old = MemoryContextSwitchTo(fetch->context);

		if (fetch->map != NULL)
			zl_tid_map_end(fetch->map);
		fetch->map = NULL;		/* if the next one fails */
		fetch->map = zl_tid_map_begin(scan->rel, snapshot);
		MemoryContextSwitchTo(old);
	}
	return zl_tid_map_fetch(fetch->map, tid, slot);
}

/* ---------- bitmap scans ---------- */

/* stand on a TID block of the bitmap: false if no visible sub-group owns it */
bool
zl_scan_bitmap_next_block(TableScanDesc sscan, TBMIterateResult *tbmres)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;
	ItemPointerData first;
	int64		position;

	if (scan->tid_map == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(scan->context);

		scan->tid_map = zl_tid_map_begin(sscan->rs_rd, sscan->rs_snapshot);
		MemoryContextSwitchTo(old);
	}
	scan->bitmap_block = tbmres->blockno;
	scan->bitmap_next = 0;
	ItemPointerSet(&first, tbmres->blockno, FirstOffsetNumber);
	return zl_tid_map_owner(scan->tid_map, &first, &position) != NULL;
}

/* the next row of the block the bitmap names (all of them when lossy) */
bool
zl_scan_bitmap_next_tuple(TableScanDesc sscan, TBMIterateResult *tbmres,
						  TupleTableSlot *slot)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;

	for (;;)
	{
		ItemPointerData tid;
		OffsetNumber offset;

		if (tbmres->ntuples >= 0)
		{
			if (scan->bitmap_next >= tbmres->ntuples)
				return false;
			offset = tbmres->offsets[scan->bitmap_next++];
		}
		else
		{
			if (scan->bitmap_next >= MaxHeapTuplesPerPage)
				return false;
			offset = (OffsetNumber) ++scan->bitmap_next;
		}
		CHECK_FOR_INTERRUPTS();
		ItemPointerSet(&tid, scan->bitmap_block, offset);
		if (zl_tid_map_fetch(scan->tid_map, &tid, slot))
		{
			pgstat_count_heap_fetch(sscan->rs_rd);
			return true;
		}
	}
}
