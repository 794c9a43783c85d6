/*-------------------------------------------------------------------------
 *
 * zl_apply_internal.h
 *	  What stays inside apply/: the fold, batches from other sources.
 *
 * Nothing above apply/ calls into it: its functions are SQL's.  The fold
 * of one key (zl_fold.c) serves zl_apply.c; a batch of changes from
 * another source than a relation (zl_apply.c, "a batch from another
 * source of changes") serves the CDC events of events/.  An application
 * (ApplyContext) is shared by the files of apply_changes and
 * apply_snapshot: zl_apply.c (the design comment, the chunks, the fold
 * and what it writes, the SQL entry points), zl_apply_batch.c (reading
 * the batch, by key hash), zl_apply_lookup.c (the stored versions of the
 * batch's keys), zl_apply_conflict.c (serialization failures) and
 * zl_apply_record.c (the change record).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_APPLY_INTERNAL_H
#define ZL_APPLY_INTERNAL_H

#include "catalog/zl_catalog.h"
#include "write/zl_write.h"

#include "utils/tuplesort.h"

/* ---------- zl_fold.c ---------- */

/* a change of one key, as the fold takes it */
typedef struct ZLFoldChange
{
	int64		time;
	bool		has_seq;
	int64		seq;
	bool		is_delete;
	bool		missing_key;	/* apply_snapshot's delete of a key its image lacks */
	Datum	   *values;			/* a full row; period slots unused */
	bool	   *isnull;
	const uint8 *given;			/* partial: a bit per column it gives (keys always); NULL: all */
} ZLFoldChange;

/* a version of a key; stored: the row it is, NULL when new */
typedef struct ZLFoldVersion
{
	int64		from;
	int64		to;
	Datum	   *values;
	bool	   *isnull;
	struct StoredVersion *stored;
} ZLFoldVersion;

typedef struct ZLFoldCounts
{
	int64		inserted;
	int64		closed;
	int64		deleted;
	int64		unchanged;
	int64		late;
} ZLFoldCounts;

/* everything the fold of one key reads and writes */
typedef struct ZLFoldKey
{
	int64		since;			/* the key's earliest change of the batch */
	ZLFoldVersion *versions;	/* sorted; every stored one ending at or after since */
	int			nversions;
	ZLRecordInstant *record;	/* sorted; remembered instants at or after since */
	int			nrecord;
	ZLFoldChange **changes;		/* sorted in fold order, duplicates collapsed */
	int			nchanges;
	/* out */
	ZLFoldVersion *result;		/* replaces versions */
	int			nresult;
	ZLRecordInstant *remember;	/* replaces record */
	int			nremember;
	bool		record_changed;
} ZLFoldKey;

/* the instants of every key (ZLTableInstant) the fold of a key weighs */
typedef struct ZLTableInstants
{
	ZLTableInstant *stored;		/* sorted by time, one per time */
	int			nstored;
	ZLTableInstant *batch;		/* this batch's */
	int			nbatch;
} ZLTableInstants;

/* what folding a key needs of its table */
typedef struct ZLFoldContext
{
	const ZLValueComparer *comparer;	/* every value column */
	const ZLValueComparer *tracked; /* the tracked ones: they make versions */
	const ZLTableOptions *opts;
	TupleDesc	tupdesc;
	int64		open_end;
	const ZLTableInstants *table;
	int			natts;
} ZLFoldContext;

extern void zl_fold_key(const ZLFoldContext *cx, ZLFoldKey *key, ZLFoldCounts *counts);
extern bool zl_fold_precedes(int64 time, bool has_seq, int64 seq,
							 int64 other_time, bool other_has_seq, int64 other_seq);

/* ---------- zl_apply.c: a batch from another source of changes ---------- */

typedef struct ApplyContext ZLApplyBatch;

typedef struct ZLBatchChange
{
	char		op;				/* 'u' upsert, 'd' delete, 't' truncate */
	TimestampTz time;
	bool		has_seq;
	int64		seq;
	Datum	   *values;			/* row-shaped, of the columns' types */
	bool	   *isnull;
	const uint8 *given;			/* a bit per column it gives; NULL: all */
} ZLBatchChange;

typedef struct ApplyCounts
{
	int64		changes;
	int64		inserted;
	int64		closed;
	int64		deleted;
	int64		unchanged;
	int64		late;
	int64		skipped;		/* apply_events: events of no change (each pass sees all) */
} ApplyCounts;

/*
 * A call on a zipper parent (README "Scaling out") applies its batch leaf
 * by leaf, each pass reading the whole batch and taking the changes of the
 * keys that hash to its leaf (zl_apply_leaves.c).  NULL: a single table.
 */
typedef struct ZLApplyLeaves
{
	ZLParent   *parent;
	int64		newest;			/* newest change applied to any leaf before */
} ZLApplyLeaves;

extern void zl_apply_lock_leaves(ZLParent *parent, int first, int step);
extern ZLApplyLeaves *zl_apply_leaves_begin(Oid relid, int first, int step);
extern int	zl_apply_leaves_count(ZLApplyLeaves *leaves);
extern void zl_apply_leaves_end(ZLApplyLeaves *leaves);
extern void zl_apply_add_counts(ApplyCounts *total, const ApplyCounts *counts);
extern Datum zl_apply_result(FunctionCallInfo fcinfo, const ApplyCounts *counts);

typedef enum ZLMissingColumns
{
	MISSING_ERROR,
	MISSING_NULL,
	MISSING_KEEP
} ZLMissingColumns;

extern ZLMissingColumns zl_apply_parse_missing_columns(const char *mode);
extern const char *zl_apply_missing_columns_name(ZLMissingColumns mode);
extern ZLApplyBatch *zl_apply_batch_begin(ZLApplyLeaves *leaves, int leaf, Oid relid,
										  Oid source_relid, const char *source_argument,
										  bool ignore_nulls, ZLMissingColumns missing_columns);
extern Relation zl_apply_batch_relation(ZLApplyBatch *batch, const ZLTableOptions **opts);
extern bool zl_apply_batch_keeps_missing(ZLApplyBatch *batch, const char *column,
										 const char *change);
extern void zl_apply_batch_add(ZLApplyBatch *batch, const ZLBatchChange *change);
extern void zl_apply_batch_finish(ZLApplyBatch *batch, ApplyCounts *total);
struct NumericData;
extern bool zl_numeric_is_integer(struct NumericData *n);

/* ---------- an application of a batch (zl_apply*.c) ---------- */

/* keys of a chunk from which the current partition's merged key index is used */
#define ZL_APPLY_INDEX_KEYS		1024

/* apply_snapshot with deletes: memory an open row read for a chunk takes */
#define ZL_OPEN_ROW_BYTES		1024

/* memory (kB) of the sort of retired rows; positions per mask insert */
#define ZL_RETIRED_SORT_KB		1024
#define ZL_MASKS_PER_INSERT		(1024 * 1024)

typedef enum ChangeOp
{
	OP_UPSERT,
	OP_DELETE,
	OP_IGNORE,					/* -U, an update's before-image */
	OP_TRUNCATE,				/* every key deleted (no key) */
	OP_UNKNOWN					/* no op zl_apply_op_kind knows */
} ChangeOp;

typedef struct Change
{
	int64		time;
	bool		has_seq;
	int64		seq;
	uint32		arrival;
	ChangeOp	op;
	bool		missing_key;	/* apply_snapshot's delete of a key its image lacks */
	Datum	   *values;			/* a full target row; period slots unused */
	bool	   *isnull;
	uint8	   *given;			/* a partial change: a bit per column it gives; NULL: all */
} Change;

/* a version as stored: where it is, so it can be masked */
typedef struct StoredVersion
{
	const ZLSubGroup *sg;
	int32		position;
	bool		survives;
} StoredVersion;

typedef ZLFoldVersion Version;

/* a change of the batch held in memory, with its key hash */
typedef struct HeldChange
{
	uint32		hash;
	uint32		arrival;
	Change	   *change;
} HeldChange;

/* a slot of the batch's key table: the key's hash, so that probes pass over others */
typedef struct KeyBucket
{
	uint32		hash;
	struct KeyState *key;		/* NULL = empty; no index into keys, which
								 * would be one more cache miss a probe */
} KeyBucket;

typedef struct KeyState
{
	uint32		hash;
	Datum	   *values;			/* row holding the key (batch or stored) */
	bool	   *isnull;
	Change	  **changes;
	int			nchanges;
	int			maxchanges;
	Version    *versions;		/* sorted by from */
	int			nversions;
	int			maxversions;
	bool		has_current;
	int64		min_time;
	ZLRecordInstant *record;	/* remembered instants at or after min_time */
	int			nrecord;
	int			maxrecord;
	int64		record_newest;	/* the newest of them, PG_INT64_MIN if none */
	int64		record_from;	/* the record is read and rewritten from here */
} KeyState;

/* a sub-group the batch retired rows of */
typedef struct TouchedSubGroup
{
	int64		subgroup_id;
	bool		current;		/* in the current partition: may be compacted */
	int64		row_count;
	int64		masked_rows;	/* before the batch */
} TouchedSubGroup;

/*
 * The arguments of an apply_changes, apply_snapshot or apply_events call,
 * of fixed size: background workers get a copy (zl_apply_workers.c).
 */
typedef struct ZLApplyCall
{
	Oid			relid;			/* the table or zipper parent */
	Oid			source_relid;
	bool		snapshot;		/* apply_snapshot */
	bool		events;			/* apply_events */
	NameData	format;			/* apply_events */
	NameData	event_column;
	bool		has_source_table;
	char		source_table[3 * NAMEDATALEN];
	NameData	time_column;	/* apply_changes */
	bool		has_op;
	NameData	op_column;
	bool		has_seq;
	NameData	seq_column;
	TimestampTz snapshot_time;	/* apply_snapshot */
	bool		deletes;
	bool		allow_empty;
	bool		ignore_nulls;	/* README "Partial changes" */
	ZLMissingColumns missing_columns;
} ZLApplyCall;

extern void zl_apply_call_leaves(const ZLApplyCall *call, ZLApplyLeaves *leaves, int first,
								 int step, ApplyCounts *total);
extern Datum zl_apply_call(FunctionCallInfo fcinfo, const ZLApplyCall *call);

/* events/zl_events_apply.c: the same for apply_events */
extern void zl_events_apply_leaves(const ZLApplyCall *call, ZLApplyLeaves *leaves, int first,
								   int step, ApplyCounts *total);

/* zl_apply_workers.c, zl_apply_resolver.c: prepared transactions "zipper_lake:X:w" */
#define ZL_APPLY_GID_PREFIX "zipper_lake:"
/* zl_apply_remote.c: a shard's pass */
extern int64 zl_apply_remote_newest(Oid leaf_relid);
extern int64 zl_apply_remote_pass(const ZLApplyCall *call, ZLApplyLeaves *leaves, int leaf,
								  ApplyCounts *total);
extern int64 zl_apply_shard_parent_newest(void);
extern struct ZLShardRows *zl_apply_shard_rows(TupleDesc desc);
extern bool zl_apply_shard_takes(struct ZLShardRows *rows, Change *c, bool *counted);
extern void zl_apply_remote_events_pass(const ZLApplyCall *call, ZLApplyLeaves *leaves, int leaf,
										ApplyCounts *total);
extern void zl_apply_refuse_empty_image(const ZLApplyCall *call, const ZLTableOptions *opts);
extern ChangeOp zl_apply_op_kind(const char *op);

extern bool zl_apply_in_workers(const ZLApplyCall *call, ApplyCounts *total);
extern int64 zl_apply_resolve(void);

/* everything one application needs */
typedef struct ApplyContext
{
	Relation	rel;
	TupleDesc	tupdesc;
	ZLTableOptions opts;
	const char *source_name;	/* for messages */

	/* key hashing and value equality (zl_keys.c) */
	ZLKeyHasher *hasher;
	ZLAssignment *assignment;	/* batch columns to table columns (zl_rowcheck.c) */
	ZLRowCheck *row_check;		/* generated columns and constraints of versions */
	ZLValueComparer *value_comparer;
	ZLValueComparer *tracked_comparer;	/* README "Tracked columns" */

	/* keys of the batch: open addressing over keys[] */
	KeyState  **keys;
	int			nkeys;
	int			maxkeys;
	KeyBucket  *buckets;		/* open addressing over keys */
	int			nbuckets;

	/* sub-groups read: the current partition's, then history's */
	ZLSubGroup *current;
	int			ncurrent;
	ZLSubGroup *history;
	int			nhistory;
	DateADT		history_partition;	/* the first one read, if any */

	/* the batch's key hashes, sorted and distinct, like key directories */
	uint32	   *hashes;
	int			nhashes;
	bool		keys_in_hash_order; /* ac->keys is sorted by hash too */
	bool		first_look;		/* the chunk reads stored key directories */

	/* stored versions found */
	StoredVersion **stored;
	int			nstored;
	int			maxstored;

	Snapshot	snapshot;		/* latest, taken under the writer lock */

	/* apply_snapshot: the batch is an image (a row a key) */
	bool		image;
	/* apply_snapshot: delete open keys missing from the batch at this time */
	bool		delete_missing;
	int64		delete_time;

	/*
	 * Changes of every key (README "Change semantics"): the snapshot's
	 * deletes of keys missing from its image, truncates; sorted in fold
	 * order.  Every open key of a chunk's hash range is read, and, when one
	 * is at or before the newest change applied (late), history too.
	 */
	ZLTableInstant *table_deletes;
	int			ntable_deletes;
	int			maxtable_deletes;
	bool		table_deletes_late;

	/*
	 * The change record (zl_record.c): what the table remembers besides
	 * its versions, read under the writer lock by the first chunk; the
	 * entries the batch changes wait in record_writer until its rows are
	 * written.  Off while the catalog is 0.1's (no record tables).
	 */
	bool		record_on;
	ZLRecordCodec *record_codec;
	ZLRecordWriter *record_writer;
	bool		head_loaded;
	int64		newest_change;	/* applied before the batch; PG_INT64_MIN none */
	ZLTableInstants table_instants;
	ZLFoldContext fold_context;
	int64		batch_newest;	/* the batch's newest change time */

	/*
	 * Partial changes (README "Partial changes"): with ignore_nulls a NULL
	 * value keeps the column; kept_columns are the columns the batch lacks
	 * under missing_columns => 'keep'.
	 */
	bool		ignore_nulls;
	ZLMissingColumns missing_columns;
	bool	   *kept_columns;	/* natts, or NULL */

	/*
	 * The batch, converted and checked, in key hash (and arrival) order:
	 * held in memory while it fits work_mem, else in a tuplesort that
	 * spills ("The batch by key hash"); it is applied a chunk of keys at
	 * a time, the keys whose hashes lie in [chunk_lo, chunk_hi],
	 * everything of a chunk in chunk_context.
	 */
	MemoryContext input_context;	/* where the sort and its slots are made */
	MemoryContext held_context; /* the held changes; NULL once moved to the sort */
	HeldChange *held;
	int			nheld;
	int			maxheld;
	bool		held_in_arrival_order;
	int			next_held;		/* the next to apply */
	TupleDesc	sort_desc;
	Tuplesortstate *sort;
	TupleTableSlot *put_slot;	/* virtual: a change into the sort */
	TupleTableSlot *sort_slot;	/* a change out of it */
	bool		sort_more;		/* sort_slot holds the next change */
	MemoryContext chunk_context;
	MemoryContext key_context;	/* what folding one key takes; reset after it */
	uint32		chunk_lo;
	uint32		chunk_hi;
	bool		later_chunk;	/* not the first chunk of the batch */

	/*
	 * Stored rows the batch retired, as (index in touched << 32 | position)
	 * in a tuplesort: they are masked, or their sub-group compacted, once
	 * the whole batch is applied (retire_rows).
	 */
	Tuplesortstate *retired;
	TouchedSubGroup *touched;	/* in the batch's memory */
	int			ntouched;
	int			maxtouched;
	int			last_touched;	/* the index found last */
	MemoryContext batch_context;

	ApplyCounts counts;
	int64		rows_seen;		/* of the batch, whichever leaf they are for */

	/* a pass of a call on a zipper parent: only the changes of its leaf */
	ZLParent   *parent;
	int			leaf;
	int64		parent_newest;
	struct ZLShardRows *shard_rows; /* a shard's call: only its keys */
} ApplyContext;

/* grow an array to hold needed elements (huge allocations allowed) */
static inline void
grow_array(void **array, int *max, int needed, Size elemsize)
{
	if (needed <= *max)
		return;
	*max = Max(needed, Max(4, *max * 2));	/* most keys have one or two of each */
	*array = *array ? repalloc_huge(*array, (Size) *max * elemsize)
		: palloc_extended((Size) *max * elemsize, MCXT_ALLOC_HUGE);
}

/* a key in messages: "(id)=(7)" */
static inline char *
describe_key_values(ApplyContext *ac, Datum *values, bool *isnull)
{
	HeapTuple	tuple = heap_form_tuple(ac->tupdesc, values, isnull);

	return zl_describe_key(&ac->opts, ac->tupdesc, tuple);
}

/* an instant in the period columns' type, for messages */
static inline char *
time_text(ApplyContext *ac, int64 instant)
{
	return zl_instant_to_cstring(instant, ac->opts.period_type);
}

/* IS NOT DISTINCT FROM on every value column */
static inline bool
values_equal(ApplyContext *ac, Datum *a, bool *anull, Datum *b, bool *bnull)
{
	return zl_values_equal(ac->value_comparer, a, anull, b, bnull);
}

/* zl_apply.c */
extern KeyState *zl_apply_key_lookup(ApplyContext *ac, Datum *values, bool *isnull,
									 bool create);
extern void zl_apply_write_version(ApplyContext *ac, ZLWriteState *state, Version *v);
extern int	zl_apply_version_cmp(const void *a, const void *b);

/* zl_apply_batch.c */
extern void zl_apply_check_change(ApplyContext *ac, Change *c, bool time_null,
								  const char *time_column);
extern void zl_apply_check_snapshot_time(ApplyContext *ac, int64 snapshot_time);
extern void zl_apply_add_change(KeyState *ks, Change *c);
extern void zl_apply_begin_batch(ApplyContext *ac);
extern void zl_apply_end_batch(ApplyContext *ac);
extern bool zl_apply_key_in_chunk(ApplyContext *ac, const Datum *key_values);
extern bool zl_apply_next_change_hash(ApplyContext *ac, uint32 *hash);
extern Change *zl_apply_next_change(ApplyContext *ac);
extern void zl_apply_drop_batch(ApplyContext *ac);
extern uint8 *zl_apply_given_columns(ApplyContext *ac, Change *c);
extern void zl_apply_add_table_delete(ApplyContext *ac, ZLTableInstant delete);
extern void zl_apply_take_change(ApplyContext *ac, Change *c, MemoryContext batch_memory);

/* zl_apply_leaves.c */
extern bool zl_apply_route_change(ApplyContext *ac, Change *c, bool *counted);
extern void zl_apply_read_batch(ApplyContext *ac, Oid source_relid, const char *time_column,
								const char *op_column, const char *seq_column,
								int64 snapshot_time);
extern void zl_apply_order_changes(ApplyContext *ac);

/* zl_apply_lookup.c */
extern int	zl_apply_table_instant_cmp(const void *a, const void *b);
extern void zl_apply_add_truncates_to_batch_keys(ApplyContext *ac);
extern bool zl_apply_key_needs_history(const KeyState *ks);
extern void zl_apply_read_batch_key_rows(ApplyContext *ac, const ZLSubGroup *sg,
										 ZLRowCallback callback, void *arg);
extern uint32 *zl_apply_key_hashes(ApplyContext *ac, bool history_only, int *n);
extern void zl_apply_find_stored_versions(ApplyContext *ac);

/* zl_apply_conflict.c */
extern void zl_apply_check_concurrent_changes(ApplyContext *ac);

/* zl_apply_record.c */
extern void zl_apply_load_record_head(ApplyContext *ac);
extern void zl_apply_check_horizon(ApplyContext *ac, KeyState *ks);
extern void zl_apply_find_record_instants(ApplyContext *ac);
extern void zl_apply_sort_keys_by_hash(ApplyContext *ac);
extern void zl_apply_save_record(ApplyContext *ac);

#endif							/* ZL_APPLY_INTERNAL_H */
