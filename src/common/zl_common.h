/*-------------------------------------------------------------------------
 *
 * zl_common.h
 *	  What every layer of zipper_lake uses.
 *
 * The layers, lowest first: common, storage, catalog, write, lifecycle,
 * then access and apply (which never use each other), planner, api, and
 * the hooks and _PG_init on top.  Each folder's zl_<folder>.h declares
 * what the folders above it may use; zl_<folder>_internal.h what stays in
 * the folder.  Here: the extension's names and constants, the in-memory
 * form of a table's registration, instants and partitions (zl_time.c),
 * naming things in messages (zl_describe.c), small helpers (zl_util.c) and
 * row sorts (zl_rowsort.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_COMMON_H
#define ZL_COMMON_H

#include "postgres.h"

#include "access/htup.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/sdir.h"
#include "access/transam.h"
#include "executor/tuptable.h"
#include "storage/lockdefs.h"
#include "storage/smgr.h"
#include "datatype/timestamp.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "storage/block.h"
#include "utils/array.h"
#include "utils/date.h"
#include "utils/rel.h"
#include "utils/snapshot.h"

/* ask the CPU to fetch a cache line that is about to be read */
#if defined(__GNUC__) || defined(__clang__)
#define ZL_PREFETCH(address)	__builtin_prefetch(address)
#else
#define ZL_PREFETCH(address)	((void) (address))
#endif

/* ---------- constants ---------- */

#define ZL_SCHEMA				"zipper_lake"
#define ZL_HINT_APPLY			"Change a zipper table with zipper_lake.apply_changes() or zipper_lake.apply_snapshot()."
#define ZL_AM_NAME				"zipper_lake"

/* partition_end of the current partition (open versions) */
#define ZL_CURRENT_PARTITION	DATEVAL_NOEND

/* sub-group formats (README "Storage formats"), as the catalog records them */
#define ZL_FORMAT_ROWS			'r'
#define ZL_FORMAT_COLUMNAR		'c'

/*
 * Memory (kB) of the sorts and buffers of a flush (write/zl_write.c,
 * "Memory") other than its two main sorts (ZL_MAIN_SORT_KB): 1 MB each.
 */
#define ZL_SIDE_KB				1024

/* ---------- registration ---------- */

typedef enum ZLPartitionUnit
{
	ZL_UNIT_DAY,
	ZL_UNIT_MONTH,
	ZL_UNIT_YEAR
} ZLPartitionUnit;

/*
 * A file-group window: either a whole number of months, or a fixed length
 * in microseconds (days and time).  register() refuses mixed spans.
 */
typedef struct ZLSpan
{
	int32		months;
	int64		usecs;
} ZLSpan;

/*
 * The registration of a zipper table, resolved against its tuple
 * descriptor.  Period values are handled as int64 microseconds
 * ("instants"): timestamptz as is, timestamp as if UTC, date at midnight.
 * Only timestamptz columns are cut into dates in time_zone.
 */
typedef struct ZLTableOptions
{
	Oid			relid;
	int			nkeys;
	AttrNumber	key_attnums[INDEX_MAX_KEYS];
	AttrNumber	from_attnum;
	AttrNumber	to_attnum;
	Oid			period_type;
	int32		period_typmod;	/* timestamp(p) / timestamptz(p): p, else -1 */
	ZLPartitionUnit unit;
	ZLSpan		history_span;
	ZLSpan		current_span;
	int			max_subgroups;
	int64		open_end;
	char	   *time_zone;
	bool		zone_is_utc;
	int64		late_horizon;	/* microseconds; 0: none (README "Late data") */
	char		history_format; /* ZL_FORMAT_*: of new history sub-groups */
	int64		history_cut;	/* README "Lifecycle": dropped up to here, or
								 * ZL_NO_HISTORY_CUT */
	bool		has_retention;	/* README "Lifecycle": keep history for ... */
	Interval	retention;
	bool		some_untracked; /* track_columns names only some (README "Tracked columns") */
	uint8		tracked[(MaxHeapAttributeNumber + 7) / 8];	/* a bit per attribute */
} ZLTableOptions;

#define ZL_NO_HISTORY_CUT		PG_INT64_MIN

#define ZL_TRACKED(opts, attnum) \
	(!(opts)->some_untracked || \
	 ((opts)->tracked[((attnum) - 1) >> 3] & (1 << (((attnum) - 1) & 7))) != 0)

/* ---------- zl_time.c ---------- */

extern int64 zl_datum_to_instant(Datum value, Oid typid);
extern Datum zl_instant_to_datum(int64 instant, Oid typid);
extern bool zl_instant_is_finite(int64 instant);
extern DateADT zl_partition_of(const ZLTableOptions *opts, int64 valid_to);
extern int64 zl_window_of(const ZLTableOptions *opts, DateADT partition_end,
						  int64 valid_from);
extern int64 zl_window_end(const ZLTableOptions *opts, DateADT partition_end,
						   int64 window_start);
extern ZLSpan zl_span_from_interval(const Interval *span);
extern void zl_partition_range(const ZLTableOptions *opts, DateADT partition_end,
							   int64 *valid_to_lo, int64 *valid_to_hi);
extern int64 zl_timestamptz_to_instant(const ZLTableOptions *opts, TimestampTz ts);
extern bool zl_timestamptz_minus_interval(TimestampTz t, const Interval *span,
										  TimestampTz *result);
extern int64 zl_instant_to_precision(const ZLTableOptions *opts, int64 instant);
extern char *zl_instant_to_cstring(int64 instant, Oid typid);
extern bool zl_time_text_reads_clock(const char *str);
extern bool zl_type_reads_time_text(Oid type);

/* ---------- zl_describe.c ---------- */

extern char *zl_qualified_name(Relation rel);
struct BackgroundWorker;
extern void zl_as_extension_owner(bool begin);
extern ErrorData *zl_try_in_subtransaction(void (*fn) (void *arg), void *arg);
extern void zl_bgworker_init(struct BackgroundWorker *bgw, const char *type,
							 const char *function, int start_time, int restart_time);
extern bool zl_is_key_column(const ZLTableOptions *opts, AttrNumber attnum);
extern bool zl_is_value_column(const ZLTableOptions *opts, Form_pg_attribute att);
extern const char *zl_attname(TupleDesc tupdesc, AttrNumber attnum);
extern char *zl_describe_key(const ZLTableOptions *opts, TupleDesc tupdesc,
							 HeapTuple tuple);
extern char *zl_describe_version(const ZLTableOptions *opts, TupleDesc tupdesc,
								 HeapTuple tuple);
extern char *zl_describe_value_text(const char *text);
extern void zl_rethrow_conversion_error(MemoryContext memory, const char *detail,
										const char *hint) pg_attribute_noreturn();

/* ---------- zl_util.c ---------- */

extern bool zl_bytes_are_zero(const char *bytes, Size len);
extern int	zl_count_distinct(int64 *values, int n);

/* ---------- zl_rowsort.c ---------- */

/* a buffer for the bytea of a row, grown in context */
typedef struct ZLRowPayload
{
	MemoryContext context;
	bytea	   *buffer;
	Size		size;
} ZLRowPayload;

extern void zl_rowsort_slots(TupleDesc desc, TupleTableSlot **put, TupleTableSlot **read);
extern struct Tuplesortstate *zl_rowsort_begin(TupleDesc desc, int nkeys,
											   const AttrNumber *attnums, int work_mem_kb);
extern void zl_rowsort_put_pending(struct Tuplesortstate *sort, TupleTableSlot *slot);
extern void zl_rowsort_perform_pending(struct Tuplesortstate *sort);
extern Datum zl_rowsort_payload(ZLRowPayload *payload, HeapTuple tuple);
extern int64 zl_rowsort_int8(TupleTableSlot *slot, AttrNumber attnum);
extern HeapTuple zl_rowsort_row_copy(TupleTableSlot *slot, AttrNumber attnum);

/* a row with its sort keys (zl_intsort_next, zl_sortrow_from_slot) */
#define ZL_SORTROW_MAX_KEYS		5
typedef struct ZLSortRow
{
	int64		keys[ZL_SORTROW_MAX_KEYS];
	HeapTupleData row;
} ZLSortRow;

typedef struct ZLIntSort ZLIntSort;

extern TupleTableSlot *zl_sortrow_to_slot(const int64 *keys, int nkeys, HeapTuple row,
										  TupleTableSlot *slot, ZLRowPayload *payload);
extern void zl_sortrow_from_slot(TupleTableSlot *slot, int nkeys, ZLSortRow *out,
								 ZLRowPayload *buffer);
extern ZLIntSort *zl_intsort_begin(TupleDesc desc, int nkeys, int work_mem_kb, bool pending);
extern void zl_intsort_put(ZLIntSort *s, const int64 *keys, HeapTuple row);
extern void zl_intsort_put_slot(ZLIntSort *s, TupleTableSlot *slot);
extern void zl_intsort_perform(ZLIntSort *s);
extern bool zl_intsort_next(ZLIntSort *s, ZLSortRow *out);
extern void zl_intsort_end(ZLIntSort *s);

#endif							/* ZL_COMMON_H */
