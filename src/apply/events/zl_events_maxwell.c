/*-------------------------------------------------------------------------
 *
 * zl_events_maxwell.c
 *	  Maxwell change events.
 *
 * An event is {"database", "table", "type", "ts", "xid", "xoffset",
 * "data", "old"}: type insert, update, delete or bootstrap-insert (an
 * upsert); bootstrap-start, bootstrap-complete and DDL events are
 * skipped.  Time: ts (seconds since the epoch).  Position: xid * 2^20 +
 * xoffset (the row's offset in its transaction) as one 63-bit number.
 *
 *-------------------------------------------------------------------------
 */
#include "apply/events/zl_events_internal.h"

/*
 * Maxwell: {"database", "table", "type", "ts" (seconds), "xid", "xoffset",
 * "data", "old"}.  bootstrap-insert is an upsert; bootstrap-start and
 * -complete and DDL events (table-*, database-*) are skipped.  Its
 * position is xid * 2^20 + xoffset (the row's offset in its transaction,
 * when Maxwell writes it).
 */
void
zl_ev_decode_maxwell(EventDecoder *d, ZLJson *root)
{
	char	   *type;
	ZLJson	   *ts;
	ZLJson	   *xid;
	TimestampTz time;
	bool		upsert;

	type = zl_ev_get_string(d, root, "type", true);
	if (strcmp(type, "bootstrap-start") == 0 || strcmp(type, "bootstrap-complete") == 0 ||
		strncmp(type, "table-", 6) == 0 || strncmp(type, "database-", 9) == 0)
	{
		zl_ev_emit_skipped(d);
		return;
	}
	if (zl_ev_skip_other_table(d, root, "database", NULL, "table"))
		return;
	upsert = strcmp(type, "insert") == 0 || strcmp(type, "update") == 0 ||
		strcmp(type, "bootstrap-insert") == 0;
	if (!upsert && strcmp(type, "delete") != 0)
		zl_ev_unknown_operation(d, "type", type,
						  "Maxwell events have type insert, update, delete or bootstrap-insert; bootstrap-start, bootstrap-complete and DDL events are skipped.");
	ts = zl_ev_get_number(d, root, "ts");
	if (ts == NULL)
		zl_ev_missing_time(d, "ts", "Maxwell events carry ts, the time of the change in seconds.");
	time = zl_ev_epoch_time(d, zl_ev_number_int64(d, ts, "ts"), USECS_PER_SEC, "ts");

	if (d->seq == NULL && (xid = zl_ev_get_number(d, root, "xid")) != NULL)
	{
		ZLJson	   *xoffset = zl_ev_get_number(d, root, "xoffset");
		int64		x = zl_ev_number_int64(d, xid, "xid");
		int64		off = xoffset != NULL ? zl_ev_number_int64(d, xoffset, "xoffset") : 0;

		if (x < 0 || x >= (INT64CONST(1) << 43) || off < 0 || off >= (1 << 20))
			zl_ev_malformed(d, psprintf("has xid " INT64_FORMAT " and xoffset " INT64_FORMAT "; non-negative numbers (xid below 2^43, xoffset below 2^20) were expected.",
					  x, off));
		/* one 63-bit number (README "Loading CDC events") */
		d->seq = zl_ev_uint64_numeric(((uint64) x << 20) | (uint64) off);
	}

	zl_ev_fill_from_object(d, &d->new_row, zl_ev_get_container(d, root, "data", true, true), NULL);
	if (!upsert)
		zl_ev_row_delete(d, time, 0, &d->new_row, "data");
	else
	{
		ZLJson	   *old = strcmp(type, "update") == 0 ?
			zl_ev_get_container(d, root, "old", true, false) : NULL;

		if (old != NULL)
			zl_ev_fill_from_object(d, &d->old_row, old, NULL);
		zl_ev_row_upsert(d, time, 0, "data", old != NULL ? "old" : NULL);
	}
}
