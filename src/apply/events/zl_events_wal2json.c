/*-------------------------------------------------------------------------
 *
 * zl_events_wal2json.c
 *	  wal2json (format-version 2) rows.
 *
 * An event is one row of wal2json's format-version 2: {"action",
 * "timestamp", "lsn", "schema", "table", "columns", "identity"}, action
 * I, U, D or T; begin, commit and message rows (B, C, M) are skipped.
 * Columns wal2json leaves out (unchanged TOAST values) are kept.  Time:
 * timestamp (include-timestamp), a date and time string (zone-less
 * ones in the table's time_zone).
 * Position: lsn (include-lsn) as a number.
 *
 *-------------------------------------------------------------------------
 */
#include "apply/events/zl_events_internal.h"

#include "utils/pg_lsn.h"

/*
 * wal2json format-version 2, one row a change: {"action", "timestamp"
 * (include-timestamp), "lsn" (include-lsn), "schema", "table", "columns",
 * "identity"}.  Begin, commit and message rows (B, C, M) are skipped.
 * Columns wal2json leaves out (unchanged TOAST values) are kept.  The
 * identity (the old key, or with REPLICA IDENTITY FULL the old row) gives
 * a delete's key and tells whether an update changed the key.  Its
 * position is lsn.
 */
void
zl_ev_decode_wal2json(EventDecoder *d, ZLJson *root)
{
	char	   *action;
	char	   *stamp;
	char	   *lsn;
	TimestampTz time;

	action = zl_ev_get_string(d, root, "action", true);
	if (strcmp(action, "B") == 0 || strcmp(action, "C") == 0 || strcmp(action, "M") == 0)
	{
		zl_ev_emit_skipped(d);
		return;
	}
	if (zl_ev_skip_other_table(d, root, NULL, "schema", "table"))
		return;
	if (strlen(action) != 1 || strchr("IUDT", action[0]) == NULL)
		zl_ev_unknown_operation(d, "action", action,
						  "wal2json rows (format-version 2) have action I, U, D or T; B, C and M rows are skipped.");
	stamp = zl_ev_get_string(d, root, "timestamp", false);
	if (stamp == NULL)
		zl_ev_missing_time(d, "timestamp",
					 "Read the slot with wal2json's options format-version 2 and include-timestamp.");
	time = zl_ev_event_time_string(d, stamp, "timestamp");
	if (d->seq == NULL && (lsn = zl_ev_get_string(d, root, "lsn", false)) != NULL)
	{
		bool		have_error = false;
		XLogRecPtr	ptr = pg_lsn_in_internal(lsn, &have_error);

		if (have_error)
			zl_ev_malformed(d, psprintf("has lsn \"%s\", which is not an LSN.", lsn));
		d->seq = zl_ev_uint64_numeric(ptr);
	}

	switch (action[0])
	{
		case 'I':
			zl_ev_fill_from_wal2json(d, &d->new_row, zl_ev_get_container(d, root, "columns", false, true), "columns");
			zl_ev_row_upsert(d, time, 0, "columns", NULL);
			break;
		case 'U':
			{
				ZLJson	   *identity = zl_ev_get_container(d, root, "identity", false, false);

				zl_ev_fill_from_wal2json(d, &d->new_row, zl_ev_get_container(d, root, "columns", false, true), "columns");
				if (identity != NULL)
					zl_ev_fill_from_wal2json(d, &d->old_row, identity, "identity");
				zl_ev_row_upsert(d, time, 0, "columns", identity != NULL ? "identity" : NULL);
				break;
			}
		case 'D':
			zl_ev_fill_from_wal2json(d, &d->old_row, zl_ev_get_container(d, root, "identity", false, true), "identity");
			zl_ev_row_delete(d, time, 0, &d->old_row, "identity");
			break;
		default:
			zl_ev_emit(d, ZL_EVENT_TRUNCATE, time, 1, NULL, false);
			break;
	}
}
