// node-cron reads the time of day through Intl.DateTimeFormat even when no time zone is given: the first
// formatter loads ICU's locale and calendar data, 7–8 MiB of resident memory in a daemon of about 60. The CLI's
// bundle (scripts/bundle-cli.mjs) hands node-cron this `Intl` instead, whose DateTimeFormat answers the two
// questions node-cron asks in the process's own time zone from Date's local fields, which use the same zone
// rules, and hands every other question (a named time zone, other fields) to the real Intl.DateTimeFormat.
// node-cron still parses the expression, finds the next tick and runs the timers; the library (plain dist/)
// uses node-cron unchanged.

const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'] as const;
/** The date and time of day node-cron asks for (its `buildDateParts`), in en-US with a 24-hour clock. */
const DATE_PARTS: Readonly<Record<string, unknown>> = {
  year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', weekday: 'short', hour12: false,
};
/** The offset from UTC node-cron asks for (its `getTimezoneGMT`): "GMT", "GMT+2", "GMT-3:30". */
const OFFSET_PARTS: Readonly<Record<string, unknown>> = { timeZoneName: 'shortOffset' };

type Parts = Intl.DateTimeFormatPart[];

function sameOptions(options: Record<string, unknown>, expected: Readonly<Record<string, unknown>>): boolean {
  const keys = Object.keys(options).filter((key) => options[key] !== undefined);
  return keys.length === Object.keys(expected).length && keys.every((key) => options[key] === expected[key]);
}

const two = (value: number): string => String(value).padStart(2, '0');

function dateParts(date: Date): Parts {
  const literal = (value: string): Intl.DateTimeFormatPart => ({ type: 'literal', value });
  // The order and separators of en-US ("Thu, 11/26/2026, 21:14:28"); node-cron reads the parts by type.
  return [
    { type: 'weekday', value: WEEKDAYS[date.getDay()] as string }, literal(', '),
    { type: 'month', value: two(date.getMonth() + 1) }, literal('/'),
    { type: 'day', value: two(date.getDate()) }, literal('/'),
    { type: 'year', value: String(date.getFullYear()) }, literal(', '),
    { type: 'hour', value: two(date.getHours()) }, literal(':'),
    { type: 'minute', value: two(date.getMinutes()) }, literal(':'),
    { type: 'second', value: two(date.getSeconds()) },
  ];
}

function offsetParts(date: Date): Parts {
  const east = -date.getTimezoneOffset();
  const minutes = Math.abs(east);
  const name = east === 0 ? 'GMT' : `GMT${east < 0 ? '-' : '+'}${Math.floor(minutes / 60)}${minutes % 60 ? `:${two(minutes % 60)}` : ''}`;
  return [
    { type: 'month', value: String(date.getMonth() + 1) }, { type: 'literal', value: '/' },
    { type: 'day', value: String(date.getDate()) }, { type: 'literal', value: '/' },
    { type: 'year', value: String(date.getFullYear()) }, { type: 'literal', value: ', ' },
    { type: 'timeZoneName', value: name },
  ];
}

/** A DateTimeFormat for the process's own time zone where node-cron's questions allow, the real one otherwise. */
function LocalDateTimeFormat(locale?: string | string[], options: Record<string, unknown> = {}): Pick<Intl.DateTimeFormat, 'formatToParts' | 'format'> {
  const local = locale === 'en-US' && options.timeZone === undefined;
  const parts = local && sameOptions(options, DATE_PARTS) ? dateParts : local && sameOptions(options, OFFSET_PARTS) ? offsetParts : undefined;
  if (parts === undefined) return new Intl.DateTimeFormat(locale, options);
  return {
    formatToParts: (date?: Date | number) => parts(date === undefined ? new Date() : new Date(date)),
    format: (date?: Date | number) => parts(date === undefined ? new Date() : new Date(date)).map((part) => part.value).join(''),
  };
}

/** What node-cron's `Intl` is in the CLI's bundle: the real one but for DateTimeFormat. */
export const cronIntl: typeof Intl = Object.create(Intl, {
  DateTimeFormat: { value: LocalDateTimeFormat, enumerable: true },
}) as typeof Intl;
