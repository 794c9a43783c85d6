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
