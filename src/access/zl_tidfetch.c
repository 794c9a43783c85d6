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
#include "storage/bufmgr.h"
#include "storage/bufpage.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

struct ZLTidMap
{
	Relation	rel;
	MemoryContext context;
	ZLSubGroup *sgs;			/* visible ones, by first_tid_block */
	int			n;
};

static int
first_tid_block_cmp(const void *a, const void *b)
{
	const ZLSubGroup *x = a;
	const ZLSubGroup *y = b;

	return x->first_tid_block < y->first_tid_block ? -1 :
		x->first_tid_block > y->first_tid_block ? 1 : 0;
}

/* the sub-groups and masks a snapshot sees, to find rows by TID in */
ZLTidMap *
zl_tid_map_begin(Relation rel, Snapshot snapshot)
{
	MemoryContext context = AllocSetContextCreate(CurrentMemoryContext,
												  "zipper_lake TID map",
												  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(context);
	ZLTidMap   *map = palloc0(sizeof(ZLTidMap));

	if (snapshot == InvalidSnapshot || !IsMVCCSnapshot(snapshot))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("zipper_lake tables fetch rows by TID with MVCC snapshots only"),
				 errdetail("Table \"%s\" was asked for a row under another kind of snapshot.",
						   RelationGetRelationName(rel)),
				 errhint("Read the table with a sequential scan.")));
	if (!zl_meta_has_tids())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("zipper_lake tables find rows by TID from version 0.2 of the extension on"),
				 errdetail("The catalog of the extension is still that of version 0.1."),
				 errhint("Run ALTER EXTENSION zipper_lake UPDATE.")));
	zl_write_flush_relation(RelationGetRelid(rel));

	map->rel = rel;
	map->context = context;
	map->sgs = zl_meta_cached_subgroups(rel, snapshot, NULL, DATEVAL_NOBEGIN, true, &map->n);
	qsort(map->sgs, map->n, sizeof(ZLSubGroup), first_tid_block_cmp);
	MemoryContextSwitchTo(old);
	return map;
}

void
zl_tid_map_end(ZLTidMap *map)
{
	MemoryContextDelete(map->context);
}

/*
 * The visible sub-group owning a TID, and the position it names; NULL if
 * none of its rows is visible there (no such sub-group, or masked).
 */
const ZLSubGroup *
zl_tid_map_find(const ZLTidMap *map, ItemPointer tid, int64 *position)
{
	int64		block = ItemPointerGetBlockNumber(tid);
	int			lo = 0;
	int			hi = map->n - 1;

	if (!ItemPointerIsValid(tid))
		return NULL;
	/* the last sub-group whose TID blocks begin at or before the TID's */
	while (lo < hi)
	{
		int			mid = lo + (hi - lo + 1) / 2;

		if (map->sgs[mid].first_tid_block <= block)
			lo = mid;
		else
			hi = mid - 1;
	}
	if (map->n == 0)
		return NULL;
	*position = zl_tid_position(&map->sgs[lo], tid);
	if (*position < 0 || ZL_ROW_MASKED(&map->sgs[lo], *position))
		return NULL;
	return &map->sgs[lo];
}

/* does a position of a row sub-group have a row (a TID may name any offset)? */
static bool
row_on_page(Relation rel, const ZLSubGroup *sg, int64 position)
{
	ItemPointerData item;
	Buffer		buffer;
	Page		page;
	bool		found;

	zl_position_page_item(sg, position, &item);
	buffer = ReadBuffer(rel, ItemPointerGetBlockNumber(&item));
	page = BufferGetPage(buffer);
	found = ItemPointerGetOffsetNumber(&item) <= PageGetMaxOffsetNumber(page) &&
		ItemIdIsNormal(PageGetItemId(page, ItemPointerGetOffsetNumber(&item)));
	ReleaseBuffer(buffer);
	return found;
}

static void
store_fetched_row(void *arg, const ZLSubGroup *sg, int32 position, HeapTuple tuple)
{
	TupleTableSlot *slot = arg;
	HeapTuple	copy = heap_copytuple(tuple);

	copy->t_tableOid = tuple->t_tableOid;
	zl_position_tid(sg, position, &copy->t_self);
	ExecForceStoreHeapTuple(copy, slot, true);
}

/* the row a TID names into the slot, if the map's snapshot sees it */
bool
zl_tid_map_fetch(const ZLTidMap *map, ItemPointer tid, TupleTableSlot *slot)
{
	int64		position;
	const ZLSubGroup *sg = zl_tid_map_find(map, tid, &position);
	int32		at;

	ExecClearTuple(slot);
	if (sg == NULL)
		return false;
	at = (int32) position;
	if (sg->format == ZL_FORMAT_ROWS && !row_on_page(map->rel, sg, position))
		return false;
	zl_read_subgroup_positions(map->rel, sg, &at, 1, store_fetched_row, slot);
	if (TTS_EMPTY(slot))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("sub-group " INT64_FORMAT " of \"%s\" has no row at position %d",
						sg->subgroup_id, RelationGetRelationName(map->rel), at)));
	slot->tts_tableOid = RelationGetRelid(map->rel);
	return true;
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

	if (!zl_meta_has_tids())
		(void) zl_tid_map_begin(sscan->rs_rd, sscan->rs_snapshot);	/* refuses */
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
