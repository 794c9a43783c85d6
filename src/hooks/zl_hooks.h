/*-------------------------------------------------------------------------
 *
 * zl_hooks.h
 *	  The hooks: what _PG_init installs.
 *
 * DDL through the object access hook (zl_ddl.c) and the executor's hooks
 * (zl_executor.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_HOOKS_H
#define ZL_HOOKS_H

extern void zl_ddl_init(void);
extern void zl_executor_init(void);

#endif							/* ZL_HOOKS_H */
