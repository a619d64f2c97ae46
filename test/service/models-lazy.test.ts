// The service's models are built when first used: importing the client (as `source list` does) builds no
// workflow or job schema. Counted through zod's own constructors, wrapped for this file only.
import { describe, expect, it, vi } from 'vitest';
import type * as Zod from 'zod';

const built = vi.hoisted(() => ({ looseObject: 0, strictObject: 0, enum: 0 }));
vi.mock('zod', async (importOriginal) => {
  const zod = await importOriginal<typeof Zod>();
  const counted = <F extends (...args: never[]) => unknown>(name: keyof typeof built, f: F) =>
    ((...args: Parameters<F>) => {
      built[name] += 1;
      return f(...args);
    }) as F;
  return {
    ...zod,
    looseObject: counted('looseObject', zod.looseObject),
    strictObject: counted('strictObject', zod.strictObject),
    enum: counted('enum', zod.enum),
  };
});

describe('the service models', () => {
  it('are not built when the client is loaded, and each is built once when first used', async () => {
    const { ServiceClient } = await import('../../src/service/client.js');
    const models = await import('../../src/service/models.js');
    expect(ServiceClient).toBeTypeOf('function');
    expect(built).toEqual({ looseObject: 0, strictObject: 0, enum: 0 });

    models.SourceConnectorInformationSchema.parse({ id: 'a', name: 'b', type: 'dropbox', config: {}, created_at: 'now' });
    models.DestinationConnectorInformationSchema.parse({ id: 'a', name: 'b', type: 's3', config: {}, created_at: 'now' });
    // One schema serves sources and destinations; the workflow and job models are still not built.
    expect(built).toEqual({ looseObject: 1, strictObject: 0, enum: 0 });

    models.JobInformationSchema.safeParse({});
    models.JobInformationSchema.safeParse({});
    expect(built.looseObject).toBe(3); // the job and its output_node_files items, once
  });
});
