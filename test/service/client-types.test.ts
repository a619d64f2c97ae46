// The library surface of the service module, checked by the type checker (`tsc --noEmit` runs over test/) and
// at run time: the signatures callers compile against, and what src/service/index.ts re-exports.
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { Dispatcher } from 'undici';
import * as service from '../../src/service/index.js';
import {
  SERVICE_ERROR_CODES,
  ServiceClient,
  ServiceError,
  isServiceError,
  validateSourceConfig,
} from '../../src/service/index.js';
import type {
  CreateSourceRequest,
  ListSourcesFilter,
  ServiceClientOptions,
  SourceConfig,
  SourceType,
  ServiceErrorCode,
  SourceConnectorInformation,
  WorkflowCreate,
  WorkflowInformation,
  WorkflowUpdate,
} from '../../src/service/index.js';
import { SyncauthError } from '../../src/errors.js';
import type { FieldIssue } from '../../src/errors.js';

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
    const typeCheckOnly = (client: ServiceClient): void => {
      // @ts-expect-error `sources` is a response field; the request has `source_id`.
      void client.updateWorkflow('id', { sources: [] });
      // @ts-expect-error not one of the named schedules
      void client.updateWorkflow('id', { schedule: 'hourly' });
      // @ts-expect-error workflow_type is required to create a workflow
      void client.createWorkflow({ name: 'wf' });
      void client.updateWorkflow('id', { schedule: null, name: undefined });
    };
    expect(typeof typeCheckOnly).toBe('function');
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
    expectTypeOf(isServiceError).guards.toEqualTypeOf<ServiceError>();
    const err = new ServiceError('SERVICE_CONFLICT', 'x', { status: 409 });
    expect(err).toBeInstanceOf(SyncauthError);
    expect(err.name).toBe('ServiceError');
    expect(isServiceError(err, 'SERVICE_CONFLICT')).toBe(true);
    expect(isServiceError(err, 'SERVICE_NOT_FOUND')).toBe(false);
    expect(isServiceError(new Error('x'))).toBe(false);
  });

  it('has exactly the documented codes', () => {
    expect([...SERVICE_ERROR_CODES].sort()).toEqual([
      'SERVICE_BAD_REQUEST', 'SERVICE_BAD_RESPONSE', 'SERVICE_CONFIG_REFUSED', 'SERVICE_CONFLICT',
      'SERVICE_FORBIDDEN', 'SERVICE_HTTP_ERROR', 'SERVICE_INVALID_REQUEST', 'SERVICE_METHOD_NOT_ALLOWED',
      'SERVICE_NETWORK', 'SERVICE_NOT_FOUND', 'SERVICE_RATE_LIMITED', 'SERVICE_UNAUTHORIZED', 'SERVICE_UNAVAILABLE',
    ]);
  });
});

describe('src/service/index.ts', () => {
  it('re-exports the client, its errors, the models and the source configs', () => {
    for (const name of [
      'ServiceClient', 'ServiceError', 'isServiceError', 'SERVICE_ERROR_CODES',
      'SOURCE_TYPES', 'SourceTypeSchema', 'WorkflowUpdateSchema', 'WorkflowCreateSchema',
      'SourceConnectorInformationSchema', 'WorkflowInformationSchema', 'Uuid', 'SCHEDULE_CRON',
      'validateSourceConfig', 'maskSourceConfig', 'isSecretConfigField',
    ]) {
      expect(service, name).toHaveProperty(name);
    }
    expect(service.ServiceClient).toBe(ServiceClient);
    expect(typeof validateSourceConfig).toBe('function');
  });

  it('keeps the transport internal', () => {
    expect(service).not.toHaveProperty('Transport');
    expect(service).not.toHaveProperty('errorFromResponse');
  });
});
