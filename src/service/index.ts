// The service module as a library: the client, its error type, the resource models and the per-type
// source connector configs.
export { ServiceClient } from './client.js';
export type {
  CreateDestinationRequest, CreateSourceRequest, ListJobsFilter, ListSourcesFilter, ListWorkflowsFilter, ServiceClientOptions, SourceSummary,
  UntypedCreateSourceRequest,
  WaitForCheckOptions,
} from './client.js';
export { SERVICE_ERROR_CODES, ServiceError, isServiceError } from './errors.js';
export type { ServiceErrorCode } from './errors.js';
export * from './models.js';
export * from './source-configs.js';
