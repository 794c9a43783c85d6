/*-------------------------------------------------------------------------
 *
 * zl_radixsort.h
 *	  Sorting elements by the unsigned integer they begin with.
 *
 * Key directories (zl_keys.c) and a batch's held changes (zl_apply.c) are
 * ordered by a 32-bit key hash, ties in the order the elements were made
 * (row position, arrival); index hits (zl_apply.c) by a 64-bit sub-group
 * and position.  Such elements need no comparison sort: a radix sort of
 * the key, a byte at a time from the lowest, each pass stable, orders them
 * in at most as many passes as the key has bytes (each counting, then
 * moving) instead of n log n comparisons, keeping the given order among
 * equal keys.  A byte that all keys share is passed over after counting,
 * so small keys in wide integers cost only their bytes.  Inline, so that
 * each caller's element size is a constant and the moves are plain copies.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_RADIXSORT_H
#define ZL_RADIXSORT_H

/* below this many elements a comparison sort is quicker */
#define ZL_RADIXSORT_MIN_ELEMENTS	256

static inline uint64
radix_key(const char *element, int key_bytes)
{
	return key_bytes == 8 ? *(const uint64 *) element : *(const uint32 *) element;
}

/*
 * Sort n elements of elemsize bytes, each beginning with an unsigned
 * integer of key_bytes bytes (4 or 8), by that integer; stable.
 */
static inline void
zl_radix_sort(void *elements, int n, Size elemsize, int key_bytes)
{
	char	   *from = elements;
	char	   *to = palloc(elemsize * n);

	Assert(key_bytes == 4 || key_bytes == 8);
	for (int shift = 0; shift < key_bytes * 8; shift += 8)
	{
		int			starts[256] = {0};
		bool		one_value = false;
		char	   *swap;

		for (int i = 0; i < n; i++)
			starts[(radix_key(from + i * elemsize, key_bytes) >> shift) & 0xFF]++;
		for (int b = 0, sum = 0; b < 256; b++)
		{
			int			count = starts[b];

			one_value |= (count == n);
			starts[b] = sum;
			sum += count;
		}
		if (one_value)
			continue;			/* this byte orders nothing */
		for (int i = 0; i < n; i++)
		{
			char	   *element = from + i * elemsize;

			memcpy(to + (Size) starts[(radix_key(element, key_bytes) >> shift) & 0xFF]++ * elemsize,
				   element, elemsize);
		}
		swap = from;
		from = to;
		to = swap;
	}
	if (from != (char *) elements)
		memcpy(elements, from, elemsize * n);
	pfree(from == (char *) elements ? to : from);
}

#endif							/* ZL_RADIXSORT_H */
