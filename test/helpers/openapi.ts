// Validates requests and responses against the service's public OpenAPI document, the contract the
// client and the emulator both answer to. The document's header is `unstructured-api-key`; ours is
// configurable, so headers are not checked here.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

const here = path.dirname(fileURLToPath(import.meta.url));
// A copy of the service's public OpenAPI document (3.0.2), kept with the tests so they need nothing outside the
// repository.
export const OPENAPI_PATH = path.resolve(here, '../fixtures/unstructured-platform-openapi.json');

interface Operation {
  parameters?: { name: string; in: string; required?: boolean; schema: object }[];
  requestBody?: { content: Record<string, { schema: object }>; required?: boolean };
  responses: Record<string, { content?: Record<string, { schema: object }> }>;
}
type OpenApiDoc = { paths: Record<string, Record<string, Operation>> };

const doc = JSON.parse(readFileSync(OPENAPI_PATH, 'utf8')) as OpenApiDoc & Record<string, unknown>;
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => void;
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addSchema({ ...doc, $id: 'openapi.json' });

export interface Located {
  template: string;
  operation: Operation;
  pathParams: Record<string, string>;
}

export function locate(method: string, urlPath: string): Located {
  const pathname = urlPath.split('?')[0] ?? urlPath;
  for (const [template, ops] of Object.entries(doc.paths)) {
    const names: string[] = [];
    const pattern = new RegExp(
      '^' + template.replace(/\{([^}]+)\}/g, (_m, name: string) => { names.push(name); return '([^/]+)'; }) + '$',
    );
    const match = pattern.exec(pathname);
    const operation = ops[method.toLowerCase()];
    if (match && operation) {
      const pathParams = Object.fromEntries(names.map((n, i) => [n, decodeURIComponent(match[i + 1] ?? '')]));
      return { template, operation, pathParams };
    }
  }
  throw new Error(`${method} ${pathname} is not an operation of the public OpenAPI document`);
}

function check(schema: object, value: unknown, what: string): string[] {
  const validate = ajv.compile(schemaWithBase(schema));
  if (validate(value)) return [];
  return (validate.errors ?? []).map((e) => `${what}${e.instancePath} ${e.message ?? ''}`.trim());
}

// Query values are text on the wire; a server coerces them to the declared type (FastAPI does, through
// pydantic), so a value is valid when the text itself or its integer/number/boolean reading is.
function checkQueryValue(schema: object, text: string, what: string): string[] {
  const readings: unknown[] = [text];
  if (/^-?\d+(\.\d+)?$/.test(text)) readings.push(Number(text));
  if (text === 'true' || text === 'false') readings.push(text === 'true');
  let first: string[] = [];
  for (const [index, reading] of readings.entries()) {
    const errors = check(schema, reading, what);
    if (errors.length === 0) return [];
    if (index === 0) first = errors;
  }
  return first;
}

// Schemas inside the document use local refs (#/components/...); resolve them against the document.
function schemaWithBase(schema: object): object {
  return JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"openapi.json#/components/')) as object;
}

/** Errors (empty when valid) for a request: path, method, path and query parameters, JSON body. */
export function requestErrors(method: string, url: string, body?: unknown): string[] {
  const { operation, pathParams } = locate(method, url);
  const errors: string[] = [];
  const query = new URL(url, 'http://x').searchParams;
  for (const p of operation.parameters ?? []) {
    if (p.in === 'path') errors.push(...check(p.schema, pathParams[p.name], `path.${p.name}`));
    if (p.in === 'query' && query.has(p.name)) errors.push(...checkQueryValue(p.schema, query.get(p.name) ?? '', `query.${p.name}`));
  }
  const known = new Set((operation.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name));
  for (const name of query.keys()) if (!known.has(name)) errors.push(`query.${name} is not a parameter`);
  const bodySchema = operation.requestBody?.content['application/json']?.schema;
  if (body !== undefined) {
    if (!bodySchema) errors.push('the operation takes no JSON body');
    else errors.push(...check(bodySchema, body, 'body'));
  } else if (operation.requestBody?.required) {
    errors.push('the operation requires a body');
  }
  return errors;
}

/** Errors (empty when valid) for a response of the given status to the given request. */
export function responseErrors(method: string, url: string, status: number, body: unknown): string[] {
  const { operation } = locate(method, url);
  const response = operation.responses[String(status)];
  if (!response) return [`status ${status} is not declared for ${method} ${url}`];
  const schema = response.content?.['application/json']?.schema;
  return schema ? check(schema, body, 'response') : [];
}
