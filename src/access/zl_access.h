/*-------------------------------------------------------------------------
 *
 * zl_access.h
 *	  The access layer: pruning bounds, scans, chunk filters, triggers.
 *
 * What the planner and the SQL functions use of pruning bounds and the
 * read helpers' terms (zl_prune.c), of scans (zl_scan*.c) and chunk
 * filters (zl_chunkfilter_exec.c); what the hooks use of the trigger
 * checks (zl_triggers.c); _PG_init's zl_tableam_init (zl_tableam.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_ACCESS_H
#define ZL_ACCESS_H

#include "catalog/zl_catalog.h"

#include "access/relscan.h"

/* ---------- pruning bounds (zl_prune.c) ---------- */

/*
 * What a read wants, as inclusive instant ranges on the period columns;
 * "either" ORs the two conditions instead of ANDing them.
 */
typedef struct ZLScanBounds
{
	bool		either;
	int64		from_lo;
	int64		from_hi;
	int64		to_lo;
	int64		to_hi;
} ZLScanBounds;

extern ZLScanBounds zl_bounds_init(bool either);
extern void zl_bounds_narrow(ZLScanBounds *bounds, bool on_valid_from, int strategy,
							 int64 value);

/*
 * What a read helper selects: each term compares a period column with one
 * of the helper's time arguments (1-based) or the open end.  All terms are
 * ANDed, or with either, the valid_from terms ORed with the valid_to ones
 * (as ZLScanBounds.either).
 */
#define ZL_TERM_OPEN_END		(-1)
#define ZL_HELPER_MAX_TIMES		2
#define ZL_HELPER_MAX_TERMS		5

typedef struct ZLHelperTerm
{
	bool		on_valid_from;
	int			strategy;		/* BTLessStrategyNumber ..., column on the left */
	int			value;			/* a time argument, or ZL_TERM_OPEN_END */
} ZLHelperTerm;

typedef struct ZLReadHelper
{
	const char *name;
	int			ntimes;
	const char *time_names[ZL_HELPER_MAX_TIMES];	/* for errors about NULL */
	bool		either;
	int			nterms;
	ZLHelperTerm terms[ZL_HELPER_MAX_TERMS];
} ZLReadHelper;

extern const ZLReadHelper *zl_read_helper(const char *name);

/* ---------- zl_scan.c, zl_scan_probe.c, zl_scan_columnar.c ---------- */

typedef struct ZLChunkFilter ZLChunkFilter;

extern void zl_scan_set_bounds(TableScanDesc scan, const ZLTableOptions *opts,
							   const ZLScanBounds *bounds);
extern void zl_scan_set_keys(TableScanDesc scan, const uint32 *hashes, int nhashes);
extern void zl_scan_keep_subgroups(TableScanDesc scan);
extern void zl_scan_set_columns(TableScanDesc scan, const bool *needed);
extern void zl_scan_set_chunk_filter(TableScanDesc scan, ZLChunkFilter *filter);
extern const ZLPruneStats *zl_scan_stats(TableScanDesc scan);

/* a parallel ZipperScan's leader prunes once for all participants */
extern Size zl_scan_shared_size(TableScanDesc scan);
extern void zl_scan_share(TableScanDesc scan, ParallelTableScanDesc pscan, Size offset);
extern bool zl_scan_shared_options(ParallelTableScanDesc pscan, ZLTableOptions *opts);
extern bool zl_scan_shared_counts(ParallelTableScanDesc pscan, int *subgroups_read, int64 *rows_masked);

/* rows of one columnar chunk a scan returns, for in-scan aggregates */
typedef struct ZLRowBatch
{
	ZLColumnarReader *reader;	/* zl_columnar_chunk_values(reader, chunk, ...) */
	int			chunk;
	const uint32 *rows;			/* the rows' indexes in the chunk, ascending */
	uint32		nrows;
} ZLRowBatch;
extern bool zl_scan_next_batch(TableScanDesc scan, ZLRowBatch *batch);

/* ---------- zl_chunkfilter_exec.c ---------- */

struct PlanState;
struct ExprContext;

/* what a chunk predicate tests; kept in the plan as an int list */
enum
{
	PRED_ATTNUM,
	PRED_STRATEGY,				/* BT*StrategyNumber, or 0: IS NULL, -1: IS NOT NULL */
	PRED_COMPARE_PROC,			/* btree support proc 1 for (column type, value type) */
	PRED_COLLATION,
	PRED_VALUE_ARG,				/* the argument holding the value */
	PRED_FIELDS
};

#define PRED_IS_NULL		0
#define PRED_IS_NOT_NULL	(-1)

extern ZLChunkFilter *zl_chunkfilter_init(List *clauses, List *info, struct PlanState *parent);
extern void zl_chunkfilter_evaluate(ZLChunkFilter *filter, struct ExprContext *econtext,
									MemoryContext context);

/* ---------- zl_triggers.c ---------- */

extern void zl_refuse_new_trigger(Oid trigger_oid);

/* ---------- zl_tableam.c ---------- */

/* gives zl_set_table_am() the access method's routine */
extern void zl_tableam_init(void);

#endif							/* ZL_ACCESS_H */
