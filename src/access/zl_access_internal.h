/*-------------------------------------------------------------------------
 *
 * zl_access_internal.h
 *	  What stays inside access/.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_ACCESS_INTERNAL_H
#define ZL_ACCESS_INTERNAL_H

#include "access/zl_access.h"
#include "access/tableam.h"
#include "nodes/tidbitmap.h"

struct SampleScanState;

/* ---------- zl_prune.c ---------- */

extern bool zl_bounds_match(const ZLScanBounds *bounds, int64 from, int64 to);
extern void zl_bounds_filter(const ZLTableOptions *opts, const ZLScanBounds *bounds,
							 ZLSubGroupFilter *filter);
extern void zl_prune(const ZLTableOptions *opts, const ZLScanBounds *bounds,
					 bool prune, const ZLSubGroup *sgs, int n, uint8 *decisions,
					 ZLPruneStats *stats);
extern ZLPruneDecision zl_prune_decide(const ZLTableOptions *opts, const ZLScanBounds *bounds,
									   bool prune, const ZLSubGroup *sg);
extern void zl_prune_count_groups(const ZLSubGroup *sgs, int n, const uint8 *decisions,
								  ZLPruneStats *stats);

/* ---------- zl_scan.c: the table access method's callbacks ---------- */

extern TableScanDesc zl_scan_begin(Relation rel, Snapshot snapshot, int nkeys,
								   struct ScanKeyData *key,
								   ParallelTableScanDesc pscan, uint32 flags);
extern void zl_scan_end(TableScanDesc scan);
extern void zl_scan_rescan(TableScanDesc scan, struct ScanKeyData *key,
						   bool set_params, bool allow_strat,
						   bool allow_sync, bool allow_pagemode);
extern bool zl_scan_getnextslot(TableScanDesc scan, ScanDirection direction,
								TupleTableSlot *slot);
extern Size zl_parallelscan_estimate(Relation rel);
extern Size zl_parallelscan_initialize(Relation rel, ParallelTableScanDesc pscan);
extern void zl_parallelscan_reinitialize(Relation rel, ParallelTableScanDesc pscan);
extern bool zl_scan_sample_next_block(TableScanDesc scan, struct SampleScanState *scanstate);
extern bool zl_scan_sample_next_tuple(TableScanDesc scan, struct SampleScanState *scanstate,
									  TupleTableSlot *slot);
extern bool zl_scan_analyze_next_block(TableScanDesc scan, BlockNumber blockno,
									   BufferAccessStrategy bstrategy);
extern bool zl_scan_analyze_next_tuple(TableScanDesc scan,
									   TransactionId OldestXmin,
									   double *liverows, double *deadrows,
									   TupleTableSlot *slot);

/* ---------- zl_chunkfilter_exec.c ---------- */

extern bool zl_chunkfilter_may_match(ZLChunkFilter *filter, const ZLColumnarReader *r,
									 int chunk);

/* ---------- zl_triggers.c ---------- */

extern void zl_refuse_after_row_triggers(Relation rel);
extern void zl_refuse_conversion_triggers(Relation rel);
extern bool zl_rewrite_reads_old_rows(Relation rel);

/* zl_tidfetch.c */
typedef struct ZLTidMap ZLTidMap;
extern ZLTidMap *zl_tid_map_begin(Relation rel, Snapshot snapshot);
extern void zl_tid_map_end(ZLTidMap *map);
extern const ZLSubGroup *zl_tid_map_owner(const ZLTidMap *map, ItemPointer tid, int64 *position);
extern const ZLSubGroup *zl_tid_map_find(const ZLTidMap *map, ItemPointer tid, int64 *position);
extern bool zl_tid_map_fetch(ZLTidMap *map, ItemPointer tid, TupleTableSlot *slot);
extern Snapshot zl_tid_map_snapshot(const ZLTidMap *map);
extern const ZLSubGroup *zl_tid_map_subgroups(const ZLTidMap *map, int *n);
extern bool zl_fetch_row_version(Relation rel, ItemPointer tid, Snapshot snapshot,
								 TupleTableSlot *slot);
extern void zl_scan_set_tidrange(TableScanDesc sscan, ItemPointer mintid, ItemPointer maxtid);
extern bool zl_scan_getnextslot_tidrange(TableScanDesc sscan, ScanDirection direction,
										 TupleTableSlot *slot);
extern struct IndexFetchTableData *zl_index_fetch_begin(Relation rel);
extern void zl_index_fetch_reset(struct IndexFetchTableData *scan);
extern void zl_index_fetch_end(struct IndexFetchTableData *scan);
extern bool zl_index_fetch_tuple(struct IndexFetchTableData *scan, ItemPointer tid,
								 Snapshot snapshot, TupleTableSlot *slot,
								 bool *call_again, bool *all_dead);
extern bool zl_scan_bitmap_next_block(TableScanDesc sscan, struct TBMIterateResult *tbmres);
extern bool zl_scan_bitmap_next_tuple(TableScanDesc sscan, struct TBMIterateResult *tbmres,
									  TupleTableSlot *slot);

/* zl_index_build.c */
struct IndexInfo;
struct ValidateIndexState;
extern double zl_index_build_range_scan(Relation table, Relation index, struct IndexInfo *info,
										bool allow_sync, bool anyvisible, bool progress,
										BlockNumber start_blockno, BlockNumber numblocks,
										IndexBuildCallback callback, void *callback_state,
										TableScanDesc scan);
extern void zl_index_validate_scan(Relation table, Relation index, struct IndexInfo *info,
								   Snapshot snapshot, struct ValidateIndexState *state);

#endif							/* ZL_ACCESS_INTERNAL_H */
