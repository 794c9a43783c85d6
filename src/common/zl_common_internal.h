/*-------------------------------------------------------------------------
 *
 * zl_common_internal.h
 *	  What stays inside common/.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_COMMON_INTERNAL_H
#define ZL_COMMON_INTERNAL_H

#include "common/zl_common.h"

/* the assign hook of zipper_lake.retained_memory (zl_malloc.c) */
extern void zl_assign_retained_memory(int newval, void *extra);

#endif							/* ZL_COMMON_INTERNAL_H */
