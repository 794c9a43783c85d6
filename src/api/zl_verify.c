/*-------------------------------------------------------------------------
 *
 * zl_verify.c
 *	  Storage checks behind zipper_lake.verify().
 *
 * zipper_lake._verify_storage() reads every visible sub-group page by page
 * and checks what only the storage knows: block ranges inside the file
 * and disjoint, row counts, rows sorted by valid_from, stored first/last
 * start times, each row in the partition of its valid_to and the window
 * of its valid_from, one file group per window of a history partition,
 * valid_from < valid_to, and in columnar sub-groups
 * each chunk's min/max and null counts against its values.  The checks across
 * versions of a key (overlaps, several open versions, the change record
 * against the versions) are plain SQL in zipper_lake.verify(), which gets
 * the record's instants from zipper_lake._record_instants() below.  Each
 * storage problem is reported once per sub-group.
 *
 * It first drops the backend's cached sub-group list of the table
 * (zl_metacache.c), so that the checks read the catalog as it is stored.
 * It reads the metadata on the caller's behalf after checking SELECT on
 * the table (zl_open_readable_zipper_table): the metadata tables
 * themselves are not readable by ordinary users.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "remote/zl_remote.h"
#include "common/zl_radixsort.h"
#include "write/zl_write.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "funcapi.h"
#include "storage/bufmgr.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

PG_FUNCTION_INFO_V1(zipper_lake_verify_storage);
PG_FUNCTION_INFO_V1(zipper_lake_record_instants);

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

/* one sub-group being checked; each problem is reported once */
typedef struct SubGroupCheck
{
	VerifyOutput *out;
	Relation	rel;
	const ZLTableOptions *opts;
	int64		rows;
	int64		prev_from;
	int64		min_from;
	int64		max_from;
	bool		bad_period;
	bool		bad_partition;
	bool		bad_window;
	bool		unsorted;
	/* the rows' (key hash, position), to compare with the key directory */
	const ZLKeyHasher *hasher;	/* NULL: the sub-group has no directory */
	Datum	   *key_values;
	ZLKeyDirEntry *entries;
} SubGroupCheck;

/*
 * Does a row starting at from belong in a sub-group's window?  A history
 * window is one or more whole base windows (README "Storage").
 */
static bool
in_window(const ZLTableOptions *opts, const ZLSubGroup *sg, int64 from)
{
	int64		base = zl_window_of(opts, sg->partition_end, from);

	if (sg->window_end == ZL_NO_WINDOW_END)
		return base == sg->window_start;
	return base >= sg->window_start && base < sg->window_end &&
		zl_window_of(opts, sg->partition_end, sg->window_start) == sg->window_start &&
		zl_window_of(opts, sg->partition_end, sg->window_end) == sg->window_end;
}

static void
check_row(void *arg, const ZLSubGroup *sg, int32 position, HeapTuple tuple)
{
	SubGroupCheck *c = arg;
	const ZLTableOptions *opts = c->opts;
	TupleDesc	tupdesc = RelationGetDescr(c->rel);
	BlockNumber blk = ItemPointerGetBlockNumber(&tuple->t_self);
	OffsetNumber off = ItemPointerGetOffsetNumber(&tuple->t_self);
	bool		isnull;
	int64		from = zl_datum_to_instant(heap_getattr(tuple, opts->from_attnum, tupdesc, &isnull),
										   opts->period_type);
	int64		to = zl_datum_to_instant(heap_getattr(tuple, opts->to_attnum, tupdesc, &isnull),
										 opts->period_type);

	if (from >= to && !c->bad_period)
	{
		c->bad_period = true;
		report(c->out, "empty period", "Sub-group " INT64_FORMAT " row (%u,%u) with key %s has valid_from %s not before valid_to %s.",
			   sg->subgroup_id, blk, off, zl_describe_key(opts, tupdesc, tuple),
			   zl_instant_to_cstring(from, opts->period_type),
			   zl_instant_to_cstring(to, opts->period_type));
	}
	if (zl_partition_of(opts, to) != sg->partition_end && !c->bad_partition)
	{
		c->bad_partition = true;
		report(c->out, "wrong partition", "Sub-group " INT64_FORMAT " row (%u,%u) with key %s has valid_to %s outside partition %s.",
			   sg->subgroup_id, blk, off, zl_describe_key(opts, tupdesc, tuple),
			   zl_instant_to_cstring(to, opts->period_type),
			   DatumGetCString(DirectFunctionCall1(date_out, DateADTGetDatum(sg->partition_end))));
	}
	if (!in_window(opts, sg, from) && !c->bad_window)
	{
		c->bad_window = true;
		report(c->out, "wrong file group", "Sub-group " INT64_FORMAT " row (%u,%u) with key %s has valid_from %s outside its window.",
			   sg->subgroup_id, blk, off, zl_describe_key(opts, tupdesc, tuple),
			   zl_instant_to_cstring(from, opts->period_type));
	}
	if (c->rows > 0 && from < c->prev_from && !c->unsorted)
	{
		c->unsorted = true;
		report(c->out, "unsorted sub-group", "Sub-group " INT64_FORMAT " row (%u,%u) has valid_from %s before the previous row's.",
			   sg->subgroup_id, blk, off, zl_instant_to_cstring(from, opts->period_type));
	}
	if (c->hasher != NULL && c->rows < sg->row_count)
	{
		zl_key_extract(c->hasher, tuple, tupdesc, c->key_values);
		c->entries[c->rows].hash = zl_key_hash(c->hasher, c->key_values);
		c->entries[c->rows].position = position;
	}
	if (c->rows == 0 || from < c->min_from)
		c->min_from = from;
	if (c->rows == 0 || from > c->max_from)
		c->max_from = from;
	c->prev_from = from;
	c->rows++;
}

/* a directory entry or row as one integer ordered by position, then hash */
static inline uint64
position_and_hash(const ZLKeyDirEntry *e)
{
	return ((uint64) (uint32) e->position << 32) | e->hash;
}

/*
 * Does the key directory name exactly the rows' positions, each with its
 * row's key hash?  The directory, ordered by hash, is ordered by position
 * here (positions are distinct) and compared with the rows, read in
 * position order.
 */
static void
verify_key_directory(VerifyOutput *out, const ZLSubGroup *sg, const ZLKeyDirEntry *rows,
					 int64 nrows)
{
	int			n = ZL_KEY_DIRECTORY_SIZE(sg->key_directory);
	const ZLKeyDirEntry *dir = ZL_KEY_DIRECTORY_ENTRIES(sg->key_directory);
	uint64	   *named = palloc(sizeof(uint64) * Max(n, 1));

	for (int i = 0; i < n; i++)
		named[i] = position_and_hash(&dir[i]);
	zl_radix_sort(named, n, sizeof(uint64), sizeof(uint64));
	if (n != nrows)
		report(out, "key directory mismatch", "Sub-group " INT64_FORMAT " has %d key directory entries for " INT64_FORMAT " rows.",
			   sg->subgroup_id, n, nrows);
	else
		for (int i = 0; i < n; i++)
			if (named[i] != position_and_hash(&rows[i]))
			{
				report(out, "key directory mismatch", "Sub-group " INT64_FORMAT " key directory names position %d with key hash %08x; the row read there is position %d with key hash %08x.",
					   sg->subgroup_id, (int32) (named[i] >> 32), (uint32) named[i],
					   rows[i].position, rows[i].hash);
				break;
			}
	pfree(named);
}

static void
verify_subgroup(VerifyOutput *out, Relation rel, const ZLTableOptions *opts,
				const ZLKeyHasher *hasher, const ZLSubGroup *sg)
{
	SubGroupCheck c = {out, rel, opts};

	if (sg->key_directory != NULL)
	{
		c.hasher = hasher;
		c.key_values = palloc(sizeof(Datum) * RelationGetDescr(rel)->natts);
		c.entries = palloc(sizeof(ZLKeyDirEntry) * Max(sg->row_count, 1));
	}
	/* masked rows are still stored: check and count them all */
	zl_read_subgroup_rows(rel, sg, true, check_row, &c);
	if (c.hasher != NULL && c.rows == sg->row_count)
		verify_key_directory(out, sg, c.entries, c.rows);

	if (c.rows != sg->row_count)
		report(out, "row count mismatch", "Sub-group " INT64_FORMAT " stores " INT64_FORMAT " rows, its metadata says " INT64_FORMAT ".",
			   sg->subgroup_id, c.rows, sg->row_count);
	if (c.rows > 0 && (c.min_from != sg->first_start || c.max_from != sg->last_start))
		report(out, "first/last start mismatch", "Sub-group " INT64_FORMAT " rows start from %s to %s, its metadata says %s to %s.",
			   sg->subgroup_id,
			   zl_instant_to_cstring(c.min_from, opts->period_type),
			   zl_instant_to_cstring(c.max_from, opts->period_type),
			   zl_instant_to_cstring(sg->first_start, opts->period_type),
			   zl_instant_to_cstring(sg->last_start, opts->period_type));
	if (sg->format == ZL_FORMAT_COLUMNAR)
	{
		char	   *problem = zl_columnar_check_chunks(rel, sg);

		if (problem != NULL)
			report(out, "chunk statistics mismatch", "Sub-group " INT64_FORMAT ": %s",
				   sg->subgroup_id, problem);
	}
}

static bool
same_window(const ZLSubGroup *x, const ZLSubGroup *y)
{
	return x->partition_end == y->partition_end && x->window_start == y->window_start;
}

/* orders sub-groups by window, then file group */
static int
window_cmp(const void *a, const void *b)
{
	const ZLSubGroup *x = *(ZLSubGroup *const *) a;
	const ZLSubGroup *y = *(ZLSubGroup *const *) b;

	if (x->partition_end != y->partition_end)
		return x->partition_end < y->partition_end ? -1 : 1;
	if (x->window_start != y->window_start)
		return x->window_start < y->window_start ? -1 : 1;
	return x->file_group < y->file_group ? -1 : (x->file_group > y->file_group);
}

/* orders sub-groups by file group, then window */
static int
file_group_cmp(const void *a, const void *b)
{
	const ZLSubGroup *x = *(ZLSubGroup *const *) a;
	const ZLSubGroup *y = *(ZLSubGroup *const *) b;

	if (x->file_group != y->file_group)
		return x->file_group < y->file_group ? -1 : 1;
	return window_cmp(a, b);
}

/*
 * A window of a history partition keeps one file group, holding nothing
 * else, and the windows of a partition's file groups do not overlap.
 */
static void
verify_history_windows(VerifyOutput *out, const ZLTableOptions *opts, ZLSubGroup *sgs,
					   int nsgs)
{
	ZLSubGroup **history = palloc(sizeof(ZLSubGroup *) * Max(nsgs, 1));
	int			n = 0;

	for (int i = 0; i < nsgs; i++)
		if (sgs[i].placed && sgs[i].partition_end != ZL_CURRENT_PARTITION)
			history[n++] = &sgs[i];

	qsort(history, n, sizeof(ZLSubGroup *), window_cmp);
	for (int i = 1; i < n; i++)
		if (same_window(history[i], history[i - 1]) &&
			history[i]->file_group != history[i - 1]->file_group)
			report(out, "split history window", "Sub-groups " INT64_FORMAT " and " INT64_FORMAT " of one window of partition %s are in file groups " INT64_FORMAT " and " INT64_FORMAT ".",
				   history[i - 1]->subgroup_id, history[i]->subgroup_id,
				   DatumGetCString(DirectFunctionCall1(date_out, DateADTGetDatum(history[i]->partition_end))),
				   history[i - 1]->file_group, history[i]->file_group);

	/* windows of one partition's file groups do not overlap */
	for (int i = 1, widest = 0; i < n; i++)
	{
		if (history[i]->partition_end != history[widest]->partition_end)
			widest = i;
		else if (!same_window(history[i], history[widest]) &&
				 zl_subgroup_window_end(opts, history[widest]) > history[i]->window_start)
			report(out, "overlapping history windows", "Sub-groups " INT64_FORMAT " and " INT64_FORMAT " of partition %s are in file groups " INT64_FORMAT " and " INT64_FORMAT " whose windows overlap.",
				   history[widest]->subgroup_id, history[i]->subgroup_id,
				   DatumGetCString(DirectFunctionCall1(date_out, DateADTGetDatum(history[i]->partition_end))),
				   history[widest]->file_group, history[i]->file_group);
		else if (zl_subgroup_window_end(opts, history[i]) > zl_subgroup_window_end(opts, history[widest]))
			widest = i;		/* the window reaching furthest so far */
	}

	qsort(history, n, sizeof(ZLSubGroup *), file_group_cmp);
	for (int i = 1; i < n; i++)
		if (history[i]->file_group == history[i - 1]->file_group &&
			(!same_window(history[i], history[i - 1]) ||
			 zl_subgroup_window_end(opts, history[i]) != zl_subgroup_window_end(opts, history[i - 1])))
			report(out, "wrong file group", "File group " INT64_FORMAT " holds sub-groups " INT64_FORMAT " and " INT64_FORMAT " of different history windows.",
				   history[i]->file_group, history[i - 1]->subgroup_id, history[i]->subgroup_id);
	pfree(history);
}

Datum
zipper_lake_verify_storage(PG_FUNCTION_ARGS)
{
	VerifyOutput out;
	Relation	rel;
	ZLTableOptions opts;
	ZLSubGroup *sgs;
	ZLSubGroup **by_block;
	ZLKeyHasher *hasher;
	int			nsgs;
	ZLFreeExtent *extents;
	int			nextents;
	BlockNumber nblocks;

	InitMaterializedSRF(fcinfo, 0);
	out.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	if (zl_remote_is_shard(PG_GETARG_OID(0)))
	{
		/* a shard of a zipper parent: verify() on its server */
		if (pg_class_aclcheck(PG_GETARG_OID(0), GetUserId(), ACL_SELECT) != ACLCHECK_OK)
			aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_FOREIGN_TABLE, get_rel_name(PG_GETARG_OID(0)));
		zl_remote_put_rows(out.rsinfo,
						   zl_remote_call_rows(PG_GETARG_OID(0),
											   "SELECT * FROM zipper_lake.verify($1::pg_catalog.regclass)",
											   0, NULL),
						   NULL, (Datum) 0);
		PG_RETURN_NULL();
	}
	rel = zl_open_readable_zipper_table(PG_GETARG_OID(0));
	zl_write_flush_relation(RelationGetRelid(rel));
	/* the checks after this one read the catalog as stored, not as cached */
	zl_meta_cache_forget(zl_storage_id(rel));
	if (!zl_meta_load_options(rel, &opts, false))
	{
		report(&out, "unregistered table", "Table \"%s\" is not registered.",
			   RelationGetRelationName(rel));
		table_close(rel, AccessShareLock);
		PG_RETURN_NULL();
	}

	sgs = zl_meta_load_subgroups(zl_storage_id(rel), GetActiveSnapshot(), DATEVAL_NOBEGIN, &nsgs);
	nblocks = RelationGetNumberOfBlocks(rel);

	hasher = zl_key_hasher_create(RelationGetDescr(rel), &opts);
	by_block = zl_subgroups_by_block(sgs, nsgs);
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
		/*
		 * Its key directory, loaded for it alone: the cache may drop those
		 * of the sub-groups checked before (each is checked once), so a
		 * table of any size is checked within key_cache_memory.
		 */
		zl_key_directory_cache_trim();
		zl_meta_load_key_directories(zl_storage_id(rel), GetActiveSnapshot(), sg, 1, NULL);
		verify_subgroup(&out, rel, &opts, hasher, sg);
		sg->key_directory = NULL;
		sg->key_filter = NULL;
	}

	verify_history_windows(&out, &opts, sgs, nsgs);

	/* free extents lie in the file and outside every visible sub-group */
	extents = zl_meta_load_free_extents(zl_storage_id(rel), GetActiveSnapshot(), &nextents);
	for (int e = 0; e < nextents; e++)
	{
		BlockNumber first = extents[e].first_block;
		BlockNumber end = first + extents[e].blocks;

		if (first < 1 || end > nblocks)
			report(&out, "free extent", "Free extent of blocks %u..%u lies outside the file of %u blocks.",
				   first, end - 1, nblocks);
		/* loaded by first block */
		if (e > 0 && extents[e - 1].first_block + extents[e - 1].blocks > first)
			report(&out, "free extent", "Free extents at blocks %u and %u overlap.",
				   extents[e - 1].first_block, first);
		for (int i = 0; i < nsgs; i++)
			if (sgs[i].first_block < end && first < sgs[i].first_block + sgs[i].blocks)
				report(&out, "free extent", "Free extent of blocks %u..%u overlaps sub-group " INT64_FORMAT ".",
					   first, end - 1, sgs[i].subgroup_id);
	}

	table_close(rel, AccessShareLock);
	PG_RETURN_NULL();
}

/* ---------- the change record ---------- */

typedef struct RecordOutput
{
	ReturnSetInfo *rsinfo;
	const ZLTableOptions *opts;
	TupleDesc	tupdesc;
	FmgrInfo	output[INDEX_MAX_KEYS];
} RecordOutput;

static void
emit_record_entry(void *arg, const ZLRecordEntry *e)
{
	RecordOutput *out = arg;
	Datum	   *key = palloc(sizeof(Datum) * out->opts->nkeys);
	ArrayType  *key_array;

	for (int i = 0; i < out->opts->nkeys; i++)
		key[i] = CStringGetTextDatum(OutputFunctionCall(&out->output[i],
														e->key[out->opts->key_attnums[i] - 1]));
	key_array = construct_array(key, out->opts->nkeys, TEXTOID, -1, false, TYPALIGN_INT);
	for (int i = 0; i < e->ninstants; i++)
	{
		const ZLRecordInstant *in = &e->instants[i];
		Datum		values[4];
		bool		nulls[4] = {false, false, false, !in->has_seq};

		/* README "Lifecycle": forgotten (at the next merge) with the history */
		if (in->time <= out->opts->history_cut)
			continue;

		values[0] = PointerGetDatum(key_array);
		values[1] = CStringGetTextDatum(zl_instant_to_cstring(in->time, out->opts->period_type));
		values[2] = BoolGetDatum(in->is_delete);
		values[3] = Int64GetDatum(in->seq);
		tuplestore_putvalues(out->rsinfo->setResult, out->rsinfo->setDesc, values, nulls);
	}
}

/*
 * zipper_lake._record_instants(tbl): the instants the change record
 * remembers, key by key (key columns as text, the instant as text of the
 * period type), for verify()'s check against the versions.
 */
Datum
zipper_lake_record_instants(PG_FUNCTION_ARGS)
{
	Relation	rel;
	ZLTableOptions opts;
	RecordOutput out;
	Snapshot	snapshot;

	InitMaterializedSRF(fcinfo, 0);
	rel = zl_open_readable_zipper_table(PG_GETARG_OID(0));
	/* the history cut as of the statement's snapshot, which reads the versions too */
	if (!zl_meta_load_options_uncached(rel, &opts) || !zl_meta_record_exists())
	{
		table_close(rel, AccessShareLock);
		PG_RETURN_VOID();
	}
	out.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	out.opts = &opts;
	out.tupdesc = RelationGetDescr(rel);
	for (int i = 0; i < opts.nkeys; i++)
	{
		Oid			typoutput;
		bool		varlena;

		getTypeOutputInfo(TupleDescAttr(out.tupdesc, opts.key_attnums[i] - 1)->atttypid,
						  &typoutput, &varlena);
		fmgr_info(typoutput, &out.output[i]);
	}
	snapshot = RegisterSnapshot(ActiveSnapshotSet() ? GetActiveSnapshot() : GetTransactionSnapshot());
	zl_record_resolve(zl_record_codec_create(out.tupdesc, &opts,
											 zl_key_hasher_create(out.tupdesc, &opts)),
					  RelationGetRelid(rel), snapshot, emit_record_entry, &out);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
	PG_RETURN_VOID();
}
