/*-------------------------------------------------------------------------
 *
 * zl_lifecycle.h
 *	  The lifecycle layer: retention, erase, scrub, reclaim.
 *
 * What the table access method's VACUUM uses: maintenance of retention
 * and compaction (zl_retention.c) and scrubbing freed pages (zl_scrub.c).
 * The rest of the layer is called from SQL.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_LIFECYCLE_H
#define ZL_LIFECYCLE_H

#include "storage/zl_storage.h"

struct VacuumParams;

extern void zl_scrub_vacuum(Relation rel, struct VacuumParams *params,
							BufferAccessStrategy bstrategy, int elevel);
extern void zl_maintenance_vacuum(Relation rel, ZLSubGroup **sgs, int *nsgs, int elevel);
extern int64 zl_maintenance_masked_left(const ZLSubGroup *sgs, int nsgs);
extern void zl_index_vacuum(Relation rel, BufferAccessStrategy bstrategy, int64 rows, int elevel);
extern bool zl_retention_cut_time(TimestampTz now, const Interval *keep, TimestampTz *cut);
extern bool zl_relocation_due(Relation rel, const ZLSubGroup *sgs, int nsgs, int min_blocks);
extern int64 zl_relocate_tail(Relation rel, int min_blocks);
extern bool zl_maintenance_gives_way(Relation rel);

#endif							/* ZL_LIFECYCLE_H */
