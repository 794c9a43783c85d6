/*-------------------------------------------------------------------------
 *
 * zl_meta_record.c
 *	  The catalog's change record tables: record_segment, record_head.
 *
 * Rows of the change record (zl_record.c encodes and decodes them):
 * segments of each piece by key hash range, and the head holding the
 * table's newest change and its instants of every key.  0.1's catalog has
 * neither table (zl_meta_record_exists).
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog_internal.h"

#include "catalog/namespace.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

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
	zl_meta_begin(&session);
	zl_meta_exec(Q_RECORD_SEGMENTS, values, NULL, snapshot, true);
	*nsegments = (int) SPI_processed;
	if (*nsegments > 0)
		segments = MemoryContextAlloc(session.caller_context,
									  sizeof(ZLRecordSegment) * *nsegments);
	for (int i = 0; i < *nsegments; i++)
	{
		bool		isnull;

		segments[i].piece = zl_meta_result_int64(i, 1);
		segments[i].segment = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
														  SPI_tuptable->tupdesc, 2, &isnull));
		segments[i].bytes = 0;
	}
	zl_meta_end(&session);
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
	zl_meta_begin(&session);
	zl_meta_exec(Q_RECORD_ENTRIES, values, NULL, snapshot, true);
	if (SPI_processed == 1)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		MemoryContext old = MemoryContextSwitchTo(session.caller_context);

		entries = DatumGetByteaPCopy(d);
		MemoryContextSwitchTo(old);
	}
	zl_meta_end(&session);
	if (entries == NULL)
		elog(ERROR, "change record segment " INT64_FORMAT "/%d of relation %u is missing",
			 piece, segment, relid);
	return entries;
}

/* the table's instants as record_head keeps them: times, and seqs (NULL: none) */
static void
instants_as_arrays(const ZLTableInstant *instants, int ninstants, Datum *times_array,
				   Datum *seqs_array)
{
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
	*times_array = PointerGetDatum(construct_md_array(times, NULL, 1, dims, lbs, TIMESTAMPTZOID,
													  sizeof(int64), true, TYPALIGN_DOUBLE));
	*seqs_array = PointerGetDatum(construct_md_array(seqs, seq_nulls, 1, dims, lbs, INT8OID,
													 sizeof(int64), true, TYPALIGN_DOUBLE));
}

/*
 * A table's record as rows (zipper_lake._record_rows, copy_history):
 * first the head (piece NULL: the newest change, the table's instants and
 * their seqs), then every segment, oldest piece first, as stored.  A
 * segment at a time in memory; the result spills as tuplestores do.
 */
void
zl_meta_record_export(Oid relid, ReturnSetInfo *rsinfo)
{
	Snapshot	snapshot = GetActiveSnapshot();
	int64		newest;
	ZLTableInstant *instants;
	int			ninstants;
	int			nsegments;
	ZLRecordSegment *segments;
	Datum		values[9];
	bool		nulls[9];

	if (!zl_meta_record_head(relid, snapshot, &newest, &instants, &ninstants))
		return;
	memset(nulls, true, sizeof(nulls));
	values[4] = Int64GetDatum(newest);
	instants_as_arrays(instants, ninstants, &values[7], &values[8]);
	nulls[4] = nulls[7] = nulls[8] = false;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	segments = zl_meta_record_segments(relid, snapshot, 0, PG_UINT32_MAX, PG_INT64_MIN, &nsegments);
	for (int i = 0; i < nsegments; i++)
	{
		ZLMetaSession session;
		Datum		key[3] = {ObjectIdGetDatum(relid), Int64GetDatum(segments[i].piece),
		Int32GetDatum(segments[i].segment)};
		bool		isnull;

		zl_meta_begin(&session);
		zl_meta_exec(Q_RECORD_SEGMENT_ROW, key, NULL, snapshot, true);
		if (SPI_processed != 1)
			elog(ERROR, "change record segment " INT64_FORMAT "/%d of relation %u is missing",
				 segments[i].piece, segments[i].segment, relid);
		memset(nulls, false, sizeof(nulls));
		nulls[7] = nulls[8] = true;
		for (int c = 0; c < 7; c++)
			values[c] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, c + 1, &isnull);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		zl_meta_end(&session);
	}
}

/*
 * A segment copied from another table's record (zipper_lake._record_put)
 * keeps its piece id, which later pieces of any table must follow.
 */
void
zl_meta_record_copy_segment(Oid relid, int64 piece, int32 segment, int64 hash_lo, int64 hash_hi,
							int64 newest, int64 instants, bytea *entries)
{
	Datum		values[1] = {Int64GetDatum(piece)};

	if (hash_lo < 0 || hash_hi > PG_UINT32_MAX || hash_lo > hash_hi)
		elog(ERROR, "change record segment " INT64_FORMAT "/%d has hashes " INT64_FORMAT ".." INT64_FORMAT,
			 piece, segment, hash_lo, hash_hi);
	zl_meta_record_insert(relid, piece, segment, (uint32) hash_lo, (uint32) hash_hi, newest, instants,
						  entries);
	zl_meta_run(Q_RECORD_RESERVE_PIECE, values, NULL);
}

/* the pieces of a table's record, oldest first, with their bytes (latest snapshot) */
ZLRecordSegment *
zl_meta_record_pieces(Oid relid, int *npieces)
{
	ZLMetaSession session;
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	ZLRecordSegment *pieces = NULL;

	zl_meta_begin(&session);
	zl_meta_exec(Q_RECORD_PIECES, values, NULL, GetLatestSnapshot(), true);
	*npieces = (int) SPI_processed;
	if (*npieces > 0)
		pieces = MemoryContextAlloc(session.caller_context, sizeof(ZLRecordSegment) * *npieces);
	for (int i = 0; i < *npieces; i++)
	{
		pieces[i].piece = zl_meta_result_int64(i, 1);
		pieces[i].segment = 0;
		pieces[i].bytes = zl_meta_result_int64(i, 2);
	}
	zl_meta_end(&session);
	return pieces;
}

int64
zl_meta_new_id(void)
{
	return zl_meta_run_int64(Q_NEW_ID, NULL);
}

void
zl_meta_record_insert(Oid relid, int64 piece, int32 segment, uint32 hash_lo, uint32 hash_hi,
					  int64 newest, int64 instants, bytea *entries)
{
	Datum		values[8];

	values[0] = ObjectIdGetDatum(relid);
	values[1] = Int64GetDatum(piece);
	values[2] = Int32GetDatum(segment);
	values[3] = Int64GetDatum((int64) hash_lo);
	values[4] = Int64GetDatum((int64) hash_hi);
	values[5] = Int64GetDatum(newest);
	values[6] = Int64GetDatum(instants);
	values[7] = PointerGetDatum(entries);
	zl_meta_run(Q_RECORD_INSERT, values, NULL);
}

void
zl_meta_record_delete_piece(Oid relid, int64 piece)
{
	Datum		values[2] = {ObjectIdGetDatum(relid), Int64GetDatum(piece)};

	zl_meta_run(Q_RECORD_DELETE_PIECE, values, NULL);
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
	zl_meta_begin(&session);
	zl_meta_exec(Q_RECORD_HEAD, values, NULL, snapshot, true);
	found = SPI_processed == 1;
	if (found)
	{
		bool		isnull;
		Datum	   *times;
		Datum	   *seqs;
		bool	   *seq_nulls;
		int			ntimes,
					nseqs;

		*newest_change = zl_meta_result_int64(0, 1);
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
	zl_meta_end(&session);
	return found;
}

/* the newest change time (only ever grows) and the table's instants, sorted */
void
zl_meta_record_save_head(Oid relid, int64 newest_change, const ZLTableInstant *instants,
						 int ninstants)
{
	Datum		values[4];

	values[0] = ObjectIdGetDatum(relid);
	values[1] = Int64GetDatum(newest_change);
	instants_as_arrays(instants, ninstants, &values[2], &values[3]);
	zl_meta_run(Q_RECORD_SAVE_HEAD, values, NULL);
}

/* TRUNCATE, DROP, SET ACCESS METHOD: the record goes with the rows */
void
zl_meta_record_forget(Oid relid)
{
	Datum		values[1] = {ObjectIdGetDatum(relid)};

	if (!zl_meta_record_exists())
		return;
	zl_meta_run(Q_RECORD_FORGET, values, NULL);
}

/* VACUUM VERBOSE: the size of a table's record */
void
zl_meta_record_size(Oid relid, int64 *pieces, int64 *instants, int64 *bytes)
{
	ZLMetaSession session;
	Datum		values[1] = {ObjectIdGetDatum(relid)};

	zl_meta_begin(&session);
	zl_meta_exec(Q_RECORD_SIZE, values, NULL, GetTransactionSnapshot(), true);
	*pieces = zl_meta_result_int64(0, 1);
	*instants = zl_meta_result_int64(0, 2);
	*bytes = zl_meta_result_int64(0, 3);
	zl_meta_end(&session);
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

	zl_meta_begin(&session);
	zl_meta_exec(Q_RECORD_INSPECT, values, NULL, GetActiveSnapshot(), true);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum		row[7];
		bool		nulls[7];

		heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, row, nulls);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, nulls);
	}
	zl_meta_end(&session);
}
