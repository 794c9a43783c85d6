/*-------------------------------------------------------------------------
 *
 * zl_inspect.c
 *	  Storage checks behind zipper_lake.verify().
 *
 * zipper_lake._verify_storage() reads every visible sub-group page by page
 * and checks what only the storage knows: block ranges inside the file
 * and disjoint, row counts, rows sorted by valid_from, stored first/last
 * start times, each row in the partition of its valid_to and the window
 * of its valid_from, and valid_from < valid_to.  The checks across
 * versions of a key (overlaps, several open versions) are plain SQL in
 * zipper_lake.verify().  Each problem is reported once per sub-group.
 *
 *-------------------------------------------------------------------------
 */
#include "zipper_lake.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "fmgr.h"
#include "funcapi.h"
#include "storage/bufmgr.h"
#include "storage/bufpage.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"

PG_FUNCTION_INFO_V1(zipper_lake_verify_storage);

typedef struct VerifyOutput
{
	ReturnSetInfo *rsinfo;
} VerifyOutput;

static void
report(VerifyOutput *out, const char *check, const char *fmt,...)
	pg_attribute_printf(3, 4);

static void
report(VerifyOutput *out, const char *check, const char *fmt,...)
{
	StringInfoData detail;
	Datum		values[2];
	bool		nulls[2] = {false, false};
	va_list		args;

	initStringInfo(&detail);
	for (;;)
	{
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&detail, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&detail, needed);
	}
	values[0] = CStringGetTextDatum(check);
	values[1] = CStringGetTextDatum(detail.data);
	tuplestore_putvalues(out->rsinfo->setResult, out->rsinfo->setDesc, values, nulls);
}

static int
block_cmp(const void *a, const void *b)
{
	const ZLSubGroup *sa = *(ZLSubGroup *const *) a;
	const ZLSubGroup *sb = *(ZLSubGroup *const *) b;

	return sa->first_block < sb->first_block ? -1 :
		(sa->first_block > sb->first_block ? 1 : 0);
}

/* problems found in one sub-group; each is reported once */
typedef struct SubGroupFindings
{
	bool		bad_period;
	bool		bad_partition;
	bool		bad_window;
	bool		unsorted;
} SubGroupFindings;

static void
verify_subgroup(VerifyOutput *out, Relation rel, const ZLTableOptions *opts,
				const ZLSubGroup *sg)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	SubGroupFindings found = {0};
	int64		rows = 0;
	int64		prev_from = 0,
				min_from = 0,
				max_from = 0;

	for (BlockNumber blk = sg->first_block; blk < sg->first_block + sg->blocks; blk++)
	{
		Buffer		buffer = ReadBuffer(rel, blk);
		Page		page = BufferGetPage(buffer);
		OffsetNumber maxoff = PageGetMaxOffsetNumber(page);

		for (OffsetNumber off = FirstOffsetNumber; off <= maxoff; off++)
		{
			ItemId		itemid = PageGetItemId(page, off);
			HeapTupleData tuple;
			bool		isnull;
			int64		from,
						to;

			if (!ItemIdIsNormal(itemid))
				continue;
			tuple.t_data = (HeapTupleHeader) PageGetItem(page, itemid);
			tuple.t_len = ItemIdGetLength(itemid);
			ItemPointerSet(&tuple.t_self, blk, off);
			from = zl_datum_to_instant(heap_getattr(&tuple, opts->from_attnum, tupdesc, &isnull),
									   opts->period_type);
			to = zl_datum_to_instant(heap_getattr(&tuple, opts->to_attnum, tupdesc, &isnull),
									 opts->period_type);

			if (from >= to && !found.bad_period)
			{
				found.bad_period = true;
				report(out, "empty period", "Sub-group " INT64_FORMAT " row (%u,%u) with key %s has valid_from %s not before valid_to %s.",
					   sg->subgroup_id, blk, off, zl_describe_key(opts, tupdesc, &tuple),
					   zl_instant_to_cstring(from, opts->period_type),
					   zl_instant_to_cstring(to, opts->period_type));
			}
			if (zl_partition_of(opts, to) != sg->partition_end && !found.bad_partition)
			{
				found.bad_partition = true;
				report(out, "wrong partition", "Sub-group " INT64_FORMAT " row (%u,%u) with key %s has valid_to %s outside partition %s.",
					   sg->subgroup_id, blk, off, zl_describe_key(opts, tupdesc, &tuple),
					   zl_instant_to_cstring(to, opts->period_type),
					   DatumGetCString(DirectFunctionCall1(date_out, DateADTGetDatum(sg->partition_end))));
			}
			if (zl_window_of(opts, sg->partition_end, from) != sg->window_start &&
				!found.bad_window)
			{
				found.bad_window = true;
				report(out, "wrong file group", "Sub-group " INT64_FORMAT " row (%u,%u) with key %s has valid_from %s outside its window.",
					   sg->subgroup_id, blk, off, zl_describe_key(opts, tupdesc, &tuple),
					   zl_instant_to_cstring(from, opts->period_type));
			}
			if (rows > 0 && from < prev_from && !found.unsorted)
			{
				found.unsorted = true;
				report(out, "unsorted sub-group", "Sub-group " INT64_FORMAT " row (%u,%u) has valid_from %s before the previous row's.",
					   sg->subgroup_id, blk, off,
					   zl_instant_to_cstring(from, opts->period_type));
			}
			if (rows == 0 || from < min_from)
				min_from = from;
			if (rows == 0 || from > max_from)
				max_from = from;
			prev_from = from;
			rows++;
		}
		ReleaseBuffer(buffer);
	}

	if (rows != sg->row_count)
		report(out, "row count mismatch", "Sub-group " INT64_FORMAT " stores " INT64_FORMAT " rows, its metadata says " INT64_FORMAT ".",
			   sg->subgroup_id, rows, sg->row_count);
	if (rows > 0 && (min_from != sg->first_start || max_from != sg->last_start))
		report(out, "first/last start mismatch", "Sub-group " INT64_FORMAT " rows start from %s to %s, its metadata says %s to %s.",
			   sg->subgroup_id,
			   zl_instant_to_cstring(min_from, opts->period_type),
			   zl_instant_to_cstring(max_from, opts->period_type),
			   zl_instant_to_cstring(sg->first_start, opts->period_type),
			   zl_instant_to_cstring(sg->last_start, opts->period_type));
}

Datum
zipper_lake_verify_storage(PG_FUNCTION_ARGS)
{
	VerifyOutput out;
	Relation	rel;
	ZLTableOptions opts;
	ZLSubGroup *sgs;
	ZLSubGroup **by_block;
	int			nsgs;
	BlockNumber nblocks;

	InitMaterializedSRF(fcinfo, 0);
	out.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	rel = zl_open_zipper_table(PG_GETARG_OID(0), AccessShareLock);
	zl_write_flush_relation(RelationGetRelid(rel));
	if (!zl_meta_load_options(rel, &opts))
	{
		report(&out, "unregistered table", "Table \"%s\" is not registered.",
			   RelationGetRelationName(rel));
		table_close(rel, AccessShareLock);
		PG_RETURN_NULL();
	}

	sgs = zl_meta_load_subgroups(zl_storage_id(rel), GetActiveSnapshot(), &nsgs);
	nblocks = RelationGetNumberOfBlocks(rel);

	by_block = palloc(sizeof(ZLSubGroup *) * Max(nsgs, 1));
	for (int i = 0; i < nsgs; i++)
		by_block[i] = &sgs[i];
	qsort(by_block, nsgs, sizeof(ZLSubGroup *), block_cmp);
	for (int i = 0; i < nsgs; i++)
	{
		ZLSubGroup *sg = by_block[i];

		if (sg->first_block < 1 || (int64) sg->first_block + sg->blocks > nblocks)
		{
			report(&out, "block range", "Sub-group " INT64_FORMAT " claims blocks %u..%u of a file of %u blocks.",
				   sg->subgroup_id, sg->first_block, sg->first_block + sg->blocks - 1, nblocks);
			continue;
		}
		if (i > 0 && by_block[i - 1]->first_block + by_block[i - 1]->blocks > sg->first_block)
			report(&out, "block range", "Sub-groups " INT64_FORMAT " and " INT64_FORMAT " share blocks.",
				   by_block[i - 1]->subgroup_id, sg->subgroup_id);
		if (!sg->placed)
		{
			report(&out, "unplaced rows", "Sub-group " INT64_FORMAT " was written before the table was registered.",
				   sg->subgroup_id);
			continue;
		}
		verify_subgroup(&out, rel, &opts, sg);
	}

	table_close(rel, AccessShareLock);
	PG_RETURN_NULL();
}
