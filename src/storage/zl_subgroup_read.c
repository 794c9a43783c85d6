/*-------------------------------------------------------------------------
 *
 * zl_subgroup_read.c
 *	  Reading the rows of one sub-group: all, at given positions, or of
 *	  given key hashes, for writers and checks.
 *
 * Compaction, load checks, apply, retention, erase and verify read whole
 * sub-groups or the rows a key directory names, outside any table scan
 * (access/zl_scan.c is the scan).  Each row is handed to a callback with
 * its position (a row sub-group's rows point into a pinned page, a
 * columnar sub-group's are formed as heap tuples), masked rows skipped
 * unless asked for.
 *
 * Row positions
 * -------------
 * A row is identified inside its sub-group by its position: in a row
 * sub-group (block - first_block) * MaxHeapTuplesPerPage + (offset - 1),
 * in a columnar one its ordinal (zl_position_page_item).  Masks and key
 * directories list positions.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage_internal.h"

#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/memutils.h"

/* a position a key directory names must lie in its sub-group */
void
zl_check_position(const ZLSubGroup *sg, int64 position)
{
	if (position < 0 || position >= zl_subgroup_positions(sg))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("key directory of sub-group " INT64_FORMAT " names position %lld outside it",
						sg->subgroup_id, (long long) position)));
}

/*
 * Call back for the rows of a columnar sub-group at the given positions
 * (ascending; NULL: all), each formed as a heap tuple that lives until the
 * next one.
 */
static void
read_columnar_rows(Relation rel, const ZLSubGroup *sg, bool include_masked,
				   const int32 *positions, int npositions,
				   ZLRowCallback callback, void *arg)
{
	TupleDesc	desc = RelationGetDescr(rel);
	ZLColumnarReader *reader = zl_columnar_open(rel, sg, NULL);
	MemoryContext row_context = AllocSetContextCreate(CurrentMemoryContext,
													  "zipper_lake columnar row",
													  ALLOCSET_SMALL_SIZES);
	Datum	   *values = palloc(sizeof(Datum) * Max(desc->natts, 1));
	bool	   *isnull = palloc(sizeof(bool) * Max(desc->natts, 1));
	int64		n = positions ? npositions : sg->row_count;

	zl_columnar_set_sparse(reader, positions != NULL);

	for (int64 i = 0; i < n; i++)
	{
		int64		position = positions ? positions[i] : i;
		MemoryContext old;
		HeapTuple	tuple;

		CHECK_FOR_INTERRUPTS();
		zl_check_position(sg, position);
		if (!include_masked && ZL_ROW_MASKED(sg, position))
			continue;
		MemoryContextReset(row_context);
		old = MemoryContextSwitchTo(row_context);
		zl_columnar_row(reader, (uint32) position, values, isnull);
		tuple = heap_form_tuple(desc, values, isnull);
		tuple->t_tableOid = RelationGetRelid(rel);
		zl_position_tid(sg, position, &tuple->t_self);
		MemoryContextSwitchTo(old);
		callback(arg, sg, (int32) position, tuple);
	}
	MemoryContextDelete(row_context);
	zl_columnar_close(reader);
	pfree(values);
	pfree(isnull);
}

/*
 * Call back for every row of a sub-group (masked ones only when asked),
 * in storage order.  The tuple points into a pinned page or lives until
 * the next one: copy what must outlive the call.
 */
void
zl_read_subgroup_rows(Relation rel, const ZLSubGroup *sg, bool include_masked,
					  ZLRowCallback callback, void *arg)
{
	if (sg->format == ZL_FORMAT_COLUMNAR)
	{
		read_columnar_rows(rel, sg, include_masked, NULL, 0, callback, arg);
		return;
	}
	for (BlockNumber block = sg->first_block; block < sg->first_block + sg->blocks; block++)
	{
		Buffer		buffer = ReadBuffer(rel, block);
		Page		page = BufferGetPage(buffer);
		OffsetNumber maxoff = PageGetMaxOffsetNumber(page);

		CHECK_FOR_INTERRUPTS();
		for (OffsetNumber offset = FirstOffsetNumber; offset <= maxoff; offset++)
		{
			ItemId		itemid = PageGetItemId(page, offset);
			int32		position = (int32) zl_page_position(sg, block, offset);
			HeapTupleData tuple;

			if (!ItemIdIsNormal(itemid) ||
				(!include_masked && ZL_ROW_MASKED(sg, position)))
				continue;
			tuple.t_data = (HeapTupleHeader) PageGetItem(page, itemid);
			tuple.t_len = ItemIdGetLength(itemid);
			tuple.t_tableOid = RelationGetRelid(rel);
			zl_page_item_tid(sg, block, offset, &tuple.t_self);
			callback(arg, sg, position, &tuple);
		}
		ReleaseBuffer(buffer);
	}
}

/*
 * The rows read for positions lie one or two to a page, so each would
 * make its reader wait for a cache miss on its line pointer and another on
 * its tuple.  So the pages of the next POSITIONS_AHEAD positions are
 * pinned ahead and their line pointers asked for, and the tuple of the
 * next one, whose line pointer has arrived meanwhile.
 */
#define POSITIONS_AHEAD 2

typedef struct PinnedRow
{
	Buffer		buffer;			/* InvalidBuffer: masked, not read */
	ItemPointerData tid;
} PinnedRow;

/* pin the page of a position (sharing the pin of the position before) */
static void
pin_position(Relation rel, const ZLSubGroup *sg, int32 position, PinnedRow *row,
			 const PinnedRow *before)
{
	zl_check_position(sg, position);
	row->buffer = InvalidBuffer;
	if (ZL_ROW_MASKED(sg, position))
		return;
	zl_position_page_item(sg, position, &row->tid);
	if (before != NULL && BufferIsValid(before->buffer) &&
		ItemPointerGetBlockNumber(&before->tid) == ItemPointerGetBlockNumber(&row->tid))
	{
		IncrBufferRefCount(before->buffer);
		row->buffer = before->buffer;
	}
	else
		row->buffer = zl_read_block(rel, ItemPointerGetBlockNumber(&row->tid));
	ZL_PREFETCH(PageGetItemId(BufferGetPage(row->buffer), ItemPointerGetOffsetNumber(&row->tid)));
}

/* the row a position names, or NULL past its page's rows */
static inline ItemId
pinned_item(const PinnedRow *row)
{
	Page		page = BufferGetPage(row->buffer);
	OffsetNumber offset = ItemPointerGetOffsetNumber(&row->tid);

	if (offset > PageGetMaxOffsetNumber(page))
		return NULL;
	return PageGetItemId(page, offset);
}

/*
 * Call back for the rows at the given positions (ascending) of a
 * sub-group, skipping masked ones; each page is read once.
 */
void
zl_read_subgroup_positions(Relation rel, const ZLSubGroup *sg,
						   const int32 *positions, int npositions,
						   ZLRowCallback callback, void *arg)
{
	PinnedRow	ring[POSITIONS_AHEAD + 1];
	int			pinned = 0;		/* positions pinned so far */

	if (sg->format == ZL_FORMAT_COLUMNAR)
	{
		read_columnar_rows(rel, sg, false, positions, npositions, callback, arg);
		return;
	}
	for (int i = 0; i < npositions; i++)
	{
		PinnedRow  *row = &ring[i % (POSITIONS_AHEAD + 1)];
		ItemId		itemid;
		HeapTupleData tuple;

		for (; pinned < npositions && pinned <= i + POSITIONS_AHEAD; pinned++)
			pin_position(rel, sg, positions[pinned], &ring[pinned % (POSITIONS_AHEAD + 1)],
						 pinned > 0 ? &ring[(pinned - 1) % (POSITIONS_AHEAD + 1)] : NULL);
		if (i + 1 < pinned)
		{
			PinnedRow  *next = &ring[(i + 1) % (POSITIONS_AHEAD + 1)];
			ItemId		next_item;

			if (BufferIsValid(next->buffer) && (next_item = pinned_item(next)) != NULL &&
				ItemIdIsNormal(next_item))
			{
				char	   *data = PageGetItem(BufferGetPage(next->buffer), next_item);

				ZL_PREFETCH(data);
				if (ItemIdGetLength(next_item) > 64)
					ZL_PREFETCH(data + 64);
			}
		}
		if (!BufferIsValid(row->buffer))
			continue;			/* masked */

		if ((itemid = pinned_item(row)) == NULL || !ItemIdIsNormal(itemid))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("key directory of sub-group " INT64_FORMAT " names a missing row at position %d",
							sg->subgroup_id, positions[i])));
		tuple.t_data = (HeapTupleHeader) PageGetItem(BufferGetPage(row->buffer), itemid);
		tuple.t_len = ItemIdGetLength(itemid);
		tuple.t_tableOid = RelationGetRelid(rel);
		zl_position_tid(sg, positions[i], &tuple.t_self);
		callback(arg, sg, positions[i], &tuple);
		ReleaseBuffer(row->buffer);
	}
}

/* orders row positions, or any int32s (qsort, bsearch) */
int
zl_position_cmp(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;

	return x < y ? -1 : (x > y);
}

/* the rows at positions a key directory named (in hash order), then freed */
static void
read_directory_positions(Relation rel, const ZLSubGroup *sg, int32 *positions,
						 int npositions, ZLRowCallback callback, void *arg)
{
	if (npositions > 0)
	{
		qsort(positions, npositions, sizeof(int32), zl_position_cmp);
		zl_read_subgroup_positions(rel, sg, positions, npositions, callback, arg);
	}
	if (positions)
		pfree(positions);
}

/*
 * Call back for the rows of a sub-group that may be of keys whose hashes
 * are given (ascending, distinct), skipping masked ones: the positions its
 * key directory names for them, if it has one loaded
 * (zl_meta_load_key_directories), else all its rows.
 */
void
zl_read_subgroup_keys(Relation rel, const ZLSubGroup *sg, const uint32 *hashes,
					  int nhashes, ZLRowCallback callback, void *arg)
{
	int32	   *positions;
	int			npositions;

	if (sg->key_directory == NULL)
	{
		zl_read_subgroup_rows(rel, sg, false, callback, arg);
		return;
	}
	positions = zl_key_directory_probe(sg->key_directory, hashes, nhashes, &npositions);
	read_directory_positions(rel, sg, positions, npositions, callback, arg);
}

/* the same for the keys whose hashes lie in [lo, hi] */
void
zl_read_subgroup_key_range(Relation rel, const ZLSubGroup *sg, uint32 lo, uint32 hi,
						   ZLRowCallback callback, void *arg)
{
	int32	   *positions;
	int			npositions;

	if (sg->key_directory == NULL)
	{
		zl_read_subgroup_rows(rel, sg, false, callback, arg);
		return;
	}
	positions = zl_key_directory_range(sg->key_directory, lo, hi, &npositions);
	read_directory_positions(rel, sg, positions, npositions, callback, arg);
}

/* ---------- sub-groups in block order ---------- */

static int
subgroup_block_cmp(const void *a, const void *b)
{
	const ZLSubGroup *sa = *(ZLSubGroup *const *) a;
	const ZLSubGroup *sb = *(ZLSubGroup *const *) b;

	return sa->first_block < sb->first_block ? -1 :
		(sa->first_block > sb->first_block ? 1 : 0);
}

/* pointers to the sub-groups, in block order (palloc'd) */
ZLSubGroup **
zl_subgroups_by_block(ZLSubGroup *sgs, int n)
{
	ZLSubGroup **by_block = palloc(sizeof(ZLSubGroup *) * Max(n, 1));

	for (int i = 0; i < n; i++)
		by_block[i] = &sgs[i];
	qsort(by_block, n, sizeof(ZLSubGroup *), subgroup_block_cmp);
	return by_block;
}

static int
first_tid_block_cmp(const void *a, const void *b)
{
	int64		x = ((const ZLSubGroup *) a)->first_tid_block;
	int64		y = ((const ZLSubGroup *) b)->first_tid_block;

	return x < y ? -1 : (x > y);
}

/* sort sub-groups by their TID blocks (README "Row identifiers") */
void
zl_sort_by_tid_block(ZLSubGroup *sgs, int n)
{
	if (n > 1)
		qsort(sgs, n, sizeof(ZLSubGroup), first_tid_block_cmp);
}

/*
 * The first TID block of each of n sub-groups sorted by it, for
 * zl_tid_block_candidate: a few cache lines to search, where the
 * sub-groups themselves would cost a miss at every step.
 */
int64 *
zl_tid_block_starts(const ZLSubGroup *sgs, int n)
{
	int64	   *starts = palloc(sizeof(int64) * Max(n, 1));

	for (int i = 0; i < n; i++)
		starts[i] = sgs[i].first_tid_block;
	return starts;
}

/*
 * In sub-groups sorted by TID blocks (their zl_tid_block_starts), the last
 * whose blocks begin at or before block (-1 if none): the only one that
 * can own it.
 */
int
zl_tid_block_candidate(const int64 *starts, int n, int64 block)
{
	int			lo = 0,
				hi = n - 1;

	if (n == 0 || starts[0] > block)
		return -1;
	while (lo < hi)
	{
		int			mid = lo + (hi - lo + 1) / 2;

		if (starts[mid] <= block)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}
