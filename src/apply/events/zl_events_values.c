/*-------------------------------------------------------------------------
 *
 * zl_events_values.c
 *	  Times and values of change events, as text for a zipper table.
 *
 * Values: JSON strings as they are, numbers as numeric text, booleans as
 * true/false, a JSON array for an array column as an array literal, other
 * arrays and objects as JSON text, null as SQL NULL.  A string for a
 * timestamptz column that has no zone is taken in the table's time_zone
 * (every string for such a column is rewritten with an explicit offset).
 * Text for a column of a date or time type (also in arrays and ranges)
 * and event times must not depend on the clock (zl_time_text_reads_clock).
 * Debezium events with the schema envelope are decoded by the schema's
 * logical types (Decimal, VariableScaleDecimal, Date, Time, MicroTime,
 * NanoTime, Timestamp, MicroTimestamp, NanoTimestamp, bytes); the decoded
 * schema is kept while consecutive events carry the same one.
 *
 * Times: a count of seconds or milliseconds since 1970-01-01 UTC
 * (zl_ev_epoch_time), or a date and time string, zone-less ones in the
 * table's time_zone (zl_ev_event_time_string).  Positions: the numbers the
 * formats compose their default seq from (zl_ev_digits_numeric,
 * zl_ev_uint64_numeric).
 *
 *-------------------------------------------------------------------------
 */
#include "apply/events/zl_events_internal.h"

#include "common/base64.h"
#include "common/int.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

/* microseconds from 1970-01-01 to 2000-01-01 */
#define UNIX_TO_PG_USECS	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

/* ---------- times ---------- */

/*
 * A count of units (usecs_per_unit each) since 1970-01-01 00:00 UTC as a
 * timestamp; false if out of range.
 */
static bool
epoch_to_timestamp(int64 value, int64 usecs_per_unit, Timestamp *result)
{
	int64		usecs;

	if (pg_mul_s64_overflow(value, usecs_per_unit, &usecs) ||
		pg_sub_s64_overflow(usecs, UNIX_TO_PG_USECS, &usecs) ||
		!IS_VALID_TIMESTAMP(usecs))
		return false;
	*result = usecs;
	return true;
}

/* an event's time given as a count of units since the epoch */
TimestampTz
zl_ev_epoch_time(EventDecoder *d, int64 value, int64 usecs_per_unit, const char *what)
{
	TimestampTz result;

	if (!epoch_to_timestamp(value, usecs_per_unit, &result))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("%s event time out of range", zl_ev_formats[d->format].name),
				 errdetail("Event %s has %s " INT64_FORMAT ".", d->ref, what, value),
				 errhint("%s", zl_ev_formats[d->format].hint)));
	return result;
}

/* nanoseconds to microseconds, rounding half to even as timestamp input does */
static int64
nanos_to_micros(int64 nanos)
{
	int64		q = nanos / 1000;
	int64		r = nanos % 1000;

	if (r < 0)
	{
		q--;
		r += 1000;
	}
	if (r > 500 || (r == 500 && (q & 1)))
		q++;
	return q;
}

/* a date and time parsed, zone-less ones in the table's zone */
typedef struct ParsedTime
{
	int			dterr;
	int			dtype;
	struct pg_tm tm;
	fsec_t		fsec;
	int			tz;
} ParsedTime;

static void
parse_time(const char *str, ParsedTime *pt)
{
	char		workbuf[MAXDATELEN + MAXDATEFIELDS];
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	int			nf;

	pt->dterr = ParseDateTime(str, workbuf, sizeof(workbuf), field, ftype, MAXDATEFIELDS, &nf);
	if (pt->dterr == 0)
		pt->dterr = DecodeDateTime(field, ftype, nf, &pt->dtype, &pt->tm, &pt->fsec, &pt->tz);
}

/*
 * Parse a date and time as timestamptz input does, except that a value
 * without a zone is taken in the table's zone rather than the session's:
 * the parser falls back on session_timezone, so it is the table's while
 * parsing.  False unless it is a finite date and time.
 */
static bool
parse_local_time(EventDecoder *d, const char *str, ParsedTime *pt)
{
	pg_tz	   *saved = session_timezone;

	if (strlen(str) >= MAXDATELEN)
		return false;
	PG_TRY();
	{
		session_timezone = d->zone;
		parse_time(str, pt);
	}
	PG_FINALLY();
	{
		session_timezone = saved;
	}
	PG_END_TRY();
	return pt->dterr == 0 && pt->dtype == DTK_DATE;
}

/*
 * A time string of an event (GoldenGate's op_ts, wal2json's timestamp): a
 * finite date and time, not one read from the clock ("now", "today 10:00").
 */
TimestampTz
zl_ev_event_time_string(EventDecoder *d, const char *str, const char *field)
{
	ParsedTime	pt;
	TimestampTz result;

	if (!parse_local_time(d, str, &pt))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_DATETIME_FORMAT),
				 errmsg("malformed %s event time", zl_ev_formats[d->format].name),
				 errdetail("Event %s has %s \"%s\", which is not a date and time.", d->ref, field, str),
				 errhint("%s", zl_ev_formats[d->format].hint)));
	if (zl_time_text_reads_clock(str))
		zl_ev_refuse_clock(d, "time", psprintf("%s \"%s\"", field, str));
	if (tm2timestamp(&pt.tm, pt.fsec, &pt.tz, &result) != 0 || !IS_VALID_TIMESTAMP(result))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("%s event time out of range", zl_ev_formats[d->format].name),
				 errdetail("Event %s has %s \"%s\".", d->ref, field, str),
				 errhint("%s", zl_ev_formats[d->format].hint)));
	return result;
}

/*
 * A wall-clock timestamp as text for a column: with the offset of the
 * table's zone for a timestamptz column, else as it is.
 */
static char *
wall_clock_text(EventDecoder *d, const EventColumn *col, Timestamp ts)
{
	struct pg_tm tm;
	fsec_t		fsec;
	char		buf[MAXDATELEN + 1];

	if (timestamp2tm(ts, NULL, &tm, &fsec, NULL, NULL) != 0)
		zl_ev_malformed(d, psprintf("has a timestamp out of range for column \"%s\".", col->name));
	if (col->is_timestamptz)
	{
		int			tz = DetermineTimeZoneOffset(&tm, d->zone);

		tm.tm_isdst = 0;		/* printed with its offset */
		EncodeDateTime(&tm, fsec, true, tz, NULL, USE_ISO_DATES, buf);
	}
	else
		EncodeDateTime(&tm, fsec, false, 0, NULL, USE_ISO_DATES, buf);
	return pstrdup(buf);
}

/*
 * A string for a timestamptz column: a date and time without a zone is
 * taken in the table's zone, and every date and time is written with its
 * offset; anything else (special values, errors) goes to the input
 * function as it is.
 */
static char *
timestamptz_text(EventDecoder *d, char *str)
{
	ParsedTime	pt;
	char		buf[MAXDATELEN + 1];

	if (!parse_local_time(d, str, &pt))
		return str;
	pt.tm.tm_isdst = 0;
	EncodeDateTime(&pt.tm, pt.fsec, true, pt.tz, NULL, USE_ISO_DATES, buf);
	return pstrdup(buf);
}

/* ---------- values ---------- */

static void
append_array_literal(StringInfo out, ZLJson *array)
{
	int			n = zl_json_size(array);

	check_stack_depth();
	appendStringInfoChar(out, '{');
	for (int i = 0; i < n; i++)
	{
		ZLJson	   *v = zl_json_item(array, i);
		const char *s;
		int			len;

		if (i > 0)
			appendStringInfoChar(out, ',');
		switch (v->type)
		{
			case ZL_JSON_NULL:
				appendStringInfoString(out, "NULL");
				continue;
			case ZL_JSON_ARRAY:
				append_array_literal(out, v);
				continue;
			case ZL_JSON_NUMBER:
				appendStringInfoString(out, zl_json_number_text(v));
				continue;
			case ZL_JSON_BOOL:
				appendStringInfoString(out, v->boolean ? "true" : "false");
				continue;
			case ZL_JSON_STRING:
				s = v->str;
				len = v->len;
				break;
			default:
				s = zl_json_text(v);
				len = strlen(s);
				break;
		}
		appendStringInfoChar(out, '"');
		for (int c = 0; c < len; c++)
		{
			if (s[c] == '"' || s[c] == '\\')
				appendStringInfoChar(out, '\\');
			appendStringInfoChar(out, s[c]);
		}
		appendStringInfoChar(out, '"');
	}
	appendStringInfoChar(out, '}');
}

/* text for a column whose type reads dates or times: not one of the clock */
static char *
fixed_time_text(EventDecoder *d, const EventColumn *col, char *str)
{
	if (col->reads_time && zl_time_text_reads_clock(str))
		zl_ev_refuse_clock(d, "value", psprintf("\"%s\" for column \"%s\"", str, col->name));
	return str;
}

/*
 * A JSON value as it is, as text for a column; NULL for JSON null.  Every
 * text that may hold words is checked for the clock's (fixed_time_text)
 * before the column's input function sees it: strings, and arrays and
 * objects as a whole (the date/time parser skips punctuation, so
 * ["now"] is now).
 */
char *
zl_ev_plain_text(EventDecoder *d, const EventColumn *col, ZLJson *v)
{
	char	   *text;

	switch (v->type)
	{
		case ZL_JSON_NULL:
			return NULL;
		case ZL_JSON_NUMBER:
			return zl_json_number_text(v);
		case ZL_JSON_BOOL:
			return pstrdup(v->boolean ? "true" : "false");
		case ZL_JSON_STRING:
			text = fixed_time_text(d, col, pnstrdup(v->str, v->len));
			return col->is_timestamptz ? timestamptz_text(d, text) : text;
		case ZL_JSON_ARRAY:
			if (col->is_array)
			{
				StringInfoData buf;

				initStringInfo(&buf);
				append_array_literal(&buf, v);
				text = buf.data;
			}
			else
				text = zl_json_text(v);
			return fixed_time_text(d, col, text);
		case ZL_JSON_OBJECT:
			return fixed_time_text(d, col, zl_json_text(v));
	}
	return NULL;				/* keep compiler quiet */
}

/* base64 to bytes; *len set */
static uint8 *
base64_bytes(EventDecoder *d, const EventColumn *col, const char *s, int slen, int *len)
{
	uint8	   *bytes = palloc(pg_b64_dec_len(slen) + 1);

	*len = pg_b64_decode(s, slen, (char *) bytes, pg_b64_dec_len(slen));
	if (*len < 0)
		zl_ev_malformed(d, psprintf("has a value for column \"%s\" that is not base64.", col->name));
	return bytes;
}

/*
 * A big-endian two's-complement integer scaled down by 10^scale, as
 * numeric text.
 */
static char *
unscaled_text(const uint8 *bytes, int n, int scale)
{
	bool		negative = n > 0 && (bytes[0] & 0x80) != 0;
	uint8	   *mag = palloc(n + 1);
	uint32	   *chunks = palloc(sizeof(uint32) * (n + 1));	/* base 10^9, least first */
	int			nchunks = 0;
	int			start = 0;
	StringInfoData digits;
	StringInfoData out;

	memcpy(mag, bytes, n);
	if (negative)
	{
		/* magnitude = ~x + 1 */
		int			carry = 1;

		for (int i = n - 1; i >= 0; i--)
		{
			int			b = (uint8) ~mag[i] + carry;

			mag[i] = (uint8) b;
			carry = b >> 8;
		}
	}
	while (start < n && mag[start] == 0)
		start++;
	while (start < n)
	{
		uint64		rem = 0;

		for (int i = start; i < n; i++)
		{
			uint64		cur = (rem << 8) | mag[i];

			mag[i] = (uint8) (cur / 1000000000);
			rem = cur % 1000000000;
		}
		chunks[nchunks++] = (uint32) rem;
		while (start < n && mag[start] == 0)
			start++;
	}

	initStringInfo(&digits);
	if (nchunks == 0)
		appendStringInfoChar(&digits, '0');
	else
	{
		appendStringInfo(&digits, "%u", chunks[nchunks - 1]);
		for (int i = nchunks - 2; i >= 0; i--)
			appendStringInfo(&digits, "%09u", chunks[i]);
	}

	initStringInfo(&out);
	if (negative && nchunks > 0)
		appendStringInfoChar(&out, '-');
	if (scale <= 0)
	{
		appendStringInfoString(&out, digits.data);
		if (nchunks > 0)
			for (int i = 0; i < -scale; i++)
				appendStringInfoChar(&out, '0');
	}
	else if (digits.len <= scale)
	{
		appendStringInfoString(&out, "0.");
		for (int i = digits.len; i < scale; i++)
			appendStringInfoChar(&out, '0');
		appendStringInfoString(&out, digits.data);
	}
	else
	{
		appendBinaryStringInfo(&out, digits.data, digits.len - scale);
		appendStringInfoChar(&out, '.');
		appendStringInfoString(&out, digits.data + digits.len - scale);
	}
	return out.data;
}

/* an integral JSON number of a column's value */
static int64
value_int64(EventDecoder *d, const EventColumn *col, ZLJson *v)
{
	if (v->type != ZL_JSON_NUMBER)
		zl_ev_malformed(d, psprintf("has a %s for column \"%s\"; its schema says a number.",
							  zl_json_type_name(v), col->name));
	return zl_ev_number_int64(d, v, psprintf("column \"%s\"", col->name));
}

static const char *
value_string(EventDecoder *d, const EventColumn *col, ZLJson *v, int *len)
{
	if (v->type != ZL_JSON_STRING)
		zl_ev_malformed(d, psprintf("has a %s for column \"%s\"; its schema says a base64 string.",
							  zl_json_type_name(v), col->name));
	*len = v->len;
	return v->str;
}

/*
 * A Decimal's unscaled value (a base64 big-endian two's-complement
 * integer) scaled down by 10^scale, as numeric text.  It has at least one
 * byte (Kafka Connect writes BigInteger.toByteArray()): no bytes at all is
 * a malformed event, not zero.
 */
static char *
decimal_text(EventDecoder *d, const EventColumn *col, ZLJson *v, int scale)
{
	int			len;
	const char *s = value_string(d, col, v, &len);
	uint8	   *bytes = base64_bytes(d, col, s, len, &len);

	if (len <= 0)				/* (base64_bytes refused negative ones) */
		zl_ev_malformed(d, psprintf("has a Decimal of no bytes for column \"%s\"; its unscaled value has at least one.",
							  col->name));
	return unscaled_text(bytes, len, scale);
}

/* a value of a Debezium logical type (schema envelope) as text */
char *
zl_ev_decoded_text(EventDecoder *d, const EventColumn *col, const ValueType *type, ZLJson *v)
{
	struct pg_tm tm;
	char		buf[MAXDATELEN + 1];
	int64		n;
	int			len;
	const char *s;
	uint8	   *bytes;

	if (v->type == ZL_JSON_NULL)
		return NULL;
	switch (type->kind)
	{
		case KIND_PLAIN:
			return zl_ev_plain_text(d, col, v);
		case KIND_BYTES:
			{
				StringInfoData out;

				s = value_string(d, col, v, &len);
				bytes = base64_bytes(d, col, s, len, &len);
				initStringInfo(&out);
				appendStringInfoString(&out, "\\x");
				for (int i = 0; i < len; i++)
					appendStringInfo(&out, "%02x", bytes[i]);
				return out.data;
			}
		case KIND_DECIMAL:
			return decimal_text(d, col, v, type->scale);
		case KIND_VARIABLE_DECIMAL:
			{
				ZLJson	   *scale = zl_ev_is_container(v, true) ? zl_ev_member(v, "scale") : NULL;
				ZLJson	   *value = zl_ev_is_container(v, true) ? zl_ev_member(v, "value") : NULL;
				int64		sc;

				if (scale == NULL || value == NULL)
					zl_ev_malformed(d, psprintf("has a value for column \"%s\" that is not a VariableScaleDecimal {\"scale\", \"value\"}.",
										  col->name));
				sc = value_int64(d, col, scale);
				if (sc < -1000 || sc > 1000)
					zl_ev_malformed(d, psprintf("has scale " INT64_FORMAT " for column \"%s\".", sc, col->name));
				return decimal_text(d, col, value, (int) sc);
			}
		case KIND_DATE:
			n = value_int64(d, col, v);
			if (n < -(int64) UNIX_EPOCH_JDATE || n > (int64) PG_INT32_MAX - UNIX_EPOCH_JDATE ||
				!IS_VALID_DATE(n + UNIX_EPOCH_JDATE - POSTGRES_EPOCH_JDATE))
				zl_ev_malformed(d, psprintf("has date " INT64_FORMAT " (days) out of range for column \"%s\".",
						  n, col->name));
			j2date((int) (n + UNIX_EPOCH_JDATE), &tm.tm_year, &tm.tm_mon, &tm.tm_mday);
			EncodeDateOnly(&tm, USE_ISO_DATES, buf);
			return pstrdup(buf);
		case KIND_TIME_MS:
		case KIND_TIME_US:
		case KIND_TIME_NS:
			{
				int64		usecs = value_int64(d, col, v);

				if (type->kind == KIND_TIME_NS)
					usecs = nanos_to_micros(usecs);
				else if (type->kind == KIND_TIME_MS && pg_mul_s64_overflow(usecs, 1000, &usecs))
					usecs = -1;
				if (usecs < 0 || usecs > USECS_PER_DAY)
					zl_ev_malformed(d, psprintf("has a time of day out of range for column \"%s\".", col->name));
				memset(&tm, 0, sizeof(tm));
				tm.tm_hour = usecs / USECS_PER_HOUR;
				usecs -= tm.tm_hour * USECS_PER_HOUR;
				tm.tm_min = usecs / USECS_PER_MINUTE;
				usecs -= tm.tm_min * USECS_PER_MINUTE;
				tm.tm_sec = usecs / USECS_PER_SEC;
				usecs -= tm.tm_sec * USECS_PER_SEC;
				EncodeTimeOnly(&tm, (fsec_t) usecs, false, 0, USE_ISO_DATES, buf);
				return pstrdup(buf);
			}
		case KIND_TIMESTAMP_MS:
		case KIND_TIMESTAMP_US:
		case KIND_TIMESTAMP_NS:
			{
				Timestamp	ts;

				n = value_int64(d, col, v);
				if (type->kind == KIND_TIMESTAMP_NS)
					n = nanos_to_micros(n);
				if (!epoch_to_timestamp(n, type->kind == KIND_TIMESTAMP_MS ? 1000 : 1, &ts))
					zl_ev_malformed(d, psprintf("has a timestamp out of range for column \"%s\".",
										  col->name));
				return wall_clock_text(d, col, ts);
			}
	}
	return NULL;				/* keep compiler quiet */
}

/* ---------- positions (the default seq) ---------- */

Numeric
zl_ev_digits_numeric(const char *digits)
{
	return DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum(digits),
											   ObjectIdGetDatum(InvalidOid),
											   Int32GetDatum(-1)));
}

bool
zl_ev_all_digits(const char *s, size_t maxlen)
{
	size_t		len = strlen(s);

	if (len == 0 || len > maxlen)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

Numeric
zl_ev_uint64_numeric(uint64 value)
{
	char		buf[32];

	snprintf(buf, sizeof(buf), UINT64_FORMAT, value);
	return zl_ev_digits_numeric(buf);
}
