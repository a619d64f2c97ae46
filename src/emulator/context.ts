// What every route module of the emulator shares, and small request helpers.
import type { Request } from 'express';
import type { Generator, MutableState } from './state.js';
import type { ResolvedEmulatorOptions } from './types.js';

export interface EmulatorContext {
  readonly options: ResolvedEmulatorOptions;
  readonly state: MutableState;
  readonly gen: Generator;
}

/** The request body as text; the app reads every body raw so that each route can parse it its own way. */
export function bodyText(req: Request): string {
  const body: unknown = req.body;
  return Buffer.isBuffer(body) ? body.toString('utf8') : '';
}

/** Query parameters as sent, without express's nested-object parsing. */
export function queryParams(req: Request): URLSearchParams {
  return new URL(req.originalUrl, 'http://emulator.invalid').searchParams;
}

/** Media type of the request without parameters, lower case; '' when absent. */
export function mediaType(req: Request): string {
  return (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
}

export function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}
