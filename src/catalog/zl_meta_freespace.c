/*-------------------------------------------------------------------------
 *
 * zl_meta_freespace.c
 *	  The catalog's free_extent table: blocks of deleted sub-groups.
 *
 * Deleting a sub-group's row records its blocks here (zl_meta_subgroup.c),
 * freed by the deleting transaction; zl_freespace.c loads them, reuses the
 * blocks once no snapshot can see the sub-group any more, and takes what
 * it reuses.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog_internal.h"

#include "executor/spi.h"
#include "utils/array.h"
#include "utils/memutils.h"

/* the free extents of a storage visible to the snapshot, by first block */
ZLFreeExtent *
zl_meta_load_free_extents(uint64 storage_id, Snapshot snapshot, int *nextents)
{
	ZLMetaSession session;
	Datum		values[1] = {Int64GetDatum((int64) storage_id)};
	ZLFreeExtent *extents = NULL;

	zl_meta_begin(&session);
	zl_meta_exec(Q_LOAD_FREE_EXTENTS, values, NULL, snapshot, true);
	*nextents = (int) SPI_processed;
	if (*nextents > 0)
		extents = MemoryContextAlloc(session.caller_context, sizeof(ZLFreeExtent) * *nextents);
	for (int i = 0; i < *nextents; i++)
	{
		bool		isnull;

		extents[i].first_block = (BlockNumber) zl_meta_result_int64(i, 1);
		extents[i].blocks = (BlockNumber) DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
																	  SPI_tuptable->tupdesc,
																	  2, &isnull));
		extents[i].freed_by = FullTransactionIdFromU64((uint64) zl_meta_result_int64(i, 3));
	}
	zl_meta_end(&session);
	return extents;
}

/* record block ranges as free, reusable once freed_by is old enough */
void
zl_meta_insert_free_extents(uint64 storage_id, const ZLFreeExtent *extents, int nextents,
							FullTransactionId freed_by)
{
	ZLMetaSession session;
	Datum	   *firsts;
	Datum	   *counts;
	Datum		values[4];

	if (nextents == 0)
		return;
	zl_meta_begin(&session);
	firsts = palloc(sizeof(Datum) * nextents);
	counts = palloc(sizeof(Datum) * nextents);
	for (int i = 0; i < nextents; i++)
	{
		firsts[i] = Int64GetDatum((int64) extents[i].first_block);
		counts[i] = Int32GetDatum((int32) extents[i].blocks);
	}
	values[0] = Int64GetDatum((int64) storage_id);
	values[1] = PointerGetDatum(construct_array(firsts, nextents, INT8OID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[2] = PointerGetDatum(construct_array(counts, nextents, INT4OID, sizeof(int32),
												true, TYPALIGN_INT));
	values[3] = Int64GetDatum((int64) U64FromFullTransactionId(freed_by));
	zl_meta_exec(Q_INSERT_FREE_EXTENTS, values, NULL, InvalidSnapshot, false);
	zl_meta_end(&session);
}

/*
 * Take the free blocks of n disjoint ranges that do not touch: blocks[i]
 * from first_blocks[i] on, which free extents that touch must cover; what
 * the last of them holds beyond a range stays free.  One statement.
 */
void
zl_meta_take_free_extents(uint64 storage_id, int n, const BlockNumber *first_blocks,
						  const BlockNumber *blocks)
{
	ZLMetaSession session;
	Datum	   *firsts;
	Datum	   *counts;
	Datum		values[3];
	int64		total = 0;

	if (n == 0)
		return;
	firsts = palloc(sizeof(Datum) * n);
	counts = palloc(sizeof(Datum) * n);
	for (int i = 0; i < n; i++)
	{
		firsts[i] = Int64GetDatum((int64) first_blocks[i]);
		counts[i] = Int32GetDatum((int32) blocks[i]);
		total += blocks[i];
	}
	values[0] = Int64GetDatum((int64) storage_id);
	values[1] = PointerGetDatum(construct_array(firsts, n, INT8OID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[2] = PointerGetDatum(construct_array(counts, n, INT4OID, sizeof(int32),
												true, TYPALIGN_INT));
	zl_meta_begin(&session);
	zl_meta_exec(Q_TAKE_FREE_EXTENTS, values, NULL, InvalidSnapshot, false);
	if (zl_meta_result_int64(0, 1) != total)
		elog(ERROR, "free extents of storage " UINT64_FORMAT " do not cover the %d block ranges taken from block %u on",
			 storage_id, n, first_blocks[0]);
	zl_meta_end(&session);
}

void
zl_meta_take_free_extent(uint64 storage_id, BlockNumber first_block, BlockNumber blocks)
{
	zl_meta_take_free_extents(storage_id, 1, &first_block, &blocks);
}
