/*-------------------------------------------------------------------------
 *
 * zl_metadata.c
 *	  The extension's catalog: registrations, storages, sub-groups, masks.
 *
 * Visibility
 * ----------
 * Data pages carry no visibility information (zl_storage.c).  A sub-group
 * is visible to a scan exactly when its row in zipper_lake.subgroup is
 * visible to the scan's snapshot, and a row of a sub-group is deleted
 * exactly when some row of zipper_lake.mask visible to that snapshot lists
 * its position.  Mask rows are only ever appended (one per sub-group per
 * writing statement), never updated, so a reader with an older snapshot
 * keeps seeing the rows it saw.  Rollback and crash safety of the pages
 * follow from the heap's own MVCC and WAL for these tables.
 *
 * Access
 * ------
 * Hot reads — the sub-groups, masks and key directories scans and batches
 * start with — scan the catalog's indexes directly (zl_metaread.c) and are
 * cached per backend (zl_metacache.c).  Everything else goes through SPI
 * with prepared, kept plans.  Each such call runs
 * as the owner of the metadata tables (ordinary users may read only the
 * registrations, and write nothing: the table access method and the SQL
 * functions check the caller's rights on the zipper table instead) and
 * with search_path pinned to pg_catalog, so neither the caller's identity
 * nor a hostile search_path can reach into these statements.
 *
 * Sub-group rows also carry the key directory of zl_keys.c; compaction
 * deletes a sub-group's row and its masks, which is as MVCC-safe as
 * inserting them.  Every write of sub-group or mask rows is counted on the
 * table's metapage (zl_storage.c) before the transaction commits, which
 * keeps readers' cached lists honest (zl_metacache.c).
 *
 * Metadata rows use int64 instants (zl_time.c) stored in timestamptz
 * columns, whatever the type of the table's period columns.
 *
 *-------------------------------------------------------------------------
 */
#include "zipper_lake.h"

#include "access/htup_details.h"
#include "access/transam.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "access/xact.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "pgtime.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

typedef enum ZLMetaQuery
{
	Q_NEW_STORAGE,
	Q_FORGET_MASKS,
	Q_FORGET_SUBGROUPS,
	Q_FORGET_STORAGE,
	Q_INSERT_REGISTRATION,
	Q_LOAD_OPTIONS,
	Q_CURRENT_FILE_GROUP,
	Q_NEW_ID,
	Q_INSERT_SUBGROUP,
	Q_INSERT_COLUMNAR_SUBGROUP,
	Q_INSERT_HISTORY_SUBGROUPS,
	Q_INSERT_HISTORY_COLUMNAR_SUBGROUPS,
	Q_DELETE_SUBGROUP,
	Q_FORGET_FREE_EXTENTS,
	Q_LOAD_FREE_EXTENTS,
	Q_INSERT_FREE_EXTENTS,
	Q_TAKE_FREE_EXTENTS,
	Q_DELETE_SUBGROUP_MASKS,
	Q_INSERT_MASK,
	Q_TIME_ZONE_EXISTS,
	Q_TABLE_STORAGES,
	Q_STORAGE_OWNER,
	Q_FORGET_REGISTRATION,
	Q_SET_LATE_HORIZON,
	Q_SET_TRACK_COLUMNS,
	Q_SET_HISTORY_FORMAT,
	Q_SET_RETENTION,
	Q_RAISE_HISTORY_CUT,
	Q_DROP_PARTITIONS,
	Q_HAS_SUBGROUPS,
	Q_RECORD_SEGMENTS,
	Q_RECORD_ENTRIES,
	Q_RECORD_PIECES,
	Q_RECORD_INSERT,
	Q_RECORD_DELETE_PIECE,
	Q_RECORD_HEAD,
	Q_RECORD_SAVE_HEAD,
	Q_RECORD_FORGET,
	Q_RECORD_SIZE,
	Q_RECORD_INSPECT,
	Q_COUNT
} ZLMetaQuery;

typedef struct ZLMetaQueryDef
{
	const char *sql;
	int			nargs;
	Oid			argtypes[11];
} ZLMetaQueryDef;

/* the INSERT of a sub-group row, with extra columns and values */
#define INSERT_SUBGROUP(more_columns, more_values) \
	"INSERT INTO zipper_lake.subgroup (storage_id, subgroup_id, file_group," \
	" rollover_seq, partition_end, window_start, first_start, last_start," \
	" row_count, first_block, blocks, key_directory" more_columns \
	" VALUES ($1, nextval('zipper_lake.id_seq'), $2, $3, $4, $5, $6, $7, $8, $9, $10, $11" \
	more_values " RETURNING subgroup_id"
/*
 * The sub-groups of history partitions a write made, in one statement
 * (their many small catalog rows would otherwise cost a statement each).
 * A history window keeps one file group: each window's, looked up once,
 * or opened (a new id, taken before the sub-groups' ids) if it has none,
 * so sub-groups of one window in one statement share it; ids follow the
 * order of the arrays.
 */
#define INSERT_HISTORY_SUBGROUPS(more_columns, more_values) \
	"WITH s AS (SELECT * FROM unnest($2::date[], $3::timestamptz[], $4::timestamptz[]," \
	" $5::timestamptz[], $6::int8[], $7::int8[], $8::int4[], $9::bytea[]) WITH ORDINALITY" \
	" AS s(partition_end, window_start, first_start, last_start, row_count, first_block," \
	" blocks, key_directory, ord))," \
	" w AS MATERIALIZED (SELECT w.partition_end, w.window_start," \
	" coalesce(g.file_group, nextval('zipper_lake.id_seq')) AS file_group," \
	" coalesce(g.rollover_seq, 0) AS rollover_seq" \
	" FROM (SELECT partition_end, window_start, min(ord) AS ord FROM s" \
	" GROUP BY partition_end, window_start ORDER BY 3) w" \
	" LEFT JOIN LATERAL (SELECT file_group, rollover_seq FROM zipper_lake.subgroup x" \
	" WHERE x.storage_id = $1 AND x.partition_end = w.partition_end" \
	" AND x.window_start = w.window_start ORDER BY rollover_seq DESC LIMIT 1) g ON true" \
	" ORDER BY w.ord)" \
	" INSERT INTO zipper_lake.subgroup (storage_id, file_group, subgroup_id," \
	" rollover_seq, partition_end, window_start, first_start, last_start," \
	" row_count, first_block, blocks, key_directory" more_columns \
	" SELECT $1, w.file_group, nextval('zipper_lake.id_seq'), w.rollover_seq," \
	" s.partition_end, s.window_start, s.first_start, s.last_start, s.row_count," \
	" s.first_block, s.blocks, s.key_directory" more_values \
	" FROM s JOIN w USING (partition_end, window_start) ORDER BY s.ord"
#define INSERT_HISTORY_SUBGROUPS_TYPES \
	INT8OID, DATEARRAYOID, TIMESTAMPTZARRAYOID, TIMESTAMPTZARRAYOID, \
	TIMESTAMPTZARRAYOID, INT8ARRAYOID, INT8ARRAYOID, INT4ARRAYOID, BYTEAARRAYOID
#define INSERT_SUBGROUP_TYPES \
	INT8OID, INT8OID, INT4OID, DATEOID, TIMESTAMPTZOID, TIMESTAMPTZOID, \
	TIMESTAMPTZOID, INT8OID, INT8OID, INT4OID, BYTEAOID

static const ZLMetaQueryDef meta_queries[Q_COUNT] = {
	[Q_NEW_STORAGE] = {
		"INSERT INTO zipper_lake.storage (storage_id, relid) "
		"VALUES (nextval('zipper_lake.id_seq'), $1) RETURNING storage_id",
		1, {OIDOID}
	},
	[Q_FORGET_MASKS] = {
		"DELETE FROM zipper_lake.mask WHERE storage_id = $1", 1, {INT8OID}
	},
	[Q_FORGET_SUBGROUPS] = {
		"DELETE FROM zipper_lake.subgroup WHERE storage_id = $1", 1, {INT8OID}
	},
	[Q_FORGET_STORAGE] = {
		"DELETE FROM zipper_lake.storage WHERE storage_id = $1", 1, {INT8OID}
	},
	[Q_INSERT_REGISTRATION] = {
		"INSERT INTO zipper_lake.registration (tbl, key, valid_from, valid_to,"
		" partition_unit, history_group_span, current_group_span, max_subgroups,"
		" open_end, time_zone) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
		10, {REGCLASSOID, NAMEARRAYOID, NAMEOID, NAMEOID, TEXTOID, INTERVALOID,
		INTERVALOID, INT4OID, TIMESTAMPTZOID, TEXTOID}
	},
	/* late_horizon came with 0.2: 0.1's catalog has no such column */
	[Q_LOAD_OPTIONS] = {
		"SELECT key, valid_from, valid_to, partition_unit, history_group_span,"
		" current_group_span, max_subgroups, open_end, time_zone,"
		" (to_jsonb(r) ->> 'late_horizon')::interval,"
		" ARRAY(SELECT jsonb_array_elements_text("
		"     nullif(to_jsonb(r) -> 'track_columns', 'null'::jsonb))),"
		" coalesce(to_jsonb(r) ->> 'history_format', 'rows'),"
		" (to_jsonb(r) ->> 'history_cut')::timestamptz,"
		" (to_jsonb(r) ->> 'retention')::interval"
		" FROM zipper_lake.registration r WHERE tbl = $1",
		1, {OIDOID}
	},
	[Q_CURRENT_FILE_GROUP] = {
		"SELECT file_group, rollover_seq, count(*) FROM zipper_lake.subgroup"
		" WHERE storage_id = $1 AND partition_end = $2 AND window_start = $3"
		" GROUP BY file_group, rollover_seq ORDER BY rollover_seq DESC LIMIT 1",
		3, {INT8OID, DATEOID, TIMESTAMPTZOID}
	},
	[Q_NEW_ID] = {
		"SELECT nextval('zipper_lake.id_seq')", 0, {InvalidOid}
	},
	/* row sub-groups leave format to its default: 0.1's catalog has none */
	[Q_INSERT_SUBGROUP] = {
		INSERT_SUBGROUP(")", ")"), 11, {INSERT_SUBGROUP_TYPES}
	},
	[Q_INSERT_COLUMNAR_SUBGROUP] = {
		INSERT_SUBGROUP(", format)", ", 'c')"), 11, {INSERT_SUBGROUP_TYPES}
	},
	[Q_INSERT_HISTORY_SUBGROUPS] = {
		INSERT_HISTORY_SUBGROUPS(")", ""), 9, {INSERT_HISTORY_SUBGROUPS_TYPES}
	},
	[Q_INSERT_HISTORY_COLUMNAR_SUBGROUPS] = {
		INSERT_HISTORY_SUBGROUPS(", format)", ", 'c'"), 9, {INSERT_HISTORY_SUBGROUPS_TYPES}
	},
	[Q_DELETE_SUBGROUP] = {
		"WITH d AS (DELETE FROM zipper_lake.subgroup"
		" WHERE storage_id = $1 AND subgroup_id = $2 RETURNING first_block, blocks)"
		" INSERT INTO zipper_lake.free_extent (storage_id, first_block, blocks, freed_by)"
		" SELECT $1, first_block, blocks, pg_current_xact_id() FROM d WHERE blocks > 0",
		2, {INT8OID, INT8OID}
	},
	[Q_FORGET_FREE_EXTENTS] = {
		"DELETE FROM zipper_lake.free_extent WHERE storage_id = $1", 1, {INT8OID}
	},
	[Q_LOAD_FREE_EXTENTS] = {
		"SELECT first_block, blocks, freed_by::text::int8 FROM zipper_lake.free_extent"
		" WHERE storage_id = $1 ORDER BY first_block",
		1, {INT8OID}
	},
	[Q_INSERT_FREE_EXTENTS] = {
		"INSERT INTO zipper_lake.free_extent (storage_id, first_block, blocks, freed_by)"
		" SELECT $1, u.first_block, u.blocks, $4::text::xid8"
		" FROM unnest($2::int8[], $3::int4[]) AS u(first_block, blocks)",
		4, {INT8OID, INT8ARRAYOID, INT4ARRAYOID, INT8OID}
	},
	/* the free extents starting in each range $2[i] .. $2[i] + $3[i] - 1 */
	[Q_TAKE_FREE_EXTENTS] = {
		"WITH t AS (SELECT * FROM unnest($2, $3) AS t(first, n)),"
		" d AS (DELETE FROM zipper_lake.free_extent f USING t"
		" WHERE f.storage_id = $1 AND f.first_block >= t.first AND f.first_block < t.first + t.n"
		" RETURNING f.storage_id, f.first_block, f.blocks, f.freed_by, t.first + t.n AS taken_end),"
		" rest AS (INSERT INTO zipper_lake.free_extent (storage_id, first_block, blocks, freed_by)"
		" SELECT storage_id, taken_end, first_block + blocks - taken_end, freed_by FROM d"
		" WHERE first_block + blocks > taken_end)"
		" SELECT coalesce(sum(least(first_block + blocks, taken_end) - first_block), 0)::int8"
		" FROM d",
		3, {INT8OID, INT8ARRAYOID, INT4ARRAYOID}
	},
	[Q_DELETE_SUBGROUP_MASKS] = {
		"DELETE FROM zipper_lake.mask WHERE storage_id = $1 AND subgroup_id = $2",
		2, {INT8OID, INT8OID}
	},
	[Q_INSERT_MASK] = {
		"INSERT INTO zipper_lake.mask (storage_id, subgroup_id, positions)"
		" SELECT $1, u.subgroup_id, $3[u.first:u.last]"
		" FROM unnest($2, $4, $5) AS u(subgroup_id, first, last)",
		5, {INT8OID, INT8ARRAYOID, INT4ARRAYOID, INT4ARRAYOID, INT4ARRAYOID}
	},
	[Q_TABLE_STORAGES] = {
		"SELECT storage_id FROM zipper_lake.storage WHERE relid = $1", 1, {OIDOID}
	},
	[Q_STORAGE_OWNER] = {
		"SELECT relid FROM zipper_lake.storage WHERE storage_id = $1", 1, {INT8OID}
	},
	[Q_FORGET_REGISTRATION] = {
		"DELETE FROM zipper_lake.registration WHERE tbl = $1", 1, {OIDOID}
	},
	[Q_SET_LATE_HORIZON] = {
		"UPDATE zipper_lake.registration SET late_horizon = $2 WHERE tbl = $1",
		2, {OIDOID, INTERVALOID}
	},
	[Q_SET_TRACK_COLUMNS] = {
		"UPDATE zipper_lake.registration SET track_columns = $2 WHERE tbl = $1",
		2, {OIDOID, NAMEARRAYOID}
	},
	[Q_SET_HISTORY_FORMAT] = {
		"UPDATE zipper_lake.registration SET history_format = $2 WHERE tbl = $1",
		2, {OIDOID, TEXTOID}
	},
	[Q_SET_RETENTION] = {
		"UPDATE zipper_lake.registration SET retention = $2 WHERE tbl = $1",
		2, {OIDOID, INTERVALOID}
	},
	[Q_RAISE_HISTORY_CUT] = {
		"UPDATE zipper_lake.registration SET history_cut = greatest(history_cut, $2)"
		" WHERE tbl = $1",
		2, {OIDOID, TIMESTAMPTZOID}
	},
	/* every sub-group of the history partitions up to $2, masks and all */
	[Q_DROP_PARTITIONS] = {
		"WITH d AS (DELETE FROM zipper_lake.subgroup"
		"  WHERE storage_id = $1 AND partition_end <= $2"
		"  RETURNING subgroup_id, first_block, blocks),"
		" m AS (DELETE FROM zipper_lake.mask k USING d"
		"  WHERE k.storage_id = $1 AND k.subgroup_id = d.subgroup_id),"
		" f AS (INSERT INTO zipper_lake.free_extent (storage_id, first_block, blocks, freed_by)"
		"  SELECT $1, first_block, blocks, pg_current_xact_id() FROM d WHERE blocks > 0)"
		" SELECT count(*) FROM d",
		2, {INT8OID, DATEOID}
	},
	[Q_HAS_SUBGROUPS] = {
		"SELECT 1 FROM zipper_lake.subgroup WHERE storage_id = $1 LIMIT 1", 1, {INT8OID}
	},
	[Q_RECORD_SEGMENTS] = {
		"SELECT piece, segment FROM zipper_lake.record_segment"
		" WHERE tbl = $1 AND hash_hi >= $2 AND hash_lo <= $3 AND newest >= $4"
		" ORDER BY piece, segment",
		4, {OIDOID, INT8OID, INT8OID, TIMESTAMPTZOID}
	},
	[Q_RECORD_ENTRIES] = {
		"SELECT entries FROM zipper_lake.record_segment"
		" WHERE tbl = $1 AND piece = $2 AND segment = $3",
		3, {OIDOID, INT8OID, INT4OID}
	},
	[Q_RECORD_PIECES] = {
		"SELECT piece, sum(pg_column_size(entries))::int8 FROM zipper_lake.record_segment"
		" WHERE tbl = $1 GROUP BY piece ORDER BY piece",
		1, {OIDOID}
	},
	[Q_RECORD_INSERT] = {
		"INSERT INTO zipper_lake.record_segment"
		" (tbl, piece, segment, hash_lo, hash_hi, newest, instants, entries)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
		8, {REGCLASSOID, INT8OID, INT4OID, INT8OID, INT8OID, TIMESTAMPTZOID, INT8OID, BYTEAOID}
	},
	[Q_RECORD_DELETE_PIECE] = {
		"DELETE FROM zipper_lake.record_segment WHERE tbl = $1 AND piece = $2",
		2, {OIDOID, INT8OID}
	},
	[Q_RECORD_HEAD] = {
		"SELECT newest_change, table_instants, table_seqs FROM zipper_lake.record_head"
		" WHERE tbl = $1",
		1, {OIDOID}
	},
	[Q_RECORD_SAVE_HEAD] = {
		"INSERT INTO zipper_lake.record_head AS h (tbl, newest_change, table_instants, table_seqs)"
		" VALUES ($1, $2, $3, $4)"
		" ON CONFLICT (tbl) DO UPDATE SET"
		" newest_change = greatest(h.newest_change, excluded.newest_change),"
		" table_instants = excluded.table_instants, table_seqs = excluded.table_seqs",
		4, {REGCLASSOID, TIMESTAMPTZOID, TIMESTAMPTZARRAYOID, INT8ARRAYOID}
	},
	[Q_RECORD_FORGET] = {
		"WITH s AS (DELETE FROM zipper_lake.record_segment WHERE tbl = $1)"
		" DELETE FROM zipper_lake.record_head WHERE tbl = $1",
		1, {OIDOID}
	},
	[Q_RECORD_SIZE] = {
		"SELECT count(DISTINCT piece), coalesce(sum(instants), 0)::int8,"
		" coalesce(sum(pg_column_size(entries)), 0)::int8"
		" FROM zipper_lake.record_segment WHERE tbl = $1",
		1, {OIDOID}
	},
	[Q_RECORD_INSPECT] = {
		"SELECT piece, count(*), min(hash_lo), max(hash_hi), max(newest),"
		" sum(instants)::int8, sum(pg_column_size(entries))::int8"
		" FROM zipper_lake.record_segment WHERE tbl = $1 GROUP BY piece ORDER BY piece",
		1, {OIDOID}
	},
	[Q_TIME_ZONE_EXISTS] = {
		"SELECT 1 FROM pg_timezone_names WHERE name = $1", 1, {TEXTOID}
	},
};

static SPIPlanPtr meta_plans[Q_COUNT];

/* true while one of the statements above runs (zl_meta_statement_running) */
static bool meta_statement_running = false;

/* state saved across one privileged SPI session */
typedef struct ZLMetaSession
{
	Oid			save_userid;
	int			save_sec_context;
	int			guc_nest_level;
	MemoryContext caller_context;
} ZLMetaSession;

static void
meta_begin(ZLMetaSession *session)
{
	session->caller_context = CurrentMemoryContext;
	GetUserIdAndSecContext(&session->save_userid, &session->save_sec_context);
	SetUserIdAndSecContext(zl_meta_catalog()->owner,
						   session->save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	session->guc_nest_level = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
}

static void
meta_end(ZLMetaSession *session)
{
	SPI_finish();
	AtEOXact_GUC(true, session->guc_nest_level);
	SetUserIdAndSecContext(session->save_userid, session->save_sec_context);
}

/*
 * Is one of the catalog statements of this file running?  The end of
 * such a statement does not flush the rows writers left pending (zl_mod.c):
 * writers flush where they are ready to (zl_write.c, "When flushes
 * happen"), so a flush never runs between a writer's catalog changes, e.g.
 * before apply_changes has masked every row it replaced.
 */
bool
zl_meta_statement_running(void)
{
	return meta_statement_running;
}

/* execute a prepared statement, marked as running (zl_meta_statement_running) */
static int
run_marked(SPIPlanPtr plan, Datum *values, const char *nulls, Snapshot snapshot,
		   bool read_only)
{
	bool		was_running = meta_statement_running;	/* a trigger may run one inside */
	volatile int rc = 0;

	meta_statement_running = true;
	PG_TRY();
	{
		if (snapshot != InvalidSnapshot)
			rc = SPI_execute_snapshot(plan, values, nulls, snapshot, InvalidSnapshot,
									  read_only, !read_only, 0);
		else
			rc = SPI_execute_plan(plan, values, nulls, read_only, 0);
	}
	PG_FINALLY();
	{
		meta_statement_running = was_running;
	}
	PG_END_TRY();
	return rc;
}

/*
 * Run one of the metadata statements.  With a snapshot, the statement
 * reads exactly what that snapshot sees (scans); without, it runs like
 * any statement of the current transaction, except as below.
 */
static int
meta_exec(ZLMetaQuery query, Datum *values, const char *nulls,
		  Snapshot snapshot, bool read_only)
{
	const ZLMetaQueryDef *def = &meta_queries[query];
	int			rc;

	if (meta_plans[query] == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare(def->sql, def->nargs, (Oid *) def->argtypes);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for \"%s\": %s",
				 def->sql, SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		meta_plans[query] = plan;
	}

	/*
	 * Statements that write must act on what other transactions committed
	 * even where the transaction's snapshot is older (REPEATABLE READ,
	 * SERIALIZABLE): a writer that waited for the table's writer lock would
	 * otherwise compact a sub-group without deleting its row, or choose a
	 * file group from stale counts.  So they read with the latest snapshot,
	 * and fire triggers as any statement would (registration places
	 * unplaced rows from one).
	 */
	if (snapshot == InvalidSnapshot && !read_only && IsolationUsesXactSnapshot())
		snapshot = GetLatestSnapshot();

	rc = run_marked(meta_plans[query], values, nulls, snapshot, read_only);
	if (rc < 0)
		elog(ERROR, "zipper_lake metadata statement failed: %s",
			 SPI_result_code_string(rc));
	return rc;
}

static int64
result_int64(int row, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc,
								  col, &isnull);

	return isnull ? 0 : DatumGetInt64(d);
}

/* ---------- storages ---------- */

uint64
zl_meta_new_storage(Oid relid)
{
	ZLMetaSession session;
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	uint64		storage_id;

	meta_begin(&session);
	meta_exec(Q_NEW_STORAGE, values, NULL, InvalidSnapshot, false);
	storage_id = (uint64) result_int64(0, 1);
	meta_end(&session);
	return storage_id;
}

void
zl_meta_forget_storage(uint64 storage_id)
{
	ZLMetaSession session;
	Datum		values[1] = {Int64GetDatum((int64) storage_id)};

	meta_begin(&session);
	meta_exec(Q_FORGET_MASKS, values, NULL, InvalidSnapshot, false);
	meta_exec(Q_FORGET_SUBGROUPS, values, NULL, InvalidSnapshot, false);
	meta_exec(Q_FORGET_FREE_EXTENTS, values, NULL, InvalidSnapshot, false);
	meta_exec(Q_FORGET_STORAGE, values, NULL, InvalidSnapshot, false);
	meta_end(&session);
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

	meta_begin(&session);
	meta_exec(Q_TABLE_STORAGES, values, NULL, InvalidSnapshot, true);
	nstorages = SPI_processed;
	storages = palloc(sizeof(int64) * Max(nstorages, 1));
	for (uint64 i = 0; i < nstorages; i++)
	{
		bool		isnull;

		storages[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
												  SPI_tuptable->tupdesc, 1, &isnull));
	}
	meta_exec(Q_FORGET_REGISTRATION, values, NULL, InvalidSnapshot, false);
	meta_end(&session);
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

	meta_begin(&session);
	meta_exec(Q_STORAGE_OWNER, values, NULL, InvalidSnapshot, true);
	if (SPI_processed == 1)
	{
		bool		isnull;

		owner = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
											   SPI_tuptable->tupdesc, 1, &isnull));
	}
	meta_end(&session);
	return owner;
}

/* ---------- registration ---------- */

/* values in the column order of zipper_lake.registration */
void
zl_meta_insert_registration(Datum *values)
{
	ZLMetaSession session;

	meta_begin(&session);
	meta_exec(Q_INSERT_REGISTRATION, values, NULL, InvalidSnapshot, false);
	meta_end(&session);
}

/* a registration option (Q_SET_*) of a table; value NULL: none */
static void
set_registration_option(ZLMetaQuery query, Oid relid, Pointer value)
{
	ZLMetaSession session;
	Datum		values[2] = {ObjectIdGetDatum(relid), PointerGetDatum(value)};
	char		nulls[2] = {' ', value == NULL ? 'n' : ' '};

	meta_begin(&session);
	meta_exec(query, values, nulls, InvalidSnapshot, false);
	meta_end(&session);
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

/* README "Lifecycle": history dropped up to cut (an instant); never lowered */
void
zl_meta_raise_history_cut(Oid relid, int64 cut)
{
	ZLMetaSession session;
	Datum		values[2] = {ObjectIdGetDatum(relid), TimestampTzGetDatum(cut)};

	meta_begin(&session);
	meta_exec(Q_RAISE_HISTORY_CUT, values, NULL, InvalidSnapshot, false);
	meta_end(&session);
}

/*
 * Delete every sub-group of the history partitions up to last_partition,
 * with their masks, their blocks becoming free extents (as
 * zl_meta_delete_subgroup does one by one); returns how many.
 */
int64
zl_meta_drop_partitions(Relation rel, DateADT last_partition)
{
	ZLMetaSession session;
	Datum		values[2] = {Int64GetDatum((int64) zl_storage_id(rel)),
		DateADTGetDatum(last_partition)};
	int64		dropped;

	Assert(last_partition != ZL_CURRENT_PARTITION);
	meta_begin(&session);
	meta_exec(Q_DROP_PARTITIONS, values, NULL, InvalidSnapshot, false);
	dropped = result_int64(0, 1);
	meta_end(&session);
	zl_storage_count_metadata_change(rel);
	return dropped;
}

/* does the storage hold a sub-group (the latest snapshot's)? */
bool
zl_meta_has_subgroups(uint64 storage_id)
{
	ZLMetaSession session;
	Datum		values[1] = {Int64GetDatum((int64) storage_id)};
	bool		found;

	meta_begin(&session);
	meta_exec(Q_HAS_SUBGROUPS, values, NULL, GetLatestSnapshot(), true);
	found = SPI_processed > 0;
	meta_end(&session);
	return found;
}

/* is name a zone of pg_timezone_names (not an abbreviation or POSIX rule)? */
bool
zl_meta_time_zone_exists(const char *name)
{
	ZLMetaSession session;
	Datum		values[1] = {CStringGetTextDatum(name)};
	bool		exists;

	meta_begin(&session);
	meta_exec(Q_TIME_ZONE_EXISTS, values, NULL, InvalidSnapshot, true);
	exists = SPI_processed > 0;
	meta_end(&session);
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
 * Read the table's registration.  Returns false when the table is not
 * registered (rows written then are kept unplaced until it is).
 */
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

/*
 * A registration row resolved against the table: column names to
 * attribute numbers, the option values to their in-memory forms.
 * time_zone is allocated in result_context (SPI memory goes at
 * meta_end).
 */
static void
options_from_row(Relation rel, HeapTuple tuple, TupleDesc tupdesc, ZLTableOptions *opts,
				 MemoryContext result_context)
{
	bool		isnull;
	ArrayType  *keys;
	Datum	   *key_names;
	int			nkeys;
	char	   *unit;
	MemoryContext old;

	keys = DatumGetArrayTypeP(SPI_getbinval(tuple, tupdesc, 1, &isnull));
	deconstruct_array(keys, NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR,
					  &key_names, NULL, &nkeys);
	if (nkeys < 1 || nkeys > INDEX_MAX_KEYS)
		elog(ERROR, "invalid key in registration of \"%s\"",
			 RelationGetRelationName(rel));
	opts->nkeys = nkeys;
	for (int i = 0; i < nkeys; i++)
		opts->key_attnums[i] = resolve_column(rel,
											  NameStr(*DatumGetName(key_names[i])),
											  "key");
	opts->from_attnum = resolve_column(rel, SPI_getvalue(tuple, tupdesc, 2),
									   "valid_from");
	opts->to_attnum = resolve_column(rel, SPI_getvalue(tuple, tupdesc, 3),
									 "valid_to");
	opts->period_type = TupleDescAttr(RelationGetDescr(rel),
									  opts->from_attnum - 1)->atttypid;
	opts->period_typmod = TupleDescAttr(RelationGetDescr(rel),
										opts->from_attnum - 1)->atttypmod;
	unit = SPI_getvalue(tuple, tupdesc, 4);
	opts->unit = strcmp(unit, "year") == 0 ? ZL_UNIT_YEAR :
		strcmp(unit, "month") == 0 ? ZL_UNIT_MONTH : ZL_UNIT_DAY;
	opts->history_span = zl_span_from_interval(DatumGetIntervalP(SPI_getbinval(tuple, tupdesc, 5, &isnull)));
	opts->current_span = zl_span_from_interval(DatumGetIntervalP(SPI_getbinval(tuple, tupdesc, 6, &isnull)));
	opts->max_subgroups = DatumGetInt32(SPI_getbinval(tuple, tupdesc, 7, &isnull));

	/*
	 * register() stores the open end of timestamp and date tables as the
	 * wall-clock value at UTC, so it reads the same in every session.
	 */
	opts->open_end = DatumGetTimestampTz(SPI_getbinval(tuple, tupdesc, 8, &isnull));
	old = MemoryContextSwitchTo(result_context);
	opts->time_zone = pstrdup(SPI_getvalue(tuple, tupdesc, 9));
	MemoryContextSwitchTo(old);
	opts->zone_is_utc = (pg_strcasecmp(opts->time_zone, "UTC") == 0);
	{
		Datum		horizon = SPI_getbinval(tuple, tupdesc, 10, &isnull);

		opts->late_horizon = isnull ? 0 : zl_span_from_interval(DatumGetIntervalP(horizon)).usecs;
	}
	{
		Datum		tracked = SPI_getbinval(tuple, tupdesc, 11, &isnull);
		Datum	   *names;
		int			nnames;

		memset(opts->tracked, 0, sizeof(opts->tracked));
		deconstruct_array(DatumGetArrayTypeP(tracked), TEXTOID, -1, false, TYPALIGN_INT,
						  &names, NULL, &nnames);
		opts->some_untracked = nnames > 0;
		for (int i = 0; i < nnames; i++)
		{
			AttrNumber	attnum = resolve_column(rel, TextDatumGetCString(names[i]), "tracked");

			opts->tracked[(attnum - 1) >> 3] |= 1 << ((attnum - 1) & 7);
		}
	}
	opts->history_format = strcmp(SPI_getvalue(tuple, tupdesc, 12), "columnar") == 0 ?
		ZL_FORMAT_COLUMNAR : ZL_FORMAT_ROWS;
	{
		Datum		cut = SPI_getbinval(tuple, tupdesc, 13, &isnull);

		opts->history_cut = isnull ? ZL_NO_HISTORY_CUT : DatumGetTimestampTz(cut);
	}
	{
		Datum		keep = SPI_getbinval(tuple, tupdesc, 14, &isnull);

		opts->has_retention = !isnull;
		if (!isnull)
			opts->retention = *DatumGetIntervalP(keep);
	}
	if (pg_tzset(opts->time_zone) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("zipper table \"%s\" has an unknown time zone \"%s\"",
						RelationGetRelationName(rel), opts->time_zone),
				 errhint("Time zones of zipper tables are full names from pg_timezone_names.")));
}

/*
 * The registration of a table, false if it has none.  Readers take it from
 * the per-backend cache (invalidated with the table's relcache entry);
 * writers read the catalog with the latest snapshot.
 */
bool
zl_meta_load_options(Relation rel, ZLTableOptions *opts, bool for_write)
{
	ZLMetaSession session;
	Datum		values[1] = {ObjectIdGetDatum(RelationGetRelid(rel))};
	bool		found;

	if (!for_write && options_cache_fetch(RelationGetRelid(rel), opts))
		return true;

	memset(opts, 0, sizeof(*opts));
	opts->relid = RelationGetRelid(rel);
	meta_begin(&session);

	/*
	 * Writers hold the table's writer lock, which register() takes too:
	 * with the latest snapshot they see a registration committed after
	 * their transaction began, so no row of theirs goes unplaced.
	 */
	meta_exec(Q_LOAD_OPTIONS, values, NULL,
			  for_write ? GetLatestSnapshot() : InvalidSnapshot, true);
	found = (SPI_processed == 1);
	if (found)
		options_from_row(rel, SPI_tuptable->vals[0], SPI_tuptable->tupdesc, opts,
						 session.caller_context);
	meta_end(&session);
	if (found)
		options_cache_store(opts);
	return found;
}

/* ---------- sub-groups and masks ---------- */

/*
 * The file group the next sub-group of (partition, window) belongs to.
 * In the current partition a file group holding max_subgroups sub-groups
 * is closed and the next one opened (rollover); max_subgroups = 0 keeps
 * one file group per window, as history partitions do (their sub-groups
 * find it as they are inserted: zl_meta_history_insert).
 */
void
zl_meta_choose_file_group(uint64 storage_id, DateADT partition_end,
						  int64 window_start, int max_subgroups,
						  int64 *file_group, int32 *rollover_seq)
{
	ZLMetaSession session;
	Datum		values[3] = {
		Int64GetDatum((int64) storage_id),
		DateADTGetDatum(partition_end),
		TimestampTzGetDatum(window_start)
	};
	bool		need_new = true;

	*rollover_seq = 0;
	meta_begin(&session);
	/* read-write: see the sub-groups this flush has written already */
	meta_exec(Q_CURRENT_FILE_GROUP, values, NULL, InvalidSnapshot, false);
	if (SPI_processed == 1)
	{
		bool		isnull;

		*file_group = result_int64(0, 1);
		*rollover_seq = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 2, &isnull));
		need_new = (max_subgroups > 0 && result_int64(0, 3) >= max_subgroups);
		if (need_new)
			(*rollover_seq)++;
	}
	if (need_new)
	{
		meta_exec(Q_NEW_ID, NULL, NULL, InvalidSnapshot, false);
		*file_group = result_int64(0, 1);
	}
	meta_end(&session);
}

/* a sub-group row written: the metapage's change counter and autovacuum's */
static void
count_subgroups_written(Relation rel, int64 rows)
{
	zl_storage_count_metadata_change(rel);
	/* autovacuum visits a table after enough rows were written (README "Lifecycle") */
	pgstat_count_heap_insert(rel, rows);
}

/* insert a sub-group's row, into sg->file_group at rollover_seq */
int64
zl_meta_insert_subgroup(Relation rel, const ZLSubGroup *sg, int32 rollover_seq,
						const bytea *key_directory)
{
	ZLMetaSession session;
	Datum		values[11];
	char		nulls[11];
	int64		subgroup_id;

	memset(nulls, ' ', sizeof(nulls));
	values[0] = Int64GetDatum((int64) zl_storage_id(rel));
	values[1] = Int64GetDatum(sg->file_group);
	values[2] = Int32GetDatum(rollover_seq);
	values[3] = DateADTGetDatum(sg->partition_end);
	values[4] = TimestampTzGetDatum(sg->window_start);
	values[5] = TimestampTzGetDatum(sg->first_start);
	values[6] = TimestampTzGetDatum(sg->last_start);
	values[7] = Int64GetDatum(sg->row_count);
	values[8] = Int64GetDatum((int64) sg->first_block);
	values[9] = Int32GetDatum(sg->blocks);
	values[10] = PointerGetDatum(key_directory);
	if (key_directory == NULL)
		nulls[10] = 'n';
	if (!sg->placed)
		nulls[3] = nulls[4] = nulls[5] = nulls[6] = 'n';

	meta_begin(&session);
	meta_exec(sg->format == ZL_FORMAT_COLUMNAR ? Q_INSERT_COLUMNAR_SUBGROUP : Q_INSERT_SUBGROUP,
			  values, nulls, InvalidSnapshot, false);
	subgroup_id = result_int64(0, 1);
	meta_end(&session);
	count_subgroups_written(rel, sg->row_count);
	return subgroup_id;
}

/*
 * The sub-groups of history partitions a write makes wait here and go to
 * the catalog together (INSERT_HISTORY_SUBGROUPS): up to
 * HISTORY_INSERTS_MAX at once, fewer when their key directories reach
 * HISTORY_INSERTS_BYTES, so what waits stays small whatever the write.
 * They join their windows' file groups as they are inserted.
 */
#define HISTORY_INSERTS_MAX		256
#define HISTORY_INSERTS_BYTES	(256 * 1024)

enum
{
	H_PARTITION_END,
	H_WINDOW_START,
	H_FIRST_START,
	H_LAST_START,
	H_ROW_COUNT,
	H_FIRST_BLOCK,
	H_BLOCKS,
	H_DIRECTORY,
	H_COLUMNS
};

struct ZLHistoryInserts
{
	Relation	rel;
	char		format;			/* of the sub-groups waiting */
	int			n;
	Size		directory_bytes;
	int64		rows;
	Datum		columns[H_COLUMNS][HISTORY_INSERTS_MAX];
};

ZLHistoryInserts *
zl_meta_history_inserts_begin(Relation rel)
{
	ZLHistoryInserts *h = palloc(sizeof(ZLHistoryInserts));

	h->rel = rel;
	h->n = 0;
	h->directory_bytes = 0;
	h->rows = 0;
	return h;
}

/* insert the sub-groups waiting */
void
zl_meta_history_inserts_flush(ZLHistoryInserts *h)
{
	static const Oid types[H_COLUMNS] = {
		DATEOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID,
		INT8OID, INT8OID, INT4OID, BYTEAOID
	};
	ZLMetaSession session;
	Datum		values[1 + H_COLUMNS];

	if (h->n == 0)
		return;
	values[0] = Int64GetDatum((int64) zl_storage_id(h->rel));
	for (int c = 0; c < H_COLUMNS; c++)
	{
		int16		typlen;
		bool		typbyval;
		char		typalign;

		get_typlenbyvalalign(types[c], &typlen, &typbyval, &typalign);
		values[1 + c] = PointerGetDatum(construct_array(h->columns[c], h->n, types[c],
														typlen, typbyval, typalign));
	}
	meta_begin(&session);
	meta_exec(h->format == ZL_FORMAT_COLUMNAR ?
			  Q_INSERT_HISTORY_COLUMNAR_SUBGROUPS : Q_INSERT_HISTORY_SUBGROUPS,
			  values, NULL, InvalidSnapshot, false);
	meta_end(&session);
	count_subgroups_written(h->rel, h->rows);

	for (int c = 0; c < H_COLUMNS; c++)
		pfree(DatumGetPointer(values[1 + c]));
	for (int i = 0; i < h->n; i++)
		pfree(DatumGetPointer(h->columns[H_DIRECTORY][i]));
	h->n = 0;
	h->directory_bytes = 0;
	h->rows = 0;
}

/* a placed sub-group of a history partition, to insert; takes its directory */
void
zl_meta_history_insert(ZLHistoryInserts *h, const ZLSubGroup *sg, bytea *key_directory)
{
	int			i;

	Assert(sg->placed && sg->partition_end != ZL_CURRENT_PARTITION && key_directory);
	if (h->n > 0 && (h->n == HISTORY_INSERTS_MAX || h->format != sg->format ||
					 h->directory_bytes + VARSIZE(key_directory) > HISTORY_INSERTS_BYTES))
		zl_meta_history_inserts_flush(h);
	i = h->n++;
	h->format = sg->format;
	h->columns[H_PARTITION_END][i] = DateADTGetDatum(sg->partition_end);
	h->columns[H_WINDOW_START][i] = TimestampTzGetDatum(sg->window_start);
	h->columns[H_FIRST_START][i] = TimestampTzGetDatum(sg->first_start);
	h->columns[H_LAST_START][i] = TimestampTzGetDatum(sg->last_start);
	h->columns[H_ROW_COUNT][i] = Int64GetDatum(sg->row_count);
	h->columns[H_FIRST_BLOCK][i] = Int64GetDatum((int64) sg->first_block);
	h->columns[H_BLOCKS][i] = Int32GetDatum(sg->blocks);
	h->columns[H_DIRECTORY][i] = PointerGetDatum(key_directory);
	h->directory_bytes += VARSIZE(key_directory);
	h->rows += sg->row_count;
}

/* insert what waits, and free */
void
zl_meta_history_inserts_end(ZLHistoryInserts *h)
{
	zl_meta_history_inserts_flush(h);
	pfree(h);
}

/*
 * Delete a sub-group's row and masks; its blocks become a free extent that
 * zl_freespace.c reuses once no snapshot can see the sub-group any more.
 */
void
zl_meta_delete_subgroup(Relation rel, int64 subgroup_id)
{
	ZLMetaSession session;
	Datum		values[2] = {Int64GetDatum((int64) zl_storage_id(rel)), Int64GetDatum(subgroup_id)};

	meta_begin(&session);
	meta_exec(Q_DELETE_SUBGROUP_MASKS, values, NULL, InvalidSnapshot, false);
	meta_exec(Q_DELETE_SUBGROUP, values, NULL, InvalidSnapshot, false);
	meta_end(&session);
	zl_storage_count_metadata_change(rel);
}

/* ---------- free extents (zl_freespace.c) ---------- */

/* the free extents of a storage visible to the snapshot, by first block */
ZLFreeExtent *
zl_meta_load_free_extents(uint64 storage_id, Snapshot snapshot, int *nextents)
{
	ZLMetaSession session;
	Datum		values[1] = {Int64GetDatum((int64) storage_id)};
	ZLFreeExtent *extents = NULL;

	meta_begin(&session);
	meta_exec(Q_LOAD_FREE_EXTENTS, values, NULL, snapshot, true);
	*nextents = (int) SPI_processed;
	if (*nextents > 0)
		extents = MemoryContextAlloc(session.caller_context, sizeof(ZLFreeExtent) * *nextents);
	for (int i = 0; i < *nextents; i++)
	{
		bool		isnull;

		extents[i].first_block = (BlockNumber) result_int64(i, 1);
		extents[i].blocks = (BlockNumber) DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
																	  SPI_tuptable->tupdesc,
																	  2, &isnull));
		extents[i].freed_by = FullTransactionIdFromU64((uint64) result_int64(i, 3));
	}
	meta_end(&session);
	return extents;
}

/* record block ranges as free, reusable once freed_by is old enough */
void
zl_meta_insert_free_extents(uint64 storage_id, const ZLFreeExtent *extents, int nextents,
							FullTransactionId freed_by)
{
	ZLMetaSession session;
	Datum	   *firsts;
	Datum	   *counts;
	Datum		values[4];

	if (nextents == 0)
		return;
	meta_begin(&session);
	firsts = palloc(sizeof(Datum) * nextents);
	counts = palloc(sizeof(Datum) * nextents);
	for (int i = 0; i < nextents; i++)
	{
		firsts[i] = Int64GetDatum((int64) extents[i].first_block);
		counts[i] = Int32GetDatum((int32) extents[i].blocks);
	}
	values[0] = Int64GetDatum((int64) storage_id);
	values[1] = PointerGetDatum(construct_array(firsts, nextents, INT8OID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[2] = PointerGetDatum(construct_array(counts, nextents, INT4OID, sizeof(int32),
												true, TYPALIGN_INT));
	values[3] = Int64GetDatum((int64) U64FromFullTransactionId(freed_by));
	meta_exec(Q_INSERT_FREE_EXTENTS, values, NULL, InvalidSnapshot, false);
	meta_end(&session);
}

/*
 * Take the free blocks of n disjoint ranges that do not touch: blocks[i]
 * from first_blocks[i] on, which free extents that touch must cover; what
 * the last of them holds beyond a range stays free.  One statement.
 */
void
zl_meta_take_free_extents(uint64 storage_id, int n, const BlockNumber *first_blocks,
						  const BlockNumber *blocks)
{
	ZLMetaSession session;
	Datum	   *firsts;
	Datum	   *counts;
	Datum		values[3];
	int64		total = 0;

	if (n == 0)
		return;
	firsts = palloc(sizeof(Datum) * n);
	counts = palloc(sizeof(Datum) * n);
	for (int i = 0; i < n; i++)
	{
		firsts[i] = Int64GetDatum((int64) first_blocks[i]);
		counts[i] = Int32GetDatum((int32) blocks[i]);
		total += blocks[i];
	}
	values[0] = Int64GetDatum((int64) storage_id);
	values[1] = PointerGetDatum(construct_array(firsts, n, INT8OID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[2] = PointerGetDatum(construct_array(counts, n, INT4OID, sizeof(int32),
												true, TYPALIGN_INT));
	meta_begin(&session);
	meta_exec(Q_TAKE_FREE_EXTENTS, values, NULL, InvalidSnapshot, false);
	if (result_int64(0, 1) != total)
		elog(ERROR, "free extents of storage " UINT64_FORMAT " do not cover the %d block ranges taken from block %u on",
			 storage_id, n, first_blocks[0]);
	meta_end(&session);
}

void
zl_meta_take_free_extent(uint64 storage_id, BlockNumber first_block, BlockNumber blocks)
{
	zl_meta_take_free_extents(storage_id, 1, &first_block, &blocks);
}

/*
 * Append one mask row per sub-group, all in one statement: masks[i] lists
 * the row positions newly deleted from sub-group subgroup_ids[i].
 */
void
zl_meta_insert_masks(Relation rel, int nmasks, const int64 *subgroup_ids,
					 int32 *const *positions, const int *npositions)
{
	ZLMetaSession session;
	Datum	   *ids = palloc(sizeof(Datum) * Max(nmasks, 1));
	Datum	   *firsts = palloc(sizeof(Datum) * Max(nmasks, 1));
	Datum	   *lasts = palloc(sizeof(Datum) * Max(nmasks, 1));
	Datum	   *all;
	int			nall = 0;
	Datum		values[5];

	if (nmasks == 0)
		return;
	/* every mask's positions in one array; each mask takes a slice of it */
	for (int i = 0; i < nmasks; i++)
		nall += npositions[i];
	all = palloc(sizeof(Datum) * Max(nall, 1));
	nall = 0;
	for (int i = 0; i < nmasks; i++)
	{
		ids[i] = Int64GetDatum(subgroup_ids[i]);
		firsts[i] = Int32GetDatum(nall + 1);
		for (int k = 0; k < npositions[i]; k++)
			all[nall++] = Int32GetDatum(positions[i][k]);
		lasts[i] = Int32GetDatum(nall);
	}
	values[0] = Int64GetDatum((int64) zl_storage_id(rel));
	values[1] = PointerGetDatum(construct_array(ids, nmasks, INT8OID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[2] = PointerGetDatum(construct_array(all, nall, INT4OID, sizeof(int32), true,
												TYPALIGN_INT));
	values[3] = PointerGetDatum(construct_array(firsts, nmasks, INT4OID, sizeof(int32), true,
												TYPALIGN_INT));
	values[4] = PointerGetDatum(construct_array(lasts, nmasks, INT4OID, sizeof(int32), true,
												TYPALIGN_INT));
	meta_begin(&session);
	meta_exec(Q_INSERT_MASK, values, NULL, InvalidSnapshot, false);
	meta_end(&session);
	zl_storage_count_metadata_change(rel);
}

/* ---------- the change record (zl_record.c) ---------- */

/* false while the extension's catalog is 0.1's, which has no change record */
bool
zl_meta_record_exists(void)
{
	Oid			nspid = get_namespace_oid(ZL_SCHEMA, false);

	return OidIsValid(get_relname_relid("record_head", nspid));
}

/*
 * The segments of a table's record that hold entries of key hashes in
 * [hash_lo, hash_hi] and an instant at or after newest_from, oldest piece
 * first.
 */
ZLRecordSegment *
zl_meta_record_segments(Oid relid, Snapshot snapshot, uint32 hash_lo, uint32 hash_hi,
						int64 newest_from, int *nsegments)
{
	ZLMetaSession session;
	Datum		values[4];
	ZLRecordSegment *segments = NULL;

	values[0] = ObjectIdGetDatum(relid);
	values[1] = Int64GetDatum((int64) hash_lo);
	values[2] = Int64GetDatum((int64) hash_hi);
	values[3] = Int64GetDatum(newest_from);
	meta_begin(&session);
	meta_exec(Q_RECORD_SEGMENTS, values, NULL, snapshot, true);
	*nsegments = (int) SPI_processed;
	if (*nsegments > 0)
		segments = MemoryContextAlloc(session.caller_context,
									  sizeof(ZLRecordSegment) * *nsegments);
	for (int i = 0; i < *nsegments; i++)
	{
		bool		isnull;

		segments[i].piece = result_int64(i, 1);
		segments[i].segment = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
														  SPI_tuptable->tupdesc, 2, &isnull));
		segments[i].bytes = 0;
	}
	meta_end(&session);
	return segments;
}

/* the entries of one segment, detoasted into the caller's memory */
bytea *
zl_meta_record_entries(Oid relid, Snapshot snapshot, int64 piece, int32 segment)
{
	ZLMetaSession session;
	Datum		values[3];
	bytea	   *entries = NULL;

	values[0] = ObjectIdGetDatum(relid);
	values[1] = Int64GetDatum(piece);
	values[2] = Int32GetDatum(segment);
	meta_begin(&session);
	meta_exec(Q_RECORD_ENTRIES, values, NULL, snapshot, true);
	if (SPI_processed == 1)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		MemoryContext old = MemoryContextSwitchTo(session.caller_context);

		entries = DatumGetByteaPCopy(d);
		MemoryContextSwitchTo(old);
	}
	meta_end(&session);
	if (entries == NULL)
		elog(ERROR, "change record segment " INT64_FORMAT "/%d of relation %u is missing",
			 piece, segment, relid);
	return entries;
}

/* the pieces of a table's record, oldest first, with their bytes (latest snapshot) */
ZLRecordSegment *
zl_meta_record_pieces(Oid relid, int *npieces)
{
	ZLMetaSession session;
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	ZLRecordSegment *pieces = NULL;

	meta_begin(&session);
	meta_exec(Q_RECORD_PIECES, values, NULL, GetLatestSnapshot(), true);
	*npieces = (int) SPI_processed;
	if (*npieces > 0)
		pieces = MemoryContextAlloc(session.caller_context, sizeof(ZLRecordSegment) * *npieces);
	for (int i = 0; i < *npieces; i++)
	{
		pieces[i].piece = result_int64(i, 1);
		pieces[i].segment = 0;
		pieces[i].bytes = result_int64(i, 2);
	}
	meta_end(&session);
	return pieces;
}

int64
zl_meta_new_id(void)
{
	ZLMetaSession session;
	int64		id;

	meta_begin(&session);
	meta_exec(Q_NEW_ID, NULL, NULL, InvalidSnapshot, false);
	id = result_int64(0, 1);
	meta_end(&session);
	return id;
}

void
zl_meta_record_insert(Oid relid, int64 piece, int32 segment, uint32 hash_lo, uint32 hash_hi,
					  int64 newest, int64 instants, bytea *entries)
{
	ZLMetaSession session;
	Datum		values[8];

	values[0] = ObjectIdGetDatum(relid);
	values[1] = Int64GetDatum(piece);
	values[2] = Int32GetDatum(segment);
	values[3] = Int64GetDatum((int64) hash_lo);
	values[4] = Int64GetDatum((int64) hash_hi);
	values[5] = Int64GetDatum(newest);
	values[6] = Int64GetDatum(instants);
	values[7] = PointerGetDatum(entries);
	meta_begin(&session);
	meta_exec(Q_RECORD_INSERT, values, NULL, InvalidSnapshot, false);
	meta_end(&session);
}

void
zl_meta_record_delete_piece(Oid relid, int64 piece)
{
	ZLMetaSession session;
	Datum		values[2] = {ObjectIdGetDatum(relid), Int64GetDatum(piece)};

	meta_begin(&session);
	meta_exec(Q_RECORD_DELETE_PIECE, values, NULL, InvalidSnapshot, false);
	meta_end(&session);
}

/* the newest change time applied and the table's instants; false if none */
bool
zl_meta_record_head(Oid relid, Snapshot snapshot, int64 *newest_change,
					ZLTableInstant **instants, int *ninstants)
{
	ZLMetaSession session;
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		found;

	*newest_change = PG_INT64_MIN;
	*instants = NULL;
	*ninstants = 0;
	meta_begin(&session);
	meta_exec(Q_RECORD_HEAD, values, NULL, snapshot, true);
	found = SPI_processed == 1;
	if (found)
	{
		bool		isnull;
		Datum	   *times;
		Datum	   *seqs;
		bool	   *seq_nulls;
		int			ntimes,
					nseqs;

		*newest_change = result_int64(0, 1);
		deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(SPI_tuptable->vals[0],
														   SPI_tuptable->tupdesc, 2, &isnull)),
						  TIMESTAMPTZOID, sizeof(int64), true, TYPALIGN_DOUBLE,
						  &times, NULL, &ntimes);
		deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(SPI_tuptable->vals[0],
														   SPI_tuptable->tupdesc, 3, &isnull)),
						  INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE,
						  &seqs, &seq_nulls, &nseqs);
		if (nseqs != ntimes)
			elog(ERROR, "zipper_lake.record_head of relation %u is damaged", relid);
		*instants = MemoryContextAlloc(session.caller_context, sizeof(ZLTableInstant) * Max(1, ntimes));
		for (int i = 0; i < ntimes; i++)
		{
			(*instants)[i].time = DatumGetInt64(times[i]);
			(*instants)[i].has_seq = !seq_nulls[i];
			(*instants)[i].seq = seq_nulls[i] ? 0 : DatumGetInt64(seqs[i]);
		}
		*ninstants = ntimes;
	}
	meta_end(&session);
	return found;
}

/* the newest change time (only ever grows) and the table's instants, sorted */
void
zl_meta_record_save_head(Oid relid, int64 newest_change, const ZLTableInstant *instants,
						 int ninstants)
{
	ZLMetaSession session;
	Datum		values[4];
	Datum	   *times = palloc(sizeof(Datum) * Max(1, ninstants));
	Datum	   *seqs = palloc(sizeof(Datum) * Max(1, ninstants));
	bool	   *seq_nulls = palloc(sizeof(bool) * Max(1, ninstants));
	int			dims[1] = {ninstants};
	int			lbs[1] = {1};

	for (int i = 0; i < ninstants; i++)
	{
		times[i] = Int64GetDatum(instants[i].time);
		seqs[i] = Int64GetDatum(instants[i].seq);
		seq_nulls[i] = !instants[i].has_seq;
	}
	values[0] = ObjectIdGetDatum(relid);
	values[1] = Int64GetDatum(newest_change);
	values[2] = PointerGetDatum(construct_md_array(times, NULL, 1, dims, lbs, TIMESTAMPTZOID,
												   sizeof(int64), true, TYPALIGN_DOUBLE));
	values[3] = PointerGetDatum(construct_md_array(seqs, seq_nulls, 1, dims, lbs, INT8OID,
												   sizeof(int64), true, TYPALIGN_DOUBLE));
	meta_begin(&session);
	meta_exec(Q_RECORD_SAVE_HEAD, values, NULL, InvalidSnapshot, false);
	meta_end(&session);
}

/* TRUNCATE, DROP, SET ACCESS METHOD: the record goes with the rows */
void
zl_meta_record_forget(Oid relid)
{
	ZLMetaSession session;
	Datum		values[1] = {ObjectIdGetDatum(relid)};

	if (!zl_meta_record_exists())
		return;
	meta_begin(&session);
	meta_exec(Q_RECORD_FORGET, values, NULL, InvalidSnapshot, false);
	meta_end(&session);
}

/* VACUUM VERBOSE: the size of a table's record */
void
zl_meta_record_size(Oid relid, int64 *pieces, int64 *instants, int64 *bytes)
{
	ZLMetaSession session;
	Datum		values[1] = {ObjectIdGetDatum(relid)};

	meta_begin(&session);
	meta_exec(Q_RECORD_SIZE, values, NULL, GetTransactionSnapshot(), true);
	*pieces = result_int64(0, 1);
	*instants = result_int64(0, 2);
	*bytes = result_int64(0, 3);
	meta_end(&session);
}

/*
 * inspect_record(): a row per piece of a table's record (piece, segments,
 * hash range, newest instant, instants, bytes) into the result of a
 * materialized set-returning function; the caller checked SELECT on the
 * table.
 */
void
zl_meta_record_inspect(Oid relid, ReturnSetInfo *rsinfo)
{
	ZLMetaSession session;
	Datum		values[1] = {ObjectIdGetDatum(relid)};

	meta_begin(&session);
	meta_exec(Q_RECORD_INSPECT, values, NULL, GetActiveSnapshot(), true);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum		row[7];
		bool		nulls[7];

		heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, row, nulls);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, nulls);
	}
	meta_end(&session);
}
