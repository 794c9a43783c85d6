/*-------------------------------------------------------------------------
 *
 * zl_columnar.c
 *	  Columnar sub-groups: the compressed format of history (README
 *	  "Storage formats").
 *
 * A columnar sub-group holds the same rows as a row sub-group, in the same
 * order (valid_from), stored column by column as one byte stream over its
 * consecutive pages:
 *
 *   header | chunk starts | chunk-column entries | min/max area | data
 *
 * Each page is a standard page header followed by up to
 * ZL_STREAM_PAGE_BYTES bytes of the stream, pd_lower marking their end, so
 * full-page images of WAL and the checksum cover all of it.
 *
 * Chunks
 * ------
 * Rows are cut into chunks of zipper_lake.columnar_chunk_rows rows
 * (ZL_CHUNK_ROWS unless a test asks for fewer), fewer when the chunk's
 * values reach ZL_CHUNK_BYTES (wide values).  Each column of a chunk is
 * encoded on its own, into a "raw" buffer:
 *
 *  - a null bitmap first when the chunk has nulls (none at all when every
 *    value is null: NULLS);
 *  - DELTA for pass-by-value columns of 2, 4 or 8 bytes: zigzag varints of
 *    the differences of consecutive values, so the sorted valid_from, dates
 *    and counters take a byte or two a row and runs of one value cost a
 *    byte each before compression; chosen when smaller than PLAIN;
 *  - DICT for other columns whose chunk repeats its values (at most a
 *    quarter distinct): each distinct value once, then a 1- or 2-byte code
 *    a row;
 *  - PLAIN otherwise: pass-by-value columns as their bytes, others laid out
 *    as in a heap tuple (aligned, short varlena headers where they fit), so
 *    decoded values point into the chunk's buffer without a copy.
 *
 * The raw buffer is then compressed with zstd when that saves bytes.
 * Values are detoasted as they are written: a columnar sub-group never
 * refers to TOAST, so it shares nothing with the rows it was made from.
 *
 * Every chunk-column entry says where its bytes are, so a reader decodes
 * just the chunks and columns it needs, and keeps the smallest and largest
 * value of the chunk under the column type's default btree ordering and
 * the column's collation (values up to ZL_MINMAX_MAX_BYTES; the btree
 * orderings put NaN above every number, as their operators do), so scans
 * skip chunks by predicates on any column (zl_chunkskip.c) and by their
 * valid_from range.  The min/max stay with the sub-group, in its pages,
 * rather than in the catalog row every scan loads: only a scan that reads
 * the sub-group pays for them, and they are immutable with it.
 *
 * Positions
 * ---------
 * A row's position in a columnar sub-group is its ordinal, so masks and
 * key directories work as with rows.  TIDs spread the positions evenly
 * over the sub-group's blocks (zl_position_tid), so that a block sampled
 * by ANALYZE stands for its share of the rows.
 *
 * Memory
 * ------
 * The writer holds one chunk of values (ZL_CHUNK_ROWS rows or
 * ZL_CHUNK_BYTES, plus the value that crossed it) and the directory;
 * encoded chunks wait in a temporary file until the page count of the
 * sub-group is known and its place chosen.  A reader holds the directory
 * and one decoded chunk of the columns it reads.
 *
 *-------------------------------------------------------------------------
 */
#include "zipper_lake.h"

#include <zstd.h>

#include "access/detoast.h"
#include "access/tupmacs.h"
#include "common/hashfn.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/buffile.h"
#include "storage/bufmgr.h"
#include "utils/datum.h"
#include "utils/memutils.h"
#include "utils/typcache.h"

#define ZL_COLUMNAR_MAGIC		0x5A4C4331	/* "ZLC1" */
#define ZL_CHUNK_ROWS			8192	/* default of zipper_lake.columnar_chunk_rows */
#define ZL_CHUNK_BYTES			(8 * 1024 * 1024)
#define ZL_MINMAX_MAX_BYTES		64
#define ZL_ZSTD_LEVEL			3

typedef enum ZLEncoding
{
	ZL_ENC_NULLS = 0,			/* every value null: no bytes */
	ZL_ENC_PLAIN,
	ZL_ENC_DELTA,
	ZL_ENC_DICT
} ZLEncoding;

typedef struct ZLColumnarHeader
{
	uint32		magic;
	uint32		natts;
	uint32		nrows;
	uint32		nchunks;
	uint32		directory_bytes;	/* everything before the data */
	uint32		minmax_bytes;
	uint64		data_bytes;
	uint64		raw_bytes;		/* of the chunks' encodings before zstd */
} ZLColumnarHeader;

typedef struct ZLChunkColumn
{
	uint64		offset;			/* of its bytes in the data */
	uint32		stored_bytes;
	uint32		raw_bytes;
	uint32		nulls;
	uint8		encoding;
	uint8		compressed;
	uint16		minmax_bytes;	/* 0: no min/max kept */
	uint32		minmax_offset;	/* into the min/max area: min, then max */
	uint32		unused;
} ZLChunkColumn;

/* where the parts of a directory lie, from its counts */
#define CHUNK_STARTS_OFFSET		MAXALIGN(sizeof(ZLColumnarHeader))
#define ENTRIES_OFFSET(nchunks) MAXALIGN(CHUNK_STARTS_OFFSET + sizeof(uint32) * (nchunks))
#define MINMAX_OFFSET(nchunks, natts) \
	(ENTRIES_OFFSET(nchunks) + sizeof(ZLChunkColumn) * (Size) (nchunks) * (natts))

/* ---------- the byte stream over pages ---------- */

/* pages a stream of this many bytes takes */
static BlockNumber
stream_pages(uint64 bytes)
{
	return (BlockNumber) ((bytes + ZL_STREAM_PAGE_BYTES - 1) / ZL_STREAM_PAGE_BYTES);
}

/* ---------- column traits ---------- */

typedef struct ColumnTraits
{
	int16		len;
	bool		byval;
	char		align;
	bool		dropped;
	Oid			collation;
	bool		has_order;		/* a default btree ordering for min/max */
	FmgrInfo	cmp;
} ColumnTraits;

static ColumnTraits *
column_traits(TupleDesc desc)
{
	ColumnTraits *traits = palloc0(sizeof(ColumnTraits) * Max(desc->natts, 1));

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		TypeCacheEntry *tc;

		traits[i].len = att->attlen;
		traits[i].byval = att->attbyval;
		traits[i].align = att->attalign;
		traits[i].dropped = att->attisdropped;
		traits[i].collation = att->attcollation;
		if (att->attisdropped)
			continue;
		tc = lookup_type_cache(att->atttypid, TYPECACHE_CMP_PROC_FINFO);
		if (OidIsValid(tc->cmp_proc_finfo.fn_oid))
		{
			fmgr_info_copy(&traits[i].cmp, &tc->cmp_proc_finfo, CurrentMemoryContext);
			traits[i].has_order = true;
		}
	}
	return traits;
}

/* a value's bytes as stored in a PLAIN area (varlenas detoasted, 4-byte header) */
static Size
value_size(const ColumnTraits *t, Datum value)
{
	if (t->len == -1)
		return VARSIZE_ANY(DatumGetPointer(value));
	if (t->len == -2)
		return strlen(DatumGetCString(value)) + 1;
	return t->len;
}

static void
append_padding(StringInfo buf, Size aligned)
{
	while ((Size) buf->len < aligned)
		appendStringInfoChar(buf, '\0');
}

/* append a pass-by-reference value to a PLAIN area, as heap tuples lay them out */
static void
append_ref_value(StringInfo buf, const ColumnTraits *t, Datum value)
{
	char	   *p = DatumGetPointer(value);

	if (t->len == -1 && VARATT_CAN_MAKE_SHORT(p))
	{
		Size		len = VARATT_CONVERTED_SHORT_SIZE(p);
		char		header;

		SET_VARSIZE_SHORT(&header, len);
		appendBinaryStringInfo(buf, &header, 1);
		appendBinaryStringInfo(buf, VARDATA(p), len - 1);
		return;
	}
	append_padding(buf, att_align_nominal(buf->len, t->align));
	appendBinaryStringInfo(buf, p, value_size(t, value));
}

/* walk a PLAIN area: the value at *offset, moving past it */
static Datum
next_ref_value(const char *area, Size area_bytes, Size *offset, const ColumnTraits *t)
{
	Size		off = att_align_pointer(*offset, t->align, t->len, area + *offset);
	const char *p = area + off;

	if (off >= area_bytes ||
		(t->len == -1 && off + VARSIZE_ANY(p) > area_bytes))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("zipper_lake columnar chunk ends inside a value")));
	*offset = att_addlength_pointer(off, t->len, p);
	if (*offset > area_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("zipper_lake columnar chunk ends inside a value")));
	return PointerGetDatum(p);
}

/* pass-by-value datums as their len bytes, and back (as heap's fetch_att) */
static void
append_byval(StringInfo buf, int16 len, Datum value)
{
	union
	{
		int64		i8;
		int32		i4;
		int16		i2;
		char		c;
	}			v;

	switch (len)
	{
		case 8:
			v.i8 = DatumGetInt64(value);
			break;
		case 4:
			v.i4 = DatumGetInt32(value);
			break;
		case 2:
			v.i2 = DatumGetInt16(value);
			break;
		default:
			v.c = DatumGetChar(value);
			break;
	}
	appendBinaryStringInfo(buf, (char *) &v, len);
}

static Datum
read_byval(const char *p, int16 len)
{
	int64		i8;
	int32		i4;
	int16		i2;

	switch (len)
	{
		case 8:
			memcpy(&i8, p, 8);
			return Int64GetDatum(i8);
		case 4:
			memcpy(&i4, p, 4);
			return Int32GetDatum(i4);
		case 2:
			memcpy(&i2, p, 2);
			return Int16GetDatum(i2);
		default:
			return CharGetDatum(*p);
	}
}

static int64
byval_as_int64(int16 len, Datum value)
{
	return len == 8 ? DatumGetInt64(value) :
		len == 4 ? (int64) DatumGetInt32(value) : (int64) DatumGetInt16(value);
}

static Datum
int64_as_byval(int16 len, int64 v)
{
	return len == 8 ? Int64GetDatum(v) :
		len == 4 ? Int32GetDatum((int32) v) : Int16GetDatum((int16) v);
}

static int
varint_size(uint64 v)
{
	int			n = 1;

	while (v >= 0x80)
	{
		v >>= 7;
		n++;
	}
	return n;
}

static void
append_varint(StringInfo buf, uint64 v)
{
	while (v >= 0x80)
	{
		appendStringInfoChar(buf, (char) ((v & 0x7F) | 0x80));
		v >>= 7;
	}
	appendStringInfoChar(buf, (char) v);
}

static uint64
read_varint(const char *area, Size area_bytes, Size *offset)
{
	uint64		v = 0;
	int			shift = 0;

	for (;;)
	{
		uint8		b;

		if (*offset >= area_bytes || shift > 63)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("zipper_lake columnar chunk ends inside a number")));
		b = (uint8) area[(*offset)++];
		v |= (uint64) (b & 0x7F) << shift;
		if ((b & 0x80) == 0)
			return v;
		shift += 7;
	}
}

static inline uint64
zigzag(int64 v)
{
	return ((uint64) v << 1) ^ (uint64) (v >> 63);
}

static inline int64
unzigzag(uint64 v)
{
	return (int64) (v >> 1) ^ -(int64) (v & 1);
}

/* min/max values: a uint16 length, then the bytes of value_size() */
static void
append_minmax_value(StringInfo buf, const ColumnTraits *t, Datum value)
{
	uint16		len = (uint16) value_size(t, value);

	appendBinaryStringInfo(buf, (char *) &len, sizeof(len));
	if (t->byval)
		append_byval(buf, t->len, value);
	else
		appendBinaryStringInfo(buf, DatumGetPointer(value), len);
}

static Datum
read_minmax_value(const char **p, const ColumnTraits *t)
{
	uint16		len;
	Datum		value;

	memcpy(&len, *p, sizeof(len));
	*p += sizeof(len);
	if (t->byval)
		value = read_byval(*p, t->len);
	else
	{
		char	   *copy = palloc(len);	/* aligned for any type */

		memcpy(copy, *p, len);
		value = PointerGetDatum(copy);
	}
	*p += len;
	return value;
}

/* ---------- the writer ---------- */

struct ZLColumnarWriter
{
	TupleDesc	desc;
	int			natts;
	ColumnTraits *traits;
	MemoryContext context;
	MemoryContext chunk_context;	/* the buffered chunk's values */
	Datum	   *row_values;
	bool	   *row_isnull;
	Datum	  **values;			/* [att][row of the chunk] */
	bool	  **isnull;
	int			chunk_rows;
	int			max_chunk_rows;
	Size		chunk_bytes;
	uint32		nrows;

	uint32	   *chunk_first_row;
	ZLChunkColumn *entries;		/* nchunks * natts */
	int			nchunks;
	int			max_chunks;
	StringInfoData minmax;

	BufFile    *data;
	uint64		data_bytes;
	uint64		raw_bytes;
	StringInfoData raw;
	char	   *compressed;
	Size		compressed_size;
	StringInfoData directory;
	bool		finished;
};

ZLColumnarWriter *
zl_columnar_writer_begin(TupleDesc desc)
{
	MemoryContext context = AllocSetContextCreate(CurrentMemoryContext,
												  "zipper_lake columnar writer",
												  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(context);
	ZLColumnarWriter *w = palloc0(sizeof(ZLColumnarWriter));

	w->desc = desc;
	w->natts = desc->natts;
	w->context = context;
	w->chunk_context = AllocSetContextCreate(context, "zipper_lake columnar chunk",
											 ALLOCSET_DEFAULT_SIZES);
	w->traits = column_traits(desc);
	w->row_values = palloc(sizeof(Datum) * Max(w->natts, 1));
	w->row_isnull = palloc(sizeof(bool) * Max(w->natts, 1));
	w->values = palloc(sizeof(Datum *) * Max(w->natts, 1));
	w->isnull = palloc(sizeof(bool *) * Max(w->natts, 1));
	w->max_chunk_rows = zipper_lake_columnar_chunk_rows;
	for (int i = 0; i < w->natts; i++)
	{
		w->values[i] = palloc(sizeof(Datum) * w->max_chunk_rows);
		w->isnull[i] = palloc(sizeof(bool) * w->max_chunk_rows);
	}
	w->max_chunks = 8;
	w->chunk_first_row = palloc(sizeof(uint32) * w->max_chunks);
	w->entries = palloc0(sizeof(ZLChunkColumn) * w->max_chunks * Max(w->natts, 1));
	initStringInfo(&w->minmax);
	initStringInfo(&w->raw);
	w->data = BufFileCreateTemp(false);
	MemoryContextSwitchTo(old);
	return w;
}

/* the null bitmap of a column's chunk, then padding to the value area */
static void
append_null_bitmap(StringInfo raw, const bool *isnull, int n)
{
	for (int i = 0; i < n; i += 8)
	{
		uint8		byte = 0;

		for (int b = 0; b < 8 && i + b < n; b++)
			if (isnull[i + b])
				byte |= 1 << b;
		appendStringInfoChar(raw, (char) byte);
	}
	append_padding(raw, MAXALIGN(raw->len));
}

/* DELTA encoding of pass-by-value values; its size first when raw is NULL */
static Size
encode_delta(StringInfo raw, const ColumnTraits *t, const Datum *values,
			 const bool *isnull, int n)
{
	int64		prev = 0;
	Size		size = 0;

	for (int i = 0; i < n; i++)
	{
		int64		v;
		uint64		z;

		if (isnull[i])
			continue;
		v = byval_as_int64(t->len, values[i]);
		z = zigzag((int64) ((uint64) v - (uint64) prev));
		prev = v;
		if (raw)
			append_varint(raw, z);
		else
			size += varint_size(z);
	}
	return size;
}

/*
 * The distinct values of a pass-by-reference chunk column, if at most a
 * quarter of its non-null values (and at most 65536): codes[i] for each
 * non-null row, the first occurrences in firsts.  False otherwise.
 */
static bool
find_dictionary(const ColumnTraits *t, const Datum *values, const bool *isnull, int n,
				int nvalues, uint16 *codes, int *firsts, int *ndistinct)
{
	int			limit = Min(nvalues / 4, 65536);
	int			slots = 16;
	int		   *table;
	int			k = 0;

	*ndistinct = 0;
	if (limit < 2)
		return false;
	while (slots < limit * 2)
		slots <<= 1;
	table = palloc(sizeof(int) * slots);
	memset(table, -1, sizeof(int) * slots);
	for (int i = 0; i < n; i++)
	{
		const char *p;
		Size		len;
		uint32		h;

		if (isnull[i])
			continue;
		p = DatumGetPointer(values[i]);
		len = value_size(t, values[i]);
		h = hash_bytes((const unsigned char *) p, (int) len);
		for (uint32 s = h & (slots - 1);; s = (s + 1) & (slots - 1))
		{
			int			d = table[s];

			if (d < 0)
			{
				if (*ndistinct >= limit)
				{
					pfree(table);
					return false;
				}
				firsts[*ndistinct] = i;
				table[s] = (*ndistinct)++;
				codes[k] = (uint16) table[s];
				break;
			}
			if (value_size(t, values[firsts[d]]) == len &&
				memcmp(DatumGetPointer(values[firsts[d]]), p, len) == 0)
			{
				codes[k] = (uint16) d;
				break;
			}
		}
		k++;
	}
	pfree(table);
	return true;
}

/* the smallest and largest non-null value of a chunk column (rows or dictionary) */
static void
find_minmax(const ColumnTraits *t, const Datum *values, const bool *isnull,
			const int *rows, int n, Datum *min, Datum *max)
{
	bool		first = true;

	for (int k = 0; k < n; k++)
	{
		int			i = rows ? rows[k] : k;

		if (isnull[i])
			continue;
		if (first)
		{
			*min = *max = values[i];
			first = false;
			continue;
		}
		if (DatumGetInt32(FunctionCall2Coll((FmgrInfo *) &t->cmp, t->collation,
											values[i], *min)) < 0)
			*min = values[i];
		else if (DatumGetInt32(FunctionCall2Coll((FmgrInfo *) &t->cmp, t->collation,
												 values[i], *max)) > 0)
			*max = values[i];
	}
}

/* encode one column of the buffered chunk into w->raw; fills the entry */
static void
encode_column(ZLColumnarWriter *w, int att, ZLChunkColumn *entry)
{
	const ColumnTraits *t = &w->traits[att];
	const Datum *values = w->values[att];
	const bool *isnull = w->isnull[att];
	int			n = w->chunk_rows;
	int			nulls = 0;
	int			ndistinct = 0;
	int		   *firsts = NULL;
	uint16	   *codes = NULL;
	StringInfo	raw = &w->raw;

	resetStringInfo(raw);
	for (int i = 0; i < n; i++)
		nulls += isnull[i] ? 1 : 0;
	entry->nulls = nulls;
	if (nulls == n || t->dropped)
	{
		entry->nulls = n;
		entry->encoding = ZL_ENC_NULLS;
		return;
	}
	if (nulls > 0)
		append_null_bitmap(raw, isnull, n);

	if (t->byval)
	{
		Size		plain = (Size) (n - nulls) * t->len;

		if (t->len >= 2 && encode_delta(NULL, t, values, isnull, n) < plain)
		{
			entry->encoding = ZL_ENC_DELTA;
			(void) encode_delta(raw, t, values, isnull, n);
		}
		else
		{
			entry->encoding = ZL_ENC_PLAIN;
			for (int i = 0; i < n; i++)
				if (!isnull[i])
					append_byval(raw, t->len, values[i]);
		}
	}
	else
	{
		firsts = palloc(sizeof(int) * (n - nulls));
		codes = palloc(sizeof(uint16) * (n - nulls));
		if (find_dictionary(t, values, isnull, n, n - nulls, codes, firsts, &ndistinct))
		{
			uint32		counts[2];
			Size		counts_at = raw->len;

			entry->encoding = ZL_ENC_DICT;
			counts[0] = ndistinct;
			appendBinaryStringInfo(raw, (char *) counts, sizeof(counts));
			append_padding(raw, MAXALIGN(raw->len));
			for (int d = 0; d < ndistinct; d++)
				append_ref_value(raw, t, values[firsts[d]]);
			/* the dictionary's bytes, so readers find the codes */
			counts[1] = (uint32) (raw->len - MAXALIGN(counts_at + sizeof(counts)));
			memcpy(raw->data + counts_at, counts, sizeof(counts));
			for (int k = 0; k < n - nulls; k++)
			{
				if (ndistinct <= 256)
					appendStringInfoChar(raw, (char) codes[k]);
				else
					appendBinaryStringInfo(raw, (char *) &codes[k], sizeof(uint16));
			}
		}
		else
		{
			entry->encoding = ZL_ENC_PLAIN;
			for (int i = 0; i < n; i++)
				if (!isnull[i])
					append_ref_value(raw, t, values[i]);
		}
	}

	/* min and max, if the type has an ordering and they are small */
	entry->minmax_bytes = 0;
	if (t->has_order)
	{
		Datum		min = 0,
					max = 0;

		if (entry->encoding == ZL_ENC_DICT)
		{
			bool	   *none = palloc0(sizeof(bool) * n);

			find_minmax(t, values, none, firsts, ndistinct, &min, &max);
			pfree(none);
		}
		else
			find_minmax(t, values, isnull, NULL, n, &min, &max);
		if (value_size(t, min) <= ZL_MINMAX_MAX_BYTES &&
			value_size(t, max) <= ZL_MINMAX_MAX_BYTES)
		{
			entry->minmax_offset = w->minmax.len;
			append_minmax_value(&w->minmax, t, min);
			append_minmax_value(&w->minmax, t, max);
			entry->minmax_bytes = (uint16) (w->minmax.len - entry->minmax_offset);
		}
	}
	if (firsts)
		pfree(firsts);
	if (codes)
		pfree(codes);
}

/* compress w->raw if that saves bytes, and append it to the data */
static void
store_column(ZLColumnarWriter *w, ZLChunkColumn *entry)
{
	char	   *bytes = w->raw.data;
	Size		len = w->raw.len;

	entry->offset = w->data_bytes;
	entry->raw_bytes = (uint32) len;
	entry->compressed = 0;
	if (len == 0)
	{
		entry->stored_bytes = 0;
		return;
	}
	if (len > 64)
	{
		Size		bound = ZSTD_compressBound(len);
		size_t		clen;

		if (bound > w->compressed_size)
		{
			if (w->compressed)
				pfree(w->compressed);
			w->compressed = MemoryContextAllocHuge(w->context, bound);
			w->compressed_size = bound;
		}
		clen = ZSTD_compress(w->compressed, bound, bytes, len, ZL_ZSTD_LEVEL);
		if (ZSTD_isError(clen))
			elog(ERROR, "zstd compression failed: %s", ZSTD_getErrorName(clen));
		if (clen < len)
		{
			bytes = w->compressed;
			len = clen;
			entry->compressed = 1;
		}
	}
	BufFileWrite(w->data, bytes, len);
	entry->stored_bytes = (uint32) len;
	w->data_bytes += len;
	w->raw_bytes += entry->raw_bytes;
}

static void
encode_chunk(ZLColumnarWriter *w)
{
	ZLChunkColumn *entries;

	if (w->chunk_rows == 0)
		return;
	if (w->nchunks == w->max_chunks)
	{
		w->max_chunks *= 2;
		w->chunk_first_row = repalloc(w->chunk_first_row, sizeof(uint32) * w->max_chunks);
		w->entries = repalloc(w->entries,
							  sizeof(ZLChunkColumn) * w->max_chunks * Max(w->natts, 1));
	}
	w->chunk_first_row[w->nchunks] = w->nrows - w->chunk_rows;
	entries = &w->entries[(Size) w->nchunks * w->natts];
	memset(entries, 0, sizeof(ZLChunkColumn) * w->natts);
	for (int att = 0; att < w->natts; att++)
	{
		MemoryContext old = MemoryContextSwitchTo(w->context);

		CHECK_FOR_INTERRUPTS();
		encode_column(w, att, &entries[att]);
		store_column(w, &entries[att]);
		MemoryContextSwitchTo(old);
	}
	w->nchunks++;
	w->chunk_rows = 0;
	w->chunk_bytes = 0;
	MemoryContextReset(w->chunk_context);
}

/* add a row (copied); returns its position, the row's ordinal */
int32
zl_columnar_writer_add(ZLColumnarWriter *w, HeapTuple tuple)
{
	MemoryContext old;
	int			row = w->chunk_rows;

	Assert(!w->finished);
	old = MemoryContextSwitchTo(w->chunk_context);
	heap_deform_tuple(tuple, w->desc, w->row_values, w->row_isnull);
	for (int att = 0; att < w->natts; att++)
	{
		const ColumnTraits *t = &w->traits[att];
		Datum		v = w->row_values[att];

		w->isnull[att][row] = w->row_isnull[att] || t->dropped;
		if (w->isnull[att][row])
			continue;
		if (t->len == -1)
		{
			struct varlena *p = (struct varlena *) DatumGetPointer(v);

			/* plain, 4-byte header: detoasted, decompressed, unpacked */
			v = PointerGetDatum(VARATT_IS_EXTENDED(p) ? detoast_attr(p) :
								(struct varlena *) datumCopy(v, false, -1));
		}
		else if (!t->byval)
			v = datumCopy(v, false, t->len);
		w->values[att][row] = v;
		w->chunk_bytes += t->byval ? t->len : value_size(t, v);
	}
	MemoryContextSwitchTo(old);
	w->chunk_rows++;
	w->nrows++;
	if (w->chunk_rows == w->max_chunk_rows || w->chunk_bytes >= ZL_CHUNK_BYTES)
		encode_chunk(w);
	return (int32) (w->nrows - 1);
}

/* encode what is left and build the directory; returns the pages needed */
BlockNumber
zl_columnar_writer_finish(ZLColumnarWriter *w)
{
	ZLColumnarHeader header;
	MemoryContext old;

	encode_chunk(w);
	old = MemoryContextSwitchTo(w->context);
	memset(&header, 0, sizeof(header));
	header.magic = ZL_COLUMNAR_MAGIC;
	header.natts = w->natts;
	header.nrows = w->nrows;
	header.nchunks = w->nchunks;
	header.minmax_bytes = w->minmax.len;
	header.directory_bytes = MAXALIGN(MINMAX_OFFSET(w->nchunks, w->natts) + w->minmax.len);
	header.data_bytes = w->data_bytes;
	header.raw_bytes = w->raw_bytes;

	initStringInfo(&w->directory);
	appendBinaryStringInfo(&w->directory, (char *) &header, sizeof(header));
	append_padding(&w->directory, CHUNK_STARTS_OFFSET);
	appendBinaryStringInfo(&w->directory, (char *) w->chunk_first_row,
						   sizeof(uint32) * w->nchunks);
	append_padding(&w->directory, ENTRIES_OFFSET(w->nchunks));
	appendBinaryStringInfo(&w->directory, (char *) w->entries,
						   sizeof(ZLChunkColumn) * (Size) w->nchunks * w->natts);
	appendBinaryStringInfo(&w->directory, w->minmax.data, w->minmax.len);
	append_padding(&w->directory, header.directory_bytes);
	MemoryContextSwitchTo(old);
	w->finished = true;
	return stream_pages(header.directory_bytes + header.data_bytes);
}

/* write the finished sub-group's stream through a page writer */
void
zl_columnar_writer_write(ZLColumnarWriter *w, ZLPageWriter *pages)
{
	char	   *buf;

	Assert(w->finished);
	zl_page_writer_add_bytes(pages, w->directory.data, w->directory.len);
	if (BufFileSeek(w->data, 0, 0, SEEK_SET) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not rewind zipper_lake temporary file")));
	buf = MemoryContextAlloc(w->context, BLCKSZ * 8);
	for (uint64 done = 0; done < w->data_bytes;)
	{
		size_t		want = Min((uint64) BLCKSZ * 8, w->data_bytes - done);
		size_t		got = BufFileRead(w->data, buf, want);

		if (got != want)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not read zipper_lake temporary file")));
		zl_page_writer_add_bytes(pages, buf, got);
		done += got;
	}
}

void
zl_columnar_writer_end(ZLColumnarWriter *w)
{
	BufFileClose(w->data);
	MemoryContextDelete(w->context);
}

/* ---------- the reader ---------- */

struct ZLColumnarReader
{
	Relation	rel;
	BlockNumber first_block;
	int32		blocks;
	int64		subgroup_id;
	BufferAccessStrategy strategy;
	MemoryContext context;
	MemoryContext chunk_context;	/* the decoded chunk */
	TupleDesc	desc;
	ColumnTraits *traits;
	ZLColumnarHeader header;
	uint32	   *chunk_first_row;
	ZLChunkColumn *entries;
	char	   *minmax;
	bool	   *needed;			/* per attribute */
	int			loaded_chunk;	/* -1: none */
	uint32		loaded_first;
	uint32		loaded_rows;
	Datum	  **values;			/* [att][row of the loaded chunk] */
	bool	  **isnull;
	Buffer		buffer;
	BlockNumber buffer_block;
};

static void
corrupted(ZLColumnarReader *r, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("columnar sub-group " INT64_FORMAT " of table \"%s\" is damaged",
					r->subgroup_id, RelationGetRelationName(r->rel)),
			 errdetail("%s", what),
			 errhint("Restore the table from a backup; zipper_lake.verify() lists what it finds.")));
}

/* copy len bytes of the stream from offset on */
static void
read_stream(ZLColumnarReader *r, uint64 offset, Size len, char *dst)
{
	while (len > 0)
	{
		BlockNumber block = r->first_block + (BlockNumber) (offset / ZL_STREAM_PAGE_BYTES);
		Size		in_page = offset % ZL_STREAM_PAGE_BYTES;
		Size		take = Min(len, ZL_STREAM_PAGE_BYTES - in_page);
		Page		page;

		if (block >= r->first_block + r->blocks)
			corrupted(r, "Its data runs past its blocks.");
		if (!BufferIsValid(r->buffer) || r->buffer_block != block)
		{
			if (BufferIsValid(r->buffer))
				ReleaseBuffer(r->buffer);
			r->buffer = ReadBufferExtended(r->rel, MAIN_FORKNUM, block, RBM_NORMAL,
										   r->strategy);
			r->buffer_block = block;
		}
		page = BufferGetPage(r->buffer);
		if (((PageHeader) page)->pd_lower < SizeOfPageHeaderData + in_page + take)
			corrupted(r, "A page ends before its data.");
		memcpy(dst, (char *) page + SizeOfPageHeaderData + in_page, take);
		dst += take;
		offset += take;
		len -= take;
	}
}

ZLColumnarReader *
zl_columnar_open(Relation rel, const ZLSubGroup *sg, BufferAccessStrategy strategy)
{
	MemoryContext context = AllocSetContextCreate(CurrentMemoryContext,
												  "zipper_lake columnar reader",
												  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(context);
	ZLColumnarReader *r = palloc0(sizeof(ZLColumnarReader));
	char	   *directory;
	uint32		nchunks;

	r->rel = rel;
	r->first_block = sg->first_block;
	r->blocks = sg->blocks;
	r->subgroup_id = sg->subgroup_id;
	r->strategy = strategy;
	r->context = context;
	r->chunk_context = AllocSetContextCreate(context, "zipper_lake columnar chunk",
											 ALLOCSET_DEFAULT_SIZES);
	r->desc = RelationGetDescr(rel);
	r->buffer = InvalidBuffer;
	r->loaded_chunk = -1;

	read_stream(r, 0, sizeof(ZLColumnarHeader), (char *) &r->header);
	nchunks = r->header.nchunks;
	if (r->header.magic != ZL_COLUMNAR_MAGIC)
		corrupted(r, "Its first page does not start a columnar sub-group.");
	if (r->header.natts > (uint32) r->desc->natts || r->header.nrows != sg->row_count ||
		(nchunks == 0) != (r->header.nrows == 0) || nchunks > r->header.nrows ||
		r->header.directory_bytes < MINMAX_OFFSET(nchunks, r->header.natts) + r->header.minmax_bytes ||
		stream_pages((uint64) r->header.directory_bytes + r->header.data_bytes) > (BlockNumber) sg->blocks)
		corrupted(r, psprintf("Its header counts %u rows in %u chunks of %u columns in %u blocks.",
							  r->header.nrows, nchunks, r->header.natts, sg->blocks));
	directory = palloc(r->header.directory_bytes);
	read_stream(r, 0, r->header.directory_bytes, directory);
	r->chunk_first_row = (uint32 *) (directory + CHUNK_STARTS_OFFSET);
	r->entries = (ZLChunkColumn *) (directory + ENTRIES_OFFSET(nchunks));
	r->minmax = directory + MINMAX_OFFSET(nchunks, r->header.natts);
	for (uint32 c = 0; c < nchunks; c++)
		if ((c == 0 ? r->chunk_first_row[c] != 0 :
			 r->chunk_first_row[c] <= r->chunk_first_row[c - 1]) ||
			r->chunk_first_row[c] >= r->header.nrows)
			corrupted(r, psprintf("Chunk %u starts at row %u.", c, r->chunk_first_row[c]));

	r->traits = column_traits(r->desc);
	r->needed = palloc(sizeof(bool) * Max(r->desc->natts, 1));
	memset(r->needed, true, sizeof(bool) * r->desc->natts);
	r->values = palloc0(sizeof(Datum *) * Max(r->desc->natts, 1));
	r->isnull = palloc0(sizeof(bool *) * Max(r->desc->natts, 1));
	MemoryContextSwitchTo(old);
	return r;
}

/* decode only these attributes (bool per attribute); the rest read as NULL */
void
zl_columnar_set_columns(ZLColumnarReader *r, const bool *needed)
{
	memcpy(r->needed, needed, sizeof(bool) * r->desc->natts);
	r->loaded_chunk = -1;
}

void
zl_columnar_close(ZLColumnarReader *r)
{
	if (BufferIsValid(r->buffer))
		ReleaseBuffer(r->buffer);
	MemoryContextDelete(r->context);
}

int
zl_columnar_nchunks(const ZLColumnarReader *r)
{
	return (int) r->header.nchunks;
}

/* the first row of a chunk; nchunks gives the row count */
uint32
zl_columnar_chunk_start(const ZLColumnarReader *r, int chunk)
{
	return chunk >= (int) r->header.nchunks ? r->header.nrows : r->chunk_first_row[chunk];
}

/* the chunk holding a row */
int
zl_columnar_chunk_of(const ZLColumnarReader *r, uint32 row)
{
	int			lo = 0,
				hi = (int) r->header.nchunks - 1;

	if (r->loaded_chunk >= 0 && row >= r->loaded_first &&
		row < r->loaded_first + r->loaded_rows)
		return r->loaded_chunk;
	while (lo < hi)
	{
		int			mid = (lo + hi + 1) / 2;

		if (r->chunk_first_row[mid] <= row)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

static const ZLChunkColumn *
chunk_entry(const ZLColumnarReader *r, int chunk, int att)
{
	return &r->entries[(Size) chunk * r->header.natts + att];
}

/*
 * What a chunk holds of an attribute: *all_null and *has_nulls (unless the
 * column was added after the sub-group was written), and true with the
 * smallest and largest value (allocated with the reader) if they were
 * kept or every value is null.
 */
bool
zl_columnar_chunk_range(const ZLColumnarReader *r, int chunk, AttrNumber attnum,
						bool *all_null, bool *has_nulls, Datum *min, Datum *max)
{
	const ZLChunkColumn *e;
	const char *p;
	MemoryContext old;
	uint32		rows = zl_columnar_chunk_start(r, chunk + 1) - zl_columnar_chunk_start(r, chunk);

	if (attnum < 1 || attnum > (AttrNumber) r->header.natts)
		return false;
	e = chunk_entry(r, chunk, attnum - 1);
	*all_null = e->nulls >= rows;
	*has_nulls = e->nulls > 0;
	if (*all_null)
		return true;
	if (e->minmax_bytes == 0 ||
		e->minmax_offset + e->minmax_bytes > r->header.minmax_bytes)
		return false;
	p = r->minmax + e->minmax_offset;
	old = MemoryContextSwitchTo(r->context);	/* freed with the reader */
	*min = read_minmax_value(&p, &r->traits[attnum - 1]);
	*max = read_minmax_value(&p, &r->traits[attnum - 1]);
	MemoryContextSwitchTo(old);
	return true;
}

/* decode one attribute of a chunk into values/isnull (rows of the chunk) */
static void
decode_column(ZLColumnarReader *r, int chunk, int att, uint32 nrows,
			  Datum *values, bool *isnull)
{
	const ZLChunkColumn *e = chunk_entry(r, chunk, att);
	const ColumnTraits *t = &r->traits[att];
	char	   *raw;
	Size		off = 0;
	uint32		nvalues;

	if (e->encoding == ZL_ENC_NULLS)
	{
		memset(isnull, true, sizeof(bool) * nrows);
		return;
	}
	if (e->nulls > nrows || e->offset + e->stored_bytes > r->header.data_bytes ||
		e->encoding > ZL_ENC_DICT)
		corrupted(r, psprintf("Chunk %d of column %d has a bad entry.", chunk, att + 1));

	raw = palloc(Max(e->raw_bytes, 1));
	if (e->compressed)
	{
		char	   *stored = palloc(e->stored_bytes);
		size_t		got;

		read_stream(r, r->header.directory_bytes + e->offset, e->stored_bytes, stored);
		got = ZSTD_decompress(raw, e->raw_bytes, stored, e->stored_bytes);
		if (ZSTD_isError(got) || got != e->raw_bytes)
			corrupted(r, psprintf("Chunk %d of column %d does not decompress.", chunk, att + 1));
		pfree(stored);
	}
	else
	{
		if (e->stored_bytes != e->raw_bytes)
			corrupted(r, psprintf("Chunk %d of column %d has a bad entry.", chunk, att + 1));
		read_stream(r, r->header.directory_bytes + e->offset, e->raw_bytes, raw);
	}

	if (e->nulls > 0)
	{
		Size		bitmap = (nrows + 7) / 8;

		if (MAXALIGN(bitmap) > e->raw_bytes)
			corrupted(r, psprintf("Chunk %d of column %d is too short.", chunk, att + 1));
		for (uint32 i = 0; i < nrows; i++)
			isnull[i] = (raw[i >> 3] & (1 << (i & 7))) != 0;
		off = MAXALIGN(bitmap);
	}
	else
		memset(isnull, false, sizeof(bool) * nrows);
	nvalues = nrows - e->nulls;

	if (e->encoding == ZL_ENC_DELTA)
	{
		int64		prev = 0;

		for (uint32 i = 0; i < nrows; i++)
		{
			if (isnull[i])
				continue;
			prev = (int64) ((uint64) prev +
							(uint64) unzigzag(read_varint(raw, e->raw_bytes, &off)));
			values[i] = int64_as_byval(t->len, prev);
		}
	}
	else if (e->encoding == ZL_ENC_PLAIN && t->byval)
	{
		if (off + (Size) nvalues * t->len > e->raw_bytes)
			corrupted(r, psprintf("Chunk %d of column %d is too short.", chunk, att + 1));
		for (uint32 i = 0; i < nrows; i++)
			if (!isnull[i])
			{
				values[i] = read_byval(raw + off, t->len);
				off += t->len;
			}
	}
	else if (e->encoding == ZL_ENC_PLAIN)
	{
		for (uint32 i = 0; i < nrows; i++)
			if (!isnull[i])
				values[i] = next_ref_value(raw, e->raw_bytes, &off, t);
	}
	else
	{
		uint32		counts[2];
		Datum	   *dictionary;
		Size		dict_off;
		Size		codes_at;
		int			width;

		if (off + sizeof(counts) > e->raw_bytes)
			corrupted(r, psprintf("Chunk %d of column %d is too short.", chunk, att + 1));
		memcpy(counts, raw + off, sizeof(counts));
		dict_off = MAXALIGN(off + sizeof(counts));
		codes_at = dict_off + counts[1];
		width = counts[0] <= 256 ? 1 : 2;
		if (counts[0] == 0 || counts[0] > 65536 ||
			codes_at + (Size) nvalues * width > e->raw_bytes)
			corrupted(r, psprintf("Chunk %d of column %d has a bad dictionary.", chunk, att + 1));
		dictionary = palloc(sizeof(Datum) * counts[0]);
		off = 0;
		for (uint32 d = 0; d < counts[0]; d++)
			dictionary[d] = next_ref_value(raw + dict_off, counts[1], &off, t);
		off = codes_at;
		for (uint32 i = 0; i < nrows; i++)
		{
			uint16		code;

			if (isnull[i])
				continue;
			if (width == 1)
				code = (uint8) raw[off];
			else
				memcpy(&code, raw + off, sizeof(code));
			off += width;
			if (code >= counts[0])
				corrupted(r, psprintf("Chunk %d of column %d has a bad code.", chunk, att + 1));
			values[i] = dictionary[code];
		}
	}
}

/* decode the needed attributes of a chunk */
static void
load_chunk(ZLColumnarReader *r, int chunk)
{
	MemoryContext old;
	uint32		first = zl_columnar_chunk_start(r, chunk);
	uint32		rows = zl_columnar_chunk_start(r, chunk + 1) - first;

	MemoryContextReset(r->chunk_context);
	r->loaded_chunk = -1;
	old = MemoryContextSwitchTo(r->chunk_context);
	for (int att = 0; att < r->desc->natts; att++)
	{
		r->values[att] = NULL;
		r->isnull[att] = NULL;
		if (!r->needed[att] || r->traits[att].dropped)
			continue;
		r->values[att] = palloc(sizeof(Datum) * rows);
		r->isnull[att] = palloc(sizeof(bool) * rows);
		if (att < (int) r->header.natts)
			decode_column(r, chunk, att, rows, r->values[att], r->isnull[att]);
		else
		{
			/* a column added later: its default, as heap rows read it */
			bool		isnull;
			Datum		v = getmissingattr(r->desc, att + 1, &isnull);

			for (uint32 i = 0; i < rows; i++)
			{
				r->values[att][i] = v;
				r->isnull[att][i] = isnull;
			}
		}
	}
	MemoryContextSwitchTo(old);
	r->loaded_chunk = chunk;
	r->loaded_first = first;
	r->loaded_rows = rows;
}

/*
 * The values of a row (position) into values/isnull; attributes not needed
 * read as NULL.  They stay valid until a row of another chunk is read.
 */
void
zl_columnar_row(ZLColumnarReader *r, uint32 row, Datum *values, bool *isnull)
{
	uint32		i;

	if (row >= r->header.nrows)
		corrupted(r, psprintf("Row %u was asked of %u rows.", row, r->header.nrows));
	if (r->loaded_chunk < 0 || row < r->loaded_first ||
		row >= r->loaded_first + r->loaded_rows)
		load_chunk(r, zl_columnar_chunk_of(r, row));
	i = row - r->loaded_first;
	for (int att = 0; att < r->desc->natts; att++)
	{
		if (r->values[att] == NULL)
		{
			values[att] = (Datum) 0;
			isnull[att] = true;
		}
		else
		{
			values[att] = r->values[att][i];
			isnull[att] = r->isnull[att][i];
		}
	}
}

/* stored (compressed) and raw bytes of the chunks, and the directory's */
void
zl_columnar_sizes(const ZLColumnarReader *r, int64 *stored, int64 *raw, int64 *directory)
{
	*stored = (int64) r->header.data_bytes;
	*raw = (int64) r->header.raw_bytes;
	*directory = (int64) r->header.directory_bytes;
}

/*
 * verify(): does every chunk's min/max hold its values, and its null count
 * its nulls?  NULL if so, else what is wrong with the first that does not.
 */
char *
zl_columnar_check_chunks(Relation rel, const ZLSubGroup *sg)
{
	ZLColumnarReader *r = zl_columnar_open(rel, sg, NULL);
	char	   *problem = NULL;

	for (int chunk = 0; chunk < (int) r->header.nchunks && problem == NULL; chunk++)
	{
		uint32		rows = zl_columnar_chunk_start(r, chunk + 1) - zl_columnar_chunk_start(r, chunk);

		CHECK_FOR_INTERRUPTS();
		load_chunk(r, chunk);
		for (int att = 0; att < (int) r->header.natts && problem == NULL; att++)
		{
			const ColumnTraits *t = &r->traits[att];
			bool		all_null,
						has_nulls;
			Datum		min,
						max;
			uint32		nulls = 0;
			bool		known;

			if (t->dropped)
				continue;
			known = zl_columnar_chunk_range(r, chunk, att + 1, &all_null, &has_nulls, &min, &max);
			for (uint32 i = 0; i < rows && problem == NULL; i++)
			{
				if (r->isnull[att][i])
				{
					nulls++;
					continue;
				}
				if (known && !all_null && t->has_order &&
					(DatumGetInt32(FunctionCall2Coll(&r->traits[att].cmp, t->collation,
													 r->values[att][i], min)) < 0 ||
					 DatumGetInt32(FunctionCall2Coll(&r->traits[att].cmp, t->collation,
													 r->values[att][i], max)) > 0))
					problem = psprintf("Chunk %d of column %d holds a value outside its min/max.",
									   chunk, att + 1);
			}
			if (problem == NULL && nulls != chunk_entry(r, chunk, att)->nulls)
				problem = psprintf("Chunk %d of column %d holds %u nulls, its entry says %u.",
								   chunk, att + 1, nulls, chunk_entry(r, chunk, att)->nulls);
		}
	}
	zl_columnar_close(r);
	return problem;
}
