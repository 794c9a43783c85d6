/*-------------------------------------------------------------------------
 *
 * zl_hashsort.h
 *	  Sorting elements by the key hash they begin with.
 *
 * Key directories (zl_keys.c) and a batch's held changes (zl_apply.c) are
 * ordered by a 32-bit key hash, ties in the order the elements were made
 * (row position, arrival).  Elements made in that order need no comparison
 * sort: a radix sort of the hash, a byte at a time from the lowest, each
 * pass stable, gives it in four passes (each counting, then moving) instead
 * of n log n comparisons.  Inline, so that each caller's element size is a
 * constant and the moves are plain copies.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_HASHSORT_H
#define ZL_HASHSORT_H

/* below this many elements a comparison sort is quicker than four passes */
#define ZL_HASHSORT_MIN_ELEMENTS	256

/*
 * Sort n elements of elemsize bytes, each beginning with a uint32 hash, by
 * that hash, keeping the given order among equal hashes.
 */
static inline void
zl_hashsort(void *elements, int n, Size elemsize)
{
	char	   *from = elements;
	char	   *to = palloc(elemsize * n);

	for (int shift = 0; shift < 32; shift += 8)
	{
		int			starts[256] = {0};
		char	   *swap;

		for (int i = 0; i < n; i++)
			starts[(*(uint32 *) (from + i * elemsize) >> shift) & 0xFF]++;
		for (int b = 0, sum = 0; b < 256; b++)
		{
			int			count = starts[b];

			starts[b] = sum;
			sum += count;
		}
		for (int i = 0; i < n; i++)
		{
			char	   *element = from + i * elemsize;

			memcpy(to + (Size) starts[(*(uint32 *) element >> shift) & 0xFF]++ * elemsize,
				   element, elemsize);
		}
		swap = from;
		from = to;
		to = swap;
	}
	/* an even number of passes: the sorted elements are back in place */
	Assert(from == (char *) elements);
	pfree(to);
}

#endif							/* ZL_HASHSORT_H */
