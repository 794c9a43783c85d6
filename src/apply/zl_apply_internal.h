/*-------------------------------------------------------------------------
 *
 * zl_apply_internal.h
 *	  What stays inside apply/: the fold, batches from other sources.
 *
 * Nothing above apply/ calls into it: its functions are SQL's.  The fold
 * of one key (zl_fold.c) serves zl_apply.c; a batch of changes from
 * another source than a relation (zl_apply.c, "a batch from another
 * source of changes") serves the CDC events of events/.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_APPLY_INTERNAL_H
#define ZL_APPLY_INTERNAL_H

#include "catalog/zl_catalog.h"
#include "write/zl_write.h"

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

extern ZLApplyBatch *zl_apply_batch_begin(Oid relid, Oid source_relid, bool ignore_nulls,
										  const char *missing_columns);
extern Relation zl_apply_batch_relation(ZLApplyBatch *batch, const ZLTableOptions **opts);
extern bool zl_apply_batch_keeps_missing(ZLApplyBatch *batch, const char *column,
										 const char *change);
extern void zl_apply_batch_add(ZLApplyBatch *batch, const ZLBatchChange *change);
extern Datum zl_apply_batch_finish(ZLApplyBatch *batch, FunctionCallInfo fcinfo,
								   int64 skipped);

#endif							/* ZL_APPLY_INTERNAL_H */
