/*-------------------------------------------------------------------------
 *
 * zl_malloc.c
 *	  Freed memory a backend keeps for reuse (zipper_lake.retained_memory).
 *
 * An apply of a 10k-change batch allocates and frees some tens of MB
 * (README "Performance"): the held batch, the stored versions it reads, the
 * rows it places.  glibc's malloc serves large blocks from mappings of
 * their own and gives freed memory at the top of the heap back to the
 * kernel once more than its trim threshold is free; both thresholds start
 * at 128 kB and only grow as mapped blocks are freed (to at most 32 MB and
 * 64 MB).  So every apply would take most of its memory fresh from the
 * kernel, a page fault per 4 kB page: 2,000-3,500 a batch, up to a tenth
 * of its time.  The backend sets the two thresholds where glibc's own
 * adaptation would end (the trim threshold to zipper_lake.retained_memory,
 * the mapping threshold to half of it, at most 32 MB), so freed memory is
 * reused from the heap: ~650 page faults a batch, most of them the first
 * touches of shared buffers.  The default, 256 MB, is the budget of the key
 * caches (zipper_lake.key_cache_memory): a batch that changes a table makes
 * the backend build its merged key index again, and with a lower threshold
 * glibc gave the old one back and faulted the new one in (an end-of-day
 * snapshot of 150k keys: 17k faults and twice the time).  0 sets glibc's initial thresholds (128 kB)
 * again, without their adaptation.  Nothing else changes: the memory a
 * statement uses is bounded as before (README "Guarantees", "Bounded
 * memory"); up to this much of it stays with the backend between
 * statements, as glibc's own adaptation may keep.  Only on glibc; the
 * setting does nothing elsewhere.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common_internal.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#define GLIBC_DEFAULT_THRESHOLD		(128 * 1024)
#define GLIBC_MAX_MMAP_THRESHOLD	(32 * 1024 * 1024)

void
zl_assign_retained_memory(int newval, void *extra)
{
#ifdef __GLIBC__
	int			trim = newval > 0 ? newval * 1024 : GLIBC_DEFAULT_THRESHOLD;

	mallopt(M_TRIM_THRESHOLD, trim);
	mallopt(M_MMAP_THRESHOLD, newval > 0 ? Min(trim / 2, GLIBC_MAX_MMAP_THRESHOLD) :
			GLIBC_DEFAULT_THRESHOLD);
#endif
}
