/*-------------------------------------------------------------------------
 *
 * zl_subgroup_write.c
 *	  The sub-group writer: the sorted rows of a flush onto pages.
 *
 * The rows to place come out of their sort (or their runs, zl_place.c)
 * run by run; each run is cut into sub-groups of at most
 * ZL_MAX_SUBGROUP_ROWS rows, written to consecutive pages (zl_storage.c)
 * -- into free blocks where a free extent holds them (zl_freespace.c),
 * else at the end of the file -- each with the key directory of its rows
 * (zl_keys.c) and one metadata row (zl_meta_subgroup.c) that makes it
 * visible at commit.  History runs of a table whose history format is
 * columnar become columnar sub-groups (zl_columnar_write.c).
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write_internal.h"

#include "miscadmin.h"
#include "storage/bufpage.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/tuplestore.h"

/* the smallest sub-group worth writing into free blocks rather than appending */
#define ZL_MIN_REUSE_BLOCKS 8

/* a piece of a columnar sub-group cut to fit a free extent (relocation): its share of it, its least rows */
#define ZL_FIT_SHARE		0.875
#define ZL_FIT_MIN_ROWS		1024

/* a lower bound of the pages rows of these lengths fill */
static BlockNumber
pages_at_least(const uint32 *lengths, int n)
{
	Size		bytes = 0;

	for (int i = 0; i < n; i++)
		bytes += MAXALIGN(lengths[i]) + sizeof(ItemIdData);
	return (BlockNumber) ((bytes + (BLCKSZ - SizeOfPageHeaderData) - 1) /
						  (BLCKSZ - SizeOfPageHeaderData));
}

/*
 * Where the next sub-group of the rows left of a run goes (zl_freespace.c),
 * from their lengths: all n rows into the smallest free extent that holds
 * them; else, outside the current partition, as many as fill the largest
 * one if that makes at least min_piece pages; else all at the end of the
 * file (*first_block = InvalidBlockNumber).  Returns how many rows the
 * sub-group takes.  Runs of the current partition are never split:
 * apply_changes probes the key directory of every current sub-group, so
 * their number must not grow with the fragmentation of free space.
 */
static int
place_subgroup(ZLFreeSpace *free_space, const uint32 *lengths, int n, bool current,
			   BlockNumber min_piece, BlockNumber *first_block, int32 *blocks)
{
	BlockNumber largest = zl_free_space_largest(free_space);
	BlockNumber at_least = pages_at_least(lengths, n);
	ZLPageWriter *counter;
	BlockNumber pages_before = 0;
	int			fitting = n;

	*first_block = InvalidBlockNumber;
	*blocks = 0;
	if (current)
		min_piece = at_least;
	if (largest == 0 || largest < Min(min_piece, at_least))
		return n;

	counter = zl_page_counter_begin();
	for (int i = 0; i < n; i++)
	{
		pages_before = zl_page_writer_pages(counter);
		zl_page_counter_add_length(counter, lengths[i]);
		if (zl_page_writer_pages(counter) > largest)
		{
			fitting = i;		/* rows [0, i) fill pages_before pages */
			break;
		}
	}
	if (fitting == n)
	{
		BlockNumber unused;

		zl_page_writer_finish(counter, &unused, blocks);
	}
	else
	{
		pfree(counter);
		if (current || pages_before < min_piece)
			return n;
		*blocks = (int32) pages_before;
	}
	*first_block = zl_free_space_take(free_space, *blocks);
	Assert(*first_block != InvalidBlockNumber);
	return fitting;
}

/* the sorted rows to place, read run by run */
typedef struct RunReader
{
	ZLWriteState *state;
	ZLSortRow	next;			/* the sort's next row */
	bool		have;			/* next holds a row not written yet */
	TupleTableSlot *slot;		/* to read a run's tuplestore */
	ZLRunKey	run;			/* the run being written */
	Tuplestorestate *buffer;	/* rows of a run buffered for placement */
	TupleTableSlot *buffer_slot;
	ZLRowPayload buffer_copy;	/* the aligned copy of a row read from it */
	uint32	   *lengths;		/* their lengths */
	uint32	   *hashes;			/* key hashes of a sub-group's rows */
	int32	   *positions;		/* and their positions */
	ZLHistoryInserts *history_inserts;	/* history sub-groups' catalog rows */
	ZLIndexEntries *index_entries;	/* the sub-groups written, to index at the end */
	int64		next_from_before;	/* valid_from of the row buffered last */
} RunReader;

/*
 * The rows of the next sub-group a run writes without buffering them: as
 * many as a sub-group holds, or, where a relocation cuts sub-groups to fit
 * the free extents (zl_write_state_fit_free_extents), about as many as the
 * largest one left takes -- an encoded columnar sub-group's size is known
 * only once written, so the estimate leaves an eighth spare.
 */
static int
unbuffered_subgroup_rows(const RunReader *rr, const ZLFreeSpace *free_space)
{
	double		per_block = rr->state->fit_rows_per_block;
	double		fitting;

	if (per_block <= 0)
		return ZL_MAX_SUBGROUP_ROWS;
	fitting = zl_free_space_largest(free_space) * per_block * ZL_FIT_SHARE;
	return (int) Max(Min(fitting, (double) ZL_MAX_SUBGROUP_ROWS), (double) ZL_FIT_MIN_ROWS);
}

/*
 * A run whose rows came out of start order, sorted alone: its rows move
 * from its tuplestore into a sort like the one of rows to place (using
 * slot), which the run is read from.
 */
static void
sort_direct_run(ZLWriteState *state, DirectRun *run, TupleTableSlot *slot)
{
	ResourceOwner save = CurrentResourceOwner;
	MemoryContext old = MemoryContextSwitchTo(state->rows_context);

	CurrentResourceOwner = TopTransactionResourceOwner;	/* files for the flush */
	run->sorted = zl_place_begin_sort(state);
	zl_place_move_run_rows(run, run->sorted, slot);
	zl_intsort_perform(run->sorted);
	CurrentResourceOwner = save;
	MemoryContextSwitchTo(old);
}

static void
read_next(RunReader *rr)
{
	ZLWriteState *state = rr->state;

	if (!state->direct)
	{
		rr->have = zl_intsort_next(state->placesort, &rr->next);
		return;
	}
	for (; state->run_cursor < state->nruns; state->run_cursor++)
	{
		DirectRun  *run = &state->runs[state->run_cursor];

		if (run->unsorted && run->sorted == NULL)
			sort_direct_run(state, run, rr->slot);
		if (run->sorted)
			rr->have = zl_intsort_next(run->sorted, &rr->next);
		else if ((rr->have = tuplestore_gettupleslot(run->rows, true, false, rr->slot)))
			zl_sortrow_from_slot(rr->slot, PLACE_NKEYS, &rr->next, &state->row_copy);
		if (rr->have)
			return;
		if (run->sorted)
		{
			zl_intsort_end(run->sorted);	/* its memory goes to the next run */
			run->sorted = NULL;
			run->unsorted = false;
		}
	}
	rr->have = false;
}

/* does the sort's next row belong to the run being written? */
static bool
next_in_run(RunReader *rr)
{
	int64		partition;

	if (!rr->have)
		return false;
	partition = rr->next.keys[PLACE_PARTITION];
	if (run_in_history(&rr->run))
		return partition == (int64) rr->run.partition_end &&
			rr->next.keys[PLACE_WINDOW] >= rr->run.window_start &&
			rr->next.keys[PLACE_WINDOW] < rr->run.window_end;
	return (rr->run.placed ? partition == (int64) rr->run.partition_end :
			partition == PG_INT64_MIN) &&
		rr->next.keys[PLACE_WINDOW] == rr->run.window_start;
}

/*
 * Does the sort's next row belong to the sub-group being written, after
 * its first n rows (the last of them starting at last_from)?  A wide
 * window's rows come base window by base window; where local time goes
 * back by more than a base window (Sitka in 1867) a later base window may
 * hold earlier starts, and the sub-group ends there, so that its rows stay
 * in start order (a new one of the same file group takes the rest).
 */
static bool
next_in_subgroup(RunReader *rr, int n, int64 last_from)
{
	return next_in_run(rr) && (n == 0 || rr->next.keys[PLACE_FROM] >= last_from);
}

/* the run of the sort's next row: a history row's is its file group's window */
static void
start_run(RunReader *rr)
{
	int64		partition = rr->next.keys[PLACE_PARTITION];

	rr->run.placed = partition != PG_INT64_MIN;
	rr->run.partition_end = rr->run.placed ? (DateADT) partition : 0;
	rr->run.window_start = rr->next.keys[PLACE_WINDOW];
	rr->run.window_end = ZL_NO_WINDOW_END;
	if (run_in_history(&rr->run))
	{
		const ZLWindow *w = zl_place_window(rr->state, rr->run.partition_end,
											rr->run.window_start);

		rr->run.window_start = w->start;
		rr->run.window_end = w->end;
	}
}

/*
 * Write the next n rows of the run (fewer if the run ends first) as one
 * sub-group, from the buffer or straight from the sort, into blocks free
 * blocks from first_block on (InvalidBlockNumber: at the end of the file).
 * A columnar sub-group is encoded first, and then goes into the smallest
 * free extent that holds it, or at the end of the file.
 */
static void
write_subgroup(Relation rel, RunReader *rr, int n, bool from_buffer,
			   BlockNumber first_block, int32 blocks, ZLFreeSpace *free_space)
{
	ZLWriteState *state = rr->state;
	const ZLRunKey *key = &rr->run;
	ZLSubGroup	sg;
	int32		rollover_seq = 0;
	ZLPageWriter *writer = NULL;
	ZLColumnarWriter *columnar = NULL;
	bytea	   *directory = NULL;
	int			i;

	memset(&sg, 0, sizeof(sg));
	sg.placed = key->placed;
	sg.partition_end = key->partition_end;
	sg.window_start = key->window_start;
	sg.window_end = key->window_end;

	/*
	 * History sub-groups join their window's file group as they are
	 * inserted, several at once; before any other sub-group takes an id,
	 * those waiting are inserted, so ids follow the order of writing.
	 */
	sg.file_group = 0;
	if (!run_in_history(key))
	{
		zl_meta_history_inserts_flush(rr->history_inserts);
		if (key->placed)
			zl_meta_choose_file_group(state->storage_id, key->partition_end,
									  key->window_start, state->opts.max_subgroups,
									  &sg.file_group, &rollover_seq);
	}

	sg.format = run_is_columnar(state, key) ? ZL_FORMAT_COLUMNAR : ZL_FORMAT_ROWS;
	if (sg.format == ZL_FORMAT_COLUMNAR)
		columnar = zl_columnar_writer_begin(state->tupdesc, run_compression(key));
	else
		writer = first_block == InvalidBlockNumber ?
			zl_page_writer_begin(rel, InvalidBlockNumber, 0) :
			zl_page_writer_begin(rel, first_block, blocks);
	for (i = 0; i < n; i++)
	{
		ZLSortRow	buffered;
		ZLSortRow  *row = &rr->next;
		HeapTuple	tuple;
		int32		position;
		int64		from;

		if (from_buffer)
		{
			row = &buffered;
			if (!tuplestore_gettupleslot(rr->buffer, true, false, rr->buffer_slot))
				elog(ERROR, "zipper_lake sub-group buffer ended early");
			zl_sortrow_from_slot(rr->buffer_slot, PLACE_NKEYS, row, &rr->buffer_copy);
		}
		else if (!next_in_subgroup(rr, i, sg.last_start))
			break;

		CHECK_FOR_INTERRUPTS();
		tuple = &row->row;
		from = row->keys[PLACE_FROM];
		if (i == 0)
			sg.first_start = from;
		sg.last_start = from;
		position = columnar ? zl_columnar_writer_add(columnar, tuple) :
			zl_page_writer_add(writer, tuple);

		/* placed sub-groups get a key directory (zl_keys.c) */
		if (key->placed)
		{
			MemoryContext old;

			MemoryContextReset(state->row_context);
			old = MemoryContextSwitchTo(state->row_context);
			zl_key_extract(state->hasher, tuple, state->tupdesc, state->key_row);
			rr->hashes[i] = zl_key_hash(state->hasher, state->key_row);
			rr->positions[i] = position;
			MemoryContextSwitchTo(old);
		}
		if (!from_buffer)
			read_next(rr);
	}
	sg.row_count = i;
	if (columnar)
	{
		/* encoded, its size is known: the smallest free extent that holds it */
		BlockNumber pages = zl_columnar_writer_finish(columnar);

		first_block = zl_free_space_take(free_space, pages);
		writer = first_block == InvalidBlockNumber ?
			zl_page_writer_begin(rel, InvalidBlockNumber, 0) :
			zl_page_writer_begin(rel, first_block, pages);
		zl_columnar_writer_write(columnar, writer);
		zl_columnar_writer_end(columnar);
	}
	zl_page_writer_finish(writer, &sg.first_block, &sg.blocks);
	sg.first_tid_block = state->numbered ?
		zl_storage_take_tid_blocks(rel, zl_subgroup_tid_blocks(&sg), zl_meta_tid_blocks_used) : -1;

	if (key->placed)
		directory = zl_key_directory_build(rr->hashes, rr->positions, i);
	if (run_in_history(key))
		zl_meta_history_insert(rr->history_inserts, &sg, directory);
	else
	{
		(void) zl_meta_insert_subgroup(rel, &sg, rollover_seq, directory);
		if (directory)
			pfree(directory);
	}
	zl_index_entries_add(rr->index_entries, &sg);
}

/*
 * Write the next up to ZL_MAX_SUBGROUP_ROWS rows of the run.  With no free
 * extent to reuse they stream to the end of the file as one sub-group;
 * otherwise they are buffered, and their lengths decide where their
 * sub-groups go (place_subgroup): pieces in free blocks take a quarter of
 * them at least.
 */
static void
write_chunk(Relation rel, RunReader *rr, ZLFreeSpace *free_space)
{
	bool		current = rr->run.placed && rr->run.partition_end == ZL_CURRENT_PARTITION;
	BlockNumber min_piece;
	int			n = 0;

	if (zl_free_space_largest(free_space) == 0 || run_is_columnar(rr->state, &rr->run))
	{
		write_subgroup(rel, rr, unbuffered_subgroup_rows(rr, free_space), false,
					   InvalidBlockNumber, 0, free_space);
		return;
	}

	if (rr->buffer == NULL)
	{
		rr->buffer = tuplestore_begin_heap(false, false, ZL_SIDE_KB);
		rr->buffer_slot = MakeSingleTupleTableSlot(rr->state->place_desc,
												   &TTSOpsMinimalTuple);
		rr->buffer_copy.context = CurrentMemoryContext;
	}
	tuplestore_clear(rr->buffer);
	while (n < ZL_MAX_SUBGROUP_ROWS &&
		   next_in_subgroup(rr, n, n > 0 ? rr->next_from_before : 0))
	{
		rr->next_from_before = rr->next.keys[PLACE_FROM];
		tuplestore_puttupleslot(rr->buffer,
								zl_sortrow_to_slot(rr->next.keys, PLACE_NKEYS, &rr->next.row,
												   rr->state->place_slot,
												   &rr->state->payload));
		rr->lengths[n++] = rr->next.row.t_len;
		read_next(rr);
	}
	min_piece = Max(ZL_MIN_REUSE_BLOCKS, pages_at_least(rr->lengths, n) / 4);
	for (int done = 0; done < n;)
	{
		BlockNumber first_block;
		int32		blocks;
		int			take = place_subgroup(free_space, rr->lengths + done, n - done, current,
										  min_piece, &first_block, &blocks);

		write_subgroup(rel, rr, take, true, first_block, blocks, free_space);
		done += take;
	}
}

/* write the rows to place, run by run in placement order */
void
zl_write_placed(ZLWriteState *state, Relation rel)
{
	ZLFreeSpace *free_space;
	RunReader	rr;
	MemoryContext old = MemoryContextSwitchTo(state->rows_context);

	zl_place_plan_windows(state, rel);
	if (state->direct)
		qsort(state->runs, state->nruns, sizeof(DirectRun), zl_place_direct_run_cmp);
	else
		zl_intsort_perform(state->placesort);
	free_space = zl_free_space_begin(rel, state->storage_id);
	if (state->reuse_below != 0)
		zl_free_space_limit(free_space, state->reuse_below);

	memset(&rr, 0, sizeof(rr));
	rr.state = state;
	rr.slot = state->place_read_slot;
	rr.lengths = palloc(sizeof(uint32) * ZL_MAX_SUBGROUP_ROWS);
	rr.hashes = palloc(sizeof(uint32) * ZL_MAX_SUBGROUP_ROWS);
	rr.positions = palloc(sizeof(int32) * ZL_MAX_SUBGROUP_ROWS);
	rr.history_inserts = zl_meta_history_inserts_begin(rel);
	rr.index_entries = zl_index_entries_begin(rel);
	read_next(&rr);
	while (rr.have)
	{
		start_run(&rr);
		while (next_in_run(&rr))
			write_chunk(rel, &rr, free_space);
	}
	zl_meta_history_inserts_end(rr.history_inserts);
	/* every catalog row of the write is in: unique checks find the rows */
	zl_index_entries_end(rr.index_entries);
	if (rr.buffer)
		tuplestore_end(rr.buffer);
	zl_free_space_end(free_space);
	MemoryContextSwitchTo(old);
}
