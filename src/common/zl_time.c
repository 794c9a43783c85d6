/*-------------------------------------------------------------------------
 *
 * zl_time.c
 *	  Period values, partition dates and file-group windows.
 *
 * Period columns may be timestamptz, timestamp or date.  Internally every
 * value is an "instant": int64 microseconds since 2000-01-01, with
 * DT_NOBEGIN / DT_NOEND for the infinities.  A timestamptz is its own
 * instant and is cut into dates in the table's time zone; a timestamp is
 * taken as a wall-clock value (time zone ignored); a date is its midnight.
 *
 * The partition of a version is the date of its valid_to (truncated to the
 * partition unit), or the current partition when valid_to is the open end.
 * Its file-group window is valid_from rounded down to the partition's group
 * span, in local time: whole months counted from year 0, or fixed lengths
 * counted from Monday 2000-01-03 00:00 (so 7-day windows are ISO weeks).
 *
 * Date and time text that depends on the clock (zl_time_text_reads_clock)
 * is refused wherever the extension converts text to a date or time
 * (README "Loading CDC events"): a batch must mean the same whenever it is
 * applied.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"

#include "catalog/pg_type.h"
#include "common/int.h"
#include "fmgr.h"
#include "pgtime.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

/* origin of fixed-length windows: Monday 2000-01-03 00:00 local time */
#define WINDOW_ORIGIN	(2 * USECS_PER_DAY)

static int64
floor_div(int64 a, int64 b)
{
	int64		q = a / b;

	if ((a % b != 0) && ((a < 0) != (b < 0)))
		q--;
	return q;
}

int64
zl_datum_to_instant(Datum value, Oid typid)
{
	switch (typid)
	{
		case TIMESTAMPTZOID:
			return DatumGetTimestampTz(value);
		case TIMESTAMPOID:
			return DatumGetTimestamp(value);
		case DATEOID:
			{
				DateADT		d = DatumGetDateADT(value);

				if (DATE_IS_NOBEGIN(d))
					return DT_NOBEGIN;
				if (DATE_IS_NOEND(d))
					return DT_NOEND;
				/*
				 * A date past timestamps' range (a query's bound: no version
				 * holds one, none passing its open end) is past every finite
				 * instant and short of infinity: so is END_TIMESTAMP.
				 */
				if (d >= TIMESTAMP_END_JULIAN - POSTGRES_EPOCH_JDATE)
					return END_TIMESTAMP;
				return (int64) d * USECS_PER_DAY;
			}
		default:
			elog(ERROR, "unexpected period type %u", typid);
	}
	return 0;					/* keep compiler quiet */
}

Datum
zl_instant_to_datum(int64 instant, Oid typid)
{
	switch (typid)
	{
		case TIMESTAMPTZOID:
			return TimestampTzGetDatum(instant);
		case TIMESTAMPOID:
			return TimestampGetDatum(instant);
		case DATEOID:
			if (instant == DT_NOBEGIN)
				return DateADTGetDatum(DATEVAL_NOBEGIN);
			if (instant == DT_NOEND)
				return DateADTGetDatum(DATEVAL_NOEND);
			return DateADTGetDatum((DateADT) floor_div(instant, USECS_PER_DAY));
		default:
			elog(ERROR, "unexpected period type %u", typid);
	}
	return (Datum) 0;			/* keep compiler quiet */
}

bool
zl_instant_is_finite(int64 instant)
{
	return instant != DT_NOBEGIN && instant != DT_NOEND;
}

char *
zl_instant_to_cstring(int64 instant, Oid typid)
{
	switch (typid)
	{
		case TIMESTAMPTZOID:
			return DatumGetCString(DirectFunctionCall1(timestamptz_out,
													   TimestampTzGetDatum(instant)));
		case TIMESTAMPOID:
			return DatumGetCString(DirectFunctionCall1(timestamp_out,
													   TimestampGetDatum(instant)));
		default:
			return DatumGetCString(DirectFunctionCall1(date_out,
													   zl_instant_to_datum(instant, typid)));
	}
}

/* wall-clock microseconds of an instant in the table's zone */
static int64
instant_to_local(const ZLTableOptions *opts, int64 instant)
{
	struct pg_tm tm;
	fsec_t		fsec;
	int			tz;
	Timestamp	local;

	if (opts->period_type != TIMESTAMPTZOID || opts->zone_is_utc)
		return instant;
	if (timestamp2tm(instant, &tz, &tm, &fsec, NULL,
					 pg_tzset(opts->time_zone)) != 0 ||
		tm2timestamp(&tm, fsec, NULL, &local) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	return local;
}

/*
 * The instant at which the table's zone shows a wall-clock value into
 * *instant, or false if that instant lies outside the range of timestamptz
 * (the first or last hours of the calendar, in a zone off UTC).
 */
static bool
local_to_instant_in_range(const ZLTableOptions *opts, int64 local, int64 *instant)
{
	struct pg_tm tm;
	fsec_t		fsec;
	int			tz;

	*instant = local;
	if (opts->period_type != TIMESTAMPTZOID || opts->zone_is_utc)
		return true;
	if (timestamp2tm(local, NULL, &tm, &fsec, NULL, NULL) != 0)
		return false;
	tz = DetermineTimeZoneOffset(&tm, pg_tzset(opts->time_zone));
	return tm2timestamp(&tm, fsec, &tz, instant) == 0;
}

/* the instant at which the table's zone shows a wall-clock value */
static int64
local_to_instant(const ZLTableOptions *opts, int64 local)
{
	int64		instant;

	if (!local_to_instant_in_range(opts, local, &instant))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	return instant;
}

/*
 * The same, clamped to the range of timestamptz: a partition's bound that
 * lies beyond it (the calendar's first or last local day) bounds nothing.
 */
static int64
local_to_instant_clamped(const ZLTableOptions *opts, int64 local)
{
	int64		instant;

	if (!local_to_instant_in_range(opts, local, &instant))
		return local < 0 ? MIN_TIMESTAMP : END_TIMESTAMP;
	return instant;
}

DateADT
zl_partition_of(const ZLTableOptions *opts, int64 valid_to)
{
	int64		days;
	int			year,
				month,
				day;

	if (valid_to == opts->open_end)
		return ZL_CURRENT_PARTITION;

	days = floor_div(instant_to_local(opts, valid_to), USECS_PER_DAY);
	if (opts->unit == ZL_UNIT_DAY)
		return (DateADT) days;

	j2date((int) days + POSTGRES_EPOCH_JDATE, &year, &month, &day);
	if (opts->unit == ZL_UNIT_YEAR)
		month = 1;
	return (DateADT) (date2j(year, month, 1) - POSTGRES_EPOCH_JDATE);
}

/*
 * The wall-clock start of the window of span holding local, moved on by
 * after whole windows.
 */
static int64
window_local(const ZLSpan *span, int64 local, int after)
{
	if (span->months > 0)
	{
		struct pg_tm tm;
		fsec_t		fsec;
		int64		month_index;

		if (timestamp2tm(local, NULL, &tm, &fsec, NULL, NULL) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
					 errmsg("timestamp out of range")));
		month_index = (int64) tm.tm_year * MONTHS_PER_YEAR + tm.tm_mon - 1;
		month_index = (floor_div(month_index, span->months) + after) * span->months;
		memset(&tm, 0, sizeof(tm));
		tm.tm_year = (int) floor_div(month_index, MONTHS_PER_YEAR);
		tm.tm_mon = (int) (month_index - (int64) tm.tm_year * MONTHS_PER_YEAR) + 1;
		tm.tm_mday = 1;
		if (tm2timestamp(&tm, 0, NULL, &local) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
					 errmsg("timestamp out of range")));
		return local;
	}
	return WINDOW_ORIGIN + (floor_div(local - WINDOW_ORIGIN, span->usecs) + after) * span->usecs;
}

static const ZLSpan *
partition_span(const ZLTableOptions *opts, DateADT partition_end)
{
	return partition_end == ZL_CURRENT_PARTITION ? &opts->current_span : &opts->history_span;
}

/*
 * The base window of valid_from in a partition: history_group_span (or
 * current_group_span) aligned in the table's time zone.  A history file
 * group's window is one or more consecutive base windows (README
 * "Storage").
 */
int64
zl_window_of(const ZLTableOptions *opts, DateADT partition_end, int64 valid_from)
{
	return local_to_instant(opts, window_local(partition_span(opts, partition_end),
											   instant_to_local(opts, valid_from), 0));
}

/* the end of the base window that starts at window_start (the next one's start) */
int64
zl_window_end(const ZLTableOptions *opts, DateADT partition_end, int64 window_start)
{
	return local_to_instant_clamped(opts, window_local(partition_span(opts, partition_end),
													   instant_to_local(opts, window_start), 1));
}

ZLSpan
zl_span_from_interval(const Interval *interval)
{
	ZLSpan		span;

	span.months = interval->month;
	span.usecs = (int64) interval->day * USECS_PER_DAY + interval->time;
	return span;
}

/*
 * The valid_to instants a history partition can hold (inclusive), or
 * exactly the open end for the current partition.  Never an error, for any
 * stored partition: VACUUM's retention reads these ranges.
 */
void
zl_partition_range(const ZLTableOptions *opts, DateADT partition_end,
				   int64 *valid_to_lo, int64 *valid_to_hi)
{
	int			year,
				month,
				day;
	int64		next;

	if (partition_end == ZL_CURRENT_PARTITION)
	{
		*valid_to_lo = *valid_to_hi = opts->open_end;
		return;
	}
	j2date(partition_end + POSTGRES_EPOCH_JDATE, &year, &month, &day);
	if (opts->unit == ZL_UNIT_DAY)
		next = partition_end + 1;
	else if (opts->unit == ZL_UNIT_MONTH)
		next = date2j(month == 12 ? year + 1 : year, month == 12 ? 1 : month + 1, 1) - POSTGRES_EPOCH_JDATE;
	else
		next = date2j(year + 1, 1, 1) - POSTGRES_EPOCH_JDATE;
	*valid_to_lo = local_to_instant_clamped(opts, (int64) partition_end * USECS_PER_DAY);
	*valid_to_hi = Min(local_to_instant_clamped(opts, next * USECS_PER_DAY) - 1, opts->open_end - 1);

	/*
	 * Where clocks go back over midnight a local date begins twice, and
	 * local_to_instant() picks one of them.  Pruning only needs a range that
	 * holds every instant of the partition, so widen it by a day wherever
	 * instants are cut into dates in a zone other than UTC.
	 */
	if (opts->period_type == TIMESTAMPTZOID && !opts->zone_is_utc)
	{
		*valid_to_lo -= USECS_PER_DAY;
		*valid_to_hi = Min(*valid_to_hi + USECS_PER_DAY, opts->open_end - 1);
	}
}

/*
 * A timestamptz argument (as_of's time, apply_snapshot's time) in the
 * terms of the table's period columns: timestamp and date columns take
 * its wall-clock value in the session's zone, as a cast would.
 */
int64
zl_timestamptz_to_instant(const ZLTableOptions *opts, TimestampTz ts)
{
	if (opts->period_type == TIMESTAMPTZOID || !zl_instant_is_finite(ts))
		return ts;
	return zl_datum_to_instant(DirectFunctionCall1(opts->period_type == DATEOID ?
												   timestamptz_date : timestamptz_timestamp,
												   TimestampTzGetDatum(ts)),
							   opts->period_type);
}

/*
 * *result = t - span, as timestamptz_mi_interval computes it (the months
 * first, then the days, both in the session's time zone, then the time),
 * or false where timestamptz_mi_interval would fail: a step or the result
 * outside the range of timestamptz.  Never an error, for VACUUM's
 * retention (zl_retention.c), which must not fail on any stored period.
 */
bool
zl_timestamptz_minus_interval(TimestampTz t, const Interval *span, TimestampTz *result)
{
	struct pg_tm tm;
	fsec_t		fsec;
	int			tz;

	if (TIMESTAMP_NOT_FINITE(t))
		return false;
	if (span->month != 0)
	{
		int64		months;

		if (timestamp2tm(t, &tz, &tm, &fsec, NULL, NULL) != 0)
			return false;
		months = (int64) tm.tm_year * MONTHS_PER_YEAR + (tm.tm_mon - 1) - span->month;
		if (months < (int64) (JULIAN_MINYEAR - 1) * MONTHS_PER_YEAR ||
			months > (int64) (JULIAN_MAXYEAR + 1) * MONTHS_PER_YEAR)
			return false;
		tm.tm_year = (int) floor_div(months, MONTHS_PER_YEAR);
		tm.tm_mon = (int) (months - (int64) tm.tm_year * MONTHS_PER_YEAR) + 1;
		tm.tm_mday = Min(tm.tm_mday, day_tab[isleap(tm.tm_year)][tm.tm_mon - 1]);
		tz = DetermineTimeZoneOffset(&tm, session_timezone);
		if (tm2timestamp(&tm, fsec, &tz, &t) != 0)
			return false;
	}
	if (span->day != 0)
	{
		int64		julian;

		if (timestamp2tm(t, &tz, &tm, &fsec, NULL, NULL) != 0)
			return false;
		julian = (int64) date2j(tm.tm_year, tm.tm_mon, tm.tm_mday) - span->day;
		if (julian < 0 || julian > TIMESTAMP_END_JULIAN)
			return false;
		j2date((int) julian, &tm.tm_year, &tm.tm_mon, &tm.tm_mday);
		tz = DetermineTimeZoneOffset(&tm, session_timezone);
		if (tm2timestamp(&tm, fsec, &tz, &t) != 0)
			return false;
	}
	if (pg_sub_s64_overflow(t, span->time, &t) || !IS_VALID_TIMESTAMP(t))
		return false;
	*result = t;
	return true;
}

/*
 * An instant to be stored in the period columns, rounded to their
 * precision (timestamp(p), timestamptz(p)) as assigning it would round it.
 */
int64
zl_instant_to_precision(const ZLTableOptions *opts, int64 instant)
{
	Datum		value;

	if (opts->period_typmod < 0 || opts->period_type == DATEOID ||
		!zl_instant_is_finite(instant))
		return instant;
	value = DirectFunctionCall2(opts->period_type == TIMESTAMPTZOID ?
								timestamptz_scale : timestamp_scale,
								zl_instant_to_datum(instant, opts->period_type),
								Int32GetDatum(opts->period_typmod));
	return zl_datum_to_instant(value, opts->period_type);
}

/*
 * Does date or time text depend on the clock?  PostgreSQL's date and time
 * input reads the words now, today, tomorrow and yesterday, in any case,
 * as the current transaction's time or date (also next to a time, as in
 * "today 10:00"), so the same text gives another value each time it is
 * converted.  A word is a run of letters, as the date/time parser cuts
 * its fields (ParseDateTime, which skips other punctuation: "now()" is
 * now), classified by the parser's own table of special words
 * (DecodeSpecial); so every spelling the parser reads as one of them is
 * found, and fixed special values (epoch, infinity, allballs) are not.
 * Such a word where the parser would refuse the text anyway
 * ("01-today-2024") counts too, and it is found inside array and range
 * literals alike.
 */
bool
zl_time_text_reads_clock(const char *str)
{
	const unsigned char *p = (const unsigned char *) str;

	while (*p != '\0')
	{
		char		word[TOKMAXLEN + 2];
		int			len = 0;
		int			val;

		if (!isalpha(*p))
		{
			p++;
			continue;
		}
		for (; isalpha(*p); p++)
			if (len <= TOKMAXLEN)
				word[len++] = pg_tolower(*p);
		word[len] = '\0';
		/* (a word longer than the parser's tokens is none of them) */
		if (len <= TOKMAXLEN && DecodeSpecial(0, word, &val) == RESERV &&
			(val == DTK_NOW || val == DTK_TODAY || val == DTK_TOMORROW ||
			 val == DTK_YESTERDAY))
			return true;
	}
	return false;
}

/*
 * Does the input function of a type read date or time text: date, time,
 * timetz, timestamp, timestamptz, and domains, arrays, ranges and
 * multiranges of them?
 */
bool
zl_type_reads_time_text(Oid type)
{
	Oid			inner;

	type = getBaseType(type);
	if (type == DATEOID || type == TIMEOID || type == TIMETZOID ||
		type == TIMESTAMPOID || type == TIMESTAMPTZOID)
		return true;
	if (OidIsValid(inner = get_element_type(type)) ||
		OidIsValid(inner = get_range_subtype(type)) ||
		OidIsValid(inner = get_multirange_range(type)))
		return zl_type_reads_time_text(inner);
	return false;
}
