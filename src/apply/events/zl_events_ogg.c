/*-------------------------------------------------------------------------
 *
 * zl_events_ogg.c
 *	  Oracle GoldenGate JSON events.
 *
 * An event is {"table": "SCHEMA.TABLE", "op_type", "op_ts", "pos",
 * "before", "after"}: op_type I, U, D or T (truncate).  Time: op_ts, a
 * date and time without a zone, taken in the table's time_zone.
 * Position: pos (the trail file's sequence number and offset, 20 digits)
 * as a number.  source_table matches the dotted name or a tail of it.
 *
 *-------------------------------------------------------------------------
 */
#include "apply/events/zl_events_internal.h"

/* a dotted name ("SCHEMA.TABLE", GoldenGate): the whole, or a tail after a dot */
static bool
dotted_table_matches(EventDecoder *d, const char *name)
{
	size_t		len;
	size_t		want;

	if (name == NULL)
		return false;
	len = strlen(name);
	want = strlen(d->source_table);
	if (len == want)
		return strcmp(name, d->source_table) == 0;
	return len > want && name[len - want - 1] == '.' &&
		strcmp(name + len - want, d->source_table) == 0;
}

/*
 * GoldenGate JSON: {"table": "SCHEMA.TABLE", "op_type", "op_ts", "pos",
 * "before", "after"}; op_type I, U, D, and T (truncate).  op_ts has no
 * zone: it is taken in the table's time_zone.  Its position is pos (the
 * trail file's sequence number and offset, 20 digits) as a number.
 */
void
zl_ev_decode_ogg(EventDecoder *d, ZLJson *root)
{
	char	   *op;
	char	   *op_ts;
	TimestampTz time;
	ZLJson	   *pos;

	op = zl_ev_get_string(d, root, "op_type", true);
	if (d->source_table != NULL && !dotted_table_matches(d, zl_ev_get_string(d, root, "table", false)))
	{
		zl_ev_emit_skipped(d);
		return;
	}
	if (strlen(op) != 1 || strchr("IUDT", pg_toupper((unsigned char) op[0])) == NULL)
		zl_ev_unknown_operation(d, "op_type", op,
						  "GoldenGate events have op_type I (insert), U (update), D (delete) or T (truncate).");
	op_ts = zl_ev_get_string(d, root, "op_ts", false);
	if (op_ts == NULL)
		zl_ev_missing_time(d, "op_ts", "GoldenGate events carry op_ts, the time of the operation.");
	time = zl_ev_event_time_string(d, op_ts, "op_ts");
	if (d->seq == NULL && (pos = zl_ev_member(root, "pos")) != NULL)
	{
		char	   *p = pos->type == ZL_JSON_STRING ? pnstrdup(pos->str, pos->len) :
			pos->type == ZL_JSON_NUMBER ? zl_json_number_text(pos) : "";

		if (!zl_ev_all_digits(p, 40))
			zl_ev_malformed(d, psprintf("has pos \"%s\"; a string of digits was expected.", p));
		d->seq = zl_ev_digits_numeric(p);
	}

	zl_ev_before_after_change(d, root, pg_toupper((unsigned char) op[0]), time, NULL, NULL);
}
