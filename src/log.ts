// The one place where log output is shaped: pino with every secret-bearing field redacted, JSON lines for
// machines, a short human line when stdout is a terminal. Code that logs never has to remember what to hide.
import { createRequire } from 'node:module';
import type * as Pino from 'pino';
import type { DestinationStream, Level, LevelWithSilent, Logger } from 'pino';
import { redact, REDACTED } from './redact.js';

export type { Logger } from 'pino';

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const satisfies readonly LevelWithSilent[];

export type LogLevel = (typeof LOG_LEVELS)[number];

export { REDACTED };

// Field names that hold a secret wherever they appear, in both the wire spelling and ours.
const SECRET_FIELDS = [
  'authorization', 'cookie', 'refresh_token', 'access_token', 'token', 'app_secret', 'app_key', 'api_key',
  'client_secret', 'code_verifier', 'refreshToken', 'accessToken', 'appSecret', 'appKey', 'apiKey',
  'clientSecret', 'storeKey', 'store_key', 'password', 'secret', 'secrets', 'grant',
];
// Headers whose value is a credential; the service's key header has two names in the wild.
const SECRET_HEADERS = ['authorization', 'cookie', 'set-cookie', 'service-api-key', 'unstructured-api-key', 'proxy-authorization'];
// Whole values that are nothing but secrets or may carry them: connector configs, form and response bodies.
const SECRET_CONTAINERS = ['config', 'form', 'body'];

function redactPaths(extraHeaders: readonly string[]): string[] {
  const paths = new Set<string>();
  for (const field of SECRET_FIELDS) {
    for (const prefix of ['', '*.', '*.*.']) paths.add(`${prefix}${field}`);
  }
  for (const header of [...SECRET_HEADERS, ...extraHeaders.map((h) => h.toLowerCase())]) {
    for (const prefix of ['headers', '*.headers', '*.*.headers']) paths.add(`${prefix}[${JSON.stringify(header)}]`);
  }
  for (const container of SECRET_CONTAINERS) {
    for (const prefix of ['', '*.']) paths.add(`${prefix}${container}`);
  }
  // An authorization code is single-use but still a credential until spent. Only at the top level: `err.code`
  // and the like are our own error codes, which a reader needs.
  paths.add('code');
  return [...paths];
}

export interface LoggerOptions {
  level?: LogLevel;
  /** Where lines go; default stdout. */
  destination?: DestinationStream;
  /** Human-readable lines instead of JSON; default: when the destination is stdout and stdout is a terminal. */
  pretty?: boolean;
  /** Header names that carry credentials besides the usual ones (a configured API key header). */
  secretHeaders?: readonly string[];
}

/** pino, loaded when the first logger is made: a command that only names the log levels never pays for it. */
const loadPino = (): typeof Pino.pino => (createRequire(import.meta.url)('pino') as typeof Pino).pino;

export function createLogger(options: LoggerOptions = {}): Logger {
  const pino = loadPino();
  const pretty = options.pretty ?? (options.destination === undefined && process.stdout.isTTY === true);
  const destination = options.destination ?? process.stdout;
  return pino(
    {
      level: options.level ?? 'info',
      redact: { paths: redactPaths(options.secretHeaders ?? []), censor: REDACTED },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      // Field names catch the secrets a caller hands over knowingly; this catches every known secret value,
      // in any form, wherever it sits in the line (a message quoting a provider's answer, an error's text).
      hooks: { streamWrite: (line) => redact(line) },
    },
    pretty ? prettyStream(destination) : destination,
  );
}

const LEVEL_NAMES: Record<number, Level> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };
const HIDDEN_KEYS = new Set(['level', 'time', 'pid', 'hostname', 'msg']);

/**
 * Renders pino's JSON lines (already redacted) as `12:00:00 INFO  message key=value`. pino-pretty would do
 * more, but a sidecar's terminal output is read rarely and only needs to be legible.
 */
export function prettyStream(out: DestinationStream): DestinationStream {
  return {
    write(line: string) {
      let record: Record<string, unknown>;
      try {
        record = JSON.parse(line) as Record<string, unknown>;
      } catch {
        out.write(line);
        return;
      }
      const time = typeof record.time === 'string' ? record.time.slice(11, 19) : '';
      const level = (LEVEL_NAMES[Number(record.level)] ?? 'info').toUpperCase().padEnd(5);
      const fields = Object.entries(record)
        .filter(([key]) => !HIDDEN_KEYS.has(key))
        .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`);
      out.write(`${time} ${level} ${String(record.msg ?? '')}${fields.length ? `  ${fields.join(' ')}` : ''}\n`);
    },
  };
}
