/*-------------------------------------------------------------------------
 *
 * zl_columnar_read.c
 *	  Reading columnar sub-groups (the format: zl_columnar_write.c).
 *
 * A reader opens a sub-group by reading its directory (header, chunk
 * starts, chunk-column entries, min/max), then hands out rows by position.
 * For each attribute the plan reads (zl_columnar_set_columns) it holds the
 * chunk of the row last read, decompressed: decoded whole when the rows
 * come in order (scans), or walked value by value when they come one here,
 * one there (key probes, zl_columnar_set_sparse), so a probe of one row
 * does not decode the other 1,023 of its chunk.  A chunk column stored in
 * frames (ZL_CODEC_ZSTD_FRAMES, ZL_CODEC_LZ4_FRAMES) is decompressed frame
 * by frame as sparse reads need them: its head at once, then the frame
 * holding each row read (the walk of DELTA and variable-length values
 * starts again at the frame's start, from its marks); scans decompress
 * every frame.  Varlenas with short headers are widened to 4-byte headers
 * as rows are handed out.
 *
 * Buffers are kept and grown across chunks rather than allocated per
 * chunk; a reader holds the directory, the bytes of one chunk of each
 * attribute it reads and their decoded values.  Corrupt data raise
 * ERRCODE_DATA_CORRUPTED naming the sub-group.
 *
 *-------------------------------------------------------------------------
 */
#include "storage/columnar/zl_columnar_internal.h"

#include <lz4.h>
#include <zstd.h>

#include "access/detoast.h"
#include "access/htup_details.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "storage/bufmgr.h"
#include "utils/memutils.h"

/* the zstd decompression context of the backend, made once */
static ZSTD_DCtx *
decompress_context(void)
{
	static ZSTD_DCtx *dctx = NULL;

	if (dctx == NULL && (dctx = ZSTD_createDCtx()) == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	return dctx;
}

/* walk a PLAIN area: the value at *offset, moving past it */
static Datum
next_ref_value(const char *area, Size area_bytes, Size *offset, const ColumnTraits *t)
{
	Size		off;
	const char *p;

	if (*offset >= area_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("zipper_lake columnar chunk ends inside a value")));
	off = att_align_pointer(*offset, t->align, t->len, area + *offset);
	p = area + off;
	if (off >= area_bytes ||
		(t->len == -1 && (off + (VARATT_IS_1B(p) ? 1 : VARHDRSZ) > area_bytes ||
						  off + VARSIZE_ANY(p) > area_bytes)))
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

/*
 * Copy a short value (at most 126 bytes) word by word: memcpy() of a size
 * the compiler cannot see becomes "rep movs" here, whose start-up cost is
 * many times the copy of a numeric.
 */
static inline void
copy_short(char *dst, const char *src, Size len)
{
	for (; len >= sizeof(uint64); len -= sizeof(uint64))
	{
		uint64		word;

		memcpy(&word, src, sizeof(word));
		memcpy(dst, &word, sizeof(word));
		src += sizeof(word);
		dst += sizeof(word);
	}
	for (; len > 0; len--)
		*dst++ = *src++;
}

/*
 * A varlena with a short header as a copy with a 4-byte header, aligned,
 * at *cursor (which moves past it): functions use such values as they
 * are, where a short header makes every call copy the value
 * (pg_detoast_datum).  Rows handed out are widened so (zl_columnar_row),
 * and dictionaries as they are decoded.
 */
static Datum
unpacked_value(Datum value, char **cursor)
{
	char	   *p = DatumGetPointer(value);
	Size		len;
	char	   *copy;

	if (!VARATT_IS_1B(p) || VARATT_IS_1B_E(p))
		return value;
	len = VARSIZE_1B(p) - VARHDRSZ_SHORT;
	copy = (char *) MAXALIGN(*cursor);	/* as a detoasted copy is, for any type */
	SET_VARSIZE(copy, len + VARHDRSZ);
	copy_short(VARDATA(copy), VARDATA_1B(p), len);
	*cursor = copy + len + VARHDRSZ;
	return PointerGetDatum(copy);
}

/* what unpacked_value() may add to a value: a longer header, alignment */
#define UNPACK_GROWTH	(VARHDRSZ - VARHDRSZ_SHORT + MAXIMUM_ALIGNOF - 1)

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

static Datum
int64_as_byval(int16 len, int64 v)
{
	return len == 8 ? Int64GetDatum(v) :
		len == 4 ? Int32GetDatum((int32) v) : Int16GetDatum((int16) v);
}

/* one varint of a DELTA chunk's area at *offset, moving *offset past it */
static inline uint64
read_varint(const char *area, Size area_bytes, Size *offset)
{
	const char *p = area + *offset;
	uint64		v;

	if (!zl_varint_get(&p, area + area_bytes, &v))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("zipper_lake columnar chunk ends inside a number")));
	*offset = p - area;
	return v;
}

static void corrupted(const ZLColumnarReader *r, const char *what);

/* a min or max value: a uint16 length, then its bytes, before end */
static Datum
read_minmax_value(const ZLColumnarReader *r, const char **p, const char *end,
				  const ColumnTraits *t)
{
	uint16		len;
	Datum		value;

	if (*p + sizeof(len) > end)
		corrupted(r, "A min/max entry is too short.");
	memcpy(&len, *p, sizeof(len));
	*p += sizeof(len);
	if (*p + len > end || (t->len > 0 && len != t->len) ||
		(t->len == -1 && (len < VARHDRSZ || VARSIZE_ANY(*p) != len)))
		corrupted(r, "A min/max value does not fit its entry.");
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


/*
 * One attribute's chunk as the reader holds it: its bytes decompressed,
 * and either decoded whole into values/isnull or walked value by value
 * (sparse reads: the walk goes on from where it stands, so ascending rows
 * of one chunk cost one pass).
 */
typedef struct ColumnState
{
	int			chunk;			/* the chunk whose bytes are in raw; -1 none */
	uint32		rows;
	const ZLChunkColumn *entry;
	char	   *raw;
	Size		raw_size;		/* allocated */
	const uint8 *nulls;			/* the null bitmap, NULL if no nulls */
	Size		values_at;		/* where the values (DICT: codes) start */
	Datum	   *dictionary;
	uint32		ndictionary;
	int			code_width;
	int64		packed_min;		/* PACKED: next_off counts values */
	int			packed_width;
	MemoryContext dictionary_context;
	bool		decoded;
	Datum	   *values;
	bool	   *isnull;
	uint32		capacity;
	char	   *widened;		/* decoded varlenas with 4-byte headers */
	Size		widened_size;
	uint32		next_row;		/* the walk stands before this row */
	Size		next_off;		/* at this offset */
	int64		prev;			/* DELTA: the value before it */
	/* in frames (ZL_CODEC_IN_FRAMES): its frames, those decompressed into raw */
	int			nframes;		/* 0: not in frames (all of raw is there) */
	int			frame_rows;
	uint32		frames_loaded;	/* bit f: frame f */
	uint64		frames_at;		/* where frame 0 starts in the stream */
	ZLFrameEnd	frame_ends[ZL_MAX_VALUE_FRAMES + 1];
	int64		frame_prev[ZL_MAX_VALUE_FRAMES];	/* DELTA: the sum before each */
} ColumnState;

struct ZLColumnarReader
{
	Relation	rel;
	BlockNumber first_block;
	int32		blocks;
	int64		subgroup_id;
	BufferAccessStrategy strategy;
	MemoryContext context;
	MemoryContext directory_context;	/* the sub-group's directory, min/max */
	TupleDesc	desc;
	ColumnTraits *traits;
	ZLColumnarHeader header;
	uint32	   *chunk_first_row;
	ZLColumnOrdering *orderings;
	ZLChunkColumn *entries;
	char	   *minmax;
	bool	   *needed;			/* per attribute */
	bool		sparse;
	ColumnState *columns;		/* per attribute */
	char	   *stored;			/* compressed bytes being read */
	Size		stored_size;
	int			loaded_chunk;	/* the chunk of the row read last, -1 none */
	uint32		loaded_first;
	uint32		loaded_rows;
	int		   *active;			/* attributes needed, stored and not dropped */
	int			nactive;
	bool		defaults_needed;	/* a needed one was added after the sub-group */
	int			ready_chunk;	/* every active one decoded for it, -1 not */
	int		   *varlenas;		/* attributes (indexes) of varlena type */
	int			nvarlenas;
	char	   *row_buffer;		/* the widened varlenas of the row handed out */
	Size		row_buffer_size;
	Buffer		buffer;
	BlockNumber buffer_block;
};

static void
corrupted(const ZLColumnarReader *r, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("columnar sub-group " INT64_FORMAT " of table \"%s\" is damaged",
					r->subgroup_id, RelationGetRelationName(r->rel)),
			 errdetail("%s", what),
			 errhint("Restore the table from a backup; zipper_lake.verify() lists what it finds.")));
}

/*
 * The bytes [offset, offset + take) of the stream, within one page, which
 * the reader keeps pinned until it reads another page
 */
static const char *
stream_bytes_in_page(ZLColumnarReader *r, uint64 offset, Size take)
{
	BlockNumber block = r->first_block + (BlockNumber) (offset / ZL_STREAM_PAGE_BYTES);
	Size		in_page = offset % ZL_STREAM_PAGE_BYTES;
	Page		page;

	Assert(in_page + take <= ZL_STREAM_PAGE_BYTES);
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
	return (const char *) page + SizeOfPageHeaderData + in_page;
}

/* copy len bytes of the stream from offset on */
static void
read_stream(ZLColumnarReader *r, uint64 offset, Size len, char *dst)
{
	while (len > 0)
	{
		Size		take = Min(len, ZL_STREAM_PAGE_BYTES - offset % ZL_STREAM_PAGE_BYTES);

		memcpy(dst, stream_bytes_in_page(r, offset, take), take);
		dst += take;
		offset += take;
		len -= take;
	}
}

static char *reader_buffer(ZLColumnarReader *r, char **buffer, Size *allocated, Size size);

/*
 * len bytes of the stream from offset on: in place when they lie in one
 * page (valid until the reader reads another page), else copied into the
 * reader's buffer for stored bytes
 */
static const char *
stream_bytes(ZLColumnarReader *r, uint64 offset, Size len)
{
	if (len > 0 && offset % ZL_STREAM_PAGE_BYTES + len <= ZL_STREAM_PAGE_BYTES)
		return stream_bytes_in_page(r, offset, len);
	reader_buffer(r, &r->stored, &r->stored_size, Max(len, 1));
	read_stream(r, offset, len, r->stored);
	return r->stored;
}

/*
 * The attributes whose values a row takes from the chunks: needed, stored
 * in this sub-group (not added since) and not dropped.
 */
static void
find_active_columns(ZLColumnarReader *r)
{
	r->nactive = 0;
	r->ready_chunk = -1;
	r->defaults_needed = false;
	for (int att = 0; att < r->desc->natts; att++)
		if (r->needed[att] && !r->traits[att].dropped)
		{
			if (att < (int) r->header.natts)
				r->active[r->nactive++] = att;
			else
				r->defaults_needed = true;
		}
}

/*
 * Read another sub-group with the same reader: its directory replaces the
 * last one's; buffers are kept.
 */
void
zl_columnar_reset(ZLColumnarReader *r, const ZLSubGroup *sg, BufferAccessStrategy strategy)
{
	MemoryContext old;
	char	   *directory;
	uint32		nchunks;

	if (BufferIsValid(r->buffer))
		ReleaseBuffer(r->buffer);
	r->buffer = InvalidBuffer;
	MemoryContextReset(r->directory_context);
	r->strategy = strategy;
	r->first_block = sg->first_block;
	r->blocks = sg->blocks;
	r->subgroup_id = sg->subgroup_id;
	r->loaded_chunk = -1;
	r->ready_chunk = -1;
	for (int att = 0; att < r->desc->natts; att++)
		r->columns[att].chunk = -1;

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
	old = MemoryContextSwitchTo(r->directory_context);
	directory = palloc(r->header.directory_bytes);
	MemoryContextSwitchTo(old);
	read_stream(r, 0, r->header.directory_bytes, directory);
	r->chunk_first_row = (uint32 *) (directory + CHUNK_STARTS_OFFSET);
	r->orderings = (ZLColumnOrdering *) (directory + ORDERINGS_OFFSET(nchunks));
	r->entries = (ZLChunkColumn *) (directory + ENTRIES_OFFSET(nchunks, r->header.natts));
	r->minmax = directory + MINMAX_OFFSET(nchunks, r->header.natts);
	for (uint32 c = 0; c < nchunks; c++)
		if ((c == 0 ? r->chunk_first_row[c] != 0 :
			 r->chunk_first_row[c] <= r->chunk_first_row[c - 1]) ||
			r->chunk_first_row[c] >= r->header.nrows)
			corrupted(r, psprintf("Chunk %u starts at row %u.", c, r->chunk_first_row[c]));
	find_active_columns(r);
}

ZLColumnarReader *
zl_columnar_open(Relation rel, const ZLSubGroup *sg, BufferAccessStrategy strategy)
{
	return zl_columnar_open_as(rel, RelationGetDescr(rel), sg, strategy);
}

/*
 * The same, decoding by the columns of desc, which the sub-group was
 * written with: a rewriting ALTER TABLE reads the table's rows by the
 * columns they had, while its relation descriptor has the new ones
 * (access/zl_scan.c).
 */
ZLColumnarReader *
zl_columnar_open_as(Relation rel, TupleDesc desc, const ZLSubGroup *sg,
					BufferAccessStrategy strategy)
{
	MemoryContext context = AllocSetContextCreate(CurrentMemoryContext,
												  "zipper_lake columnar reader",
												  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(context);
	ZLColumnarReader *r = palloc0(sizeof(ZLColumnarReader));

	r->rel = rel;
	r->context = context;
	r->directory_context = AllocSetContextCreate(context, "zipper_lake columnar directory",
												 ALLOCSET_DEFAULT_SIZES);
	r->desc = desc;
	r->buffer = InvalidBuffer;
	r->traits = zl_columnar_traits(r->desc);
	r->columns = palloc0(sizeof(ColumnState) * Max(r->desc->natts, 1));
	r->varlenas = palloc(sizeof(int) * Max(r->desc->natts, 1));
	for (int att = 0; att < r->desc->natts; att++)
		if (r->traits[att].len == -1 && !r->traits[att].dropped)
			r->varlenas[r->nvarlenas++] = att;
	r->needed = palloc(sizeof(bool) * Max(r->desc->natts, 1));
	memset(r->needed, true, sizeof(bool) * r->desc->natts);
	r->active = palloc(sizeof(int) * Max(r->desc->natts, 1));
	MemoryContextSwitchTo(old);
	zl_columnar_reset(r, sg, strategy);
	return r;
}

/* unpin the page the reader holds, between sub-groups */
void
zl_columnar_release(ZLColumnarReader *r)
{
	if (BufferIsValid(r->buffer))
		ReleaseBuffer(r->buffer);
	r->buffer = InvalidBuffer;
}

/* decode only these attributes (bool per attribute); the rest read as NULL */
void
zl_columnar_set_columns(ZLColumnarReader *r, const bool *needed)
{
	memcpy(r->needed, needed, sizeof(bool) * r->desc->natts);
	find_active_columns(r);
}

/*
 * Read rows one here, one there (key probes): decode just the values asked
 * for, walking each column's chunk, instead of whole chunks.
 */
void
zl_columnar_set_sparse(ZLColumnarReader *r, bool sparse)
{
	r->sparse = sparse;
}

void
zl_columnar_close(ZLColumnarReader *r)
{
	if (BufferIsValid(r->buffer))
		ReleaseBuffer(r->buffer);
	MemoryContextDelete(r->context);
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
 * smallest and largest value (allocated with the directory) if they were
 * kept or every value is null.
 */
bool
zl_columnar_chunk_range(const ZLColumnarReader *r, int chunk, AttrNumber attnum,
						bool *all_null, bool *has_nulls, Datum *min, Datum *max)
{
	const ZLChunkColumn *e;
	const char *p;
	const char *end;
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
	/* taken under another type or collation (ALTER since): unusable */
	if (r->orderings[attnum - 1].type != TupleDescAttr(r->desc, attnum - 1)->atttypid ||
		r->orderings[attnum - 1].collation != TupleDescAttr(r->desc, attnum - 1)->attcollation)
		return false;
	p = r->minmax + e->minmax_offset;
	end = p + e->minmax_bytes;
	old = MemoryContextSwitchTo(r->directory_context);	/* freed with the directory */
	*min = read_minmax_value(r, &p, end, &r->traits[attnum - 1]);
	*max = read_minmax_value(r, &p, end, &r->traits[attnum - 1]);
	MemoryContextSwitchTo(old);
	return true;
}


/* a buffer of at least size bytes, kept (and grown) in the reader's context */
static char *
reader_buffer(ZLColumnarReader *r, char **buffer, Size *allocated, Size size)
{
	if (size > *allocated)
	{
		if (*buffer)
			pfree(*buffer);
		*allocated = Max(size, 1024);
		*buffer = MemoryContextAllocHuge(r->context, *allocated);
	}
	return *buffer;
}

/*
 * Read the frame table of a chunk column stored in frames into cs, checked
 * against its entry.
 */
static void
read_frame_table(ZLColumnarReader *r, ColumnState *cs, int chunk, int att)
{
	const ZLChunkColumn *e = cs->entry;
	uint64		at = r->header.directory_bytes + e->offset;
	ZLFramesHeader header;
	Size		table;

	if (e->stored_bytes < sizeof(header))
		corrupted(r, psprintf("Chunk %d of column %d has a bad frame table.", chunk, att + 1));
	read_stream(r, at, sizeof(header), (char *) &header);
	table = sizeof(header) + sizeof(ZLFrameEnd) * header.nframes +
		(e->encoding == ZL_ENC_DELTA ? sizeof(int64) * (header.nframes - 1) : 0);
	if (header.nframes < 2 || header.nframes > ZL_MAX_VALUE_FRAMES + 1 ||
		header.frame_rows == 0 ||
		header.nframes - 1 != (cs->rows + header.frame_rows - 1) / header.frame_rows ||
		table > e->stored_bytes)
		corrupted(r, psprintf("Chunk %d of column %d has a bad frame table.", chunk, att + 1));
	read_stream(r, at + sizeof(header), sizeof(ZLFrameEnd) * header.nframes,
				(char *) cs->frame_ends);
	if (e->encoding == ZL_ENC_DELTA)
		read_stream(r, at + sizeof(header) + sizeof(ZLFrameEnd) * header.nframes,
					sizeof(int64) * (header.nframes - 1), (char *) cs->frame_prev);
	for (int f = 0; f < header.nframes; f++)
		if ((f > 0 && (cs->frame_ends[f].raw_end < cs->frame_ends[f - 1].raw_end ||
					   cs->frame_ends[f].stored_end < cs->frame_ends[f - 1].stored_end)) ||
			(f == header.nframes - 1 && (cs->frame_ends[f].raw_end != e->raw_bytes ||
										 table + cs->frame_ends[f].stored_end != e->stored_bytes)))
			corrupted(r, psprintf("Chunk %d of column %d has a bad frame table.", chunk, att + 1));
	cs->nframes = header.nframes;
	cs->frame_rows = header.frame_rows;
	cs->frames_at = at + table;
	cs->frames_loaded = 0;
}

/* decompress src with codec (ZL_CODEC_LZ4 or ZL_CODEC_ZSTD); the bytes made, 0 on failure */
static size_t
decompress_bytes(int codec, char *dst, Size raw_len, const char *src, Size stored_len)
{
	if (codec == ZL_CODEC_LZ4)
	{
		int			n = LZ4_decompress_safe(src, dst, (int) stored_len, (int) raw_len);

		return n < 0 ? 0 : (size_t) n;
	}
	if (codec == ZL_CODEC_ZSTD)
	{
		size_t		n = ZSTD_decompressDCtx(decompress_context(), dst, raw_len, src, stored_len);

		return ZSTD_isError(n) ? 0 : n;
	}
	return 0;
}

/* decompress the frames [from, to] of a fetched chunk column into its raw bytes */
static void
load_frames(ZLColumnarReader *r, ColumnState *cs, int chunk, int att, int from, int to)
{
	for (int f = from; f <= to; f++)
	{
		Size		raw_start = f == 0 ? 0 : cs->frame_ends[f - 1].raw_end;
		Size		stored_start = f == 0 ? 0 : cs->frame_ends[f - 1].stored_end;
		Size		raw_len = cs->frame_ends[f].raw_end - raw_start;
		Size		stored_len = cs->frame_ends[f].stored_end - stored_start;
		size_t		got = 0;

		if ((cs->frames_loaded & ((uint32) 1 << f)) != 0)
			continue;
		if (stored_len == raw_len)
		{
			/* kept as it is: the codec did not shrink it */
			if (raw_len > 0)
				read_stream(r, cs->frames_at + stored_start, raw_len, cs->raw + raw_start);
			got = raw_len;
		}
		else if (stored_len > 0)
			got = decompress_bytes(cs->entry->compressed == ZL_CODEC_LZ4_FRAMES ?
								   ZL_CODEC_LZ4 : ZL_CODEC_ZSTD, cs->raw + raw_start, raw_len,
								   stream_bytes(r, cs->frames_at + stored_start, stored_len),
								   stored_len);
		if (got != raw_len)
			corrupted(r, psprintf("Chunk %d of column %d does not decompress.", chunk, att + 1));
		cs->frames_loaded |= (uint32) 1 << f;
	}
}

/* decompress the frames holding the raw bytes [start, end) of a fetched chunk column */
static void
load_raw_range(ZLColumnarReader *r, ColumnState *cs, int att, Size start, Size end)
{
	int			from = -1,
				to = -1;

	for (int f = 0; f < cs->nframes; f++)
	{
		Size		raw_start = f == 0 ? 0 : cs->frame_ends[f - 1].raw_end;

		if (raw_start < end && cs->frame_ends[f].raw_end > start)
		{
			if (from < 0)
				from = f;
			to = f;
		}
	}
	if (from >= 0)
		load_frames(r, cs, cs->chunk, att, from, to);
}

/* the bytes of an attribute's chunk, decompressed, parsed up to its values */
static void
fetch_column(ZLColumnarReader *r, ColumnState *cs, int chunk, int att)
{
	const ZLChunkColumn *e = chunk_entry(r, chunk, att);
	uint32		rows = zl_columnar_chunk_start(r, chunk + 1) - zl_columnar_chunk_start(r, chunk);
	Size		off = 0;
	Size		head_bytes = e->raw_bytes;	/* what is decompressed of it */

	if (cs->chunk == chunk)
		return;
	r->ready_chunk = -1;
	cs->chunk = -1;
	cs->entry = e;
	cs->rows = rows;
	cs->decoded = false;
	cs->nulls = NULL;
	cs->next_row = 0;
	cs->prev = 0;
	cs->nframes = 0;
	if (e->encoding == ZL_ENC_NULLS)
	{
		cs->chunk = chunk;
		return;
	}
	if (e->nulls > rows || e->offset + e->stored_bytes > r->header.data_bytes ||
		e->encoding > ZL_ENC_PACKED)
		corrupted(r, psprintf("Chunk %d of column %d has a bad entry.", chunk, att + 1));

	reader_buffer(r, &cs->raw, &cs->raw_size, Max(e->raw_bytes, 1));
	if (ZL_CODEC_IN_FRAMES(e->compressed))
	{
		read_frame_table(r, cs, chunk, att);
		load_frames(r, cs, chunk, att, 0, r->sparse ? 0 : cs->nframes - 1);
		if (r->sparse)
			head_bytes = cs->frame_ends[0].raw_end;
	}
	else if (e->compressed)
	{
		size_t		got;

		/* decompressed straight from the page when the chunk lies in one */
		const char *stored = stream_bytes(r, r->header.directory_bytes + e->offset,
										  e->stored_bytes);

		got = decompress_bytes(e->compressed, cs->raw, e->raw_bytes, stored, e->stored_bytes);
		if (got != e->raw_bytes)
			corrupted(r, psprintf("Chunk %d of column %d does not decompress.", chunk, att + 1));
	}
	else
	{
		if (e->stored_bytes != e->raw_bytes)
			corrupted(r, psprintf("Chunk %d of column %d has a bad entry.", chunk, att + 1));
		read_stream(r, r->header.directory_bytes + e->offset, e->raw_bytes, cs->raw);
	}

	if (e->nulls > 0)
	{
		Size		bitmap = (rows + 7) / 8;

		if (MAXALIGN(bitmap) > head_bytes)
			corrupted(r, psprintf("Chunk %d of column %d is too short.", chunk, att + 1));
		cs->nulls = (const uint8 *) cs->raw;
		/* the value areas were checked against the entry's count */
		if ((rows & 7) != 0 && (cs->nulls[bitmap - 1] >> (rows & 7)) != 0)
			corrupted(r, psprintf("Chunk %d of column %d has nulls past its rows.", chunk, att + 1));
		if (pg_popcount((const char *) cs->nulls, bitmap) != e->nulls)
			corrupted(r, psprintf("Chunk %d of column %d holds other nulls than its entry says.",
								  chunk, att + 1));
		off = MAXALIGN(bitmap);
	}
	if (e->encoding == ZL_ENC_DICT)
	{
		const ColumnTraits *t = &r->traits[att];
		uint32		counts[2];
		Size		dict_off;
		Size		dict_end;
		char	   *cursor;

		if (off + sizeof(counts) > head_bytes)
			corrupted(r, psprintf("Chunk %d of column %d is too short.", chunk, att + 1));
		memcpy(counts, cs->raw + off, sizeof(counts));
		dict_off = MAXALIGN(off + sizeof(counts));
		dict_end = dict_off + counts[1];
		cs->code_width = counts[0] <= 256 ? 1 : 2;
		if (counts[0] == 0 || counts[0] > 65536 || dict_end > head_bytes ||
			dict_end + (Size) (rows - e->nulls) * cs->code_width > e->raw_bytes)
			corrupted(r, psprintf("Chunk %d of column %d has a bad dictionary.", chunk, att + 1));
		if (cs->dictionary_context == NULL)
			cs->dictionary_context = AllocSetContextCreate(r->context, "zipper_lake dictionary",
														   ALLOCSET_SMALL_SIZES);
		MemoryContextReset(cs->dictionary_context);
		cs->dictionary = MemoryContextAlloc(cs->dictionary_context, sizeof(Datum) * counts[0]);
		cursor = t->len == -1 ?
			MemoryContextAlloc(cs->dictionary_context, counts[1] + (Size) counts[0] * UNPACK_GROWTH) :
			NULL;
		cs->ndictionary = counts[0];
		off = 0;
		for (uint32 d = 0; d < counts[0]; d++)
		{
			cs->dictionary[d] = next_ref_value(cs->raw + dict_off, counts[1], &off, t);
			if (cursor)
				cs->dictionary[d] = unpacked_value(cs->dictionary[d], &cursor);
		}
		off = dict_end;
	}
	if (e->encoding == ZL_ENC_PACKED)
	{
		uint8		width;

		if (off + PACKED_HEADER_BYTES > head_bytes)
			corrupted(r, psprintf("Chunk %d of column %d is too short.", chunk, att + 1));
		memcpy(&cs->packed_min, cs->raw + off, sizeof(int64));
		width = (uint8) cs->raw[off + sizeof(int64)];
		off += PACKED_HEADER_BYTES;
		if (width > 64 || off + PACKED_BYTES(rows - e->nulls, width) > e->raw_bytes)
			corrupted(r, psprintf("Chunk %d of column %d has bad packed values.", chunk, att + 1));
		cs->packed_width = width;
	}
	if (cs->nframes > 0 && cs->frame_ends[0].raw_end != off)
		corrupted(r, psprintf("Chunk %d of column %d has a bad frame table.", chunk, att + 1));
	cs->values_at = off;
	cs->next_off = e->encoding == ZL_ENC_PACKED ? 0 : off;
	cs->chunk = chunk;
}

/* PACKED: the k-th value (its bits lie within the checked area) */
static inline int64
packed_value(const ColumnState *cs, uint64 k)
{
	uint64		bitpos = k * cs->packed_width;
	const uint8 *p = (const uint8 *) cs->raw + cs->values_at + (bitpos >> 3);
	int			shift = (int) (bitpos & 7);
	uint64		v;

	if (cs->packed_width == 0)
		return cs->packed_min;
	memcpy(&v, p, sizeof(v));
	v >>= shift;
	if (shift + cs->packed_width > 64)
		v |= (uint64) p[8] << (64 - shift);
	if (cs->packed_width < 64)
		v &= (UINT64CONST(1) << cs->packed_width) - 1;
	return (int64) ((uint64) cs->packed_min + v);
}

static inline bool
null_at(const ColumnState *cs, uint32 i)
{
	return cs->nulls != NULL && (cs->nulls[i >> 3] & (1 << (i & 7))) != 0;
}

/* the non-null value the walk stands on; the walk moves past it */
static inline Datum
step_value(ZLColumnarReader *r, ColumnState *cs, const ColumnTraits *t)
{
	const ZLChunkColumn *e = cs->entry;
	Datum		value;

	switch (e->encoding)
	{
		case ZL_ENC_PACKED:
			return int64_as_byval(t->len, packed_value(cs, cs->next_off++));
		case ZL_ENC_DELTA:
			cs->prev = (int64) ((uint64) cs->prev +
								(uint64) zl_unzigzag(read_varint(cs->raw, e->raw_bytes, &cs->next_off)));
			return int64_as_byval(t->len, cs->prev);
		case ZL_ENC_PLAIN:
			if (t->byval)
			{
				if (cs->next_off + t->len > e->raw_bytes)
					corrupted(r, "A chunk ends inside a value.");
				value = read_byval(cs->raw + cs->next_off, t->len);
				cs->next_off += t->len;
				return value;
			}
			return next_ref_value(cs->raw, e->raw_bytes, &cs->next_off, t);
		default:
			{
				uint16		code;

				if (cs->code_width == 1)
					code = (uint8) cs->raw[cs->next_off];
				else
					memcpy(&code, cs->raw + cs->next_off, sizeof(code));
				cs->next_off += cs->code_width;
				if (code >= cs->ndictionary)
					corrupted(r, "A chunk holds a code outside its dictionary.");
				return cs->dictionary[code];
			}
	}
}

/* how many of the rows [from, to) of a fetched chunk are not null */
static uint32
nonnull_between(const ColumnState *cs, uint32 from, uint32 to)
{
	uint32		nulls = 0;
	uint32		i = from;

	if (cs->nulls == NULL)
		return to - from;
	for (; i < to && (i & 7) != 0; i++)
		nulls += null_at(cs, i) ? 1 : 0;
	if (i + 8 <= to)
	{
		uint32		bytes = (to - i) / 8;

		nulls += (uint32) pg_popcount((const char *) cs->nulls + i / 8, bytes);
		i += bytes * 8;
	}
	for (; i < to; i++)
		nulls += null_at(cs, i) ? 1 : 0;
	return to - from - nulls;
}

/*
 * Move the walk past count non-null values without handing them out:
 * arithmetic for fixed-width values and codes, a tight loop for deltas
 * (which must be summed) and variable-length values.
 */
static void
skip_values(ZLColumnarReader *r, ColumnState *cs, const ColumnTraits *t, uint32 count)
{
	const ZLChunkColumn *e = cs->entry;
	Size		width = 0;

	switch (e->encoding)
	{
		case ZL_ENC_PACKED:
			cs->next_off += count;
			return;
		case ZL_ENC_DELTA:
			{
				uint64		sum = (uint64) cs->prev;
				Size		off = cs->next_off;

				for (uint32 k = 0; k < count; k++)
					sum += (uint64) zl_unzigzag(read_varint(cs->raw, e->raw_bytes, &off));
				cs->prev = (int64) sum;
				cs->next_off = off;
				return;
			}
		case ZL_ENC_PLAIN:
			if (!t->byval)
			{
				for (uint32 k = 0; k < count; k++)
					(void) next_ref_value(cs->raw, e->raw_bytes, &cs->next_off, t);
				return;
			}
			width = t->len;
			break;
		case ZL_ENC_DICT:
			width = cs->code_width;
			break;
	}
	if (cs->next_off + (Size) count * width > e->raw_bytes)
		corrupted(r, "A chunk ends inside a value.");
	cs->next_off += (Size) count * width;
}

/* decode a fetched chunk of an attribute whole, into values/isnull */
static void
decode_column(ZLColumnarReader *r, ColumnState *cs, int att)
{
	const ColumnTraits *t = &r->traits[att];

	if (cs->nframes > 0)
		load_frames(r, cs, cs->chunk, att, 0, cs->nframes - 1);
	if (cs->rows > cs->capacity)
	{
		if (cs->values)
		{
			pfree(cs->values);
			pfree(cs->isnull);
		}
		cs->capacity = cs->rows;
		cs->values = MemoryContextAlloc(r->context, sizeof(Datum) * cs->capacity);
		cs->isnull = MemoryContextAlloc(r->context, sizeof(bool) * cs->capacity);
	}
	cs->next_off = cs->entry->encoding == ZL_ENC_PACKED ? 0 : cs->values_at;
	cs->prev = 0;
	if (cs->entry->encoding == ZL_ENC_NULLS)
		memset(cs->isnull, true, sizeof(bool) * cs->rows);
	else if (cs->nulls != NULL)
		for (uint32 i = 0; i < cs->rows; i++)
		{
			cs->isnull[i] = null_at(cs, i);
			if (!cs->isnull[i])
				cs->values[i] = step_value(r, cs, t);
		}
	else
	{
		/* no nulls: a loop per encoding, the common case of scans */
		memset(cs->isnull, false, sizeof(bool) * cs->rows);
		switch (cs->entry->encoding)
		{
			case ZL_ENC_PACKED:
				for (uint32 i = 0; i < cs->rows; i++)
					cs->values[i] = int64_as_byval(t->len, packed_value(cs, i));
				break;
			case ZL_ENC_DELTA:
				{
					uint64		sum = 0;
					Size		off = cs->values_at;

					for (uint32 i = 0; i < cs->rows; i++)
					{
						sum += (uint64) zl_unzigzag(read_varint(cs->raw, cs->entry->raw_bytes, &off));
						cs->values[i] = int64_as_byval(t->len, (int64) sum);
					}
					break;
				}
			default:
				for (uint32 i = 0; i < cs->rows; i++)
					cs->values[i] = step_value(r, cs, t);
				break;
		}
	}
	if (t->len == -1 && cs->entry->encoding == ZL_ENC_PLAIN)
	{
		/* widened in one sequential pass (dictionaries were as they were read) */
		char	   *cursor = reader_buffer(r, &cs->widened, &cs->widened_size,
										   cs->entry->raw_bytes + (Size) cs->rows * UNPACK_GROWTH);

		for (uint32 i = 0; i < cs->rows; i++)
			if (!cs->isnull[i])
				cs->values[i] = unpacked_value(cs->values[i], &cursor);
	}
	cs->next_row = cs->rows;
	cs->decoded = true;
}

/* must a walk sum or step over the values before a row's (DELTA, variable length)? */
static inline bool
walked_encoding(const ColumnState *cs, const ColumnTraits *t)
{
	return cs->entry->encoding == ZL_ENC_DELTA ||
		(cs->entry->encoding == ZL_ENC_PLAIN && !t->byval);
}

/* decompress the frames holding the fixed-width value the walk stands on */
static void
load_value_bytes(ZLColumnarReader *r, ColumnState *cs, const ColumnTraits *t, int att)
{
	Size		start = cs->next_off;
	Size		len;

	switch (cs->entry->encoding)
	{
		case ZL_ENC_PACKED:
			/* packed_value() reads up to 9 bytes from the first of its bits */
			start = cs->values_at + (cs->next_off * cs->packed_width) / 8;
			len = 9;
			break;
		case ZL_ENC_DICT:
			len = cs->code_width;
			break;
		default:
			len = t->len;
			break;
	}
	load_raw_range(r, cs, att, start, Min(start + len, cs->entry->raw_bytes));
}

/* the value of an attribute at a row of its fetched chunk */
static Datum
column_value(ZLColumnarReader *r, ColumnState *cs, int att, uint32 i, bool *isnull)
{
	const ColumnTraits *t = &r->traits[att];

	if (cs->decoded)
	{
		*isnull = cs->isnull[i];
		return cs->values[i];
	}
	*isnull = true;
	if (cs->entry->encoding == ZL_ENC_NULLS)
		return (Datum) 0;
	if (i < cs->next_row)
	{
		/* behind the walk: start it again */
		cs->next_row = 0;
		cs->next_off = cs->entry->encoding == ZL_ENC_PACKED ? 0 : cs->values_at;
		cs->prev = 0;
	}
	if (cs->nframes > 0 && walked_encoding(cs, t))
	{
		int			frame = i / cs->frame_rows + 1;

		/* the walk starts again at the row's frame rather than before it */
		if (cs->next_row < (uint32) (frame - 1) * cs->frame_rows)
		{
			cs->next_row = (uint32) (frame - 1) * cs->frame_rows;
			cs->next_off = cs->frame_ends[frame - 1].raw_end;
			cs->prev = cs->entry->encoding == ZL_ENC_DELTA ? cs->frame_prev[frame - 1] : 0;
		}
		load_frames(r, cs, cs->chunk, att, frame, frame);
	}
	skip_values(r, cs, t, nonnull_between(cs, cs->next_row, i));
	cs->next_row = i + 1;
	if (null_at(cs, i))
		return (Datum) 0;
	*isnull = false;
	if (cs->nframes > 0 && !walked_encoding(cs, t))
		load_value_bytes(r, cs, t, att);
	return step_value(r, cs, t);
}

/* the short varlenas of a row, widened into the reader's row buffer */
static void
widen_row(ZLColumnarReader *r, Datum *values, bool *isnull)
{
	Size		need = 0;
	char	   *cursor;

	for (int k = 0; k < r->nvarlenas; k++)
	{
		int			att = r->varlenas[k];

		if (!isnull[att] && VARATT_IS_1B(DatumGetPointer(values[att])))
			need += VARSIZE_1B(DatumGetPointer(values[att])) + UNPACK_GROWTH;
	}
	if (need == 0)
		return;
	cursor = reader_buffer(r, &r->row_buffer, &r->row_buffer_size, need);
	for (int k = 0; k < r->nvarlenas; k++)
	{
		int			att = r->varlenas[k];

		if (!isnull[att])
			values[att] = unpacked_value(values[att], &cursor);
	}
}

/*
 * The values of a row (position) into values/isnull; attributes not needed
 * read as NULL.  They stay valid until the next row is read.
 */
void
zl_columnar_row(ZLColumnarReader *r, uint32 row, Datum *values, bool *isnull)
{
	int			chunk;
	uint32		i;

	if (r->loaded_chunk < 0 || row - r->loaded_first >= r->loaded_rows)
	{
		if (row >= r->header.nrows)
			corrupted(r, psprintf("Row %u was asked of %u rows.", row, r->header.nrows));
		chunk = zl_columnar_chunk_of(r, row);
		r->loaded_chunk = chunk;
		r->loaded_first = zl_columnar_chunk_start(r, chunk);
		r->loaded_rows = zl_columnar_chunk_start(r, chunk + 1) - r->loaded_first;
		r->ready_chunk = -1;
	}
	chunk = r->loaded_chunk;
	i = row - r->loaded_first;
	if (r->ready_chunk == chunk)
	{
		/* the common case of scans: every value decoded (and widened) */
		memset(isnull, true, sizeof(bool) * r->desc->natts);
		for (int k = 0; k < r->nactive; k++)
		{
			const ColumnState *cs = &r->columns[r->active[k]];

			values[r->active[k]] = cs->values[i];
			isnull[r->active[k]] = cs->isnull[i];
		}
		return;
	}
	for (int att = 0; att < r->desc->natts; att++)
	{
		ColumnState *cs = &r->columns[att];

		if (!r->needed[att] || r->traits[att].dropped)
		{
			values[att] = (Datum) 0;
			isnull[att] = true;
			continue;
		}
		if (att >= (int) r->header.natts)
		{
			/* a column added later: its default, as heap rows read it */
			values[att] = getmissingattr(r->desc, att + 1, &isnull[att]);
			continue;
		}
		fetch_column(r, cs, chunk, att);
		if (!r->sparse && !cs->decoded)
			decode_column(r, cs, att);
		values[att] = column_value(r, cs, att, i, &isnull[att]);
	}
	widen_row(r, values, isnull);
	if (!r->sparse && !r->defaults_needed)
		r->ready_chunk = chunk;
}

/*
 * The decoded values of an attribute over a whole chunk, whether the rows
 * handed out need it or not (scans check their bounds on the period
 * columns in one pass over them); false if the sub-group does not store
 * the attribute.  Valid until the reader moves to another chunk.
 */
bool
zl_columnar_chunk_values(ZLColumnarReader *r, int chunk, AttrNumber attnum,
						 const Datum **values, const bool **isnull)
{
	int			att = attnum - 1;
	ColumnState *cs = &r->columns[att];

	if (att >= (int) r->header.natts || r->traits[att].dropped)
		return false;
	fetch_column(r, cs, chunk, att);
	if (!cs->decoded)
		decode_column(r, cs, att);
	*values = cs->values;
	*isnull = cs->isnull;
	return true;
}

/* does a needed attribute read its default (added after the sub-group)? */
bool
zl_columnar_defaults_needed(const ZLColumnarReader *r)
{
	return r->defaults_needed;
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
		CHECK_FOR_INTERRUPTS();
		for (int att = 0; att < (int) r->header.natts && problem == NULL; att++)
		{
			const ColumnTraits *t = &r->traits[att];
			ColumnState *cs = &r->columns[att];
			bool		all_null,
						has_nulls;
			Datum		min,
						max;
			uint32		nulls = 0;
			bool		known;

			if (t->dropped)
				continue;
			fetch_column(r, cs, chunk, att);
			decode_column(r, cs, att);
			known = zl_columnar_chunk_range(r, chunk, att + 1, &all_null, &has_nulls, &min, &max);
			for (uint32 i = 0; i < cs->rows && problem == NULL; i++)
			{
				if (cs->isnull[i])
				{
					nulls++;
					continue;
				}
				if (known && !all_null && t->has_order &&
					(DatumGetInt32(FunctionCall2Coll(&r->traits[att].cmp, t->collation,
													 cs->values[i], min)) < 0 ||
					 DatumGetInt32(FunctionCall2Coll(&r->traits[att].cmp, t->collation,
													 cs->values[i], max)) > 0))
					problem = psprintf("Chunk %d of column %d holds a value outside its min/max.",
									   chunk, att + 1);
			}
			if (problem == NULL && nulls != cs->entry->nulls)
				problem = psprintf("Chunk %d of column %d holds %u nulls, its entry says %u.",
								   chunk, att + 1, nulls, cs->entry->nulls);
		}
	}
	zl_columnar_close(r);
	return problem;
}
