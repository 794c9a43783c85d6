/*-------------------------------------------------------------------------
 *
 * zl_meta_bytes.c
 *	  The bytes a zipper table's catalog rows take, part by part.
 *
 * inspect_bytes() (src/api/zl_inspect.c) shows what a table costs besides
 * its file: the catalog rows of its sub-groups, their key directories
 * (kept apart: immutable and the largest part), its deletion masks, its
 * free extents, its change record and its registration.  Bytes are those
 * of the live rows, as pg_column_size counts them (tuple header and
 * out-of-line values included, the catalog's indexes and dead rows not),
 * read as the catalog's owner in the caller's snapshot.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog_internal.h"

#include "executor/spi.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

/*
 * One (part, bytes) row per part of the catalog, in a fixed order, plus
 * the bytes of the free extents' blocks (counted with the table file, not
 * the catalog).
 */
int
zl_meta_catalog_bytes(Oid relid, ZLCatalogBytes *parts, int max_parts,
					  int64 *free_extent_bytes)
{
	ZLMetaSession session;
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	int			n = 0;

	*free_extent_bytes = 0;
	zl_meta_begin(&session);
	zl_meta_exec(Q_CATALOG_BYTES, values, NULL, GetActiveSnapshot(), true);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *part = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		int64		bytes = zl_meta_result_int64(i, 2);

		if (strcmp(part, "free extent blocks") == 0)
			*free_extent_bytes = bytes * BLCKSZ;
		else
		{
			if (n >= max_parts)
				elog(ERROR, "more catalog parts than %d", max_parts);
			parts[n].part = MemoryContextStrdup(session.caller_context, part);
			parts[n].bytes = bytes;
			n++;
		}
	}
	zl_meta_end(&session);
	return n;
}
