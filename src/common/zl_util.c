/*-------------------------------------------------------------------------
 *
 * zl_util.c
 *	  Small helpers over arrays and bytes that several layers use.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"

/* are all these bytes zero? */
bool
zl_bytes_are_zero(const char *bytes, Size len)
{
	for (Size i = 0; i < len; i++)
		if (bytes[i] != 0)
			return false;
	return true;
}

static int
int64_cmp(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return x < y ? -1 : (x > y);
}

/* number of distinct values among the first n of an array (sorted in place) */
int
zl_count_distinct(int64 *values, int n)
{
	int			distinct = 0;

	qsort(values, n, sizeof(int64), int64_cmp);
	for (int i = 0; i < n; i++)
		if (i == 0 || values[i] != values[i - 1])
			distinct++;
	return distinct;
}
