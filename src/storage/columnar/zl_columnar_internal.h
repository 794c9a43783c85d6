/*-------------------------------------------------------------------------
 *
 * zl_columnar_internal.h
 *	  The columnar sub-group format, shared by its writer
 *	  (zl_columnar_write.c) and its reader (zl_columnar_read.c).
 *
 * See zl_columnar_write.c for the layout and the encodings.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_COLUMNAR_INTERNAL_H
#define ZL_COLUMNAR_INTERNAL_H

#include "storage/zl_storage_internal.h"
#include "common/zl_varint.h"

#include "access/tupmacs.h"
#include "lib/stringinfo.h"

#define ZL_COLUMNAR_MAGIC		0x5A4C4331	/* "ZLC1" */
#define ZL_CHUNK_BYTES			(8 * 1024 * 1024)
#define ZL_MINMAX_MAX_BYTES		64
#define ZL_ZSTD_LEVEL			3

typedef enum ZLEncoding
{
	ZL_ENC_NULLS = 0,			/* every value null: no bytes */
	ZL_ENC_PLAIN,
	ZL_ENC_DELTA,
	ZL_ENC_DICT,
	ZL_ENC_PACKED				/* frame of reference: value - min in fixed bits */
} ZLEncoding;

/* ZLChunkColumn.compressed: the codec of its bytes */
#define ZL_CODEC_NONE			0
#define ZL_CODEC_ZSTD			1
#define ZL_CODEC_LZ4			2
#define ZL_CODEC_ZSTD_FRAMES	3	/* zstd in independent frames: below */
#define ZL_CODEC_LZ4_FRAMES		4	/* lz4 in independent frames (0.2) */
#define ZL_CODEC_IN_FRAMES(c)	((c) == ZL_CODEC_ZSTD_FRAMES || (c) == ZL_CODEC_LZ4_FRAMES)

/*
 * ZSTD_FRAMES, LZ4_FRAMES: the raw bytes cut into independent zstd (lz4)
 * frames, so a key probe -- or apply reading the stored versions of a
 * batch's keys, one here, one there -- decompresses the head of a chunk
 * column (null bitmap, dictionary, PACKED header) and the frame holding
 * its row, not all of it.  Frame 0
 * is the head, raw bytes [0, the values' start); value frame k (frame
 * k + 1) holds the values of rows [k * frame_rows, (k + 1) * frame_rows):
 * its raw bytes start where a walk over the values stands before row
 * k * frame_rows (PACKED: the byte holding that value's first bit, so a
 * value's bits may run into the next frame).  The stored bytes:
 *
 *   ZLFramesHeader | ZLFrameEnd per frame | DELTA: the sum before each
 *   value frame (int64) | the frames
 *
 * A frame the codec does not shrink is stored as it is (its stored and
 * raw lengths equal).  The raw bytes are those of the other codecs: scans
 * decompress every frame and decode them as before.
 */
/*
 * Frames are smaller in lz4: it is the codec of the current partition,
 * whose open versions every apply batch reads a few to a chunk (README
 * "Storage formats"), and an lz4 frame costs little ratio.  With 64 rows a
 * batch of 10,000 keys on 4M open versions decompresses about what it
 * does on 1M (test/bench/README.md, "Secondary indexes"); with 256 it
 * decompressed every frame of 3.7x the chunks.  zstd frames keep 256
 * rows: history is probed one key at a time, and small zstd frames lose
 * much of the ratio.
 */
#define ZL_FRAME_ROWS			256 /* rows a zstd value frame holds at least */
#define ZL_LZ4_FRAME_ROWS		64	/* an lz4 one */
#define ZL_MAX_VALUE_FRAMES		31	/* value frames of a chunk column at most */
#define ZL_FRAMES_MIN_RAW_BYTES 2048	/* smaller zstd chunk columns take one frame */
#define ZL_LZ4_FRAMES_MIN_RAW_BYTES 512 /* smaller lz4 ones */

typedef struct ZLFramesHeader
{
	uint16		nframes;		/* the head and the value frames */
	uint16		frame_rows;
} ZLFramesHeader;

typedef struct ZLFrameEnd
{
	uint32		raw_end;		/* where its raw bytes end */
	uint32		stored_end;		/* where its compressed frame ends, from the first */
} ZLFrameEnd;

/* PACKED: min (int64) and bit width, then the bits, 8 zero bytes after them */
#define PACKED_HEADER_BYTES		MAXALIGN(sizeof(int64) + 1)
#define PACKED_BYTES(n, width)	((((Size) (n) * (width) + 7) / 8) + 8)

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
/*
 * The ordering a column's min/max were taken under: its type and collation
 * when the sub-group was written.  A later ALTER of either leaves the
 * min/max unusable (zl_columnar_chunk_range), not wrong.
 */
typedef struct ZLColumnOrdering
{
	Oid			type;
	Oid			collation;
} ZLColumnOrdering;

#define CHUNK_STARTS_OFFSET		MAXALIGN(sizeof(ZLColumnarHeader))
#define ORDERINGS_OFFSET(nchunks) MAXALIGN(CHUNK_STARTS_OFFSET + sizeof(uint32) * (nchunks))
#define ENTRIES_OFFSET(nchunks, natts) \
	MAXALIGN(ORDERINGS_OFFSET(nchunks) + sizeof(ZLColumnOrdering) * (natts))
#define MINMAX_OFFSET(nchunks, natts) \
	(ENTRIES_OFFSET(nchunks, natts) + sizeof(ZLChunkColumn) * (Size) (nchunks) * (natts))

/* ---------- column traits ---------- */

typedef struct ColumnTraits
{
	int16		len;
	bool		byval;
	char		align;
	bool		dropped;
	Oid			collation;
	bool		has_order;		/* a default btree ordering for min/max */
	bool		integer_order;	/* ordered as its value as a signed integer */
	FmgrInfo	cmp;
} ColumnTraits;

extern ColumnTraits *zl_columnar_traits(TupleDesc desc);

/* ---------- the byte stream over pages ---------- */

/* pages a stream of this many bytes takes */
static inline BlockNumber
stream_pages(uint64 bytes)
{
	return (BlockNumber) ((bytes + ZL_STREAM_PAGE_BYTES - 1) / ZL_STREAM_PAGE_BYTES);
}

/* a value's bytes as stored in a PLAIN area (varlenas detoasted, 4-byte header) */
static inline Size
value_size(const ColumnTraits *t, Datum value)
{
	if (t->len == -1)
		return VARSIZE_ANY(DatumGetPointer(value));
	if (t->len == -2)
		return strlen(DatumGetCString(value)) + 1;
	return t->len;
}

#endif							/* ZL_COLUMNAR_INTERNAL_H */
