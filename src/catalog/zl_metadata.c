/*-------------------------------------------------------------------------
 *
 * zl_metadata.c
 *	  The extension's catalog: how it works, its statements, and the
 *	  privileged session they run in.
 *
 * The functions of each catalog table are in a file of their own:
 * zl_meta_registration.c (storages, registrations), zl_meta_subgroup.c
 * (sub-groups, masks), zl_meta_freespace.c (free extents) and
 * zl_meta_record.c (the change record); the hot reads are zl_metaread.c's
 * and zl_metacache.c's.
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
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog_internal.h"

#include "access/htup_details.h"
#include "access/transam.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "access/xact.h"
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

typedef struct ZLMetaQueryDef
{
	const char *sql;
	int			nargs;
	Oid			argtypes[13];
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
 * A history window keeps one file group: each window's, looked up once by
 * its start, or opened (a new id, taken before the sub-groups' ids) if it
 * has none, so sub-groups of one window in one statement share it; ids
 * follow the order of the arrays.  The writer chose the windows
 * (zl_place.c, "File-group windows"), and their ends ($10) go to catalogs
 * that have window_end (0.2).
 */
#define INSERT_HISTORY_SUBGROUPS(more_columns, more_values) \
	INSERT_HISTORY_SUBGROUPS_FROM("", "", more_columns, more_values)
#define INSERT_HISTORY_SUBGROUPS_FROM(more_arrays, more_names, more_columns, more_values) \
	"WITH s AS (SELECT * FROM unnest($2::date[], $3::timestamptz[], $4::timestamptz[]," \
	" $5::timestamptz[], $6::int8[], $7::int8[], $8::int4[], $9::bytea[], $10::timestamptz[]" \
	more_arrays ") WITH ORDINALITY AS s(partition_end, window_start, first_start, last_start," \
	" row_count, first_block, blocks, key_directory, window_end" more_names ", ord))," \
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
	TIMESTAMPTZARRAYOID, INT8ARRAYOID, INT8ARRAYOID, INT4ARRAYOID, BYTEAARRAYOID, \
	TIMESTAMPTZARRAYOID
#define INSERT_SUBGROUP_TYPES \
	INT8OID, INT8OID, INT4OID, DATEOID, TIMESTAMPTZOID, TIMESTAMPTZOID, \
	TIMESTAMPTZOID, INT8OID, INT8OID, INT4OID, BYTEAOID

/* an option set on a zipper parent is set on its leaves too (zl_parent.c) */
#define LEAVES_TOO \
	" OR tbl IN (SELECT i.inhrelid FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class c" \
	" ON c.oid = i.inhrelid WHERE i.inhparent = $1 AND c.relispartition)"

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
	/* catalogs that number rows (zl_meta_has_tids) have format and window_end */
	[Q_INSERT_NUMBERED_SUBGROUP] = {
		INSERT_SUBGROUP(", format, first_tid_block)", ", $12, $13)"), 13,
		{INSERT_SUBGROUP_TYPES, CHAROID, INT8OID}
	},
	/* 0.1's catalog has neither window_end nor format */
	[Q_INSERT_HISTORY_SUBGROUPS] = {
		INSERT_HISTORY_SUBGROUPS(")", ""), 10, {INSERT_HISTORY_SUBGROUPS_TYPES}
	},
	[Q_INSERT_HISTORY_WIDE_SUBGROUPS] = {
		INSERT_HISTORY_SUBGROUPS(", window_end)", ", s.window_end"), 10,
		{INSERT_HISTORY_SUBGROUPS_TYPES}
	},
	[Q_INSERT_HISTORY_COLUMNAR_SUBGROUPS] = {
		INSERT_HISTORY_SUBGROUPS(", window_end, format)", ", s.window_end, 'c'"), 10,
		{INSERT_HISTORY_SUBGROUPS_TYPES}
	},
	[Q_INSERT_HISTORY_NUMBERED_SUBGROUPS] = {
		INSERT_HISTORY_SUBGROUPS_FROM(", $11::int8[]", ", first_tid_block",
									  ", window_end, format, first_tid_block)",
									  ", s.window_end, $12, s.first_tid_block"), 12,
		{INSERT_HISTORY_SUBGROUPS_TYPES, INT8ARRAYOID, CHAROID}
	},
	/* the first TID block after every sub-group's (zl_subgroup_tid_blocks) */
	[Q_TID_BLOCKS_USED] = {
		"SELECT coalesce(max(first_tid_block + greatest(CASE format WHEN 'c'"
		" THEN (row_count + 290) / 291 ELSE blocks END, 1)), 0)"
		" FROM zipper_lake.subgroup WHERE storage_id = $1",
		1, {INT8OID}
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
	[Q_INSERT_MASK_ARRAY] = {
		"INSERT INTO zipper_lake.mask (storage_id, subgroup_id, positions) VALUES ($1, $2, $3)",
		3, {INT8OID, INT8OID, INT4ARRAYOID}
	},
	[Q_INSERT_MASK] = {
		"INSERT INTO zipper_lake.mask (storage_id, subgroup_id, positions)"
		" SELECT $1, u.subgroup_id, u.positions FROM unnest($2, $3) AS u(subgroup_id, positions)",
		3, {INT8OID, INT8ARRAYOID, BYTEAARRAYOID}
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
		"UPDATE zipper_lake.registration SET late_horizon = $2 WHERE tbl = $1" LEAVES_TOO,
		2, {OIDOID, INTERVALOID}
	},
	[Q_SET_TRACK_COLUMNS] = {
		"UPDATE zipper_lake.registration SET track_columns = $2 WHERE tbl = $1" LEAVES_TOO,
		2, {OIDOID, NAMEARRAYOID}
	},
	[Q_SET_HISTORY_FORMAT] = {
		"UPDATE zipper_lake.registration SET history_format = $2 WHERE tbl = $1" LEAVES_TOO,
		2, {OIDOID, TEXTOID}
	},
	[Q_SET_RETENTION] = {
		"UPDATE zipper_lake.registration SET retention = $2 WHERE tbl = $1" LEAVES_TOO,
		2, {OIDOID, INTERVALOID}
	},
	[Q_RAISE_HISTORY_CUT] = {
		"UPDATE zipper_lake.registration SET history_cut = greatest(history_cut, $2)"
		" WHERE tbl = $1",
		2, {OIDOID, TIMESTAMPTZOID}
	},
	/* a zipper parent's leaf takes the parent's registration (zl_parent.c) */
	[Q_COPY_REGISTRATION] = {
		"INSERT INTO zipper_lake.registration (tbl, key, valid_from, valid_to,"
		" partition_unit, history_group_span, current_group_span, max_subgroups,"
		" open_end, time_zone, late_horizon, track_columns, history_format,"
		" history_cut, retention)"
		" SELECT $2, key, valid_from, valid_to, partition_unit, history_group_span,"
		" current_group_span, max_subgroups, open_end, time_zone, late_horizon,"
		" track_columns, history_format, history_cut, retention"
		" FROM zipper_lake.registration WHERE tbl = $1",
		2, {OIDOID, OIDOID}
	},
	/* do two registrations name the same columns, options and history cut? */
	[Q_SAME_REGISTRATION] = {
		"SELECT 1 FROM zipper_lake.registration a, zipper_lake.registration b"
		" WHERE a.tbl = $1 AND b.tbl = $2 AND (a.key, a.valid_from, a.valid_to,"
		" a.partition_unit, a.history_group_span, a.current_group_span,"
		" a.max_subgroups, a.open_end, a.time_zone, a.late_horizon, a.track_columns,"
		" a.history_format, a.retention, a.history_cut) IS NOT DISTINCT FROM (b.key, b.valid_from,"
		" b.valid_to, b.partition_unit, b.history_group_span, b.current_group_span,"
		" b.max_subgroups, b.open_end, b.time_zone, b.late_horizon, b.track_columns,"
		" b.history_format, b.retention, b.history_cut)",
		2, {OIDOID, OIDOID}
	},
	/*
	 * a registration as text, but for its table, to compare with a shard's
	 * (zl_parent.c: under fixed TimeZone and IntervalStyle on both sides)
	 */
	[Q_REGISTRATION_TEXT] = {
		"SELECT (pg_catalog.to_jsonb(r) OPERATOR(pg_catalog.-) 'tbl'::pg_catalog.text)::pg_catalog.text"
		" FROM zipper_lake.registration r WHERE tbl = $1",
		1, {OIDOID}
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
	[Q_RECORD_SEGMENT_ROW] = {
		"SELECT piece, segment, hash_lo, hash_hi, newest, instants, entries FROM zipper_lake.record_segment"
		" WHERE tbl = $1 AND piece = $2 AND segment = $3",
		3, {OIDOID, INT8OID, INT4OID}
	},
	/* a copied piece keeps its id: later pieces must come after it */
	[Q_RECORD_RESERVE_PIECE] = {
		"SELECT pg_catalog.setval('zipper_lake.id_seq', greatest(last_value, $1))"
		" FROM zipper_lake.id_seq",
		1, {INT8OID}
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
	[Q_CATALOG_BYTES] = {
		"WITH s AS (SELECT storage_id FROM zipper_lake.storage WHERE relid = $1),"
		" g AS (SELECT pg_column_size(g.*) AS whole, pg_column_size(g.key_directory) AS kd"
		"       FROM zipper_lake.subgroup g WHERE storage_id IN (SELECT storage_id FROM s))"
		" SELECT part, coalesce(bytes, 0)::int8 FROM ("
		" SELECT 1, 'sub-group rows', sum(whole - coalesce(kd, 0)) FROM g"
		" UNION ALL SELECT 2, 'key directories', sum(kd) FROM g"
		" UNION ALL SELECT 3, 'masks', sum(pg_column_size(m.*)) FROM zipper_lake.mask m"
		"  WHERE storage_id IN (SELECT storage_id FROM s)"
		" UNION ALL SELECT 4, 'free extent rows', sum(pg_column_size(f.*)) FROM zipper_lake.free_extent f"
		"  WHERE storage_id IN (SELECT storage_id FROM s)"
		" UNION ALL SELECT 5, 'change record', (SELECT sum(pg_column_size(r.*)) FROM zipper_lake.record_segment r"
		"  WHERE tbl = $1) + coalesce((SELECT sum(pg_column_size(h.*)) FROM zipper_lake.record_head h"
		"  WHERE tbl = $1), 0)"
		" UNION ALL SELECT 6, 'registration', coalesce((SELECT sum(pg_column_size(r.*)) FROM zipper_lake.registration r"
		"  WHERE tbl = $1), 0) + (SELECT sum(pg_column_size(t.*)) FROM zipper_lake.storage t WHERE relid = $1)"
		" UNION ALL SELECT 7, 'free extent blocks', sum(blocks) FROM zipper_lake.free_extent"
		"  WHERE storage_id IN (SELECT storage_id FROM s)"
		" ) p(ord, part, bytes) ORDER BY ord",
		1, {OIDOID}
	},
	[Q_TIME_ZONE_EXISTS] = {
		"SELECT 1 FROM pg_timezone_names WHERE name = $1", 1, {TEXTOID}
	},
};

static SPIPlanPtr meta_plans[Q_COUNT];

/* true while one of the statements above runs (zl_meta_statement_running) */
static bool meta_statement_running = false;

/* start a session: as the catalog's owner, search_path pg_catalog, SPI */
void
zl_meta_begin(ZLMetaSession *session)
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

/* end it: SPI's memory goes, the caller's identity and settings come back */
void
zl_meta_end(ZLMetaSession *session)
{
	SPI_finish();
	AtEOXact_GUC(true, session->guc_nest_level);
	SetUserIdAndSecContext(session->save_userid, session->save_sec_context);
}

/*
 * Is one of the catalog statements of this file running?  The end of
 * such a statement does not flush the rows writers left pending (zl_executor.c):
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
int
zl_meta_exec(ZLMetaQuery query, Datum *values, const char *nulls,
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

/* one statement that writes, in a session of its own, as any statement would */
void
zl_meta_run(ZLMetaQuery query, Datum *values, const char *nulls)
{
	ZLMetaSession session;

	zl_meta_begin(&session);
	zl_meta_exec(query, values, nulls, InvalidSnapshot, false);
	zl_meta_end(&session);
}

/* one statement in a session of its own: the int8 its first row begins with */
int64
zl_meta_run_int64(ZLMetaQuery query, Datum *values)
{
	ZLMetaSession session;
	int64		result;

	zl_meta_begin(&session);
	zl_meta_exec(query, values, NULL, InvalidSnapshot, false);
	result = zl_meta_result_int64(0, 1);
	zl_meta_end(&session);
	return result;
}

/* an int8 column of a result row (1-based col); NULL reads as 0 */
int64
zl_meta_result_int64(int row, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc,
								  col, &isnull);

	return isnull ? 0 : DatumGetInt64(d);
}
