/*-------------------------------------------------------------------------
 *
 * zl_follow_internal.h
 *	  Inside the follow layer: a followed table's row of
 *	  zipper_lake.follower (zl_follow_catalog.c), its source
 *	  (zl_follow_source.c), the decoding of pgoutput's messages
 *	  (zl_follow_pgoutput.c), the staging of changes and their application
 *	  (zl_follow_stage.c) and the worker (zl_follow_worker.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_FOLLOW_INTERNAL_H
#define ZL_FOLLOW_INTERNAL_H

#include "follow/zl_follow.h"
#include "remote/zl_remote.h"

#include "access/xlogdefs.h"
#include "datatype/timestamp.h"
#include "lib/stringinfo.h"

/*
 * The advisory lock a follower's worker holds: (this, table oid), objsubid
 * 2; the view zipper_lake.followers finds the worker's pid by it.
 */
#define ZL_FOLLOW_LOCK_CLASS	2053924463

/* a row of zipper_lake.follower */
typedef struct ZLFollower
{
	Oid			tbl;
	Oid			owner;
	char	   *source_table;	/* quoted, schema-qualified */
	Oid			source_relid;	/* on the source: what pgoutput's messages name */
	char	   *connection;		/* NULL: this database */
	char	   *publication;
	char	   *slot;
	int			batch_changes;
	int64		batch_interval_ms;
	char	   *missing_columns;
	char	   *state;
	XLogRecPtr	applied_lsn;
	XLogRecPtr	caught_up_lsn;
} ZLFollower;

/* zl_follow_worker.c */
extern void zl_follow_start_worker(Oid tbl, Oid owner, TransactionId wait_for);
extern void zl_follow_start_missing(void);
extern bool zl_follow_lock(Oid tbl, bool session, bool dont_wait);
extern bool zl_follow_preloaded;

/* zl_follow_api.c */
extern void zl_follow_drop(const ZLFollower *f, bool warn_unreachable);

/* zl_follow_catalog.c */
extern ZLFollower *zl_follow_load(Oid tbl, bool missing_ok);
extern Oid *zl_follow_all(int *n);
extern void zl_follow_insert(const ZLFollower *f, TimestampTz image_time, XLogRecPtr source_lsn);
extern void zl_follow_set_state(Oid tbl, const char *state);
extern void zl_follow_set_options(const ZLFollower *f);
extern void zl_follow_record_progress(Oid tbl, XLogRecPtr applied_lsn, TimestampTz commit_time,
									  XLogRecPtr caught_up_lsn, XLogRecPtr source_lsn,
									  int64 transactions, int64 changes);
extern void zl_follow_record_error(Oid tbl, const char *message, bool stop);
extern void zl_follow_delete(Oid tbl);
extern char *zl_follow_origin_name(Oid tbl);
extern char *zl_follow_slot_name(Oid tbl);
extern int	zl_follow_worker_pid(Oid tbl);

/* zl_follow_source.c: this database (SPI) or another server (libpq) */
typedef struct ZLSource ZLSource;
typedef void (*ZLSourceRow) (void *arg, char **values);

extern ZLSource *zl_source_open(const char *connection, Oid userid);
extern void zl_source_close(ZLSource *source);
extern bool zl_source_is_local(ZLSource *source);
extern PGconn *zl_source_conn(ZLSource *source);
extern char *zl_source_name(ZLSource *source);
extern char **zl_source_row(ZLSource *source, const char *sql, int nparams,
							const char *const *params, int ncols);
extern int64 zl_source_each_row(ZLSource *source, const char *sql, int nparams,
								const char *const *params, int ncols, ZLSourceRow callback,
								void *arg);
extern void zl_source_command(ZLSource *source, const char *sql, int nparams,
							  const char *const *params);
extern XLogRecPtr zl_source_wal_end(ZLSource *source);

/* zl_follow_stage.c: changes staged in a temporary table, then applied */
typedef struct ZLStage ZLStage;

extern ZLStage *zl_stage_begin(Oid tbl, const char *missing_columns);
extern void zl_stage_columns(ZLStage *stage, int natts, char **names, const char *what);
extern int	zl_stage_key_count(ZLStage *stage);
extern bool zl_stage_same(ZLStage *a, ZLStage *b);
extern int	zl_stage_source_column(ZLStage *stage, int i);
extern bool zl_stage_same_key(ZLStage *stage, char **a, char **b);
extern void zl_stage_change(ZLStage *stage, char op, char **values, bool *unchanged,
							char **held_by, TimestampTz time, XLogRecPtr seq);
extern int64 zl_stage_apply(ZLStage *stage);
extern int64 zl_stage_apply_image(ZLStage *stage, TimestampTz time);
extern void zl_stage_end(ZLStage *stage);

/* zl_follow_pgoutput.c: one batch of messages of the slot */
typedef struct ZLDecoded
{
	XLogRecPtr	applied_lsn;	/* commit LSN of the last transaction staged */
	XLogRecPtr	end_lsn;		/* the end of its commit record */
	XLogRecPtr	read_end_lsn;	/* the end of the last commit read, applied or skipped */
	TimestampTz commit_time;
	int64		transactions;
	int64		changes;
	int64		messages;
} ZLDecoded;

extern void zl_pgoutput_batch(ZLSource *source, const ZLFollower *f, ZLStage *stage,
							  XLogRecPtr upto, ZLDecoded *out);

#endif							/* ZL_FOLLOW_INTERNAL_H */
