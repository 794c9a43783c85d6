/*-------------------------------------------------------------------------
 *
 * zl_columnar_write.c
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
 * (ZL_CHUNK_ROWS_DEFAULT, 1,024), fewer when the chunk's
 * values reach ZL_CHUNK_BYTES (wide values).  Each column of a chunk is
 * encoded on its own, into a "raw" buffer:
 *
 *  - a null bitmap first when the chunk has nulls (none at all when every
 *    value is null: NULLS);
 *  - PACKED for pass-by-value columns of 2, 4 or 8 bytes: each value's
 *    difference from the chunk's smallest, in as many bits as the largest
 *    needs (keys, amounts, end times), read where it lies;
 *  - DELTA for such columns when it is a quarter smaller still: zigzag
 *    varints of the differences of consecutive values, so the sorted
 *    valid_from takes a byte or two a row and runs of one value a byte
 *    each before compression (a value is read by summing from the chunk's
 *    start);
 *  - DICT for other columns whose chunk repeats its values (at most a
 *    quarter distinct): each distinct value once, then a 1- or 2-byte code
 *    a row;
 *  - PLAIN otherwise: pass-by-value columns as their bytes, others laid out
 *    as in a heap tuple (aligned, short varlena headers where they fit), so
 *    decoded values point into the chunk's buffer; short varlenas are
 *    widened to 4-byte headers when a row is handed out, once, rather than
 *    by every function that reads them.
 *
 * The raw buffer is then compressed with zstd (or lz4, as
 * zipper_lake.columnar_compression says) when that saves bytes; the entry
 * records the codec.  A chunk column of at least ZL_FRAMES_MIN_RAW_BYTES
 * raw bytes and more than ZL_FRAME_ROWS rows (lz4: ZL_LZ4_* of both) is
 * cut into independent frames, its head and every ZL_FRAME_ROWS rows' values
 * (ZL_CODEC_ZSTD_FRAMES, ZL_CODEC_LZ4_FRAMES: zl_columnar_internal.h), so
 * a key probe decompresses about a quarter of it (lz4: a sixteenth of a
 * chunk of 1,024 rows); the encoders mark where
 * each frame's rows begin as they write them (FrameMarks).
 * Values are detoasted as they are written: a columnar sub-group never
 * refers to TOAST, so it shares nothing with the rows it was made from.
 *
 * Every chunk-column entry says where its bytes are, so a reader decodes
 * just the chunks and columns it needs, and keeps the smallest and largest
 * value of the chunk under the column type's default btree ordering and
 * the column's collation (values up to ZL_MINMAX_MAX_BYTES; the btree
 * orderings put NaN above every number, as their operators do), so scans
 * skip chunks by predicates on any column (zl_chunkfilter*.c) and by their
 * valid_from range.  The min/max stay with the sub-group, in its pages,
 * rather than in the catalog row every scan loads: only a scan that reads
 * the sub-group pays for them, and they are immutable with it.
 *
 * Positions
 * ---------
 * A row's position in a columnar sub-group is its ordinal, so masks and
 * key directories work as with rows.  ANALYZE and TABLESAMPLE spread the
 * positions evenly over the sub-group's blocks (zl_position_page_item), so
 * that a sampled block stands for its share of the rows.
 *
 * Memory
 * ------
 * The writer holds one chunk of values (columnar_chunk_rows rows or
 * ZL_CHUNK_BYTES counting each value's Datum and null flag, plus the value
 * that crossed it) and the directory;
 * encoded chunks wait until the page count of the sub-group is known and
 * its place chosen: in memory up to ZL_SIDE_KB (1 MB), beyond that in a
 * temporary file.  Reading: zl_columnar_read.c.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_guc.h"
#include "storage/columnar/zl_columnar_internal.h"

#include <lz4.h>
#include <lz4hc.h>
#include <zstd.h>

#include "access/detoast.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "storage/buffile.h"
#include "utils/datum.h"
#include "utils/memutils.h"
#include "utils/typcache.h"

/*
 * Where the value frames of a chunk column start in its raw bytes, as its
 * encoder wrote them (frame codecs): value frame k holds rows
 * [k * frame_rows, (k + 1) * frame_rows).
 */
typedef struct FrameMarks
{
	int			frame_rows;
	int			nvalue_frames;	/* 0: not marked, stored in one frame */
	bool		has_prev;		/* DELTA: prev is the sum before each */
	uint32		start[ZL_MAX_VALUE_FRAMES];
	int64		prev[ZL_MAX_VALUE_FRAMES];
} FrameMarks;

/* rows the writer's chunk arrays have room for at first (they double) */
#define ZL_FIRST_CAPACITY		64

/*
 * The zstd compression context of the backend: making one per call costs
 * more than compressing a small chunk column.
 */
static ZSTD_CCtx *
compress_context(void)
{
	static ZSTD_CCtx *cctx = NULL;

	if (cctx == NULL && (cctx = ZSTD_createCCtx()) == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	return cctx;
}

/* what the format needs to know of each attribute */
ColumnTraits *
zl_columnar_traits(TupleDesc desc)
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
			/* their btree order is that of the signed integer they hold */
			traits[i].integer_order = att->attbyval &&
				(tc->type_id == INT2OID || tc->type_id == INT4OID || tc->type_id == INT8OID ||
				 tc->type_id == DATEOID || tc->type_id == TIMEOID ||
				 tc->type_id == TIMESTAMPOID || tc->type_id == TIMESTAMPTZOID);
		}
	}
	return traits;
}

static void
append_padding(StringInfo buf, Size aligned)
{
	if ((Size) buf->len < aligned)
	{
		int			pad = (int) (aligned - buf->len);

		enlargeStringInfo(buf, pad);
		memset(buf->data + buf->len, 0, pad + 1);	/* and the terminating zero */
		buf->len += pad;
	}
}

/* append a pass-by-reference value to a PLAIN area, as heap tuples lay them out */
static void
append_ref_value(StringInfo buf, const ColumnTraits *t, Datum value)
{
	char	   *p = DatumGetPointer(value);

	if (t->len == -1 && VARATT_IS_SHORT(p))
	{
		appendBinaryStringInfo(buf, p, VARSIZE_SHORT(p));
		return;
	}
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

static int64
byval_as_int64(int16 len, Datum value)
{
	return len == 8 ? DatumGetInt64(value) :
		len == 4 ? (int64) DatumGetInt32(value) : (int64) DatumGetInt16(value);
}

/* min/max values: a uint16 length, then the bytes of value_size() */
static void
append_minmax_value(StringInfo buf, const ColumnTraits *t, Datum value)
{
	char	   *p = DatumGetPointer(value);
	uint16		len;

	if (t->len == -1)
	{
		/* always with a 4-byte header, which readers use as it is */
		varattrib_4b header;

		len = (uint16) (VARSIZE_ANY_EXHDR(p) + VARHDRSZ);
		SET_VARSIZE(&header, len);
		appendBinaryStringInfo(buf, (char *) &len, sizeof(len));
		appendBinaryStringInfo(buf, (char *) &header, VARHDRSZ);
		appendBinaryStringInfo(buf, VARDATA_ANY(p), len - VARHDRSZ);
		return;
	}
	len = (uint16) value_size(t, value);
	appendBinaryStringInfo(buf, (char *) &len, sizeof(len));
	if (t->byval)
		append_byval(buf, t->len, value);
	else
		appendBinaryStringInfo(buf, p, len);
}

/* ---------- the writer ---------- */

struct ZLColumnarWriter
{
	TupleDesc	desc;
	int			natts;
	ColumnTraits *traits;
	MemoryContext context;
	MemoryContext chunk_context;	/* the buffered chunk's values */
	char	   *arena;			/* values are cut from blocks of it */
	Size		arena_left;
	Datum	   *row_values;
	bool	   *row_isnull;
	Datum	  **values;			/* [att][row of the chunk] */
	bool	  **isnull;
	int			chunk_rows;
	int			max_chunk_rows;
	int			capacity;		/* rows values/isnull have room for */
	Size		chunk_bytes;
	uint32		nrows;

	uint32	   *chunk_first_row;
	ZLChunkColumn *entries;		/* nchunks * natts */
	int			nchunks;
	int			max_chunks;
	StringInfoData minmax;

	StringInfoData data_head;	/* encoded chunks, till ZL_SIDE_KB */
	BufFile    *data;			/* then all of them, in a temporary file */
	uint64		data_bytes;
	uint64		raw_bytes;
	StringInfoData raw;
	FrameMarks *marks;			/* per attribute, of its last encoding */
	int			compression;	/* ZLCompression, as set when it began */
	char	   *compressed;
	Size		compressed_size;
	StringInfoData directory;
	bool		finished;
};

/* bytes for a buffered value: cut from blocks of the chunk's memory */
#define ZL_ARENA_BLOCK		(64 * 1024)

static char *
chunk_bytes_alloc(ZLColumnarWriter *w, Size len)
{
	char	   *p;

	len = MAXALIGN(len);
	if (w->arena_left < len)
	{
		Size		block = Max(len, ZL_ARENA_BLOCK);

		w->arena = MemoryContextAlloc(w->chunk_context, block);
		w->arena_left = block;
	}
	p = w->arena;
	w->arena += len;
	w->arena_left -= len;
	return p;
}

ZLColumnarWriter *
zl_columnar_writer_begin(TupleDesc desc, int compression)
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
	w->traits = zl_columnar_traits(desc);
	w->row_values = palloc(sizeof(Datum) * Max(w->natts, 1));
	w->row_isnull = palloc(sizeof(bool) * Max(w->natts, 1));
	w->values = palloc(sizeof(Datum *) * Max(w->natts, 1));
	w->isnull = palloc(sizeof(bool *) * Max(w->natts, 1));
	w->max_chunk_rows = zipper_lake_columnar_chunk_rows;
	w->capacity = ZL_FIRST_CAPACITY;
	w->compression = compression;
	for (int i = 0; i < w->natts; i++)
	{
		w->values[i] = palloc(sizeof(Datum) * ZL_FIRST_CAPACITY);
		w->isnull[i] = palloc(sizeof(bool) * ZL_FIRST_CAPACITY);
	}
	w->max_chunks = 8;
	w->chunk_first_row = palloc(sizeof(uint32) * w->max_chunks);
	w->marks = palloc0(sizeof(FrameMarks) * Max(w->natts, 1));
	w->entries = palloc0(sizeof(ZLChunkColumn) * w->max_chunks * Max(w->natts, 1));
	initStringInfo(&w->minmax);
	initStringInfo(&w->raw);
	initStringInfo(&w->data_head);
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

/*
 * DELTA encoding of pass-by-value values, marking its frames (marks may be
 * NULL); its size first when raw is NULL
 */
static Size
encode_delta(StringInfo raw, const ColumnTraits *t, const Datum *values,
			 const bool *isnull, int n, FrameMarks *marks)
{
	int64		prev = 0;
	Size		size = 0;

	for (int i = 0; i < n; i++)
	{
		int64		v;
		uint64		z;

		if (raw && marks && i % marks->frame_rows == 0)
		{
			marks->start[i / marks->frame_rows] = raw->len;
			marks->prev[i / marks->frame_rows] = prev;
		}
		if (isnull[i])
			continue;
		v = byval_as_int64(t->len, values[i]);
		z = zl_zigzag((int64) ((uint64) v - (uint64) prev));
		prev = v;
		if (raw)
			zl_varint_append(raw, z);
		else
			size += zl_varint_size(z);
	}
	return size;
}

/*
 * PACKED encoding: the bits a pass-by-value chunk column needs as
 * differences from its smallest value (*min).
 */
static int
packed_width(const ColumnTraits *t, const Datum *values, const bool *isnull, int n, int64 *min)
{
	int64		lo = PG_INT64_MAX,
				hi = PG_INT64_MIN;
	uint64		range;

	for (int i = 0; i < n; i++)
	{
		int64		v;

		if (isnull[i])
			continue;
		v = byval_as_int64(t->len, values[i]);
		lo = Min(lo, v);
		hi = Max(hi, v);
	}
	*min = lo;
	range = (uint64) hi - (uint64) lo;
	return range == 0 ? 0 : pg_leftmost_one_pos64(range) + 1;
}

static void
encode_packed(StringInfo raw, const ColumnTraits *t, const Datum *values, const bool *isnull,
			  int n, int64 min, int width)
{
	uint8		w = (uint8) width;
	Size		start;
	uint8	   *bits;
	uint64		bitpos = 0;
	int			nvalues = 0;

	appendBinaryStringInfo(raw, (char *) &min, sizeof(min));
	appendBinaryStringInfo(raw, (char *) &w, 1);
	append_padding(raw, MAXALIGN(raw->len));
	for (int i = 0; i < n; i++)
		nvalues += isnull[i] ? 0 : 1;
	start = raw->len;
	append_padding(raw, start + PACKED_BYTES(nvalues, width));
	bits = (uint8 *) raw->data + start;
	for (int i = 0; i < n; i++)
	{
		uint64		v;

		if (isnull[i])
			continue;
		v = (uint64) byval_as_int64(t->len, values[i]) - (uint64) min;
		for (int b = 0; b < width;)
		{
			int			shift = (int) ((bitpos + b) & 7);
			int			take = Min(8 - shift, width - b);

			bits[(bitpos + b) >> 3] |= (uint8) (((v >> b) & ((1u << take) - 1)) << shift);
			b += take;
		}
		bitpos += width;
	}
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

/*
 * The smallest and largest non-null value of a chunk column: of its rows,
 * or (rows given, isnull NULL) of those rows, its dictionary's firsts.
 */
static void
find_minmax(const ColumnTraits *t, const Datum *values, const bool *isnull,
			const int *rows, int n, Datum *min, Datum *max)
{
	bool		first = true;

	for (int k = 0; k < n; k++)
	{
		int			i = rows ? rows[k] : k;

		if (isnull != NULL && isnull[i])
			continue;
		if (first)
		{
			*min = *max = values[i];
			first = false;
			continue;
		}
		if (t->integer_order)
		{
			int64		v = byval_as_int64(t->len, values[i]);

			if (v < byval_as_int64(t->len, *min))
				*min = values[i];
			else if (v > byval_as_int64(t->len, *max))
				*max = values[i];
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

/*
 * Mark the frames of values of a fixed number of bits each, the first at
 * values_at: a frame starts at the byte holding its first row's value
 * (PACKED values may share a byte with the frame before).
 */
static void
mark_fixed_width(FrameMarks *marks, const bool *isnull, int n, Size values_at, int bits)
{
	uint64		before = 0;		/* non-null values before row i */

	for (int i = 0; i < n; i++)
	{
		if (i % marks->frame_rows == 0)
			marks->start[i / marks->frame_rows] = (uint32) (values_at + before * bits / 8);
		before += isnull[i] ? 0 : 1;
	}
}

/* the rows a value frame holds at least, by the writer's codec */
static inline int
frame_rows_at_least(const ZLColumnarWriter *w)
{
	return w->compression == ZL_COMPRESSION_LZ4 ? ZL_LZ4_FRAME_ROWS : ZL_FRAME_ROWS;
}

/* the raw bytes from which a chunk column is cut into frames */
static inline Size
frames_min_raw_bytes(const ZLColumnarWriter *w)
{
	return w->compression == ZL_COMPRESSION_LZ4 ?
		ZL_LZ4_FRAMES_MIN_RAW_BYTES : ZL_FRAMES_MIN_RAW_BYTES;
}

/*
 * encode one column of the buffered chunk into w->raw; fills the entry and
 * the column's frame marks
 */
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
	FrameMarks *marks = &w->marks[att];

	resetStringInfo(raw);
	marks->frame_rows = Max(frame_rows_at_least(w),
							(n + ZL_MAX_VALUE_FRAMES - 1) / ZL_MAX_VALUE_FRAMES);
	marks->nvalue_frames = (n + marks->frame_rows - 1) / marks->frame_rows;
	marks->has_prev = false;
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
		Size		delta = plain;
		Size		packed = plain;
		int64		min = 0;
		int			width = 0;

		/* 1-byte values (bool, "char") are stored as they are */
		if (t->len >= 2)
		{
			delta = encode_delta(NULL, t, values, isnull, n, NULL);
			width = packed_width(t, values, isnull, n, &min);
			packed = PACKED_HEADER_BYTES + PACKED_BYTES(n - nulls, width);
		}

		/*
		 * Deltas must be summed from the start of the chunk to read one value;
		 * packed values are read where they lie: those unless deltas are a
		 * quarter smaller (sorted columns: valid_from).
		 */
		if (delta < plain && delta * 4 < packed * 3)
		{
			entry->encoding = ZL_ENC_DELTA;
			marks->has_prev = true;
			(void) encode_delta(raw, t, values, isnull, n, marks);
		}
		else if (packed < plain)
		{
			entry->encoding = ZL_ENC_PACKED;
			encode_packed(raw, t, values, isnull, n, min, width);
			mark_fixed_width(marks, isnull, n, raw->len - PACKED_BYTES(n - nulls, width), width);
		}
		else
		{
			entry->encoding = ZL_ENC_PLAIN;
			mark_fixed_width(marks, isnull, n, raw->len, t->len * 8);
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
			mark_fixed_width(marks, isnull, n, raw->len, ndistinct <= 256 ? 8 : 16);
			if (ndistinct <= 256)
			{
				enlargeStringInfo(raw, n - nulls);
				for (int k = 0; k < n - nulls; k++)
					raw->data[raw->len++] = (char) codes[k];
				raw->data[raw->len] = '\0';
			}
			else
				appendBinaryStringInfo(raw, (char *) codes, sizeof(uint16) * (n - nulls));
		}
		else
		{
			entry->encoding = ZL_ENC_PLAIN;
			for (int i = 0; i < n; i++)
			{
				if (i % marks->frame_rows == 0)
					marks->start[i / marks->frame_rows] = raw->len;
				if (!isnull[i])
					append_ref_value(raw, t, values[i]);
			}
		}
	}

	/* min and max, if the type has an ordering and they are small */
	entry->minmax_bytes = 0;
	if (t->has_order)
	{
		Datum		min = 0,
					max = 0;

		if (entry->encoding == ZL_ENC_DICT)
			find_minmax(t, values, NULL, firsts, ndistinct, &min, &max);
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

/*
 * Keep encoded bytes: in memory while they are few (most history
 * sub-groups), then in a temporary file (see "Memory").
 */
static void
append_data(ZLColumnarWriter *w, char *bytes, size_t len)
{
	if (w->data == NULL && w->data_head.len + len > (Size) ZL_SIDE_KB * 1024)
	{
		MemoryContext old = MemoryContextSwitchTo(w->context);

		w->data = BufFileCreateTemp(false);
		BufFileWrite(w->data, w->data_head.data, w->data_head.len);
		pfree(w->data_head.data);
		w->data_head.data = NULL;
		MemoryContextSwitchTo(old);
	}
	if (w->data != NULL)
		BufFileWrite(w->data, bytes, len);
	else
		appendBinaryStringInfo(&w->data_head, bytes, len);
}

/* the compression buffer, of at least bound bytes */
static char *
compression_buffer(ZLColumnarWriter *w, Size bound)
{
	if (bound > w->compressed_size)
	{
		if (w->compressed)
			pfree(w->compressed);
		w->compressed = MemoryContextAllocHuge(w->context, bound);
		w->compressed_size = bound;
	}
	return w->compressed;
}

/*
 * compress src into dst (capacity bytes) with the writer's codec; its
 * length.  An lz4 frame is compressed harder (lz4hc: slower to write, as
 * fast to read), to win back what cutting the chunk column loses.
 */
static Size
compress_bytes(ZLColumnarWriter *w, char *dst, Size capacity, const char *src, Size len,
			   bool frame)
{
	if (w->compression == ZL_COMPRESSION_LZ4)
	{
		int			n = frame ?
			LZ4_compress_HC(src, dst, (int) len, (int) capacity, LZ4HC_CLEVEL_DEFAULT) :
			LZ4_compress_default(src, dst, (int) len, (int) capacity);

		if (n <= 0)
			elog(ERROR, "lz4 compression failed");
		return (Size) n;
	}
	else
	{
		size_t		n = ZSTD_compressCCtx(compress_context(), dst, capacity, src, len, ZL_ZSTD_LEVEL);

		if (ZSTD_isError(n))
			elog(ERROR, "zstd compression failed: %s", ZSTD_getErrorName(n));
		return n;
	}
}

/* the most compress_bytes can make of len bytes */
static Size
compress_bound(ZLColumnarWriter *w, Size len)
{
	return w->compression == ZL_COMPRESSION_LZ4 ? (Size) LZ4_compressBound((int) len) :
		ZSTD_compressBound(len);
}

/*
 * A raw encoding in frames (ZL_CODEC_ZSTD_FRAMES, ZL_CODEC_LZ4_FRAMES) into
 * the compression buffer: its head and value frames, each compressed on
 * its own; returns its bytes.
 */
static Size
compress_frames(ZLColumnarWriter *w, const StringInfoData *raw, const FrameMarks *marks)
{
	int			nframes = marks->nvalue_frames + 1;
	Size		table = sizeof(ZLFramesHeader) + sizeof(ZLFrameEnd) * nframes +
		(marks->has_prev ? sizeof(int64) * marks->nvalue_frames : 0);
	Size		bound = table;
	ZLFramesHeader header;
	char	   *out;
	Size		stored = 0;

	header.nframes = (uint16) nframes;
	header.frame_rows = (uint16) marks->frame_rows;
	for (int f = 0; f < nframes; f++)
	{
		Size		raw_start = f == 0 ? 0 : marks->start[f - 1];
		Size		raw_end = f < marks->nvalue_frames ? marks->start[f] : (Size) raw->len;

		bound += compress_bound(w, raw_end - raw_start);
	}
	out = compression_buffer(w, bound);
	memcpy(out, &header, sizeof(header));
	if (marks->has_prev)
		memcpy(out + sizeof(header) + sizeof(ZLFrameEnd) * nframes, marks->prev,
			   sizeof(int64) * marks->nvalue_frames);
	for (int f = 0; f < nframes; f++)
	{
		Size		raw_start = f == 0 ? 0 : marks->start[f - 1];
		Size		raw_end = f < marks->nvalue_frames ? marks->start[f] : (Size) raw->len;
		ZLFrameEnd	end;

		Assert(raw_start <= raw_end && raw_end <= (Size) raw->len);
		if (raw_end > raw_start)
		{
			Size		clen = compress_bytes(w, out + table + stored, bound - table - stored,
											  raw->data + raw_start, raw_end - raw_start, true);

			/* a frame the codec does not shrink (a PACKED head) is kept as it is */
			if (clen >= raw_end - raw_start)
			{
				clen = raw_end - raw_start;
				memcpy(out + table + stored, raw->data + raw_start, clen);
			}
			stored += clen;
		}
		end.raw_end = (uint32) raw_end;
		end.stored_end = (uint32) stored;
		memcpy(out + sizeof(header) + sizeof(ZLFrameEnd) * f, &end, sizeof(end));
	}
	return table + stored;
}

/*
 * Append a column's raw encoding to the data, compressed if asked and that
 * saves bytes: in frames when it has marks (marks->nvalue_frames > 1) and
 * is large enough
 */
static void
store_column(ZLColumnarWriter *w, ZLChunkColumn *entry, const StringInfoData *raw,
			 const FrameMarks *marks, bool compress)
{
	char	   *bytes = raw->data;
	Size		len = raw->len;

	entry->offset = w->data_bytes;
	entry->raw_bytes = (uint32) len;
	entry->compressed = ZL_CODEC_NONE;
	if (len == 0)
	{
		entry->stored_bytes = 0;
		return;
	}
	if (compress && marks->nvalue_frames > 1 && len >= frames_min_raw_bytes(w))
	{
		Size		clen = compress_frames(w, raw, marks);

		if (clen < len)
		{
			bytes = w->compressed;
			len = clen;
			entry->compressed = w->compression == ZL_COMPRESSION_LZ4 ?
				ZL_CODEC_LZ4_FRAMES : ZL_CODEC_ZSTD_FRAMES;
		}
	}
	/* frames that save nothing: the chunk column may still shrink whole */
	if (compress && entry->compressed == ZL_CODEC_NONE && len > 64)
	{
		Size		bound = compress_bound(w, len);
		Size		clen;

		compression_buffer(w, bound);
		clen = compress_bytes(w, w->compressed, bound, bytes, len, false);
		if (clen < len)
		{
			bytes = w->compressed;
			len = clen;
			entry->compressed = w->compression == ZL_COMPRESSION_LZ4 ? ZL_CODEC_LZ4 : ZL_CODEC_ZSTD;
		}
	}
	append_data(w, bytes, len);
	entry->stored_bytes = (uint32) len;
	w->data_bytes += len;
	w->raw_bytes += entry->raw_bytes;
}

/* bytes of a sub-group's stream before its data: header, chunk starts, entries, min/max */
static Size
directory_bytes(int nchunks, int natts, Size minmax_bytes)
{
	return MAXALIGN(MINMAX_OFFSET(nchunks, natts) + minmax_bytes);
}

/*
 * Encode the buffered chunk, column by column.  The last chunk of a
 * sub-group that has no other (sub-groups of one chunk: most history a
 * batch closes in a window) is stored uncompressed when its stream fits
 * in one page anyway: a sub-group takes whole pages, so compressing it
 * would save no byte on disk and cost its writer and every reader time.
 */
static void
encode_chunk(ZLColumnarWriter *w, bool last)
{
	ZLChunkColumn *entries;
	StringInfoData *raws = NULL;
	bool		compress = true;

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
	if (last && w->nchunks == 0)
	{
		MemoryContext old = MemoryContextSwitchTo(w->context);
		Size		data = 0;

		/* every column encoded first (each adds its min/max), then measured */
		raws = palloc(sizeof(StringInfoData) * Max(w->natts, 1));
		for (int att = 0; att < w->natts; att++)
		{
			CHECK_FOR_INTERRUPTS();
			encode_column(w, att, &entries[att]);
			raws[att] = w->raw;
			initStringInfo(&w->raw);
			data += raws[att].len;
		}
		compress = directory_bytes(1, w->natts, w->minmax.len) + data > ZL_STREAM_PAGE_BYTES;
		MemoryContextSwitchTo(old);
	}
	for (int att = 0; att < w->natts; att++)
	{
		MemoryContext old = MemoryContextSwitchTo(w->context);

		CHECK_FOR_INTERRUPTS();
		if (raws != NULL)
		{
			store_column(w, &entries[att], &raws[att], &w->marks[att], compress);
			pfree(raws[att].data);
		}
		else
		{
			encode_column(w, att, &entries[att]);
			store_column(w, &entries[att], &w->raw, &w->marks[att], compress);
		}
		MemoryContextSwitchTo(old);
	}
	w->nchunks++;
	w->chunk_rows = 0;
	w->chunk_bytes = 0;
	MemoryContextReset(w->chunk_context);
	w->arena_left = 0;
}

/* add a row (copied); returns its position, the row's ordinal */
int32
zl_columnar_writer_add(ZLColumnarWriter *w, HeapTuple tuple)
{
	MemoryContext old;
	int			row = w->chunk_rows;

	Assert(!w->finished);
	if (row == w->capacity)
	{
		/* grown as rows come: a wide table's chunk ends at the byte cap first */
		w->capacity = Min(w->capacity * 2, w->max_chunk_rows);
		for (int att = 0; att < w->natts; att++)
		{
			w->values[att] = repalloc(w->values[att], sizeof(Datum) * w->capacity);
			w->isnull[att] = repalloc(w->isnull[att], sizeof(bool) * w->capacity);
		}
	}
	/* every value costs its Datum and null flag, and its bytes */
	w->chunk_bytes += (Size) w->natts * (sizeof(Datum) + sizeof(bool));
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

			/*
			 * Inline, uncompressed, with a 4-byte header: the min/max
			 * comparisons would otherwise copy every short value they
			 * detoast (the encoders write short headers again).
			 */
			if (VARATT_IS_EXTERNAL(p) || VARATT_IS_COMPRESSED(p))
				v = PointerGetDatum(detoast_attr(p));
			else if (VARATT_IS_SHORT(p))
			{
				Size		data_len = VARSIZE_SHORT(p) - VARHDRSZ_SHORT;
				struct varlena *wide = (struct varlena *) chunk_bytes_alloc(w, VARHDRSZ + data_len);

				SET_VARSIZE(wide, VARHDRSZ + data_len);
				memcpy(VARDATA(wide), VARDATA_SHORT(p), data_len);
				v = PointerGetDatum(wide);
			}
			else
			{
				char	   *copy = chunk_bytes_alloc(w, VARSIZE(p));

				memcpy(copy, p, VARSIZE(p));
				v = PointerGetDatum(copy);
			}
		}
		else if (!t->byval && t->len > 0)
		{
			char	   *copy = chunk_bytes_alloc(w, t->len);

			memcpy(copy, DatumGetPointer(v), t->len);
			v = PointerGetDatum(copy);
		}
		else if (!t->byval)
			v = datumCopy(v, false, t->len);
		w->values[att][row] = v;
		w->chunk_bytes += t->byval ? 0 : value_size(t, v);
	}
	MemoryContextSwitchTo(old);
	w->chunk_rows++;
	w->nrows++;
	if (w->chunk_rows == w->max_chunk_rows || w->chunk_bytes >= ZL_CHUNK_BYTES)
		encode_chunk(w, false);
	return (int32) (w->nrows - 1);
}

/* encode what is left and build the directory; returns the pages needed */
BlockNumber
zl_columnar_writer_finish(ZLColumnarWriter *w)
{
	ZLColumnarHeader header;
	MemoryContext old;

	encode_chunk(w, true);
	old = MemoryContextSwitchTo(w->context);
	memset(&header, 0, sizeof(header));
	header.magic = ZL_COLUMNAR_MAGIC;
	header.natts = w->natts;
	header.nrows = w->nrows;
	header.nchunks = w->nchunks;
	header.minmax_bytes = w->minmax.len;
	header.directory_bytes = directory_bytes(w->nchunks, w->natts, w->minmax.len);
	header.data_bytes = w->data_bytes;
	header.raw_bytes = w->raw_bytes;

	initStringInfo(&w->directory);
	appendBinaryStringInfo(&w->directory, (char *) &header, sizeof(header));
	append_padding(&w->directory, CHUNK_STARTS_OFFSET);
	appendBinaryStringInfo(&w->directory, (char *) w->chunk_first_row,
						   sizeof(uint32) * w->nchunks);
	append_padding(&w->directory, ORDERINGS_OFFSET(w->nchunks));
	for (int att = 0; att < w->natts; att++)
	{
		ZLColumnOrdering ordering;

		ordering.type = TupleDescAttr(w->desc, att)->atttypid;
		ordering.collation = TupleDescAttr(w->desc, att)->attcollation;
		appendBinaryStringInfo(&w->directory, (char *) &ordering, sizeof(ordering));
	}
	append_padding(&w->directory, ENTRIES_OFFSET(w->nchunks, w->natts));
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
	if (w->data == NULL)
	{
		zl_page_writer_add_bytes(pages, w->data_head.data, w->data_head.len);
		return;
	}
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
	if (w->data != NULL)
		BufFileClose(w->data);
	MemoryContextDelete(w->context);
}

