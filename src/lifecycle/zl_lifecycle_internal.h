/*-------------------------------------------------------------------------
 *
 * zl_lifecycle_internal.h
 *	  What stays inside lifecycle/.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_LIFECYCLE_INTERNAL_H
#define ZL_LIFECYCLE_INTERNAL_H

#include "lifecycle/zl_lifecycle.h"

/* drop_history's work (zl_retention.c) */
extern int64 zl_drop_history(Relation rel, const ZLTableOptions *opts, int64 cut);

#endif							/* ZL_LIFECYCLE_INTERNAL_H */
