/*-------------------------------------------------------------------------
 *
 * zl_reclaim.c
 *	  zipper_lake.reclaim(tbl): the blocks of aborted writes made reusable.
 *
 * Owner only, like VACUUM.  With the transaction's pending rows written
 * and the table's writer lock held, no write is in progress, so every
 * block the catalog does not refer to was written by a transaction that
 * aborted; zl_free_space_reclaim() records them (zl_freespace.c explains
 * what happens at the end of the file).
 *
 *-------------------------------------------------------------------------
 */
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write.h"

#include "access/table.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"

PG_FUNCTION_INFO_V1(zipper_lake_reclaim);

Datum
zipper_lake_reclaim(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Relation	rel;
	int64		reclaimed;

	if (zl_is_partitioned_table(relid))
		PG_RETURN_INT64(zl_parent_call_per_leaf(fcinfo, zipper_lake_reclaim));
	rel = zl_open_zipper_table(relid, RowExclusiveLock);

	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, RelationGetRelationName(rel));

	/* no write in progress; see everything committed before */
	zl_write_flush_relation(relid);
	(void) zl_write_lock_table(zl_storage_id(rel), false);
	reclaimed = zl_free_space_reclaim(rel);
	table_close(rel, NoLock);
	PG_RETURN_INT64(reclaimed);
}
