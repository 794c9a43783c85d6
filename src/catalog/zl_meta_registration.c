/*-------------------------------------------------------------------------
 *
 * zl_meta_registration.c
 *	  The catalog's storage and registration tables.
 *
 * A zipper table's storages (one per relfilenode it had: the ids its
 * metadata is keyed by), forgetting them with the table, and its
 * registration: written by register() and the option setters, read back
 * as ZLTableOptions (cached per backend for readers).  Statements and
 * their privileged session: zl_metadata.c.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog_internal.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "executor/spi.h"
#include "pgtime.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

/* ---------- storages ---------- */

uint64
zl_meta_new_storage(Oid relid)
{
	ZLMetaSession session;
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	uint64		storage_id;

	zl_meta_begin(&session);
	zl_meta_exec(Q_NEW_STORAGE, values, NULL, InvalidSnapshot, false);
	storage_id = (uint64) zl_meta_result_int64(0, 1);
	zl_meta_end(&session);
	return storage_id;
}

/* forget the metadata of a storage (a file of a table); true if it held sub-groups */
bool
zl_meta_forget_storage(uint64 storage_id)
{
	ZLMetaSession session;
	Datum		values[1] = {Int64GetDatum((int64) storage_id)};
	bool		had_subgroups;

	zl_meta_begin(&session);
	zl_meta_exec(Q_FORGET_MASKS, values, NULL, InvalidSnapshot, false);
	zl_meta_exec(Q_FORGET_SUBGROUPS, values, NULL, InvalidSnapshot, false);
	had_subgroups = SPI_processed > 0;
	zl_meta_exec(Q_FORGET_FREE_EXTENTS, values, NULL, InvalidSnapshot, false);
	zl_meta_exec(Q_FORGET_STORAGE, values, NULL, InvalidSnapshot, false);
	zl_meta_end(&session);
	return had_subgroups;
}

/*
 * Forget a table that is dropped or stopped being a zipper table (SET
 * ACCESS METHOD): the metadata of all its storages and its registration.
 * False if it had no storage.
 */
bool
zl_meta_forget_table(Oid relid)
{
	ZLMetaSession session;
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	uint64		nstorages;
	int64	   *storages;

	zl_meta_begin(&session);
	zl_meta_exec(Q_TABLE_STORAGES, values, NULL, InvalidSnapshot, true);
	nstorages = SPI_processed;
	storages = palloc(sizeof(int64) * Max(nstorages, 1));
	for (uint64 i = 0; i < nstorages; i++)
	{
		bool		isnull;

		storages[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
												  SPI_tuptable->tupdesc, 1, &isnull));
	}
	zl_meta_exec(Q_FORGET_REGISTRATION, values, NULL, InvalidSnapshot, false);
	zl_meta_end(&session);
	zl_meta_record_forget(relid);
	for (uint64 i = 0; i < nstorages; i++)
		zl_meta_forget_storage((uint64) storages[i]);
	return nstorages > 0;
}

/* the table a storage was created for, InvalidOid if none */
Oid
zl_meta_storage_owner(uint64 storage_id)
{
	ZLMetaSession session;
	Datum		values[1] = {Int64GetDatum((int64) storage_id)};
	Oid			owner = InvalidOid;

	zl_meta_begin(&session);
	zl_meta_exec(Q_STORAGE_OWNER, values, NULL, InvalidSnapshot, true);
	if (SPI_processed == 1)
	{
		bool		isnull;

		owner = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
											   SPI_tuptable->tupdesc, 1, &isnull));
	}
	zl_meta_end(&session);
	return owner;
}

/* ---------- registration ---------- */

/* values in the column order of zipper_lake.registration */
void
zl_meta_insert_registration(Datum *values)
{
	zl_meta_run(Q_INSERT_REGISTRATION, values, NULL);
}

/* a registration option (Q_SET_*) of a table; value NULL: none */
static void
set_registration_option(ZLMetaQuery query, Oid relid, Pointer value)
{
	Datum		values[2] = {ObjectIdGetDatum(relid), PointerGetDatum(value)};
	char		nulls[2] = {' ', value == NULL ? 'n' : ' '};

	zl_meta_run(query, values, nulls);
}

/* README "Late data": NULL horizon = none */
void
zl_meta_set_late_horizon(Oid relid, Interval *horizon)
{
	set_registration_option(Q_SET_LATE_HORIZON, relid, (Pointer) horizon);
}

/* README "Tracked columns": names (name[]), NULL = all */
void
zl_meta_set_track_columns(Oid relid, ArrayType *names)
{
	set_registration_option(Q_SET_TRACK_COLUMNS, relid, (Pointer) names);
}

/* README "Storage formats": 'columnar' or 'rows' */
void
zl_meta_set_history_format(Oid relid, text *format)
{
	set_registration_option(Q_SET_HISTORY_FORMAT, relid, (Pointer) format);
}

/* README "Lifecycle": NULL keep = forever */
void
zl_meta_set_retention(Oid relid, Interval *keep)
{
	set_registration_option(Q_SET_RETENTION, relid, (Pointer) keep);
}

/* a zipper parent's new leaf is registered as the parent is (zl_parent.c) */
void
zl_meta_copy_registration(Oid parent, Oid leaf)
{
	Datum		values[2] = {ObjectIdGetDatum(parent), ObjectIdGetDatum(leaf)};

	zl_meta_run(Q_COPY_REGISTRATION, values, NULL);
}

/* are two tables registered with the same columns and options? */
bool
zl_meta_same_registration(Oid a, Oid b)
{
	ZLMetaSession session;
	Datum		values[2] = {ObjectIdGetDatum(a), ObjectIdGetDatum(b)};
	bool		same;

	zl_meta_begin(&session);
	zl_meta_exec(Q_SAME_REGISTRATION, values, NULL, InvalidSnapshot, true);
	same = SPI_processed == 1;
	zl_meta_end(&session);
	return same;
}

/*
 * A table's registration as text, its table left out (the columns as
 * JSON), in TimeZone UTC and IntervalStyle postgres, as a shard's
 * connection shows its own (src/remote/zl_remote_conn.c); NULL if none.
 */
char *
zl_meta_registration_text(Oid relid)
{
	ZLMetaSession session;
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	char	   *result = NULL;

	zl_meta_begin(&session);	/* its settings are undone by zl_meta_end */
	(void) set_config_option("TimeZone", "UTC", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
	(void) set_config_option("IntervalStyle", "postgres", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	zl_meta_exec(Q_REGISTRATION_TEXT, values, NULL, InvalidSnapshot, true);
	if (SPI_processed == 1)
		result = MemoryContextStrdup(session.caller_context,
									 SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	zl_meta_end(&session);
	return result;
}

/* README "Lifecycle": history dropped up to cut (an instant); never lowered */
void
zl_meta_raise_history_cut(Oid relid, int64 cut)
{
	Datum		values[2] = {ObjectIdGetDatum(relid), TimestampTzGetDatum(cut)};

	zl_meta_run(Q_RAISE_HISTORY_CUT, values, NULL);
}

/* is name a zone of pg_timezone_names (not an abbreviation or POSIX rule)? */
bool
zl_meta_time_zone_exists(const char *name)
{
	ZLMetaSession session;
	Datum		values[1] = {CStringGetTextDatum(name)};
	bool		exists;

	zl_meta_begin(&session);
	zl_meta_exec(Q_TIME_ZONE_EXISTS, values, NULL, InvalidSnapshot, true);
	exists = SPI_processed > 0;
	zl_meta_end(&session);
	return exists;
}

static AttrNumber
resolve_column(Relation rel, const char *name, const char *role)
{
	AttrNumber	attnum = InvalidAttrNumber;
	TupleDesc	tupdesc = RelationGetDescr(rel);

	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
			attnum = att->attnum;
	}
	if (attnum == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("%s column \"%s\" of zipper table \"%s\" does not exist",
						role, name, RelationGetRelationName(rel)),
				 errhint("Register the table again with existing columns.")));
	return attnum;
}

/*
 * Registrations read by readers, cached per backend.  Only registered
 * tables are cached: a registration never changes (re-registering is
 * refused, registered columns cannot be renamed or dropped) until the
 * table is dropped, and then its relcache invalidation clears the entry.
 * "Not registered" is never cached: a reader with an old snapshot would
 * keep believing it after the registration's invalidation has passed.
 */
typedef struct OptionsCacheEntry
{
	Oid			relid;			/* hash key */
	ZLTableOptions opts;
} OptionsCacheEntry;

static HTAB *options_cache = NULL;

static void
options_cache_invalidate(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	OptionsCacheEntry *entry;

	if (options_cache == NULL)
		return;
	hash_seq_init(&status, options_cache);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (OidIsValid(relid) && entry->relid != relid)
			continue;
		pfree(entry->opts.time_zone);
		(void) hash_search(options_cache, &entry->relid, HASH_REMOVE, NULL);
	}
}

static void
options_cache_store(const ZLTableOptions *opts)
{
	static bool callback_registered = false;
	OptionsCacheEntry *entry;

	if (options_cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(OptionsCacheEntry);
		ctl.hcxt = CacheMemoryContext;
		options_cache = hash_create("zipper_lake registrations", 64, &ctl,
									HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(options_cache_invalidate, (Datum) 0);
		callback_registered = true;
	}
	entry = hash_search(options_cache, &opts->relid, HASH_ENTER, NULL);
	entry->opts = *opts;
	entry->opts.time_zone = MemoryContextStrdup(CacheMemoryContext, opts->time_zone);
}

/* a copy of the cached registration of relid, if there is one */
static bool
options_cache_fetch(Oid relid, ZLTableOptions *opts)
{
	OptionsCacheEntry *entry;

	if (options_cache == NULL ||
		(entry = hash_search(options_cache, &relid, HASH_FIND, NULL)) == NULL)
		return false;
	/* the entry may go at any invalidation: callers get their own copy */
	*opts = entry->opts;
	opts->time_zone = pstrdup(entry->opts.time_zone);
	return true;
}

/* a column of a registration row by name: NULL where 0.1's catalog lacks it */
static Datum
registration_column(HeapTuple tuple, TupleDesc desc, const char *name, bool *isnull)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
			return heap_getattr(tuple, att->attnum, desc, isnull);
	}
	*isnull = true;
	return (Datum) 0;
}

/* the names of a name[] column of the registration (none if NULL) */
static int
registration_names(HeapTuple tuple, TupleDesc desc, const char *column, Datum **names)
{
	bool		isnull;
	Datum		array = registration_column(tuple, desc, column, &isnull);
	int			n = 0;

	*names = NULL;
	if (!isnull)
		deconstruct_array(DatumGetArrayTypeP(array), NAMEOID, NAMEDATALEN, false,
						  TYPALIGN_CHAR, names, NULL, &n);
	return n;
}

/*
 * A registration row resolved against the table: column names to
 * attribute numbers, the option values to their in-memory forms.  Columns
 * of 0.2 read as their defaults against 0.1's catalog: no late horizon,
 * every column tracked, history in rows, no cut, no retention.
 */
static void
options_from_row(Relation rel, HeapTuple tuple, TupleDesc desc, ZLTableOptions *opts)
{
	bool		isnull;
	Datum		value;
	Datum	   *names;
	int			n;
	char	   *unit;

	n = registration_names(tuple, desc, "key", &names);
	if (n < 1 || n > INDEX_MAX_KEYS)
		elog(ERROR, "invalid key in registration of \"%s\"",
			 RelationGetRelationName(rel));
	opts->nkeys = n;
	for (int i = 0; i < n; i++)
		opts->key_attnums[i] = resolve_column(rel, NameStr(*DatumGetName(names[i])), "key");
	value = registration_column(tuple, desc, "valid_from", &isnull);
	opts->from_attnum = resolve_column(rel, NameStr(*DatumGetName(value)), "valid_from");
	value = registration_column(tuple, desc, "valid_to", &isnull);
	opts->to_attnum = resolve_column(rel, NameStr(*DatumGetName(value)), "valid_to");
	opts->period_type = TupleDescAttr(RelationGetDescr(rel),
									  opts->from_attnum - 1)->atttypid;
	opts->period_typmod = TupleDescAttr(RelationGetDescr(rel),
										opts->from_attnum - 1)->atttypmod;
	unit = TextDatumGetCString(registration_column(tuple, desc, "partition_unit", &isnull));
	opts->unit = strcmp(unit, "year") == 0 ? ZL_UNIT_YEAR :
		strcmp(unit, "month") == 0 ? ZL_UNIT_MONTH : ZL_UNIT_DAY;
	opts->history_span = zl_span_from_interval(DatumGetIntervalP(registration_column(tuple, desc, "history_group_span", &isnull)));
	opts->current_span = zl_span_from_interval(DatumGetIntervalP(registration_column(tuple, desc, "current_group_span", &isnull)));
	opts->max_subgroups = DatumGetInt32(registration_column(tuple, desc, "max_subgroups", &isnull));

	/*
	 * register() stores the open end of timestamp and date tables as the
	 * wall-clock value at UTC, so it reads the same in every session.
	 */
	opts->open_end = DatumGetTimestampTz(registration_column(tuple, desc, "open_end", &isnull));
	opts->time_zone = TextDatumGetCString(registration_column(tuple, desc, "time_zone", &isnull));
	opts->zone_is_utc = (pg_strcasecmp(opts->time_zone, "UTC") == 0);

	value = registration_column(tuple, desc, "late_horizon", &isnull);
	opts->late_horizon = isnull ? 0 : zl_span_from_interval(DatumGetIntervalP(value)).usecs;

	memset(opts->tracked, 0, sizeof(opts->tracked));
	n = registration_names(tuple, desc, "track_columns", &names);
	opts->some_untracked = n > 0;
	for (int i = 0; i < n; i++)
	{
		AttrNumber	attnum = resolve_column(rel, NameStr(*DatumGetName(names[i])), "tracked");

		opts->tracked[(attnum - 1) >> 3] |= 1 << ((attnum - 1) & 7);
	}

	value = registration_column(tuple, desc, "history_format", &isnull);
	opts->history_format = !isnull && strcmp(TextDatumGetCString(value), "columnar") == 0 ?
		ZL_FORMAT_COLUMNAR : ZL_FORMAT_ROWS;
	value = registration_column(tuple, desc, "history_cut", &isnull);
	opts->history_cut = isnull ? ZL_NO_HISTORY_CUT : DatumGetTimestampTz(value);
	value = registration_column(tuple, desc, "retention", &isnull);
	opts->has_retention = !isnull;
	if (!isnull)
		opts->retention = *DatumGetIntervalP(value);
}

static void
refuse_unknown_zone(Relation rel, const ZLTableOptions *opts)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("zipper table \"%s\" has an unknown time zone \"%s\"",
					RelationGetRelationName(rel), opts->time_zone),
			 errhint("Time zones of zipper tables are full names from pg_timezone_names.")));
}

/*
 * Read the registration row of rel, if there is one, into opts: a scan of
 * the registration's primary key, as zl_metaread.c reads sub-groups — no
 * SPI statement to plan, which was most of a new connection's first query
 * of a zipper table.  Writers hold the table's writer lock, which
 * register() takes too: with the latest snapshot they see a registration
 * committed after their transaction began, so no row of theirs goes
 * unplaced.  Readers read what their statement's snapshot sees.
 */
/*
 * The table whose registration rel's rows are placed by: rel, or for the
 * transient relation of a rewrite (zl_rewritten_table), the table it
 * rewrites -- its key and period columns are the table's (they cannot be
 * dropped or retyped), so VACUUM FULL and ALTER TABLE rewrites write its
 * rows placed, into the file the table then takes.
 */
static Oid
registered_as(Relation rel)
{
	Oid			rewritten = zl_rewritten_table(rel);

	return OidIsValid(rewritten) ? rewritten : RelationGetRelid(rel);
}

static bool
read_registration(Relation rel, ZLTableOptions *opts, bool for_write)
{
	const ZLCatalog *catalog = zl_meta_catalog();
	Snapshot	snapshot;
	Relation	registration;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	bool		found;

	snapshot = RegisterSnapshot(for_write ? GetLatestSnapshot() :
								ActiveSnapshotSet() ? GetActiveSnapshot() :
								GetTransactionSnapshot());
	registration = table_open(catalog->registration, AccessShareLock);
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(registered_as(rel)));
	scan = systable_beginscan(registration, catalog->registration_pkey, true, snapshot, 1, &key);
	tuple = systable_getnext(scan);
	found = HeapTupleIsValid(tuple);
	if (found)
		options_from_row(rel, tuple, RelationGetDescr(registration), opts);
	systable_endscan(scan);
	table_close(registration, AccessShareLock);
	UnregisterSnapshot(snapshot);
	return found;
}

/* the registration from the catalog (read_registration), *zone_known: is its time zone known? */
static bool
read_options(Relation rel, ZLTableOptions *opts, bool for_write, bool *zone_known)
{
	memset(opts, 0, sizeof(*opts));
	opts->relid = RelationGetRelid(rel);
	if (!read_registration(rel, opts, for_write))
		return false;
	*zone_known = pg_tzset(opts->time_zone) != NULL;
	return true;
}

/*
 * The registration of a table, false if it has none.  Readers take it from
 * the per-backend cache (invalidated with the table's relcache entry);
 * writers read the catalog with the latest snapshot.
 */
bool
zl_meta_load_options(Relation rel, ZLTableOptions *opts, bool for_write)
{
	bool		zone_known;

	if (!zl_meta_load_options_any_zone(rel, opts, for_write, &zone_known))
		return false;
	if (!zone_known)
		refuse_unknown_zone(rel, opts);
	return true;
}

/*
 * The same, but a registration whose time zone the server does not know
 * (any more) is loaded too (not cached), *zone_known saying so.  For
 * VACUUM, which must not fail on a stored value (zl_retention.c).
 */
bool
zl_meta_load_options_any_zone(Relation rel, ZLTableOptions *opts, bool for_write,
							  bool *zone_known)
{
	*zone_known = true;

	if (!for_write && options_cache_fetch(RelationGetRelid(rel), opts))
		return true;
	if (!read_options(rel, opts, for_write, zone_known))
		return false;
	if (*zone_known)
		options_cache_store(opts);
	return true;
}

/*
 * The registration as the statement's snapshot sees it, never the cached
 * one: for a reader that checks it against rows read with that snapshot
 * (verify()'s check of the change record, which leaves out what the
 * history cut dropped), when another transaction may have changed it
 * since the cache was filled.  False if it has none.
 */
bool
zl_meta_load_options_uncached(Relation rel, ZLTableOptions *opts)
{
	bool		zone_known;

	if (!read_options(rel, opts, false, &zone_known))
		return false;
	if (!zone_known)
		refuse_unknown_zone(rel, opts);
	return true;
}
