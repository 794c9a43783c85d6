/*-------------------------------------------------------------------------
 *
 * zl_remote_internal.h
 *	  Inside the remote layer: libpq connections to shards
 *	  (zl_remote_conn.c) and the names of the transactions prepared on
 *	  them (zl_remote_xact.c, zl_remote_resolve.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_REMOTE_INTERNAL_H
#define ZL_REMOTE_INTERNAL_H

#include "remote/zl_remote.h"

#include "foreign/foreign.h"

/*
 * A transaction prepared on a shard is named
 * "zipper_lake_shard:<system id>:<database>:<full xid>:<user mapping>":
 * this server, this database, the caller's transaction, whose commit
 * decides it, and the user mapping it was prepared through.
 */
#define ZL_SHARD_GID_PREFIX "zipper_lake_shard:"

/* how long finishing a prepared transaction may wait for a shard */
#define ZL_SHARD_FINISH_TIMEOUT_MS	30000

extern PGconn *zl_remote_connect(UserMapping *mapping);
extern ZLRemoteRows *zl_remote_rows(PGresult *res);
extern char *zl_remote_gid_prefix(void);
extern char *zl_remote_gid(FullTransactionId fxid, Oid umid);
extern bool zl_remote_finish_prepared(PGconn *conn, const char *gid, bool commit);
extern UserMapping *zl_remote_mapping_by_id(Oid umid);

/* zl_remote_xact.c, zl_remote_resolve.c */
extern int64 zl_remote_settle(PGconn *conn, Oid umid, const char *server_name,
							  bool delete_logged);

#endif							/* ZL_REMOTE_INTERNAL_H */
