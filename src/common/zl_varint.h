/*-------------------------------------------------------------------------
 *
 * zl_varint.h
 *	  Variable-length unsigned integers, and zigzag for signed ones.
 *
 * Key directories (zl_keys.c), the change record (zl_record.c) and
 * columnar DELTA chunks (zl_columnar_write.c, zl_columnar_read.c) store
 * small numbers in as few bytes as they need: seven bits a byte, lowest
 * first, the high bit set on every byte but the last (at most 10 bytes
 * for 64 bits).  A signed number is zigzagged first, so that small
 * negative ones stay small: 0, -1, 1, -2 ... become 0, 1, 2, 3 ...
 *
 * Decoding never reads past the end it is given; a number that runs past
 * it, or past 64 bits, is reported to the caller, which says what is
 * damaged in its own words.  Inline: columnar sums decode one a row.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_VARINT_H
#define ZL_VARINT_H

#include "lib/stringinfo.h"

/* the most bytes a varint of 64 bits takes */
#define ZL_VARINT_MAX_BYTES 10

static inline int
zl_varint_size(uint64 v)
{
	int			n = 1;

	while (v >= 0x80)
	{
		v >>= 7;
		n++;
	}
	return n;
}

/* write v at p (room for ZL_VARINT_MAX_BYTES); returns the byte after it */
static inline char *
zl_varint_put(char *p, uint64 v)
{
	while (v >= 0x80)
	{
		*p++ = (char) ((v & 0x7F) | 0x80);
		v >>= 7;
	}
	*p++ = (char) v;
	return p;
}

static inline void
zl_varint_append(StringInfo buf, uint64 v)
{
	char		bytes[ZL_VARINT_MAX_BYTES];

	appendBinaryStringInfo(buf, bytes, zl_varint_put(bytes, v) - bytes);
}

/*
 * Read one varint at *p, before end, into *v and move *p past it; false
 * (and *p unchanged) when it runs past end or past 64 bits.
 */
static inline bool
zl_varint_get(const char **p, const char *end, uint64 *v)
{
	const char *q = *p;
	uint64		result = 0;

	for (int shift = 0; shift < 64 && q < end; shift += 7)
	{
		uint8		b = (uint8) *q++;

		result |= (uint64) (b & 0x7F) << shift;
		if ((b & 0x80) == 0)
		{
			*v = result;
			*p = q;
			return true;
		}
	}
	return false;
}

static inline uint64
zl_zigzag(int64 v)
{
	return ((uint64) v << 1) ^ (uint64) (v >> 63);
}

static inline int64
zl_unzigzag(uint64 v)
{
	return (int64) (v >> 1) ^ -(int64) (v & 1);
}

#endif							/* ZL_VARINT_H */
