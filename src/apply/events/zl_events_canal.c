/*-------------------------------------------------------------------------
 *
 * zl_events_canal.c
 *	  Canal flat messages.
 *
 * An event is {"type", "isDdl", "es", "database", "table", "data",
 * "old"}: type INSERT, UPDATE or DELETE, several rows in the "data" array
 * (sub_seq 2i + 1 for row i) and, for updates, the old values of their
 * changed columns in "old".  DDL events are skipped.  Time: es
 * (milliseconds since the epoch).  Position: none, so seq is NULL unless
 * a seq column gives it.
 *
 *-------------------------------------------------------------------------
 */
#include "apply/events/zl_events_internal.h"

/* Canal's event types that are no row changes */
static bool
canal_ddl_type(const char *type)
{
	static const char *const ddl[] = {"CREATE", "ALTER", "ERASE", "QUERY", "TRUNCATE",
	"RENAME", "CINDEX", "DINDEX", "GTID", "XACOMMIT", "XAROLLBACK", "MHEARTBEAT"};

	for (int i = 0; i < lengthof(ddl); i++)
		if (pg_strcasecmp(type, ddl[i]) == 0)
			return true;
	return false;
}

/*
 * Canal flat messages: several rows an event in "data" (and their changed
 * columns' old values in "old"), kept in array order; values are strings;
 * the time is es (milliseconds).  DDL events (isDdl true, or a DDL type)
 * are skipped; isDdl is a boolean.  "old" has no more rows than "data"
 * (it may have fewer: Canal leaves out a row whose update changed no
 * column).  Canal has no position: seq is NULL unless a seq column gives
 * it.
 */
void
zl_ev_decode_canal(EventDecoder *d, ZLJson *root)
{
	ZLJson	   *v;
	char	   *type;
	ZLJson	   *es;
	TimestampTz time;
	ZLJson	   *data;
	ZLJson	   *old;
	int			nrows;

	type = zl_ev_get_string(d, root, "type", true);
	if ((v = zl_ev_member(root, "isDdl")) != NULL && v->type != ZL_JSON_BOOL)
		zl_ev_malformed(d, psprintf("has \"isDdl\" of type %s; a boolean was expected.",
							  zl_json_type_name(v)));
	if ((v != NULL && v->boolean) || canal_ddl_type(type))
	{
		zl_ev_emit_skipped(d);
		return;
	}
	if (zl_ev_skip_other_table(d, root, "database", NULL, "table"))
		return;
	if (pg_strcasecmp(type, "INSERT") != 0 && pg_strcasecmp(type, "UPDATE") != 0 &&
		pg_strcasecmp(type, "DELETE") != 0)
		zl_ev_unknown_operation(d, "type", type,
						  "Canal events have type INSERT, UPDATE or DELETE; DDL events (isDdl true) are skipped.");
	es = zl_ev_get_number(d, root, "es");
	if (es == NULL)
		zl_ev_missing_time(d, "es", "Canal flat messages carry es, the time of the change in milliseconds.");
	time = zl_ev_epoch_time(d, zl_ev_number_int64(d, es, "es"), 1000, "es");

	data = zl_ev_get_container(d, root, "data", false, true);
	nrows = zl_json_size(data);
	if (nrows == 0)
		zl_ev_malformed(d, "has an empty \"data\" array.");
	old = pg_strcasecmp(type, "UPDATE") == 0 ? zl_ev_get_container(d, root, "old", false, false) : NULL;
	if (old != NULL && zl_json_size(old) > nrows)
		zl_ev_malformed(d, psprintf("has %d rows in \"old\" but %d in \"data\"; \"old\" holds the old values of rows of \"data\".",
							  zl_json_size(old), nrows));
	for (int i = 0; i < nrows; i++)
	{
		ZLJson	   *row = zl_json_item(data, i);
		ZLJson	   *old_row = (old != NULL && i < zl_json_size(old)) ? zl_json_item(old, i) : NULL;

		if (!zl_ev_is_container(row, true))
			zl_ev_malformed(d, "has a row of \"data\" that is not an object.");
		zl_ev_fill_from_object(d, &d->new_row, row, NULL);
		if (pg_strcasecmp(type, "DELETE") == 0)
			zl_ev_row_delete(d, time, i, &d->new_row, "data");
		else
		{
			if (old_row != NULL && old_row->type != ZL_JSON_NULL)
			{
				if (!zl_ev_is_container(old_row, true))
					zl_ev_malformed(d, "has a row of \"old\" that is not an object.");
				zl_ev_fill_from_object(d, &d->old_row, old_row, NULL);
			}
			else
				old_row = NULL;
			zl_ev_row_upsert(d, time, i, "data", old_row != NULL ? "old" : NULL);
		}
	}
}
