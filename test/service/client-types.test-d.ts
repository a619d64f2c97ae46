// The library surface of the service module, for the type checker only: the signatures callers compile against,
// and the requests the types refuse. `npm run typecheck` (part of `npm test`) compiles it, and a wrong type or an
// `@ts-expect-error` that is no longer an error fails it; vitest runs `*.test.ts` only, so nothing here runs (as
// a `*.test-d.ts`, `vitest --typecheck` reports it test by test). The run-time side is client-types.test.ts.
import { describe, expectTypeOf, it } from 'vitest';
import type { Dispatcher } from 'undici';
import type {
  CreateSourceRequest,
  ListSourcesFilter,
  ServiceClient,
  ServiceClientOptions,
  ServiceError,
  ServiceErrorCode,
  SourceConfig,
  SourceConnectorInformation,
  SourceType,
  WorkflowCreate,
  WorkflowInformation,
  WorkflowUpdate,
} from '../../src/service/index.js';
import type { isServiceError } from '../../src/service/index.js';
import type { FieldIssue, SyncauthError } from '../../src/errors.js';

declare const client: ServiceClient;

describe('ServiceClient types', () => {
  it('has the documented method signatures', () => {
    expectTypeOf<ServiceClient['createSource']>().toEqualTypeOf<(req: CreateSourceRequest) => Promise<SourceConnectorInformation>>();
    expectTypeOf<ServiceClient['createSourceUntyped']>().toEqualTypeOf<
      (req: { name: string; type: string; config: Record<string, unknown> }) => Promise<SourceConnectorInformation>
    >();
    expectTypeOf<ServiceClient['getSource']>().toEqualTypeOf<(id: string) => Promise<SourceConnectorInformation>>();
    expectTypeOf<ServiceClient['listSources']>().toEqualTypeOf<
      (filter?: ListSourcesFilter) => Promise<SourceConnectorInformation[]>
    >();
    expectTypeOf<ListSourcesFilter>().toEqualTypeOf<{ sourceType?: string; where?: (source: SourceConnectorInformation) => boolean }>();
    expectTypeOf<ServiceClient['findSourceByName']>().toEqualTypeOf<
      (name: string, type?: string) => Promise<SourceConnectorInformation | undefined>
    >();
    expectTypeOf<ServiceClient['updateSource']>().toEqualTypeOf<
      <T extends SourceType>(id: string, config: SourceConfig<T>, type: T) => Promise<SourceConnectorInformation>
    >();
    expectTypeOf<ServiceClient['updateSourceUntyped']>().toEqualTypeOf<
      (id: string, config: Record<string, unknown>, type?: string) => Promise<SourceConnectorInformation>
    >();
    expectTypeOf<ServiceClient['deleteSource']>().toEqualTypeOf<(id: string) => Promise<void>>();
    expectTypeOf<ServiceClient['createWorkflow']>().toEqualTypeOf<(req: WorkflowCreate) => Promise<WorkflowInformation>>();
    expectTypeOf<ServiceClient['getWorkflow']>().toEqualTypeOf<(id: string) => Promise<WorkflowInformation>>();
    expectTypeOf<ServiceClient['listWorkflows']>().toEqualTypeOf<
      (filter?: { name?: string }) => Promise<WorkflowInformation[]>
    >();
    expectTypeOf<ServiceClient['findWorkflowByName']>().toEqualTypeOf<
      (name: string) => Promise<WorkflowInformation | undefined>
    >();
    expectTypeOf<ServiceClient['updateWorkflow']>().toEqualTypeOf<
      (id: string, update: WorkflowUpdate) => Promise<WorkflowInformation>
    >();
    expectTypeOf<ServiceClient['close']>().toEqualTypeOf<() => Promise<void>>();
  });

  it('takes the documented options', () => {
    expectTypeOf<ServiceClientOptions>().toEqualTypeOf<{
      baseUrl: string;
      apiKey: string;
      apiKeyHeader?: string;
      dispatcher?: Dispatcher;
      timeouts?: { connectMs?: number; headersMs?: number; bodyMs?: number; totalMs?: number };
      retry?: { retries?: number; baseDelayMs?: number; maxDelayMs?: number };
      sleep?: (ms: number) => Promise<void>;
      userAgent?: string;
    }>();
  });

  it('refuses, at compile time, a workflow update with a field the service does not know', () => {
    // @ts-expect-error `sources` is a response field; the request has `source_id`.
    void client.updateWorkflow('id', { sources: [] });
    // @ts-expect-error not one of the named schedules
    void client.updateWorkflow('id', { schedule: 'hourly' });
    // @ts-expect-error workflow_type is required to create a workflow
    void client.createWorkflow({ name: 'wf' });
    void client.updateWorkflow('id', { schedule: null, name: undefined });
  });
});

describe('ServiceError types', () => {
  it('is a SyncauthError with a stable code and the documented fields', () => {
    expectTypeOf<ServiceError>().toMatchTypeOf<SyncauthError>();
    expectTypeOf<ServiceError['code']>().toEqualTypeOf<ServiceErrorCode>();
    expectTypeOf<ServiceError['status']>().toEqualTypeOf<number | undefined>();
    expectTypeOf<ServiceError['issues']>().toEqualTypeOf<FieldIssue[] | undefined>();
    expectTypeOf<ServiceError['retryAfterMs']>().toEqualTypeOf<number | undefined>();
    expectTypeOf<ServiceError['detail']>().toEqualTypeOf<string | undefined>();
    expectTypeOf<ServiceError['unsupported']>().toEqualTypeOf<boolean>();
    expectTypeOf<typeof isServiceError>().guards.toEqualTypeOf<ServiceError>();
  });
});
