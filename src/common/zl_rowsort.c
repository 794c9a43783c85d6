/*-------------------------------------------------------------------------
 *
 * zl_rowsort.c
 *	  Rows carried through tuplesorts.
 *
 * A flush sorts rows by values computed from them: loaded rows by key
 * hash and start (zl_load.c), rows to place by partition, window and start
 * (zl_place.c).  A sort tuple holds those integer columns, which the sort
 * compares, and the row itself as a bytea column, which it only carries.
 * The sorts spill to temporary files beyond their memory (zl_write.c,
 * "Memory").
 *
 * The two sorts of a write state's pending rows may hold rows past the
 * statement that added them, so their temporary files belong to the top
 * transaction (files are created on the resource owner current when a sort
 * spills): rows go into them with zl_rowsort_put_pending and they are
 * sorted with zl_rowsort_perform_pending.  Sorts that live within one
 * flush use tuplesort's own calls.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"

#include "catalog/pg_operator_d.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/tuplesort.h"

/* slots to put tuples of a sort descriptor (virtual) and to read them */
void
zl_rowsort_slots(TupleDesc desc, TupleTableSlot **put, TupleTableSlot **read)
{
	*put = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	*read = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
}

/*
 * A sort on up to five integer columns (int4 or int8) of desc, ascending,
 * in the current memory context.
 */
Tuplesortstate *
zl_rowsort_begin(TupleDesc desc, int nkeys, const AttrNumber *attnums, int work_mem_kb)
{
	AttrNumber	columns[5];
	Oid			operators[5];
	Oid			collations[5] = {0};
	bool		nulls_first[5] = {0};

	Assert(nkeys <= lengthof(columns));
	for (int i = 0; i < nkeys; i++)
	{
		columns[i] = attnums[i];
		operators[i] = TupleDescAttr(desc, attnums[i] - 1)->atttypid == INT4OID ?
			Int4LessOperator : Int8LessOperator;
	}
	return tuplesort_begin_heap(desc, nkeys, columns, operators, collations, nulls_first,
								work_mem_kb, NULL, TUPLESORT_NONE);
}

/* put a tuple into a sort of pending rows (see the header comment) */
void
zl_rowsort_put_pending(Tuplesortstate *sort, TupleTableSlot *slot)
{
	ResourceOwner save = CurrentResourceOwner;

	CurrentResourceOwner = TopTransactionResourceOwner;
	tuplesort_puttupleslot(sort, slot);
	CurrentResourceOwner = save;
}

/* sort the pending rows (see the header comment) */
void
zl_rowsort_perform_pending(Tuplesortstate *sort)
{
	ResourceOwner save = CurrentResourceOwner;

	CurrentResourceOwner = TopTransactionResourceOwner;
	tuplesort_performsort(sort);
	CurrentResourceOwner = save;
}

/* room for size bytes in a payload's buffer (what it held is lost) */
static void
payload_reserve(ZLRowPayload *payload, Size size)
{
	if (size > payload->size)
	{
		if (payload->buffer)
			pfree(payload->buffer);
		payload->size = Max(size, 2 * payload->size);
		payload->buffer = MemoryContextAlloc(payload->context, payload->size);
	}
}

/*
 * The row as a bytea for a sort tuple, in the payload's buffer (grown in
 * its memory context), valid until the next call.
 */
Datum
zl_rowsort_payload(ZLRowPayload *payload, HeapTuple tuple)
{
	Size		size = VARHDRSZ + tuple->t_len;

	payload_reserve(payload, size);
	SET_VARSIZE(payload->buffer, size);
	memcpy(VARDATA(payload->buffer), tuple->t_data, tuple->t_len);
	return PointerGetDatum(payload->buffer);
}

int64
zl_rowsort_int8(TupleTableSlot *slot, AttrNumber attnum)
{
	bool		isnull;

	return DatumGetInt64(slot_getattr(slot, attnum, &isnull));
}

/* length of the row a sort tuple carries */
static uint32
zl_rowsort_row_length(TupleTableSlot *slot, AttrNumber attnum)
{
	bool		isnull;

	return VARSIZE_ANY_EXHDR(DatumGetPointer(slot_getattr(slot, attnum, &isnull)));
}

/* the row a sort tuple carries, copied to aligned memory at buffer */
static void
zl_rowsort_row_into(TupleTableSlot *slot, AttrNumber attnum, HeapTuple tuple, char *buffer)
{
	bool		isnull;
	Pointer		p = DatumGetPointer(slot_getattr(slot, attnum, &isnull));

	tuple->t_len = VARSIZE_ANY_EXHDR(p);
	tuple->t_data = (HeapTupleHeader) buffer;
	tuple->t_tableOid = InvalidOid;
	ItemPointerSetInvalid(&tuple->t_self);
	memcpy(buffer, VARDATA_ANY(p), tuple->t_len);
}

/* the row a sort tuple carries, as a palloc'd tuple */
HeapTuple
zl_rowsort_row_copy(TupleTableSlot *slot, AttrNumber attnum)
{
	HeapTuple	tuple = palloc(HEAPTUPLESIZE + zl_rowsort_row_length(slot, attnum));

	zl_rowsort_row_into(slot, attnum, tuple, (char *) tuple + HEAPTUPLESIZE);
	return tuple;
}

/* ---------- sorts that stay in memory while they fit ---------- */

/*
 * A tuplesort on integer columns compares the first one through its
 * datum1 and every tie through heap_getattr on both tuples; the sort of
 * rows to place ties on its first column (the run) for nearly every
 * comparison.  So a ZLIntSort keeps its rows in an array, each a copy of
 * the row with its keys beside it, and sorts that with a comparison
 * specialized for it (lib/sort_template.h) -- while they fit in its
 * memory.  The row that would pass that moves every row into a tuplesort,
 * which spills; the sort goes on there.  Either way the rows come out in
 * the same order: ascending by the keys, which make every row distinct.
 *
 * Its sort tuples (for the tuplesort, and for tuplestores that feed it)
 * hold the keys as int8 columns 1 to nkeys and the row as a bytea column
 * after them: zl_sortrow_to_slot and zl_sortrow_from_slot.  A row in the
 * array is never formed into one.
 */
typedef struct IntSortItem
{
	int64		keys[ZL_SORTROW_MAX_KEYS];
	HeapTuple	row;
} IntSortItem;

struct ZLIntSort
{
	TupleDesc	desc;
	int			nkeys;
	int			work_mem_kb;
	bool		pending;		/* files on the top transaction's resource owner */
	MemoryContext context;		/* the sort's; items live in a child of it */
	MemoryContext item_context;
	IntSortItem *items;
	int			nitems;
	int			maxitems;
	int			next;			/* the next item to return */
	Size		row_bytes;		/* the items' rows take */
	Tuplesortstate *spilled;	/* the tuplesort, once they did not fit */
	TupleTableSlot *put_slot;	/* virtual: rows into it */
	TupleTableSlot *read_slot;	/* minimal: rows out of it */
	ZLRowPayload payload;		/* a row's bytea going into the tuplesort */
	ZLRowPayload row_copy;		/* the aligned copy of a row read from a sort tuple */
};

static inline int
int_sort_item_cmp(const IntSortItem *a, const IntSortItem *b, int *nkeys)
{
	for (int k = 0; k < *nkeys; k++)
		if (a->keys[k] != b->keys[k])
			return a->keys[k] < b->keys[k] ? -1 : 1;
	return 0;
}

#define ST_SORT sort_int_items
#define ST_ELEMENT_TYPE IntSortItem
#define ST_COMPARE(a, b, arg) int_sort_item_cmp(a, b, arg)
#define ST_COMPARE_ARG_TYPE int
#define ST_CHECK_FOR_INTERRUPTS
#define ST_SCOPE static
#define ST_DECLARE
#define ST_DEFINE
#include "lib/sort_template.h"

/* the keys of a sort tuple */
static void
slot_keys(TupleTableSlot *slot, int nkeys, int64 *keys)
{
	for (int k = 0; k < nkeys; k++)
		keys[k] = zl_rowsort_int8(slot, k + 1);
}

/* the sort tuple of a row and its keys, in a virtual slot of the descriptor */
TupleTableSlot *
zl_sortrow_to_slot(const int64 *keys, int nkeys, HeapTuple row, TupleTableSlot *slot,
				   ZLRowPayload *payload)
{
	ExecClearTuple(slot);
	memset(slot->tts_isnull, 0, sizeof(bool) * (nkeys + 1));
	for (int k = 0; k < nkeys; k++)
		slot->tts_values[k] = Int64GetDatum(keys[k]);
	slot->tts_values[nkeys] = zl_rowsort_payload(payload, row);
	return ExecStoreVirtualTuple(slot);
}

/*
 * The keys and the row of a sort tuple; the row is copied to aligned
 * memory in buffer's and is valid until buffer is used again.
 */
void
zl_sortrow_from_slot(TupleTableSlot *slot, int nkeys, ZLSortRow *out, ZLRowPayload *buffer)
{
	slot_keys(slot, nkeys, out->keys);
	payload_reserve(buffer, zl_rowsort_row_length(slot, nkeys + 1));
	zl_rowsort_row_into(slot, nkeys + 1, &out->row, (char *) buffer->buffer);
}

/*
 * A sort of rows by nkeys (up to ZL_SORTROW_MAX_KEYS) integer keys,
 * ascending, in work_mem_kb, in the current memory context; desc is its
 * sort tuples' (see above); pending: its rows may outlive the statement
 * (see the header comment).
 */
ZLIntSort *
zl_intsort_begin(TupleDesc desc, int nkeys, int work_mem_kb, bool pending)
{
	ZLIntSort  *s = palloc0(sizeof(ZLIntSort));

	Assert(nkeys <= ZL_SORTROW_MAX_KEYS && desc->natts == nkeys + 1);
	s->desc = desc;
	s->nkeys = nkeys;
	s->work_mem_kb = work_mem_kb;
	s->pending = pending;
	s->context = CurrentMemoryContext;
	s->item_context = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake sort items",
											ALLOCSET_DEFAULT_SIZES);
	s->payload.context = CurrentMemoryContext;
	s->row_copy.context = CurrentMemoryContext;
	return s;
}

static void
put_spilled(ZLIntSort *s, TupleTableSlot *slot)
{
	if (s->pending)
		zl_rowsort_put_pending(s->spilled, slot);
	else
		tuplesort_puttupleslot(s->spilled, slot);
}

/* the items do not fit: on into a tuplesort */
static void
spill(ZLIntSort *s)
{
	MemoryContext old = MemoryContextSwitchTo(s->context);
	AttrNumber	attnums[ZL_SORTROW_MAX_KEYS];

	for (int k = 0; k < s->nkeys; k++)
		attnums[k] = k + 1;
	s->spilled = zl_rowsort_begin(s->desc, s->nkeys, attnums, s->work_mem_kb);
	zl_rowsort_slots(s->desc, &s->put_slot, &s->read_slot);
	MemoryContextSwitchTo(old);
	for (int i = 0; i < s->nitems; i++)
	{
		put_spilled(s, zl_sortrow_to_slot(s->items[i].keys, s->nkeys, s->items[i].row,
										  s->put_slot, &s->payload));
		heap_freetuple(s->items[i].row);	/* the tuplesort's copy takes its place */
	}
	MemoryContextReset(s->item_context);
	s->items = NULL;
	s->nitems = s->maxitems = 0;
	s->row_bytes = 0;
}

/* are the rows still kept in memory?  They move into a tuplesort once they would not fit */
static bool
rows_in_memory(ZLIntSort *s)
{
	if (s->spilled == NULL &&
		s->row_bytes + sizeof(IntSortItem) * s->maxitems > (Size) s->work_mem_kb * 1024)
		spill(s);
	return s->spilled == NULL;
}

/* keep a row (a copy in the item context) with its keys */
static void
add_item(ZLIntSort *s, const int64 *keys, HeapTuple row)
{
	IntSortItem *item;

	if (s->nitems == s->maxitems)
	{
		s->maxitems = Max(1024, s->maxitems * 2);
		s->items = s->items == NULL ?
			MemoryContextAlloc(s->item_context, sizeof(IntSortItem) * s->maxitems) :
			repalloc_huge(s->items, sizeof(IntSortItem) * s->maxitems);
	}
	item = &s->items[s->nitems++];
	memcpy(item->keys, keys, sizeof(int64) * s->nkeys);
	item->row = row;
	s->row_bytes += GetMemoryChunkSpace(row);
}

/* add a row (copied) with its keys */
void
zl_intsort_put(ZLIntSort *s, const int64 *keys, HeapTuple row)
{
	MemoryContext old;

	if (!rows_in_memory(s))
	{
		put_spilled(s, zl_sortrow_to_slot(keys, s->nkeys, row, s->put_slot, &s->payload));
		return;
	}
	old = MemoryContextSwitchTo(s->item_context);
	add_item(s, keys, heap_copytuple(row));
	MemoryContextSwitchTo(old);
}

/* add the row of a sort tuple (of the sort's descriptor) */
void
zl_intsort_put_slot(ZLIntSort *s, TupleTableSlot *slot)
{
	int64		keys[ZL_SORTROW_MAX_KEYS];
	MemoryContext old;

	if (!rows_in_memory(s))
	{
		put_spilled(s, slot);
		return;
	}
	slot_keys(slot, s->nkeys, keys);
	old = MemoryContextSwitchTo(s->item_context);
	add_item(s, keys, zl_rowsort_row_copy(slot, s->nkeys + 1));
	MemoryContextSwitchTo(old);
}

void
zl_intsort_perform(ZLIntSort *s)
{
	if (s->spilled == NULL)
		sort_int_items(s->items, s->nitems, &s->nkeys);
	else if (s->pending)
		zl_rowsort_perform_pending(s->spilled);
	else
		tuplesort_performsort(s->spilled);
	s->next = 0;
}

/* rows ahead of the one read whose first bytes are fetched meanwhile */
#define ZL_INTSORT_PREFETCH		8

/* the next row in order with its keys, valid until the next call; false at the end */
bool
zl_intsort_next(ZLIntSort *s, ZLSortRow *out)
{
	IntSortItem *item;

	if (s->spilled != NULL)
	{
		if (!tuplesort_gettupleslot(s->spilled, true, false, s->read_slot, NULL))
			return false;
		zl_sortrow_from_slot(s->read_slot, s->nkeys, out, &s->row_copy);
		return true;
	}
	if (s->next >= s->nitems)
		return false;
	/*
	 * Sorted, the rows are read far from where they were put: the first
	 * two cache lines of each copy (its HeapTupleData, then its data) are
	 * fetched a few rows ahead, from the item's pointer alone (following
	 * t_data would wait for the first line).
	 */
	if (s->next + ZL_INTSORT_PREFETCH < s->nitems)
	{
		char	   *ahead = (char *) s->items[s->next + ZL_INTSORT_PREFETCH].row;

		ZL_PREFETCH(ahead);
		ZL_PREFETCH(ahead + 64);
	}
	item = &s->items[s->next++];
	memcpy(out->keys, item->keys, sizeof(int64) * s->nkeys);
	out->row = *item->row;
	return true;
}

void
zl_intsort_end(ZLIntSort *s)
{
	if (s->spilled != NULL)
	{
		tuplesort_end(s->spilled);
		ExecDropSingleTupleTableSlot(s->put_slot);
		ExecDropSingleTupleTableSlot(s->read_slot);
	}
	MemoryContextDelete(s->item_context);
	if (s->payload.buffer)
		pfree(s->payload.buffer);
	if (s->row_copy.buffer)
		pfree(s->row_copy.buffer);
	pfree(s);
}
