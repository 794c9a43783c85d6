/*-------------------------------------------------------------------------
 *
 * zl_remote.h
 *	  Shards: zipper tables on other servers, reached through the
 *	  postgres_fdw foreign tables that stand for them (README "Scaling
 *	  out", src/remote/README.md).
 *
 * A shard is used within the caller's transaction: the first use opens
 * (or reuses) a libpq connection with the credentials of the caller's
 * user mapping and starts a transaction there; one that writes there is
 * prepared when the caller's transaction commits and committed after it
 * (two-phase commit, zl_remote_xact.c), one that only reads is committed.
 * Results arrive as text.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_REMOTE_H
#define ZL_REMOTE_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "fmgr.h"
#include "nodes/execnodes.h"
#include "libpq-fe.h"

typedef struct ZLShard ZLShard;

/* a query's rows, all values as text (NULL: SQL NULL) */
typedef struct ZLRemoteRows
{
	int			nrows;
	int			ncols;
	char	  **names;			/* [ncols] */
	char	  **values;			/* [nrows * ncols] */
} ZLRemoteRows;

/* zl_remote_conn.c */
extern bool zl_remote_is_shard(Oid relid);
extern char *zl_remote_table_name(Oid relid);
extern char *zl_remote_schema_name(Oid relid);
extern char *zl_remote_where_name(Oid relid);
extern int	zl_remote_fix_output(void);
extern void zl_remote_restore_output(int nest);
extern const char *zl_remote_value(const ZLRemoteRows *rows, int row, const char *column);
extern void zl_remote_put_rows(ReturnSetInfo *rsinfo, const ZLRemoteRows *rows,
							   const char *local_column, Datum local_value);
extern ZLRemoteRows *zl_remote_call_rows(Oid relid, const char *sql, int nparams,
										 const char *const *params);

/* zl_remote_conn.c: libpq connections of the extension's own (a follower's source too) */
extern PGconn *zl_remote_connect_string(const char *conninfo, Oid userid, const char *nothing_done);
extern char *zl_remote_connection_shown(const char *conninfo);
extern PGresult *zl_remote_exec(PGconn *conn, const char *sql, int nparams,
								const char *const *params, bool interruptible,
								int timeout_ms);
extern PGresult *zl_remote_wait(PGconn *conn, bool interruptible, int timeout_ms);
extern bool zl_remote_ok(PGresult *res);
extern void zl_remote_raise(PGresult *res, PGconn *conn, const char *server_name);
extern void zl_remote_raise_at(PGresult *res, PGconn *conn, const char *where);

/* zl_remote_xact.c: the caller's transaction on a shard */
extern ZLShard *zl_remote_shard(Oid relid);
extern void zl_remote_refuse_truncate_after_writes(Oid relid);
extern ZLShard *zl_remote_shard_for_write(Oid relid);
extern ZLRemoteRows *zl_remote_query(ZLShard *shard, const char *sql, int nparams,
									 const char *const *params);
extern ZLRemoteRows *zl_remote_query_where(Oid relid, bool writes, const char *sql, int nparams,
										   const char *const *params);
extern void zl_remote_copy_begin(ZLShard *shard, const char *sql);
extern void zl_remote_copy_data(ZLShard *shard, const char *data, int len);
extern void zl_remote_copy_end(ZLShard *shard);
extern Datum zl_remote_call(Oid relid, FunctionCallInfo fcinfo, bool *isnull);
extern void zl_remote_init(void);

/* zl_remote_stage.c: a relation's rows copied into a staging table on a shard */
typedef bool (*ZLStageFilter) (HeapTuple tuple, TupleDesc desc, void *arg);
extern char *zl_remote_columns(TupleDesc desc, bool with_types);
extern char *zl_remote_stage_create(ZLShard *shard, Oid shard_relid, Oid relid, int n);
extern int64 zl_remote_stage_rows(ZLShard *shard, const char *staging, const char *columns,
								  const char *query, int skip, ZLStageFilter take, void *arg);
extern void zl_remote_stage_drop(ZLShard *shard, const char *staging);

/* zl_remote_resolve.c */
extern int64 zl_remote_resolve(void);

#endif							/* ZL_REMOTE_H */
