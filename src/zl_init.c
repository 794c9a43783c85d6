/*-------------------------------------------------------------------------
 *
 * zl_init.c
 *	  Module entry point: _PG_init sets up every layer.
 *
 * The settings first (common/zl_guc.c), then the table access method
 * tells the catalog layer its routine (zl_is_zipper_relation), then the
 * hooks: the executor's
 * (hooks/zl_executor.c: statements zipper tables refuse, flushes of
 * INSERT), the transaction callbacks of the write state
 * (write/zl_write.c), DDL through the object access hook
 * (hooks/zl_ddl.c: dropped tables, registered columns, row-level AFTER
 * triggers), and the planner's (planner/: pruned scans, aggregates in
 * the scan, read helpers inlined into scans), and, when the library is
 * preloaded, the shared pool of idle apply workers (apply/zl_apply_pool.c).
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_guc.h"
#include "write/zl_write.h"
#include "apply/zl_apply.h"
#include "access/zl_access.h"
#include "planner/zl_planner.h"
#include "hooks/zl_hooks.h"
#include "remote/zl_remote.h"
#include "follow/zl_follow.h"

#include "fmgr.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	zl_guc_init();
	zl_tableam_init();
	zl_executor_init();
	zl_write_register_callbacks();
	zl_ddl_init();
	zl_remote_init();
	zl_customscan_init();
	zl_indexpaths_init();
	zl_aggregate_init();
	zl_inline_init();
	zl_apply_pool_init();
	zl_apply_resolver_init();
	zl_follow_init();
}
