/*-------------------------------------------------------------------------
 *
 * zl_erase.c
 *	  zipper_lake.erase(tbl, keys): every trace of some keys removed.
 *
 * README "Lifecycle" (right to be forgotten).  The keys come from a
 * relation with the key columns, read as the caller, and are held sorted
 * by key hash (at most work_mem of them: erase more in several calls).
 * Then, under the writer lock:
 *
 *  - every sub-group that holds a row of those keys — visible or masked,
 *    found through its key directory where it has one, else by reading
 *    it — is rewritten without them (zl_rewrite_subgroup: its other live
 *    rows written again through the write state, in both formats, its
 *    metadata row and masks deleted, its blocks a free extent);
 *  - the TOAST values those rows point to are deleted.  Row sub-groups
 *    share TOAST values only between copies of one version (a row moved
 *    to history or kept by compaction keeps its pointers; every write of
 *    a new version toasts afresh), so all of them belong to the erased
 *    keys; each is deleted once;
 *  - the change record is rewritten as one piece without their entries;
 *  - the metapage asks the next VACUUM to wipe what is left of them
 *    (zl_scrub.c): the free extents and the TOAST relation's free space
 *    are zeroed once no snapshot can see the erased rows.
 *
 * Afterwards the keys start again from "absent": nothing of theirs is left
 * for a fold to find.  The cost is that of reading the sub-groups that may
 * hold the keys and rewriting those that do, and of rewriting the record.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write.h"

#include "access/detoast.h"
#include "access/table.h"
#include "access/toast_internals.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

PG_FUNCTION_INFO_V1(zipper_lake_erase);

typedef struct ErasedKey
{
	uint32		hash;
	Datum	   *key;			/* row-shaped: key slots only */
} ErasedKey;

typedef struct EraseContext
{
	Relation	rel;
	ZLTableOptions opts;
	TupleDesc	desc;
	ZLKeyHasher *hasher;
	MemoryContext keys_context;
	ErasedKey  *keys;
	int			nkeys;
	uint32	   *hashes;			/* distinct, ascending */
	int			nhashes;
	Datum	   *scratch;		/* row-shaped */
	bool	   *scratch_null;

	/* the sub-group being read */
	int32	   *erased;			/* positions of rows of the keys */
	int			nerased;
	int			maxerased;
	int64		erased_versions;	/* visible ones */

	/* TOAST values of erased rows, by value id */
	List	   *toast_values;	/* of struct varlena *, copies */
} EraseContext;

static int
erased_key_cmp(const void *a, const void *b)
{
	return zl_key_hash_cmp(&((const ErasedKey *) a)->hash, &((const ErasedKey *) b)->hash);
}

/* ---------- the keys ---------- */

/*
 * The next keys from the cursor, cast to the key columns' types: a key
 * that does not convert fails with the cast's error, given misfit as its
 * detail, and a hint (zl_rethrow_conversion_error).
 */
static void
fetch_keys(Portal portal, const char *misfit)
{
	MemoryContext memory = CurrentMemoryContext;

	PG_TRY();
	{
		SPI_cursor_fetch(portal, true, 1000);
	}
	PG_CATCH();
	{
		zl_rethrow_conversion_error(memory, misfit,
									"List keys of the zipper table's key types; nothing was erased.");
	}
	PG_END_TRY();
}

/* the keys a relation lists, as the caller reads them, sorted and distinct */
static void
read_keys(EraseContext *ec, Oid keys_relid)
{
	StringInfoData query;
	StringInfoData key_types;	/* "id integer, ...", for a key that does not convert */
	char	   *misfit;
	Portal		portal;
	int			maxkeys = 1024;
	Size		limit = (Size) work_mem * 1024;
	char	   *keys_name = zl_relation_arg_name(keys_relid, "keys");

	initStringInfo(&query);
	initStringInfo(&key_types);
	appendStringInfoString(&query, "SELECT ");
	for (int i = 0; i < ec->opts.nkeys; i++)
	{
		Form_pg_attribute att = TupleDescAttr(ec->desc, ec->opts.key_attnums[i] - 1);
		const char *name;
		char	   *type;

		if (get_attnum(keys_relid, NameStr(att->attname)) <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("keys to erase lack key column \"%s\"", NameStr(att->attname)),
					 errdetail("Relation \"%s\" has no such column; zipper table \"%s\" is keyed by it.",
							   keys_name, RelationGetRelationName(ec->rel)),
					 errhint("Pass a table or view with the key columns of the keys to erase.")));
		name = quote_identifier(NameStr(att->attname));
		type = format_type_with_typemod(att->atttypid, att->atttypmod);
		appendStringInfo(&query, "%s%s::%s", i > 0 ? ", " : "", name, type);
		appendStringInfo(&key_types, "%s%s %s", i > 0 ? ", " : "", name, type);
	}
	appendStringInfo(&query, " FROM %s",
					 quote_qualified_identifier(get_namespace_name(get_rel_namespace(keys_relid)),
												keys_name));
	misfit = psprintf("Relation \"%s\" lists a key that does not convert to the key of zipper table \"%s\" (%s).",
					  keys_name, RelationGetRelationName(ec->rel), key_types.data);

	ec->keys = MemoryContextAlloc(ec->keys_context, sizeof(ErasedKey) * maxkeys);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	portal = SPI_cursor_open_with_args(NULL, query.data, 0, NULL, NULL, NULL, true, 0);
	for (;;)
	{
		fetch_keys(portal, misfit);
		if (SPI_processed == 0)
			break;
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			MemoryContext old = MemoryContextSwitchTo(ec->keys_context);
			Datum	   *key = palloc0(sizeof(Datum) * ec->desc->natts);

			for (int i = 0; i < ec->opts.nkeys; i++)
			{
				AttrNumber attnum = ec->opts.key_attnums[i];
				Form_pg_attribute att = TupleDescAttr(ec->desc, attnum - 1);
				bool		isnull;
				Datum		value = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc,
												  i + 1, &isnull);

				if (isnull)
					ereport(ERROR,
							(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
							 errmsg("null key column \"%s\" in the keys to erase",
									NameStr(att->attname)),
							 errdetail("Relation \"%s\", row %d, has no value for it.",
									   keys_name, ec->nkeys + 1),
							 errhint("List complete keys; nothing was erased.")));
				key[attnum - 1] = datumCopy(value, att->attbyval, att->attlen);
			}
			if (ec->nkeys == maxkeys)
			{
				maxkeys *= 2;
				ec->keys = repalloc(ec->keys, sizeof(ErasedKey) * maxkeys);
			}
			ec->keys[ec->nkeys].key = key;
			ec->keys[ec->nkeys].hash = zl_key_hash(ec->hasher, key);
			ec->nkeys++;
			MemoryContextSwitchTo(old);
		}
		SPI_freetuptable(SPI_tuptable);
		if (MemoryContextMemAllocated(ec->keys_context, true) > limit)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("too many keys to erase at once"),
					 errdetail("The keys of relation \"%s\" take more than work_mem (%d kB).",
							   keys_name, work_mem),
					 errhint("Erase them in several calls, or raise work_mem; nothing was erased.")));
	}
	SPI_cursor_close(portal);
	SPI_finish();

	qsort(ec->keys, ec->nkeys, sizeof(ErasedKey), erased_key_cmp);
	ec->hashes = palloc(sizeof(uint32) * Max(ec->nkeys, 1));
	for (int i = 0; i < ec->nkeys; i++)
		if (ec->nhashes == 0 || ec->hashes[ec->nhashes - 1] != ec->keys[i].hash)
			ec->hashes[ec->nhashes++] = ec->keys[i].hash;
}

/* is the row-shaped key one of the keys to erase? */
static bool
key_is_erased(const EraseContext *ec, uint32 hash, const Datum *key)
{
	int			lo = 0,
				hi = ec->nkeys;

	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (ec->keys[mid].hash < hash)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < ec->nkeys && ec->keys[lo].hash == hash; lo++)
		if (zl_keys_equal(ec->hasher, ec->keys[lo].key, key))
			return true;
	return false;
}

/* ---------- sub-groups ---------- */

/* remember the TOAST values an erased row of a row sub-group points to */
static void
collect_toast_values(EraseContext *ec, HeapTuple tuple)
{
	if (!HeapTupleHasExternal(tuple))
		return;
	heap_deform_tuple(tuple, ec->desc, ec->scratch, ec->scratch_null);
	for (int i = 0; i < ec->desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(ec->desc, i);
		struct varlena *value;
		struct varlena *copy;

		if (att->attisdropped || att->attlen != -1 || ec->scratch_null[i])
			continue;
		value = (struct varlena *) DatumGetPointer(ec->scratch[i]);
		if (!VARATT_IS_EXTERNAL_ONDISK(value))
			continue;
		copy = palloc(VARSIZE_EXTERNAL(value));
		memcpy(copy, value, VARSIZE_EXTERNAL(value));
		ec->toast_values = lappend(ec->toast_values, copy);
	}
}

static int
toast_pointer_cmp(const ListCell *a, const ListCell *b)
{
	struct varatt_external x,
				y;

	VARATT_EXTERNAL_GET_POINTER(x, (struct varlena *) lfirst(a));
	VARATT_EXTERNAL_GET_POINTER(y, (struct varlena *) lfirst(b));
	if (x.va_toastrelid != y.va_toastrelid)
		return x.va_toastrelid < y.va_toastrelid ? -1 : 1;
	return x.va_valueid < y.va_valueid ? -1 : (x.va_valueid > y.va_valueid);
}

/* delete the collected TOAST values, each once (copies of a version share them) */
static void
delete_toast_values(EraseContext *ec)
{
	ListCell   *lc;
	ListCell   *prev = NULL;

	list_sort(ec->toast_values, toast_pointer_cmp);
	foreach(lc, ec->toast_values)
	{
		if (prev == NULL || toast_pointer_cmp(prev, lc) != 0)
			toast_delete_datum(ec->rel, PointerGetDatum(lfirst(lc)), false);
		prev = lc;
	}
}

static void
find_erased_row(void *arg, const ZLSubGroup *sg, int32 position, HeapTuple tuple)
{
	EraseContext *ec = arg;

	zl_key_extract(ec->hasher, tuple, ec->desc, ec->scratch);
	if (!key_is_erased(ec, zl_key_hash(ec->hasher, ec->scratch), ec->scratch))
		return;
	if (ec->nerased == ec->maxerased)
	{
		ec->maxerased = Max(64, ec->maxerased * 2);
		ec->erased = ec->erased == NULL ? palloc(sizeof(int32) * ec->maxerased) :
			repalloc(ec->erased, sizeof(int32) * ec->maxerased);
	}
	ec->erased[ec->nerased++] = position;
	if (!ZL_ROW_MASKED(sg, position))
		ec->erased_versions++;
	if (sg->format == ZL_FORMAT_ROWS)
		collect_toast_values(ec, tuple);
}

/* may the sub-group hold a row of the keys (its key directory says)? */
static bool
may_hold_keys(const EraseContext *ec, const ZLSubGroup *sg)
{
	int			npositions;

	if (sg->key_directory == NULL)
		return true;
	(void) zl_key_directory_probe(sg->key_directory, ec->hashes, ec->nhashes, &npositions);
	return npositions > 0;
}

/* rewrite every sub-group holding rows of the keys without them */
static void
erase_rows(EraseContext *ec)
{
	uint64		storage_id = zl_storage_id(ec->rel);
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	ZLSubGroup *sgs;
	int			nsgs;
	uint8	   *decisions;
	ZLWriteState *state = zl_write_state_get(ec->rel);

	sgs = zl_meta_load_subgroups(storage_id, snapshot, DATEVAL_NOBEGIN, &nsgs);
	decisions = palloc(Max(nsgs, 1));
	memset(decisions, ZL_CHECK, Max(nsgs, 1));
	zl_meta_load_key_directories(storage_id, snapshot, sgs, nsgs, decisions);
	for (int i = 0; i < nsgs; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (!may_hold_keys(ec, &sgs[i]))
			continue;
		ec->nerased = 0;
		zl_read_subgroup_rows(ec->rel, &sgs[i], true, find_erased_row, ec);
		if (ec->nerased > 0)
			zl_rewrite_subgroup(ec->rel, state, &sgs[i], ec->erased, ec->nerased);
	}
	UnregisterSnapshot(snapshot);
	zl_key_directory_cache_trim();
}

/* ---------- the change record ---------- */

static bool
record_entry_kept(void *arg, const ZLRecordEntry *e)
{
	return !key_is_erased((EraseContext *) arg, e->hash, e->key);
}

/*
 * erase(tbl, keys): README "Lifecycle".  Owner only, like drop_history;
 * the keys are read with the caller's rights.
 */
Datum
zipper_lake_erase(PG_FUNCTION_ARGS)
{
	EraseContext ec = {0};
	Oid			relid;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", PG_ARGISNULL(0) ? "table" : "keys"),
				 errhint("Pass the zipper table and a relation with the key columns of the keys to erase.")));
	relid = PG_GETARG_OID(0);
	if (zl_is_partitioned_table(relid))
		PG_RETURN_INT64(zl_parent_call_per_leaf(fcinfo, zipper_lake_erase));
	ec.rel = zl_open_owned_registered_table(relid, RowExclusiveLock, &ec.opts,
											"Register it with zipper_lake.register().");
	ec.desc = RelationGetDescr(ec.rel);
	ec.hasher = zl_key_hasher_create(ec.desc, &ec.opts);
	ec.scratch = palloc0(sizeof(Datum) * ec.desc->natts);
	ec.scratch_null = palloc0(sizeof(bool) * ec.desc->natts);
	ec.keys_context = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake erased keys",
											ALLOCSET_DEFAULT_SIZES);
	read_keys(&ec, PG_GETARG_OID(1));

	/* this transaction's pending rows first, then no other writer */
	zl_write_flush_relation(relid);
	(void) zl_write_lock_table(zl_storage_id(ec.rel), false);
	CommandCounterIncrement();
	if (ec.nkeys > 0)
	{
		erase_rows(&ec);
		delete_toast_values(&ec);
		if (zl_meta_record_exists())
			zl_record_rewrite(zl_record_codec_create(ec.desc, &ec.opts, ec.hasher), relid,
							  ec.opts.history_cut == ZL_NO_HISTORY_CUT ? PG_INT64_MIN :
							  ec.opts.history_cut + 1,
							  record_entry_kept, &ec);
		/* the rows kept are written now, then VACUUM wipes what is left */
		zl_write_flush_relation(relid);
		zl_storage_request_scrub(ec.rel);
	}
	table_close(ec.rel, NoLock);
	PG_RETURN_INT64(ec.erased_versions);
}
