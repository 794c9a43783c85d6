/*-------------------------------------------------------------------------
 *
 * zl_apply.h
 *	  What the layers above use of the apply layer: setting up its pool of
 *	  background workers (zl_apply_pool.c) at library load.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_APPLY_H
#define ZL_APPLY_H

#include "storage/dsm.h"
#include "storage/proc.h"

extern void zl_apply_pool_init(void);
extern void zl_apply_resolver_init(void);

/*
 * The resolver's round in each database (zl_apply_resolver.c) calls this
 * too, in a transaction, as superuser: the follow layer starts the
 * followers' workers there.
 */
typedef void (*zl_database_round_hook_type) (void);
extern PGDLLIMPORT zl_database_round_hook_type zl_resolver_database_hook;

/* set while a follower applies its batch: apply to a followed table */
extern bool zl_apply_by_follower;

/* zl_apply_pool.c, for zl_apply_workers.c */
extern PGPROC *zl_apply_pool_take(dsm_handle job, int w, int *pool_slot, pid_t *pid);
extern void zl_apply_pool_release(int pool_slot);
extern void zl_apply_pool_first_job(int pool_slot, Oid *database, Oid *user, dsm_handle *job,
									int *w);
extern bool zl_apply_pool_next_job(int pool_slot, dsm_handle *job, int *w);

#endif							/* ZL_APPLY_H */
