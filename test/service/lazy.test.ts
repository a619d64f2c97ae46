import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import { lazy } from '../../src/service/lazy.js';
import {
  ConnectionCheckSchema, JobInformationSchema, SOURCE_TYPES, SourceConnectorInformationSchema, SourceTypeSchema, Uuid,
  WorkflowInformationSchema, WorkflowUpdateSchema,
} from '../../src/service/models.js';

describe('lazy', () => {
  it('builds nothing until the value is first used, then builds it once for every later use', () => {
    let builds = 0;
    const schema = lazy(() => {
      builds += 1;
      return z.looseObject({ id: z.string() });
    });
    expect(builds).toBe(0);
    expect(schema.safeParse({ id: 'a', extra: 1 }).success).toBe(true);
    expect(schema.safeParse({ id: 1 }).success).toBe(false);
    expect(schema.shape.id).toBeInstanceOf(z.ZodString);
    expect(builds).toBe(1);
  });

  it('stands in for the schema it builds: instanceof, keys, methods and composition into other schemas', () => {
    const inner = lazy(() => z.strictObject({ n: z.number() }));
    expect(inner).toBeInstanceOf(z.ZodObject);
    expect(Object.keys(inner)).toEqual(Object.keys(z.strictObject({ n: z.number() })));
    expect('safeParse' in inner).toBe(true);
    const list = z.array(inner.nullish());
    expect(list.parse([{ n: 1 }, null])).toEqual([{ n: 1 }, null]);
    const failed = list.safeParse([{ n: 'x' }]);
    expect(failed.success).toBe(false);
    expect(failed.error?.issues[0]?.path).toEqual([0, 'n']);
  });
});

describe('the models, built on first use', () => {
  it('are the zod schemas they were, with the same checks and messages', () => {
    expect(SourceTypeSchema).toBeInstanceOf(z.ZodEnum);
    expect(SourceTypeSchema.options).toEqual([...SOURCE_TYPES]);
    expect(SourceTypeSchema.safeParse('nope').error?.issues[0]?.message).toMatch(/^must be one of the 21 source types: /);
    expect(Uuid.safeParse('3fa85f64-5717-4562-b3fc-2c963f66afa6').success).toBe(true);
    expect(Uuid.safeParse('x').error?.issues[0]?.message).toBe('must be a UUID, like 3fa85f64-5717-4562-b3fc-2c963f66afa6');
    expect(WorkflowUpdateSchema.safeParse({ surprise: 1 }).success).toBe(false);
    expect(WorkflowUpdateSchema.safeParse({ source_id: null, reprocess_all: true }).success).toBe(true);
    const connector = { id: 'a', name: 'b', type: 'dropbox', config: {}, created_at: 'now', added: 1 };
    expect(SourceConnectorInformationSchema.parse(connector)).toEqual(connector);
    expect(SourceConnectorInformationSchema.safeParse({ ...connector, id: undefined }).success).toBe(false);
    expect(ConnectionCheckSchema.safeParse({ id: 'c', status: 'SUCCESS', created_at: 'now' }).success).toBe(true);
    expect(JobInformationSchema.safeParse({ id: 'j' }).success).toBe(false);
    expect(WorkflowInformationSchema.shape.workflow_nodes).toBeInstanceOf(z.ZodArray);
  });
});
