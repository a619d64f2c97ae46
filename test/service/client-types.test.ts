// The library surface of the service module at run time: its errors, and what src/service/index.ts re-exports.
// The signatures callers compile against are checked by the type checker in client-types.test-d.ts.
import { describe, expect, it } from 'vitest';
import * as service from '../../src/service/index.js';
import {
  SERVICE_ERROR_CODES,
  ServiceClient,
  ServiceError,
  isServiceError,
  validateSourceConfig,
} from '../../src/service/index.js';
import { SyncauthError } from '../../src/errors.js';

describe('ServiceError', () => {
  it('is a SyncauthError with a stable code', () => {
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
