/*-------------------------------------------------------------------------
 *
 * zl_scan_columnar.c
 *	  Scanning a zipper table: the rows of columnar sub-groups.
 *
 * Columnar sub-groups
 * -------------------
 * A columnar sub-group (zl_columnar_read.c) is read through a reader
 * kept for the scan, chunk by chunk: a chunk whose min/max the bounds or the chunk
 * filter (zl_chunkfilter.c) exclude is skipped, and past the valid_from
 * range no later one is read.  In a chunk the bounds keep only in part,
 * the rows are checked in one pass over its decoded period columns
 * (scan_check_chunk_rows), not row by row.  Rows are handed out as
 * virtual tuples of the columns the plan reads (zl_scan_set_columns),
 * pointing into the decoded chunk, valid until the scan moves on.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "common/zl_guc.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "access/zl_scan_internal.h"

#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/memutils.h"

/* read the current sub-group, if columnar, through a reader of its own */
void
zl_scan_open_columnar(ZLScanDesc scan)
{
	MemoryContext old;

	if (scan->current->format != ZL_FORMAT_COLUMNAR)
		return;
	old = MemoryContextSwitchTo(scan->context);
	/* one reader for all, so its buffers are made once */
	if (scan->columnar_reader == NULL)
		scan->columnar_reader = zl_columnar_open_as(scan->base.rs_rd,
													scan->row_desc ? scan->row_desc : RelationGetDescr(scan->base.rs_rd),
													scan->current, scan->strategy);
	else
		zl_columnar_reset(scan->columnar_reader, scan->current, scan->strategy);
	scan->columnar = scan->columnar_reader;
	scan->tid_position = -2;
	/* zl_position_tid, stepping row by row */
	scan->tid_base = scan->current->first_tid_block >= 0 ?
		(BlockNumber) scan->current->first_tid_block : scan->current->first_block;
	scan->tid_per_block = scan->current->first_tid_block >= 0 ? MaxHeapTuplesPerPage :
		(uint32) zl_columnar_rows_per_block(scan->current);
	if (scan->columns != NULL && scan->probing && scan->bounded)
	{
		/* probed rows are checked against the bounds one by one, on these */
		memcpy(scan->probe_columns, scan->columns,
			   sizeof(bool) * RelationGetDescr(scan->base.rs_rd)->natts);
		scan->probe_columns[scan->opts.from_attnum - 1] =
			scan->probe_columns[scan->opts.to_attnum - 1] = true;
		zl_columnar_set_columns(scan->columnar, scan->probe_columns);
	}
	else if (scan->columns != NULL)
		zl_columnar_set_columns(scan->columnar, scan->columns);
	/* a key probe reads a row here and there: no chunk decoded whole */
	zl_columnar_set_sparse(scan->columnar, scan->probing);
	MemoryContextSwitchTo(old);
	scan->chunk = -1;
}

/* skip chunks of columnar sub-groups where the filter says no row matches */
void
zl_scan_set_chunk_filter(TableScanDesc sscan, ZLChunkFilter *filter)
{
	((ZLScanDesc) sscan)->chunk_filter = filter;
}

/*
 * Read only these attributes (a bool per attribute) of columnar
 * sub-groups; the others read as NULL.  For scans whose plan needs no more
 * (zl_customscan.c).
 */
void
zl_scan_set_columns(TableScanDesc sscan, const bool *needed)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;
	int			natts = RelationGetDescr(scan->base.rs_rd)->natts;

	if (scan->columns == NULL)
	{
		scan->columns = MemoryContextAlloc(scan->context, sizeof(bool) * Max(natts, 1));
		scan->probe_columns = MemoryContextAlloc(scan->context, sizeof(bool) * Max(natts, 1));
	}
	memcpy(scan->columns, needed, sizeof(bool) * natts);
}

/*
 * The TID of a row of the current columnar sub-group (zl_position_tid):
 * the next row's is the last one's, one further, without dividing.
 */
static inline void
scan_columnar_tid(ZLScanDesc scan, int64 position, ItemPointer tid)
{
	if (position != scan->tid_position + 1)
	{
		scan->tid_block = scan->tid_base + (uint32) position / scan->tid_per_block;
		scan->tid_index = (uint32) position % scan->tid_per_block;
	}
	else if (++scan->tid_index == scan->tid_per_block)
	{
		scan->tid_block++;
		scan->tid_index = 0;
	}
	scan->tid_position = position;
	ItemPointerSet(tid, scan->tid_block, (OffsetNumber) (scan->tid_index + 1));
}

/* the row at a position of the current columnar sub-group into the slot */
void
zl_scan_store_columnar_row(ZLScanDesc scan, TupleTableSlot *slot, int64 position)
{
	ExecClearTuple(slot);
	zl_columnar_row(scan->columnar, (uint32) position, slot->tts_values, slot->tts_isnull);
	ExecStoreVirtualTuple(slot);
	slot->tts_tableOid = RelationGetRelid(scan->base.rs_rd);
	scan_columnar_tid(scan, position, &slot->tts_tid);
}

/* a period column's values over the current chunk */
static void
chunk_period_values(ZLScanDesc scan, AttrNumber attnum, const Datum **values,
					const bool **isnull)
{
	if (!zl_columnar_chunk_values(scan->columnar, scan->chunk, attnum, values, isnull))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("columnar sub-group " INT64_FORMAT " of table \"%s\" lacks a period column",
						scan->current->subgroup_id, RelationGetRelationName(scan->base.rs_rd)),
				 errdetail("Column %d is not stored in it.", attnum),
				 errhint("Restore the table from a backup; zipper_lake.verify() lists what it finds.")));
}

/*
 * Check the rows of the current chunk against the bounds in one pass over
 * its decoded period columns (NULL the lowest instant), instead of row by
 * row through the slot: chunk_pass says which pass.  Rows of a sub-group
 * sorted by valid_from leave the valid_from range for good, forward at
 * chunk_past_end, backward at chunk_before_start.
 */
static void
scan_check_chunk_rows(ZLScanDesc scan)
{
	const ZLScanBounds *b = &scan->bounds;
	uint32		n = (uint32) (scan->chunk_end - scan->chunk_first);
	const Datum *from_values,
			   *to_values;
	const bool *from_nulls,
			   *to_nulls;

	/*
	 * Bounds on valid_from alone ("began that day") pass any valid_to: that
	 * column is not decoded for them (the instant 0 stands for every row's).
	 */
	bool		to_open = !b->either && b->to_lo == ZL_UNBOUNDED_LO && b->to_hi == ZL_UNBOUNDED_HI;

	chunk_period_values(scan, scan->opts.from_attnum, &from_values, &from_nulls);
	if (!to_open)
		chunk_period_values(scan, scan->opts.to_attnum, &to_values, &to_nulls);
	if (n > scan->chunk_pass_size)
	{
		if (scan->chunk_pass != NULL)
			pfree(scan->chunk_pass);
		scan->chunk_pass = MemoryContextAlloc(scan->context, n);
		scan->chunk_pass_size = n;
	}
	scan->chunk_past_end = scan->chunk_end;
	scan->chunk_before_start = scan->chunk_first - 1;
	for (uint32 i = 0; i < n; i++)
	{
		int64		from = period_instant(scan, from_values[i], from_nulls[i]);
		int64		to = to_open ? 0 : period_instant(scan, to_values[i], to_nulls[i]);

		scan->chunk_pass[i] = zl_bounds_match(b, from, to);
		if (from > b->from_hi && scan->chunk_past_end == scan->chunk_end)
			scan->chunk_past_end = scan->chunk_first + i;
		if (from < b->from_lo)
			scan->chunk_before_start = scan->chunk_first + i;
	}
}

/* can a range [lo, hi] of a period column's chunk meet the bound [blo, bhi]? */
static bool
chunk_period_meets(ZLScanDesc scan, int chunk, AttrNumber attnum, int64 blo, int64 bhi,
				   int64 *lo, int64 *hi)
{
	bool		all_null,
				has_nulls;
	Datum		min,
				max;

	*lo = PG_INT64_MIN;
	*hi = PG_INT64_MAX;
	if (!zl_columnar_chunk_range(scan->columnar, chunk, attnum, &all_null, &has_nulls,
								 &min, &max) || all_null || has_nulls)
		return true;
	*lo = zl_datum_to_instant(min, scan->opts.period_type);
	*hi = zl_datum_to_instant(max, scan->opts.period_type);
	return *hi >= blo && *lo <= bhi;
}

/*
 * A chunk is read: its rows are checked against the bounds (READ), on the
 * period columns decoded with the plan's, or not (ALL), on the plan's only.
 */
static ZLChunkStep
scan_read_chunk(ZLScanDesc scan, ZLChunkStep step)
{
	scan->chunk_checks = step == ZL_CHUNK_READ;
	if (scan->chunk_checks && !scan->probing)
		scan_check_chunk_rows(scan);
	return step;
}

/*
 * Entering a chunk of the current columnar sub-group: can the chunk filter
 * (zl_chunkfilter.c) and the bounds keep any of its rows, going by its
 * min/max?  Past the valid_from range in the scan's direction, no later
 * chunk can either.
 */
ZLChunkStep
zl_scan_enter_chunk(ZLScanDesc scan, int chunk, bool forward)
{
	const ZLScanBounds *b = &scan->bounds;
	int64		from_lo = PG_INT64_MIN,
				from_hi = PG_INT64_MAX,
				to_lo,
				to_hi;
	bool		from_meets,
				to_meets;

	scan->stats.chunks_total++;
	scan->chunk_checks = false;
	if (scan->chunk_filter != NULL &&
		!zl_chunkfilter_may_match(scan->chunk_filter, scan->columnar, chunk))
	{
		scan->stats.chunks_skipped++;
		return ZL_CHUNK_SKIP;
	}
	if (scan->current_decision != ZL_CHECK)
		return scan_read_chunk(scan, ZL_CHUNK_ALL);
	from_meets = chunk_period_meets(scan, chunk, scan->opts.from_attnum, b->from_lo,
									b->from_hi, &from_lo, &from_hi);
	to_meets = chunk_period_meets(scan, chunk, scan->opts.to_attnum, b->to_lo, b->to_hi,
								  &to_lo, &to_hi);
	if (b->either ? (from_meets || to_meets) : (from_meets && to_meets))
	{
		bool		from_inside = from_lo >= b->from_lo && from_hi <= b->from_hi;
		bool		to_inside = to_lo >= b->to_lo && to_hi <= b->to_hi;

		return scan_read_chunk(scan, (b->either ? from_inside || to_inside :
									  from_inside && to_inside) ?
							   ZL_CHUNK_ALL : ZL_CHUNK_READ);
	}
	scan->stats.chunks_skipped++;
	if (zl_scan_uses_sort_order(scan) &&
		(forward ? from_lo > b->from_hi : from_hi < b->from_lo))
		return ZL_CHUNK_LAST;
	return ZL_CHUNK_SKIP;
}

/*
 * Stand on the chunk holding a row of the current columnar sub-group,
 * entering it (zl_scan_enter_chunk) unless the scan stands in it already
 * (then ZL_CHUNK_READ: its rows are read as decided on entering).  A
 * chunk to skip leaves the scan on its last row in the scan's direction.
 */
static ZLChunkStep
scan_chunk_of_row(ZLScanDesc scan, int64 row, bool forward)
{
	ZLChunkStep step;

	if (scan->chunk >= 0 && row >= scan->chunk_first && row < scan->chunk_end)
		return ZL_CHUNK_READ;
	scan->chunk = zl_columnar_chunk_of(scan->columnar, (uint32) row);
	scan->chunk_first = zl_columnar_chunk_start(scan->columnar, scan->chunk);
	scan->chunk_end = zl_columnar_chunk_start(scan->columnar, scan->chunk + 1);
	step = zl_scan_enter_chunk(scan, scan->chunk, forward);
	if (step == ZL_CHUNK_SKIP)
		scan->row = forward ? scan->chunk_end - 1 : scan->chunk_first;
	return step;
}

/*
 * Next unmasked row of the current columnar sub-group, in the scan's
 * direction, into the slot: chunk by chunk, skipping those the bounds
 * exclude.
 */
ZLPageStep
zl_scan_step_columnar(ZLScanDesc scan, TupleTableSlot *slot, bool forward)
{
	const ZLSubGroup *sg = scan->current;

	for (;;)
	{
		int64		row = scan->row + (forward ? 1 : -1);

		if (row < 0 || row >= sg->row_count)
			return ZL_STEP_SUBGROUP_DONE;
		scan->row = row;
		switch (scan_chunk_of_row(scan, row, forward))
		{
			case ZL_CHUNK_READ:
			case ZL_CHUNK_ALL:
				break;
			case ZL_CHUNK_SKIP:
				continue;
			case ZL_CHUNK_LAST:
				return ZL_STEP_SUBGROUP_DONE;
		}
		if (ZL_ROW_MASKED(sg, row))
		{
			scan->stats.rows_masked++;
			continue;
		}
		if (scan->chunk_checks && !scan->chunk_pass[row - scan->chunk_first])
		{
			if (zl_scan_uses_sort_order(scan) &&
				(forward ? row >= scan->chunk_past_end : row <= scan->chunk_before_start))
				return ZL_STEP_SUBGROUP_DONE;
			continue;
		}
		zl_scan_store_columnar_row(scan, slot, row);
		return ZL_STEP_ROW;
	}
}

/*
 * The rows of a columnar chunk at once, for aggregates computed in the
 * scan (zl_aggregate.c): from where the scan stands (forward) to the end
 * of the chunk, the indexes in the chunk of the rows zl_scan_getnextslot
 * would return one by one — not masked, passing the bounds — with no
 * slot filled; chunks the bounds or the chunk filter exclude are skipped
 * on the way.  The scan then stands on the chunk's last row.  False when
 * the next rows do not come this way (no sub-group entered yet, its end
 * reached, a row sub-group, a key probe, a column added since the
 * sub-group was written): zl_scan_getnextslot returns the next row.
 */
bool
zl_scan_next_batch(TableScanDesc sscan, ZLRowBatch *batch)
{
	ZLScanDesc	scan = (ZLScanDesc) sscan;
	const ZLSubGroup *sg = scan->current;

	if (scan->columnar == NULL || scan->probing ||
		zl_columnar_defaults_needed(scan->columnar))
		return false;
	for (;;)
	{
		int64		row = scan->row + 1;
		int64		end;

		CHECK_FOR_INTERRUPTS();
		if (row >= sg->row_count)
			return false;
		switch (scan_chunk_of_row(scan, row, true))
		{
			case ZL_CHUNK_READ:
			case ZL_CHUNK_ALL:
				break;
			case ZL_CHUNK_SKIP:
				continue;
			case ZL_CHUNK_LAST:
				scan->row = sg->row_count - 1;
				return false;
		}
		if (scan->chunk_end - scan->chunk_first > scan->batch_rows_size)
		{
			if (scan->batch_rows != NULL)
				pfree(scan->batch_rows);
			scan->batch_rows_size = (uint32) (scan->chunk_end - scan->chunk_first);
			scan->batch_rows = MemoryContextAlloc(scan->context,
												  sizeof(uint32) * scan->batch_rows_size);
		}
		/* sorted by valid_from: past from_hi, no later row of the sub-group passes */
		end = scan->chunk_checks && zl_scan_uses_sort_order(scan) ?
			scan->chunk_past_end : scan->chunk_end;
		batch->nrows = 0;
		for (int64 r = row; r < end; r++)
		{
			if (ZL_ROW_MASKED(sg, r))
			{
				scan->stats.rows_masked++;
				continue;
			}
			if (scan->chunk_checks && !scan->chunk_pass[r - scan->chunk_first])
				continue;
			scan->batch_rows[batch->nrows++] = (uint32) (r - scan->chunk_first);
		}
		if (end < scan->chunk_end)
		{
			/* counted as the row-by-row walk counts them: masked ones up to the stop */
			for (int64 r = end; r < scan->chunk_end && ZL_ROW_MASKED(sg, r); r++)
				scan->stats.rows_masked++;
			scan->row = sg->row_count - 1;
		}
		else
			scan->row = end - 1;
		batch->reader = scan->columnar;
		batch->chunk = scan->chunk;
		batch->rows = scan->batch_rows;
		return true;
	}
}
