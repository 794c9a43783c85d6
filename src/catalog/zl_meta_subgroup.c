/*-------------------------------------------------------------------------
 *
 * zl_meta_subgroup.c
 *	  The catalog's sub-group and mask tables.
 *
 * A sub-group's row makes its pages visible (zl_metadata.c,
 * "Visibility"): rows of the current partition are inserted one by one
 * into the file group of their window (with rollover), those of history
 * partitions in batches; masks are appended, one row per sub-group per
 * statement; compaction and drop_history delete rows and masks, their
 * blocks becoming free extents.  Each write is counted on the metapage
 * (zl_storage.c) and in the table's statistics for autovacuum.  Reading
 * is zl_metaread.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog_internal.h"

#include "executor/spi.h"
#include "pgstat.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

/*
 * Rows masked or of a deleted sub-group: deleted for pgstat, as heap counts
 * its DELETEs and UPDATEs, so that autovacuum visits a table whose rows
 * changed, not only one that grew, and drops the index entries of hidden
 * rows (README "Lifecycle").  One call sets up the transaction's counts;
 * the rest are added at once (a dropped partition may hold millions).
 */
static void
count_rows_hidden(Relation rel, int64 rows)
{
	if (rows <= 0)
		return;
	pgstat_count_heap_delete(rel);
	if (rel->pgstat_info != NULL && rel->pgstat_info->trans != NULL)
		rel->pgstat_info->trans->tuples_deleted += rows - 1;
}

/*
 * Delete every sub-group of the history partitions up to last_partition,
 * with their masks, their blocks becoming free extents (as
 * zl_meta_delete_subgroup does one by one; live_rows: their rows not
 * masked); returns how many.
 */
int64
zl_meta_drop_partitions(Relation rel, DateADT last_partition, int64 live_rows)
{
	ZLMetaSession session;
	Datum		values[2] = {Int64GetDatum((int64) zl_storage_id(rel)),
		DateADTGetDatum(last_partition)};
	int64		dropped;

	Assert(last_partition != ZL_CURRENT_PARTITION);
	zl_meta_begin(&session);
	zl_meta_exec(Q_DROP_PARTITIONS, values, NULL, InvalidSnapshot, false);
	dropped = zl_meta_result_int64(0, 1);
	zl_meta_end(&session);
	zl_storage_count_metadata_change(rel);
	count_rows_hidden(rel, live_rows);
	return dropped;
}

/* does the storage hold a sub-group (the latest snapshot's)? */
bool
zl_meta_has_subgroups(uint64 storage_id)
{
	ZLMetaSession session;
	Datum		values[1] = {Int64GetDatum((int64) storage_id)};
	bool		found;

	zl_meta_begin(&session);
	zl_meta_exec(Q_HAS_SUBGROUPS, values, NULL, GetLatestSnapshot(), true);
	found = SPI_processed > 0;
	zl_meta_end(&session);
	return found;
}

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
	zl_meta_begin(&session);
	/* read-write: see the sub-groups this flush has written already */
	zl_meta_exec(Q_CURRENT_FILE_GROUP, values, NULL, InvalidSnapshot, false);
	if (SPI_processed == 1)
	{
		bool		isnull;

		*file_group = zl_meta_result_int64(0, 1);
		*rollover_seq = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 2, &isnull));
		need_new = (max_subgroups > 0 && zl_meta_result_int64(0, 3) >= max_subgroups);
		if (need_new)
			(*rollover_seq)++;
	}
	if (need_new)
	{
		zl_meta_exec(Q_NEW_ID, NULL, NULL, InvalidSnapshot, false);
		*file_group = zl_meta_result_int64(0, 1);
	}
	zl_meta_end(&session);
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
	Datum		values[13];
	char		nulls[13];
	int64		subgroup_id;
	ZLMetaQuery query = sg->format == ZL_FORMAT_COLUMNAR ? Q_INSERT_COLUMNAR_SUBGROUP :
		Q_INSERT_SUBGROUP;

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
	if (sg->first_tid_block >= 0)
	{
		query = Q_INSERT_NUMBERED_SUBGROUP;
		values[11] = CharGetDatum(sg->format);
		values[12] = Int64GetDatum(sg->first_tid_block);
	}

	zl_meta_begin(&session);
	zl_meta_exec(query, values, nulls, InvalidSnapshot, false);
	subgroup_id = zl_meta_result_int64(0, 1);
	zl_meta_end(&session);
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
	H_WINDOW_END,
	H_FIRST_TID_BLOCK,			/* catalogs that number rows */
	H_COLUMNS
};

struct ZLHistoryInserts
{
	Relation	rel;
	char		format;			/* of the sub-groups waiting */
	bool		numbered;		/* they have TIDs (first_tid_block >= 0) */
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
		INT8OID, INT8OID, INT4OID, BYTEAOID, TIMESTAMPTZOID, INT8OID
	};
	Datum		values[1 + H_COLUMNS + 1];
	int			columns = h->numbered ? H_COLUMNS : H_FIRST_TID_BLOCK;

	if (h->n == 0)
		return;
	values[0] = Int64GetDatum((int64) zl_storage_id(h->rel));
	for (int c = 0; c < columns; c++)
	{
		int16		typlen;
		bool		typbyval;
		char		typalign;

		get_typlenbyvalalign(types[c], &typlen, &typbyval, &typalign);
		values[1 + c] = PointerGetDatum(construct_array(h->columns[c], h->n, types[c],
														typlen, typbyval, typalign));
	}
	values[1 + H_COLUMNS] = CharGetDatum(h->format);
	zl_meta_run(h->numbered ? Q_INSERT_HISTORY_NUMBERED_SUBGROUPS :
				h->format == ZL_FORMAT_COLUMNAR ? Q_INSERT_HISTORY_COLUMNAR_SUBGROUPS :
				zl_meta_has_window_end() ? Q_INSERT_HISTORY_WIDE_SUBGROUPS :
				Q_INSERT_HISTORY_SUBGROUPS,
				values, NULL);
	count_subgroups_written(h->rel, h->rows);

	for (int c = 0; c < columns; c++)
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
					 h->numbered != (sg->first_tid_block >= 0) ||
					 h->directory_bytes + VARSIZE(key_directory) > HISTORY_INSERTS_BYTES))
		zl_meta_history_inserts_flush(h);
	i = h->n++;
	h->format = sg->format;
	h->numbered = sg->first_tid_block >= 0;
	h->columns[H_PARTITION_END][i] = DateADTGetDatum(sg->partition_end);
	h->columns[H_WINDOW_START][i] = TimestampTzGetDatum(sg->window_start);
	h->columns[H_FIRST_START][i] = TimestampTzGetDatum(sg->first_start);
	h->columns[H_LAST_START][i] = TimestampTzGetDatum(sg->last_start);
	h->columns[H_ROW_COUNT][i] = Int64GetDatum(sg->row_count);
	h->columns[H_FIRST_BLOCK][i] = Int64GetDatum((int64) sg->first_block);
	h->columns[H_BLOCKS][i] = Int32GetDatum(sg->blocks);
	h->columns[H_DIRECTORY][i] = PointerGetDatum(key_directory);
	h->columns[H_WINDOW_END][i] = TimestampTzGetDatum(sg->window_end);
	h->columns[H_FIRST_TID_BLOCK][i] = Int64GetDatum(sg->first_tid_block);
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
zl_meta_delete_subgroup(Relation rel, const ZLSubGroup *sg)
{
	ZLMetaSession session;
	Datum		values[2] = {Int64GetDatum((int64) zl_storage_id(rel)), Int64GetDatum(sg->subgroup_id)};

	count_rows_hidden(rel, sg->row_count - sg->masked_rows);

	zl_meta_begin(&session);
	zl_meta_exec(Q_DELETE_SUBGROUP_MASKS, values, NULL, InvalidSnapshot, false);
	zl_meta_exec(Q_DELETE_SUBGROUP, values, NULL, InvalidSnapshot, false);
	zl_meta_end(&session);
	zl_storage_count_metadata_change(rel);
}

/*
 * Append one mask row per sub-group, all in one statement: masks[i] lists
 * the row positions newly deleted from sub-group subgroup_ids[i].
 */
void
zl_meta_insert_masks(Relation rel, int nmasks, const int64 *subgroup_ids,
					 int32 *const *positions, const int *npositions)
{
	Datum	   *ids = palloc(sizeof(Datum) * Max(nmasks, 1));
	Datum	   *masks = palloc(sizeof(Datum) * Max(nmasks, 1));
	bool		compact = zl_mask_compact(zl_meta_catalog()->mask);
	Datum		values[3];

	if (nmasks == 0)
		return;
	for (int i = 0; i < nmasks; i++)
		count_rows_hidden(rel, npositions[i]);
	values[0] = Int64GetDatum((int64) zl_storage_id(rel));
	if (!compact)
	{
		/* 0.1's catalog, until ALTER EXTENSION UPDATE: an int[] a row */
		for (int i = 0; i < nmasks; i++)
		{
			Datum	   *elements = palloc(sizeof(Datum) * Max(npositions[i], 1));

			for (int k = 0; k < npositions[i]; k++)
				elements[k] = Int32GetDatum(positions[i][k]);
			values[1] = Int64GetDatum(subgroup_ids[i]);
			values[2] = PointerGetDatum(construct_array(elements, npositions[i], INT4OID,
														sizeof(int32), true, TYPALIGN_INT));
			zl_meta_run(Q_INSERT_MASK_ARRAY, values, NULL);
		}
		zl_storage_count_metadata_change(rel);
		return;
	}
	/* each mask's positions compact (zl_maskcodec.c), all in one statement */
	for (int i = 0; i < nmasks; i++)
	{
		int32	   *copy = palloc(sizeof(int32) * Max(npositions[i], 1));

		memcpy(copy, positions[i], sizeof(int32) * npositions[i]);
		ids[i] = Int64GetDatum(subgroup_ids[i]);
		masks[i] = PointerGetDatum(zl_mask_encode(copy, npositions[i]));
		pfree(copy);
	}
	values[1] = PointerGetDatum(construct_array(ids, nmasks, INT8OID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[2] = PointerGetDatum(construct_array(masks, nmasks, BYTEAOID, -1, false,
												TYPALIGN_INT));
	zl_meta_run(Q_INSERT_MASK, values, NULL);
	zl_storage_count_metadata_change(rel);
}

/*
 * The first TID block after those of every sub-group of the storage: where
 * the metapage's counter starts on a table written before it
 * (zl_storage_take_tid_blocks).
 */
int64
zl_meta_tid_blocks_used(uint64 storage_id)
{
	Datum		values[1] = {Int64GetDatum((int64) storage_id)};

	return zl_meta_run_int64(Q_TID_BLOCKS_USED, values);
}
