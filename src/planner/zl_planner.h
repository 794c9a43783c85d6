/*-------------------------------------------------------------------------
 *
 * zl_planner.h
 *	  The planner layer: what _PG_init installs.
 *
 * The custom scan and its paths (zl_customscan.c), aggregates computed in
 * the scan (zl_aggregate.c) and the read helpers inlined into scans
 * (zl_inline.c) hook into the planner at load; nothing else of the layer
 * is used above it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_PLANNER_H
#define ZL_PLANNER_H

extern void zl_customscan_init(void);
extern void zl_indexpaths_init(void);
extern void zl_aggregate_init(void);
extern void zl_inline_init(void);

#endif							/* ZL_PLANNER_H */
