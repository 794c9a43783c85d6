/*-------------------------------------------------------------------------
 *
 * zl_record.c
 *	  The change record: what a key's versions do not show.
 *
 * README "Change semantics" makes a key's history the fold of every change
 * ever applied to it (zl_fold.c).  The versions show most of that; the
 * record keeps the rest, per key: the instants that are no version
 * boundary (no-op upserts, deletes of an absent key, boundaries later
 * merged away) and the seq of instants a change with seq won.  Each
 * remembered instant carries the kind of its winning change, which the
 * versions also imply (verify compares the two).
 *
 * Layout
 * ------
 * The record is a list of immutable *pieces*, one per application that
 * changed it, oldest first (piece ids come from the extension's sequence,
 * and writers of a table serialize).  A piece holds one *entry* per key
 * it changed — the key, a time `since` and the key's remembered instants
 * at or after it — and replaces what older pieces remember of that key
 * from `since` on.  A piece is cut into *segments* of about
 * ZL_RECORD_SEGMENT_BYTES, rows of zipper_lake.record_segment (MVCC,
 * WAL-logged, dumped with the table by pg_dump as extension configuration)
 * holding the entries in key-hash order and their hash range and newest
 * instant, so a batch reads only segments of its chunk's hash range that
 * hold an instant at or after its earliest change: an in-order stream
 * reads none.
 *
 * Encoding (varints; a segment's first entry starts from zero):
 *		hash delta, key columns (integers as zigzag varints, others in
 *		binary send format, length-prefixed),
 *		header (instants << 1 | has overridden), since delta (zigzag),
 *		[overridden - since], then per instant
 *		(delta from the previous instant or since) << 3 | has_payload << 2 |
 *		has_seq << 1 | is_delete, [seq (zigzag)], [payload].
 * A no-op remembered for an integer key takes about 12 bytes (a hash
 * delta of 3, a key of 3 for a million keys, a since of 6 for a time
 * within a day's microseconds).  The payload
 * is what an instant's changes gave beyond its kind: a kind varint, then
 * for a partial change (README "Partial changes") a bit per column (by
 * attribute number) it set; for columns another change at the instant
 * gave than its winner, who (attnum, seq); with tracked columns (README
 * "Tracked columns") the untracked values of an instant whose version
 * shows another's (attnum, length, binary send format).
 *
 * Merging
 * -------
 * After each application the two newest pieces are merged while the older
 * is at most twice the size of the newer, like the levels of an LSM tree,
 * so a table has O(log size) pieces and a key's probe does not grow with
 * the number of batches.  Merging streams both pieces segment by segment
 * (bounded memory); into the oldest piece, replaced instants and empty
 * entries drop out.
 *
 * The table-wide part of the record (the newest change time applied, and
 * the instants of apply_snapshot with deletes) is one row of
 * zipper_lake.record_head (zl_meta_record.c).
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog_internal.h"
#include "common/zl_varint.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"

/* entries are cut into segments of about this size */
#define ZL_RECORD_SEGMENT_BYTES		(64 * 1024)

/* bytes of a partial change's bitmap of given columns */
#define GIVEN_BYTES(codec)		(((codec)->natts + 7) / 8)

/* the low bits of an instant's varint */
#define INSTANT_IS_DELETE		0x1
#define INSTANT_HAS_SEQ			0x2
#define INSTANT_HAS_PAYLOAD		0x4
#define INSTANT_FLAG_BITS		3

struct ZLRecordCodec
{
	TupleDesc	tupdesc;
	FmgrInfo   *column_send;	/* natts, looked up when first needed */
	FmgrInfo   *column_receive;
	Oid		   *column_ioparam;
	int			natts;
	int			nkeys;
	AttrNumber	attnums[INDEX_MAX_KEYS];
	FmgrInfo	send[INDEX_MAX_KEYS];
	FmgrInfo	receive[INDEX_MAX_KEYS];
	Oid			ioparam[INDEX_MAX_KEYS];
	int32		typmod[INDEX_MAX_KEYS];
	int16		typlen[INDEX_MAX_KEYS];
	bool		typbyval[INDEX_MAX_KEYS];
	Oid			integer[INDEX_MAX_KEYS];	/* INT2OID, INT4OID, INT8OID (of a domain's base): as a varint */
	const ZLKeyHasher *hasher;
};

/* a segment being written */
struct ZLRecordWriter
{
	ZLRecordCodec *codec;
	StringInfoData buf;
	bool		empty;
	uint32		prev_hash;
	int64		prev_since;
	uint32		hash_lo;
	int64		newest;
	int64		instants;
	Tuplestorestate *segments;	/* (hash_lo, hash_hi, newest, instants, entries) */
	TupleDesc	desc;
	TupleTableSlot *slot;
	int			nsegments;
	MemoryContext context;		/* the writer's: entries come from shorter-lived ones */
};

/* ---------- varints (common/zl_varint.h) ---------- */

static void
put_varint(StringInfo buf, uint64 v)
{
	zl_varint_append(buf, v);
}

static void
put_zigzag(StringInfo buf, int64 v)
{
	zl_varint_append(buf, zl_zigzag(v));
}

typedef struct Reader
{
	const char *p;
	const char *end;
} Reader;

static uint64
get_varint(Reader *r)
{
	uint64		v;

	if (!zl_varint_get(&r->p, r->end, &v))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("change record segment is damaged"),
				 errhint("zipper_lake.verify() reports the table's state.")));
	return v;
}

static int64
get_zigzag(Reader *r)
{
	return zl_unzigzag(get_varint(r));
}

/* ---------- keys ---------- */

ZLRecordCodec *
zl_record_codec_create(TupleDesc tupdesc, const ZLTableOptions *opts, const ZLKeyHasher *hasher)
{
	ZLRecordCodec *codec = palloc0(sizeof(ZLRecordCodec));

	codec->tupdesc = tupdesc;
	codec->column_send = palloc0(sizeof(FmgrInfo) * tupdesc->natts);
	codec->column_receive = palloc0(sizeof(FmgrInfo) * tupdesc->natts);
	codec->column_ioparam = palloc0(sizeof(Oid) * tupdesc->natts);
	codec->natts = tupdesc->natts;
	codec->nkeys = opts->nkeys;
	codec->hasher = hasher;
	for (int i = 0; i < opts->nkeys; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, opts->key_attnums[i] - 1);
		Oid			send,
					receive,
					base;
		bool		varlena;

		codec->attnums[i] = opts->key_attnums[i];
		codec->typmod[i] = att->atttypmod;
		codec->typlen[i] = att->attlen;
		codec->typbyval[i] = att->attbyval;
		base = getBaseType(att->atttypid);
		if (base == INT2OID || base == INT4OID || base == INT8OID)
			codec->integer[i] = base;
		getTypeBinaryOutputInfo(att->atttypid, &send, &varlena);
		getTypeBinaryInputInfo(att->atttypid, &receive, &codec->ioparam[i]);
		fmgr_info(send, &codec->send[i]);
		fmgr_info(receive, &codec->receive[i]);
	}
	return codec;
}

static void
put_key(const ZLRecordCodec *codec, StringInfo buf, const Datum *key)
{
	for (int i = 0; i < codec->nkeys; i++)
	{
		Datum		value = key[codec->attnums[i] - 1];
		bytea	   *b;

		if (codec->integer[i] != InvalidOid)
		{
			put_zigzag(buf, codec->integer[i] == INT8OID ? DatumGetInt64(value) :
					   codec->integer[i] == INT4OID ? DatumGetInt32(value) : DatumGetInt16(value));
			continue;
		}
		b = SendFunctionCall((FmgrInfo *) &codec->send[i], value);
		put_varint(buf, VARSIZE(b) - VARHDRSZ);
		appendBinaryStringInfo(buf, VARDATA(b), VARSIZE(b) - VARHDRSZ);
		pfree(b);
	}
}

static Datum *
get_key(const ZLRecordCodec *codec, Reader *r)
{
	Datum	   *key = palloc0(sizeof(Datum) * codec->natts);

	for (int i = 0; i < codec->nkeys; i++)
	{
		uint64		len;
		StringInfoData value;

		if (codec->integer[i] != InvalidOid)
		{
			int64		v = get_zigzag(r);

			if ((codec->integer[i] == INT4OID && (v < PG_INT32_MIN || v > PG_INT32_MAX)) ||
				(codec->integer[i] == INT2OID && (v < PG_INT16_MIN || v > PG_INT16_MAX)))
				ereport(ERROR,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("change record segment is damaged"),
						 errhint("zipper_lake.verify() reports the table's state.")));
			key[codec->attnums[i] - 1] = codec->integer[i] == INT8OID ? Int64GetDatum(v) :
				codec->integer[i] == INT4OID ? Int32GetDatum((int32) v) : Int16GetDatum((int16) v);
			continue;
		}
		len = get_varint(r);
		if (len > (uint64) (r->end - r->p))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("change record segment is damaged"),
					 errhint("zipper_lake.verify() reports the table's state.")));
		initStringInfo(&value);
		appendBinaryStringInfo(&value, (const char *) r->p, (int) len);
		r->p += len;
		key[codec->attnums[i] - 1] =
			ReceiveFunctionCall((FmgrInfo *) &codec->receive[i], &value,
								codec->ioparam[i], codec->typmod[i]);
		pfree(value.data);
	}
	return key;
}

/* ---------- payloads: what a change gave beyond its kind ---------- */

#define PAYLOAD_GIVEN			0x1 /* the columns a partial change gave */
#define PAYLOAD_UNTRACKED		0x2 /* untracked values */
#define PAYLOAD_GIVERS			0x4 /* columns another change at the instant gave */

static void
damaged(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("change record segment is damaged"),
			 errhint("zipper_lake.verify() reports the table's state.")));
}

static void
column_io(ZLRecordCodec *codec, AttrNumber attnum)
{
	Form_pg_attribute att;
	Oid			func;
	bool		varlena;

	if (attnum < 1 || attnum > codec->natts)
		damaged();
	if (OidIsValid(codec->column_send[attnum - 1].fn_oid))
		return;
	att = TupleDescAttr(codec->tupdesc, attnum - 1);
	getTypeBinaryOutputInfo(att->atttypid, &func, &varlena);
	fmgr_info(func, &codec->column_send[attnum - 1]);
	getTypeBinaryInputInfo(att->atttypid, &func, &codec->column_ioparam[attnum - 1]);
	fmgr_info(func, &codec->column_receive[attnum - 1]);
}

static void
put_payload(const ZLRecordCodec *codec, StringInfo buf, const ZLRecordInstant *in)
{
	put_varint(buf, (in->given ? PAYLOAD_GIVEN : 0) | (in->untracked ? PAYLOAD_UNTRACKED : 0) |
			   (in->ngivers > 0 ? PAYLOAD_GIVERS : 0));
	if (in->given != NULL)
	{
		put_varint(buf, GIVEN_BYTES(codec));
		appendBinaryStringInfo(buf, (const char *) in->given, GIVEN_BYTES(codec));
	}
	if (in->ngivers > 0)
	{
		put_varint(buf, in->ngivers);
		for (int i = 0; i < in->ngivers; i++)
		{
			put_varint(buf, in->giver_attnums[i]);
			put_varint(buf, (uint64) in->givers[i].has_seq | ((uint64) in->givers[i].earlier << 1));
			put_zigzag(buf, in->givers[i].seq);
		}
	}
	if (in->untracked != NULL)
	{
		const ZLUntrackedValues *u = in->untracked;

		put_varint(buf, u->n);
		for (int i = 0; i < u->n; i++)
		{
			bytea	   *b;

			put_varint(buf, u->attnums[i]);
			if (u->isnull[i])
			{
				put_varint(buf, 0);
				continue;
			}
			column_io((ZLRecordCodec *) codec, u->attnums[i]);
			b = SendFunctionCall(&codec->column_send[u->attnums[i] - 1], u->values[i]);
			put_varint(buf, VARSIZE(b) - VARHDRSZ + 1);
			appendBinaryStringInfo(buf, VARDATA(b), VARSIZE(b) - VARHDRSZ);
			pfree(b);
		}
	}
}

/* a bitmap of columns (those added since it was written are not in it) */
static const uint8 *
get_given(const ZLRecordCodec *codec, Reader *r)
{
	uint64		len = get_varint(r);
	uint8	   *given;

	if (len > (uint64) (r->end - r->p))
		damaged();
	given = palloc0(Max(len, GIVEN_BYTES(codec)));
	memcpy(given, r->p, len);
	r->p += len;
	return given;
}

static void
get_payload(const ZLRecordCodec *codec, Reader *r, ZLRecordInstant *in)
{
	uint64		kind = get_varint(r);

	if (kind & PAYLOAD_GIVEN)
		in->given = get_given(codec, r);
	if (kind & PAYLOAD_GIVERS)
	{
		uint64		n = get_varint(r);
		AttrNumber *attnums;
		ZLGiver    *givers;

		if (n > (uint64) codec->natts)
			damaged();
		attnums = palloc(sizeof(AttrNumber) * Max(1, n));
		givers = palloc(sizeof(ZLGiver) * Max(1, n));
		for (uint64 i = 0; i < n; i++)
		{
			uint64		flags;

			attnums[i] = (AttrNumber) get_varint(r);
			flags = get_varint(r);
			givers[i].set = true;
			givers[i].has_seq = (flags & 1) != 0;
			givers[i].earlier = (flags & 2) != 0;
			givers[i].seq = get_zigzag(r);
		}
		in->ngivers = (int) n;
		in->giver_attnums = attnums;
		in->givers = givers;
	}
	if (kind & PAYLOAD_UNTRACKED)
	{
		ZLUntrackedValues *u = palloc(sizeof(ZLUntrackedValues));
		uint64		n = get_varint(r);

		if (n > (uint64) codec->natts)
			damaged();
		u->attnums = palloc(sizeof(AttrNumber) * Max(1, n));
		u->values = palloc(sizeof(Datum) * Max(1, n));
		u->isnull = palloc(sizeof(bool) * Max(1, n));
		u->n = 0;
		for (uint64 k = 0; k < n; k++)
		{
			int			i = u->n;
			uint64		len;
			StringInfoData value;

			u->attnums[i] = (AttrNumber) get_varint(r);
			len = get_varint(r);
			if (u->attnums[i] < 1 || u->attnums[i] > codec->natts ||
				(len > 0 && len - 1 > (uint64) (r->end - r->p)))
				damaged();
			/* README "Lifecycle": a column dropped since is left out */
			if (TupleDescAttr(codec->tupdesc, u->attnums[i] - 1)->attisdropped)
			{
				r->p += len > 0 ? len - 1 : 0;
				continue;
			}
			u->n++;
			u->isnull[i] = len == 0;
			u->values[i] = (Datum) 0;
			if (len == 0)
				continue;
			column_io((ZLRecordCodec *) codec, u->attnums[i]);
			initStringInfo(&value);
			appendBinaryStringInfo(&value, (const char *) r->p, (int) (len - 1));
			r->p += len - 1;
			u->values[i] = ReceiveFunctionCall(&codec->column_receive[u->attnums[i] - 1], &value,
											   codec->column_ioparam[u->attnums[i] - 1],
											   TupleDescAttr(codec->tupdesc, u->attnums[i] - 1)->atttypmod);
		}
		in->untracked = u;
	}
}

/* ---------- entries ---------- */

static void
put_entry(ZLRecordWriter *w, const ZLRecordEntry *e)
{
	StringInfo	buf = &w->buf;
	int64		prev;
	bool		overridden = e->overridden != PG_INT64_MIN;

	put_varint(buf, e->hash - w->prev_hash);
	put_key(w->codec, buf, e->key);
	put_varint(buf, ((uint64) e->ninstants << 1) | overridden);
	put_zigzag(buf, e->since - w->prev_since);
	if (overridden)
		put_varint(buf, (uint64) (e->overridden - e->since));
	prev = e->since;
	for (int i = 0; i < e->ninstants; i++)
	{
		const ZLRecordInstant *in = &e->instants[i];

		put_varint(buf, ((uint64) (in->time - prev) << INSTANT_FLAG_BITS) |
				   (in->has_seq ? INSTANT_HAS_SEQ : 0) | (in->is_delete ? INSTANT_IS_DELETE : 0) |
				   (in->given != NULL || in->ngivers > 0 || in->untracked != NULL ?
					INSTANT_HAS_PAYLOAD : 0));
		if (in->has_seq)
			put_zigzag(buf, in->seq);
		if (in->given != NULL || in->ngivers > 0 || in->untracked != NULL)
			put_payload(w->codec, buf, in);
		prev = in->time;
	}
	w->prev_hash = e->hash;
	w->prev_since = e->since;
}

/* the next entry; key NULL when only its hash is wanted (skip) */
typedef struct EntryReader
{
	Reader		r;
	uint32		prev_hash;
	int64		prev_since;
} EntryReader;

static bool
next_entry(const ZLRecordCodec *codec, EntryReader *er, ZLRecordEntry *e,
		   uint32 want_lo, uint32 want_hi)
{
	uint64		header;
	int64		prev;

	if (er->r.p >= er->r.end)
		return false;
	e->hash = er->prev_hash + (uint32) get_varint(&er->r);
	er->prev_hash = e->hash;
	if (e->hash >= want_lo && e->hash <= want_hi)
		e->key = get_key(codec, &er->r);
	else
	{
		e->key = NULL;
		for (int i = 0; i < codec->nkeys; i++)
		{
			if (codec->integer[i] != InvalidOid)
				(void) get_varint(&er->r);
			else
			{
				uint64		len = get_varint(&er->r);

				if (len > (uint64) (er->r.end - er->r.p))
					damaged();
				er->r.p += len;
			}
		}
	}
	header = get_varint(&er->r);
	/* every instant takes a byte at least */
	if ((header >> 1) > (uint64) (er->r.end - er->r.p))
		damaged();
	e->ninstants = (int) (header >> 1);
	e->since = er->prev_since + get_zigzag(&er->r);
	er->prev_since = e->since;
	e->overridden = (header & 1) ? e->since + (int64) get_varint(&er->r) : PG_INT64_MIN;
	e->instants = e->ninstants > 0 ? palloc(sizeof(ZLRecordInstant) * e->ninstants) : NULL;
	prev = e->since;
	for (int i = 0; i < e->ninstants; i++)
	{
		ZLRecordInstant *in = &e->instants[i];
		uint64		v = get_varint(&er->r);

		in->time = prev + (int64) (v >> INSTANT_FLAG_BITS);
		in->has_seq = (v & INSTANT_HAS_SEQ) != 0;
		in->is_delete = (v & INSTANT_IS_DELETE) != 0;
		in->seq = in->has_seq ? get_zigzag(&er->r) : 0;
		in->given = NULL;
		in->ngivers = 0;
		in->giver_attnums = NULL;
		in->givers = NULL;
		in->untracked = NULL;
		if (v & INSTANT_HAS_PAYLOAD)
			get_payload(codec, &er->r, in);
		prev = in->time;
	}
	return true;
}

/* instants (and their payloads) copied into the current memory context */
ZLRecordInstant *
zl_record_copy_instants(const ZLRecordCodec *codec, const ZLRecordInstant *instants, int n)
{
	ZLRecordInstant *copy = palloc(sizeof(ZLRecordInstant) * Max(1, n));

	for (int i = 0; i < n; i++)
	{
		copy[i] = instants[i];
		if (instants[i].given != NULL)
		{
			uint8	   *given = palloc(GIVEN_BYTES(codec));

			memcpy(given, instants[i].given, GIVEN_BYTES(codec));
			copy[i].given = given;
		}
		if (instants[i].ngivers > 0)
		{
			AttrNumber *attnums = palloc(sizeof(AttrNumber) * instants[i].ngivers);
			ZLGiver    *givers = palloc(sizeof(ZLGiver) * instants[i].ngivers);

			memcpy(attnums, instants[i].giver_attnums, sizeof(AttrNumber) * instants[i].ngivers);
			memcpy(givers, instants[i].givers, sizeof(ZLGiver) * instants[i].ngivers);
			copy[i].giver_attnums = attnums;
			copy[i].givers = givers;
		}
		if (instants[i].untracked != NULL)
		{
			const ZLUntrackedValues *from = instants[i].untracked;
			ZLUntrackedValues *u = palloc(sizeof(ZLUntrackedValues));

			u->n = from->n;
			u->attnums = palloc(sizeof(AttrNumber) * Max(1, from->n));
			u->values = palloc(sizeof(Datum) * Max(1, from->n));
			u->isnull = palloc(sizeof(bool) * Max(1, from->n));
			for (int j = 0; j < from->n; j++)
			{
				Form_pg_attribute att = TupleDescAttr(codec->tupdesc, from->attnums[j] - 1);

				u->attnums[j] = from->attnums[j];
				u->isnull[j] = from->isnull[j];
				u->values[j] = from->isnull[j] ? (Datum) 0 :
					datumCopy(from->values[j], att->attbyval, att->attlen);
			}
			copy[i].untracked = u;
		}
	}
	return copy;
}

/* ---------- writing ---------- */

ZLRecordWriter *
zl_record_writer_begin(ZLRecordCodec *codec)
{
	ZLRecordWriter *w = palloc0(sizeof(ZLRecordWriter));

	w->codec = codec;
	initStringInfo(&w->buf);
	w->empty = true;
	w->desc = CreateTemplateTupleDesc(5);
	TupleDescInitEntry(w->desc, 1, "hash_lo", INT8OID, -1, 0);
	TupleDescInitEntry(w->desc, 2, "hash_hi", INT8OID, -1, 0);
	TupleDescInitEntry(w->desc, 3, "newest", INT8OID, -1, 0);
	TupleDescInitEntry(w->desc, 4, "instants", INT8OID, -1, 0);
	TupleDescInitEntry(w->desc, 5, "entries", BYTEAOID, -1, 0);
	w->slot = MakeSingleTupleTableSlot(w->desc, &TTSOpsMinimalTuple);
	/* segments wait here until the batch's rows are written (zl_apply.c) */
	w->segments = tuplestore_begin_heap(false, false, ZL_SIDE_KB);
	w->context = CurrentMemoryContext;
	return w;
}

static void
flush_segment(ZLRecordWriter *w)
{
	Datum		values[5];
	bool		nulls[5] = {0};
	bytea	   *entries;
	MemoryContext old;

	if (w->empty)
		return;
	old = MemoryContextSwitchTo(w->context);
	entries = palloc(VARHDRSZ + w->buf.len);
	SET_VARSIZE(entries, VARHDRSZ + w->buf.len);
	memcpy(VARDATA(entries), w->buf.data, w->buf.len);
	values[0] = Int64GetDatum((int64) w->hash_lo);
	values[1] = Int64GetDatum((int64) w->prev_hash);
	values[2] = Int64GetDatum(w->newest);
	values[3] = Int64GetDatum(w->instants);
	values[4] = PointerGetDatum(entries);
	tuplestore_putvalues(w->segments, w->desc, values, nulls);
	pfree(entries);
	w->nsegments++;
	resetStringInfo(&w->buf);
	w->empty = true;
	w->prev_hash = 0;
	w->prev_since = 0;
	MemoryContextSwitchTo(old);
}

/* entries come in key-hash order */
void
zl_record_writer_add(ZLRecordWriter *w, const ZLRecordEntry *e)
{
	if (w->empty)
	{
		w->hash_lo = e->hash;
		w->newest = PG_INT64_MIN;
		w->instants = 0;
		w->empty = false;
	}
	Assert(e->hash >= w->prev_hash);
	put_entry(w, e);
	w->newest = Max(w->newest, e->overridden);
	if (e->ninstants > 0)
		w->newest = Max(w->newest, e->instants[e->ninstants - 1].time);
	w->instants += e->ninstants;
	if (w->buf.len >= ZL_RECORD_SEGMENT_BYTES)
		flush_segment(w);
}

/* write what was added as the table's newest piece */
void
zl_record_writer_finish(ZLRecordWriter *w, Oid relid)
{
	int64		piece;
	int32		segment = 0;

	flush_segment(w);
	if (w->nsegments > 0)
	{
		piece = zl_meta_new_id();
		while (tuplestore_gettupleslot(w->segments, true, false, w->slot))
		{
			bool		isnull;
			int64		newest = DatumGetInt64(slot_getattr(w->slot, 3, &isnull));

			zl_meta_record_insert(relid, piece, segment++,
								  (uint32) DatumGetInt64(slot_getattr(w->slot, 1, &isnull)),
								  (uint32) DatumGetInt64(slot_getattr(w->slot, 2, &isnull)),
								  newest == PG_INT64_MIN ? 0 : newest,
								  DatumGetInt64(slot_getattr(w->slot, 4, &isnull)),
								  DatumGetByteaPP(slot_getattr(w->slot, 5, &isnull)));
		}
	}
	tuplestore_end(w->segments);
	ExecDropSingleTupleTableSlot(w->slot);
	pfree(w->buf.data);
}

/* ---------- reading ---------- */

/*
 * Every entry of key hashes in [hash_lo, hash_hi] in the segments holding
 * an instant at or after newest_from, oldest piece first: the callback
 * applies each over what older ones said (an entry replaces the key's
 * instants from its since on).
 */
void
zl_record_read(ZLRecordCodec *codec, Oid relid, Snapshot snapshot, uint32 hash_lo,
			   uint32 hash_hi, int64 newest_from, ZLRecordCallback callback, void *arg)
{
	int			nsegments;
	ZLRecordSegment *segments = zl_meta_record_segments(relid, snapshot, hash_lo, hash_hi,
														 newest_from, &nsegments);
	MemoryContext entry_context = AllocSetContextCreate(CurrentMemoryContext,
														"zipper_lake record entry",
														ALLOCSET_SMALL_SIZES);

	for (int i = 0; i < nsegments; i++)
	{
		bytea	   *entries = zl_meta_record_entries(relid, snapshot, segments[i].piece,
													 segments[i].segment);
		EntryReader er = {{(const char *) VARDATA(entries),
		(const char *) VARDATA(entries) + VARSIZE(entries) - VARHDRSZ}, 0, 0};

		for (;;)
		{
			MemoryContext old = MemoryContextSwitchTo(entry_context);
			ZLRecordEntry e;
			bool		more = next_entry(codec, &er, &e, hash_lo, hash_hi);

			MemoryContextSwitchTo(old);
			if (!more)
				break;
			if (e.key != NULL)
				callback(arg, &e);
			MemoryContextReset(entry_context);
		}
		pfree(entries);
	}
	MemoryContextDelete(entry_context);
}

/* ---------- merging ---------- */

/* one piece read entry by entry, segment by segment */
typedef struct PieceCursor
{
	ZLRecordCodec *codec;
	Oid			relid;
	Snapshot	snapshot;
	ZLRecordSegment *segments;
	int			nsegments;
	int			next_segment;
	bytea	   *entries;
	EntryReader er;
	bool		have;			/* entry holds the next entry */
	ZLRecordEntry entry;
	MemoryContext context;		/* of entry */
	MemoryContext segment_context;	/* of entries */
} PieceCursor;

static void
cursor_advance(PieceCursor *c)
{
	MemoryContext old;

	MemoryContextReset(c->context);
	old = MemoryContextSwitchTo(c->context);
	for (;;)
	{
		if (c->entries != NULL &&
			next_entry(c->codec, &c->er, &c->entry, 0, PG_UINT32_MAX))
		{
			c->have = true;
			break;
		}
		MemoryContextReset(c->segment_context);
		c->entries = NULL;
		if (c->next_segment >= c->nsegments)
		{
			c->have = false;
			break;
		}
		MemoryContextSwitchTo(c->segment_context);
		c->entries = zl_meta_record_entries(c->relid, c->snapshot,
											c->segments[c->next_segment].piece,
											c->segments[c->next_segment].segment);
		c->next_segment++;
		MemoryContextSwitchTo(c->context);
		c->er.r.p = (const char *) VARDATA(c->entries);
		c->er.r.end = c->er.r.p + VARSIZE(c->entries) - VARHDRSZ;
		c->er.prev_hash = 0;
		c->er.prev_since = 0;
	}
	MemoryContextSwitchTo(old);
}

static void
cursor_open(PieceCursor *c, ZLRecordCodec *codec, Oid relid, Snapshot snapshot, int64 piece)
{
	int			n;
	ZLRecordSegment *all = zl_meta_record_segments(relid, snapshot, 0, PG_UINT32_MAX,
												   PG_INT64_MIN, &n);

	memset(c, 0, sizeof(*c));
	c->codec = codec;
	c->relid = relid;
	c->snapshot = snapshot;
	c->segments = palloc(sizeof(ZLRecordSegment) * Max(1, n));
	for (int i = 0; i < n; i++)
		if (all[i].piece == piece)
			c->segments[c->nsegments++] = all[i];
	c->context = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake record merge",
									   ALLOCSET_SMALL_SIZES);
	c->segment_context = AllocSetContextCreate(CurrentMemoryContext,
											   "zipper_lake record segment",
											   ALLOCSET_DEFAULT_SIZES);
	cursor_advance(c);
}

/* a copy of an entry that outlives its cursor's next step */
static ZLRecordEntry *
copy_entry(const ZLRecordCodec *codec, const ZLRecordEntry *e)
{
	ZLRecordEntry *copy = palloc(sizeof(ZLRecordEntry));

	*copy = *e;
	copy->key = palloc0(sizeof(Datum) * codec->natts);
	for (int i = 0; i < codec->nkeys; i++)
	{
		int			col = codec->attnums[i] - 1;

		copy->key[col] = datumCopy(e->key[col], codec->typbyval[i], codec->typlen[i]);
	}
	copy->instants = zl_record_copy_instants(codec, e->instants, e->ninstants);
	return copy;
}

/* a newer piece's entry of a key over an older one's: one entry */
static void
combine_entries(const ZLRecordCodec *codec, ZLRecordEntry *older, const ZLRecordEntry *newer)
{
	ZLRecordInstant *instants = palloc(sizeof(ZLRecordInstant) *
									   (older->ninstants + newer->ninstants + 1));
	int			n = 0;

	for (int i = 0; i < older->ninstants && older->instants[i].time < newer->since; i++)
		instants[n++] = older->instants[i];
	memcpy(&instants[n], zl_record_copy_instants(codec, newer->instants, newer->ninstants),
		   sizeof(ZLRecordInstant) * newer->ninstants);
	older->instants = instants;
	older->ninstants = n + newer->ninstants;
	older->since = Min(older->since, newer->since);
	older->overridden = Max(older->overridden, newer->overridden);
}

/*
 * The entries of several pieces (oldest first) in key-hash order, each
 * key's entries combined into one, newer over older; from_oldest: nothing
 * older remains, so what they replace no longer matters and empty entries
 * drop out, and so do instants before forget_before (README "Late data":
 * no change older than that is accepted any more).  Streams every piece
 * segment by segment.
 */
static void
merge_pieces(ZLRecordCodec *codec, Oid relid, Snapshot snapshot, const int64 *pieces,
			 int npieces, bool from_oldest, int64 forget_before,
			 ZLRecordCallback callback, void *arg)
{
	PieceCursor *cursors = palloc(sizeof(PieceCursor) * Max(1, npieces));
	MemoryContext group_context = AllocSetContextCreate(CurrentMemoryContext,
														"zipper_lake record group",
														ALLOCSET_SMALL_SIZES);
	ZLRecordEntry **keys = NULL;
	int			maxkeys = 0;

	for (int i = 0; i < npieces; i++)
		cursor_open(&cursors[i], codec, relid, snapshot, pieces[i]);
	for (;;)
	{
		MemoryContext old;
		bool		any = false;
		uint32		hash = 0;
		int			nkeys = 0;

		for (int i = 0; i < npieces; i++)
			if (cursors[i].have && (!any || cursors[i].entry.hash < hash))
			{
				hash = cursors[i].entry.hash;
				any = true;
			}
		if (!any)
			break;

		/* the entries of this hash, piece by piece: one key, collisions aside */
		old = MemoryContextSwitchTo(group_context);
		for (int i = 0; i < npieces; i++)
			while (cursors[i].have && cursors[i].entry.hash == hash)
			{
				ZLRecordEntry *e = &cursors[i].entry;
				int			k = 0;

				while (k < nkeys && !zl_keys_equal(codec->hasher, keys[k]->key, e->key))
					k++;
				if (k < nkeys)
					combine_entries(codec, keys[k], e);
				else
				{
					if (nkeys == maxkeys)
					{
						MemoryContextSwitchTo(old);
						maxkeys = Max(4, maxkeys * 2);
						keys = keys == NULL ? palloc(sizeof(ZLRecordEntry *) * maxkeys) :
							repalloc(keys, sizeof(ZLRecordEntry *) * maxkeys);
						MemoryContextSwitchTo(group_context);
					}
					keys[nkeys++] = copy_entry(codec, e);
				}
				cursor_advance(&cursors[i]);
			}
		for (int k = 0; k < nkeys; k++)
		{
			if (from_oldest)
			{
				int			first = 0;

				while (first < keys[k]->ninstants && keys[k]->instants[first].time < forget_before)
					first++;
				keys[k]->instants += first;
				keys[k]->ninstants -= first;
				keys[k]->overridden = PG_INT64_MIN;
			}
			if (keys[k]->ninstants > 0 || keys[k]->overridden != PG_INT64_MIN)
				callback(arg, keys[k]);
		}
		MemoryContextSwitchTo(old);
		MemoryContextReset(group_context);
	}
	for (int i = 0; i < npieces; i++)
	{
		MemoryContextDelete(cursors[i].context);
		MemoryContextDelete(cursors[i].segment_context);
	}
	MemoryContextDelete(group_context);
}

static void
write_entry(void *arg, const ZLRecordEntry *e)
{
	zl_record_writer_add((ZLRecordWriter *) arg, e);
}

/*
 * Merge the two newest pieces into one (a new id, after all others) while
 * the older is at most twice the newer's size; merged into the oldest,
 * instants before forget_before are forgotten.
 */
void
zl_record_merge(ZLRecordCodec *codec, Oid relid, int64 forget_before)
{
	for (;;)
	{
		int			npieces;
		ZLRecordSegment *pieces;
		int64		pair[2];
		ZLRecordWriter *w;
		Snapshot	snapshot;

		CommandCounterIncrement();
		pieces = zl_meta_record_pieces(relid, &npieces);
		if (npieces < 2 || pieces[npieces - 2].bytes > 2 * pieces[npieces - 1].bytes)
			return;
		pair[0] = pieces[npieces - 2].piece;
		pair[1] = pieces[npieces - 1].piece;
		snapshot = RegisterSnapshot(GetLatestSnapshot());
		w = zl_record_writer_begin(codec);
		merge_pieces(codec, relid, snapshot, pair, 2, npieces == 2, forget_before, write_entry, w);
		UnregisterSnapshot(snapshot);
		zl_meta_record_delete_piece(relid, pair[0]);
		zl_meta_record_delete_piece(relid, pair[1]);
		zl_record_writer_finish(w, relid);
	}
}

/* an entry a rewrite keeps is written on */
typedef struct RewriteArg
{
	ZLRecordWriter *writer;
	bool		(*keep) (void *arg, const ZLRecordEntry *entry);
	void	   *keep_arg;
} RewriteArg;

static void
write_kept_entry(void *arg, const ZLRecordEntry *e)
{
	RewriteArg *ra = arg;

	if (ra->keep(ra->keep_arg, e))
		zl_record_writer_add(ra->writer, e);
}

/*
 * Merge every piece into one without the entries keep() refuses, and
 * forgetting instants before forget_before (README "Lifecycle": erase),
 * so that no byte of theirs stays in a live row of the record.
 */
void
zl_record_rewrite(ZLRecordCodec *codec, Oid relid, int64 forget_before,
				  bool (*keep) (void *arg, const ZLRecordEntry *entry), void *keep_arg)
{
	int			npieces;
	ZLRecordSegment *pieces;
	int64	   *ids;
	Snapshot	snapshot;
	RewriteArg	ra = {NULL, keep, keep_arg};

	CommandCounterIncrement();
	pieces = zl_meta_record_pieces(relid, &npieces);
	if (npieces == 0)
		return;
	ids = palloc(sizeof(int64) * npieces);
	for (int i = 0; i < npieces; i++)
		ids[i] = pieces[i].piece;
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	ra.writer = zl_record_writer_begin(codec);
	merge_pieces(codec, relid, snapshot, ids, npieces, true, forget_before, write_kept_entry, &ra);
	UnregisterSnapshot(snapshot);
	for (int i = 0; i < npieces; i++)
		zl_meta_record_delete_piece(relid, ids[i]);
	zl_record_writer_finish(ra.writer, relid);
}

/* every key's remembered instants, pieces combined, in key-hash order (verify) */
void
zl_record_resolve(ZLRecordCodec *codec, Oid relid, Snapshot snapshot,
				  ZLRecordCallback callback, void *arg)
{
	int			npieces;
	ZLRecordSegment *pieces = zl_meta_record_pieces(relid, &npieces);
	int64	   *ids = palloc(sizeof(int64) * Max(1, npieces));

	for (int i = 0; i < npieces; i++)
		ids[i] = pieces[i].piece;
	merge_pieces(codec, relid, snapshot, ids, npieces, true, PG_INT64_MIN, callback, arg);
}
