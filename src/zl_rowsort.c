/*-------------------------------------------------------------------------
 *
 * zl_rowsort.c
 *	  Rows carried through tuplesorts.
 *
 * A flush sorts rows by values computed from them: loaded rows by key
 * hash and start (zl_load.c), rows to place by partition, window and start
 * (zl_write.c).  A sort tuple holds those integer columns, which the sort
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
#include "zipper_lake.h"

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

/*
 * The row as a bytea for a sort tuple, in the payload's buffer (grown in
 * its memory context), valid until the next call.
 */
Datum
zl_rowsort_payload(ZLRowPayload *payload, HeapTuple tuple)
{
	Size		size = VARHDRSZ + tuple->t_len;

	if (size > payload->size)
	{
		if (payload->buffer)
			pfree(payload->buffer);
		payload->size = Max(size, 2 * payload->size);
		payload->buffer = MemoryContextAlloc(payload->context, payload->size);
	}
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
uint32
zl_rowsort_row_length(TupleTableSlot *slot, AttrNumber attnum)
{
	bool		isnull;

	return VARSIZE_ANY_EXHDR(DatumGetPointer(slot_getattr(slot, attnum, &isnull)));
}

/* the row a sort tuple carries, copied to aligned memory at buffer */
void
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
 * comparison.  So a ZLIntSort keeps its tuples in an array, each with its
 * key columns extracted, and sorts that with a comparison specialized for
 * it (lib/sort_template.h) — while they fit in its memory.  The tuple that
 * would pass that moves every tuple into a tuplesort, which spills; the
 * sort goes on there.  Either way the rows come out in the same order:
 * ascending by the key columns, which make every row distinct.
 */
typedef struct IntSortItem
{
	int64		keys[5];
	MinimalTuple tuple;
} IntSortItem;

struct ZLIntSort
{
	TupleDesc	desc;
	int			nkeys;
	AttrNumber	attnums[5];
	int			work_mem_kb;
	bool		pending;		/* files on the top transaction's resource owner */
	MemoryContext context;		/* the sort's; items live in a child of it */
	MemoryContext item_context;
	IntSortItem *items;
	int			nitems;
	int			maxitems;
	int			next;			/* the next item to return */
	Size		tuple_bytes;	/* the items' tuples take */
	Tuplesortstate *spilled;	/* the tuplesort, once they did not fit */
	TupleTableSlot *move_slot;	/* items into it */
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

/*
 * A sort on up to five integer columns (int4 or int8) of desc, ascending,
 * in work_mem_kb, in the current memory context; pending: its rows may
 * outlive the statement (see the header comment).
 */
ZLIntSort *
zl_intsort_begin(TupleDesc desc, int nkeys, const AttrNumber *attnums, int work_mem_kb,
				 bool pending)
{
	ZLIntSort  *s = palloc0(sizeof(ZLIntSort));

	Assert(nkeys <= lengthof(s->attnums));
	s->desc = desc;
	s->nkeys = nkeys;
	memcpy(s->attnums, attnums, sizeof(AttrNumber) * nkeys);
	s->work_mem_kb = work_mem_kb;
	s->pending = pending;
	s->context = CurrentMemoryContext;
	s->item_context = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake sort items",
											ALLOCSET_DEFAULT_SIZES);
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

	s->spilled = zl_rowsort_begin(s->desc, s->nkeys, s->attnums, s->work_mem_kb);
	s->move_slot = MakeSingleTupleTableSlot(s->desc, &TTSOpsMinimalTuple);
	MemoryContextSwitchTo(old);
	for (int i = 0; i < s->nitems; i++)
	{
		ExecStoreMinimalTuple(s->items[i].tuple, s->move_slot, false);
		put_spilled(s, s->move_slot);
		ExecClearTuple(s->move_slot);
		pfree(s->items[i].tuple);	/* the tuplesort's copy takes its place */
	}
	MemoryContextReset(s->item_context);
	s->items = NULL;
	s->nitems = s->maxitems = 0;
	s->tuple_bytes = 0;
}

void
zl_intsort_put(ZLIntSort *s, TupleTableSlot *slot)
{
	MemoryContext old;
	IntSortItem *item;

	if (s->spilled == NULL &&
		s->tuple_bytes + sizeof(IntSortItem) * s->maxitems > (Size) s->work_mem_kb * 1024)
		spill(s);
	if (s->spilled != NULL)
	{
		put_spilled(s, slot);
		return;
	}
	old = MemoryContextSwitchTo(s->item_context);
	if (s->nitems == s->maxitems)
	{
		s->maxitems = Max(1024, s->maxitems * 2);
		s->items = s->items == NULL ? palloc(sizeof(IntSortItem) * s->maxitems) :
			repalloc_huge(s->items, sizeof(IntSortItem) * s->maxitems);
	}
	item = &s->items[s->nitems++];
	for (int k = 0; k < s->nkeys; k++)
	{
		bool		isnull;
		Datum		value = slot_getattr(slot, s->attnums[k], &isnull);

		item->keys[k] = TupleDescAttr(s->desc, s->attnums[k] - 1)->atttypid == INT4OID ?
			(int64) DatumGetInt32(value) : DatumGetInt64(value);
	}
	item->tuple = ExecCopySlotMinimalTuple(slot);
	s->tuple_bytes += GetMemoryChunkSpace(item->tuple);
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

/*
 * The next row in order into slot (a minimal tuple slot of the sort's
 * descriptor), valid until the next call; false at the end.
 */
bool
zl_intsort_get(ZLIntSort *s, TupleTableSlot *slot)
{
	if (s->spilled != NULL)
		return tuplesort_gettupleslot(s->spilled, true, false, slot, NULL);
	if (s->next >= s->nitems)
	{
		ExecClearTuple(slot);
		return false;
	}
	/* sorted, the rows are read far from where they were put */
	if (s->next + ZL_INTSORT_PREFETCH < s->nitems)
		ZL_PREFETCH(s->items[s->next + ZL_INTSORT_PREFETCH].tuple);
	ExecStoreMinimalTuple(s->items[s->next++].tuple, slot, false);
	return true;
}

void
zl_intsort_end(ZLIntSort *s)
{
	if (s->spilled != NULL)
	{
		tuplesort_end(s->spilled);
		ExecDropSingleTupleTableSlot(s->move_slot);
	}
	MemoryContextDelete(s->item_context);
	pfree(s);
}
