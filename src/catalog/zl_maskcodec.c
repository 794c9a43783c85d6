/*-------------------------------------------------------------------------
 *
 * zl_maskcodec.c
 *	  The positions of a mask row, stored compact.
 *
 * A mask row (zipper_lake.mask, README "Storage") lists the positions a
 * statement masked in one sub-group.  0.1 stored them as an int[]: 4 bytes
 * a position plus the array header.  They are stored as a bytea of
 * varints (common/zl_varint.h) instead: how many positions, the first,
 * then each gap to the next less one -- ascending and distinct, so a run
 * of neighbours (an apply closing the versions of keys written together)
 * takes a byte each, and a day's closings in a current sub-group of 40,000
 * rows about 1.2 bytes each (a bitmap would take a bit per row of the
 * sub-group, masked or not).  The upgrade from 0.1 converts the arrays
 * (sql/install/zipper_lake--0.1--0.2.sql).  A row whose bytes do not decode
 * raises ERRCODE_DATA_CORRUPTED naming its sub-group.  Until the upgrade
 * has run, this library reads and writes 0.1's arrays (README "Upgrading":
 * the new library first, then ALTER EXTENSION UPDATE).
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "catalog/zl_catalog_internal.h"
#include "common/zl_varint.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/lsyscache.h"

static int
position_cmp(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;

	return x < y ? -1 : (x > y);
}

/* the positions (sorted in place, duplicates dropped) as a mask row's bytes */
bytea *
zl_mask_encode(int32 *positions, int n)
{
	StringInfoData buf;
	int			distinct = 0;
	bytea	   *result;

	qsort(positions, n, sizeof(int32), position_cmp);
	for (int i = 0; i < n; i++)
		if (i == 0 || positions[i] != positions[i - 1])
			positions[distinct++] = positions[i];
	initStringInfo(&buf);
	appendStringInfoSpaces(&buf, VARHDRSZ);
	zl_varint_append(&buf, (uint64) distinct);
	for (int i = 0; i < distinct; i++)
	{
		Assert(positions[i] >= 0);
		zl_varint_append(&buf, i == 0 ? (uint64) positions[0] :
						 (uint64) (positions[i] - positions[i - 1] - 1));
	}
	result = (bytea *) buf.data;
	SET_VARSIZE(result, buf.len);
	return result;
}

static void
damaged(int64 subgroup_id)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("mask of sub-group " INT64_FORMAT " is damaged", subgroup_id),
			 errdetail("Its positions do not decode."),
			 errhint("Restore the table from a backup; zipper_lake.verify() lists what it finds.")));
}

/* a mask row's positions, ascending (palloc'd), their number in *n */
int32 *
zl_mask_decode(const bytea *bytes, int64 subgroup_id, int *n)
{
	const char *p = VARDATA_ANY(bytes);
	const char *end = p + VARSIZE_ANY_EXHDR(bytes);
	uint64		count;
	uint64		value;
	int64		position = -1;
	int32	   *positions;

	if (!zl_varint_get(&p, end, &count) || count > (uint64) (end - p))
		damaged(subgroup_id);
	positions = palloc(sizeof(int32) * Max(count, 1));
	for (uint64 i = 0; i < count; i++)
	{
		if (!zl_varint_get(&p, end, &value) || value > PG_INT32_MAX)
			damaged(subgroup_id);
		position += (int64) value + 1;
		if (position > PG_INT32_MAX)
			damaged(subgroup_id);
		positions[i] = (int32) position;
	}
	if (p != end)
		damaged(subgroup_id);
	*n = (int) count;
	return positions;
}

/* does the catalog, as installed, store mask positions compact (0.2) or as int[] (0.1)? */
bool
zl_mask_compact(Oid mask_catalog)
{
	return get_atttype(mask_catalog, ZL_MASK_POSITIONS_ATTNUM) == BYTEAOID;
}

/* the same, from the mask catalog's descriptor (a reader has it open) */
bool
zl_mask_compact_desc(TupleDesc desc)
{
	return TupleDescAttr(desc, ZL_MASK_POSITIONS_ATTNUM - 1)->atttypid == BYTEAOID;
}

/* a mask row's positions datum, compact or an array, decoded (palloc'd) */
int32 *
zl_mask_positions(Datum datum, bool compact, int64 subgroup_id, int *n)
{
	ArrayType  *array;
	int32	   *positions;

	if (compact)
		return zl_mask_decode(DatumGetByteaPP(datum), subgroup_id, n);
	array = DatumGetArrayTypeP(datum);
	*n = ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array));
	positions = palloc(sizeof(int32) * Max(*n, 1));
	memcpy(positions, ARR_DATA_PTR(array), sizeof(int32) * *n);
	return positions;
}
