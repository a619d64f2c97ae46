// Models of the service's workflow and connector resources (SPEC §1), as zod schemas. Request schemas are
// strict: a field the service does not know is refused before sending. Response schemas insist on the
// required fields and tolerate added ones, so a newer service version does not break the client. Each is built
// when first used (lazy.ts): a command that reads connectors does not build the workflow and job models.
import * as z from 'zod';
import { DESTINATION_TYPES, SCHEDULES, SOURCE_TYPES, WORKFLOW_TYPES, type Schedule } from './constants.js';
import { lazy } from './lazy.js';

export * from './constants.js';

export const SourceTypeSchema = lazy(() => z.enum(SOURCE_TYPES, {
  error: () => `must be one of the 21 source types: ${SOURCE_TYPES.join(', ')}`,
}));

export const DestinationTypeSchema = lazy(() => z.enum(DESTINATION_TYPES, {
  error: () => `must be one of the destination types: ${DESTINATION_TYPES.join(', ')}`,
}));

export const Uuid = lazy(() => z.uuid({ error: 'must be a UUID, like 3fa85f64-5717-4562-b3fc-2c963f66afa6' }));

export const ScheduleSchema = lazy(() => z.enum(SCHEDULES as [Schedule, ...Schedule[]], {
  error: () => `must be one of: ${SCHEDULES.join(', ')}`,
}));
export const WorkflowTypeSchema = lazy(() => z.enum(WORKFLOW_TYPES, {
  error: () => `must be one of: ${WORKFLOW_TYPES.join(', ')}`,
}));

export const WorkflowNodeSchema = lazy(() => z.strictObject({
  id: Uuid.nullish(),
  name: z.string(),
  type: z.string(),
  subtype: z.string(),
  settings: z.record(z.string(), z.unknown()).nullish(),
}));
export type WorkflowNode = z.infer<typeof WorkflowNodeSchema>;

/** PUT /api/v1/workflows/{id}: every field optional and nullable; an absent field is absent from the body. */
export const WorkflowUpdateSchema = lazy(() => z.strictObject({
  name: z.string().nullish(),
  source_id: Uuid.nullish(),
  destination_id: Uuid.nullish(),
  workflow_type: WorkflowTypeSchema.nullish(),
  workflow_nodes: z.array(WorkflowNodeSchema).nullish(),
  schedule: ScheduleSchema.nullish(),
  reprocess_all: z.boolean().nullish(),
}));
export type WorkflowUpdate = z.infer<typeof WorkflowUpdateSchema>;

/** POST /api/v1/workflows/ (not in the described interface, but offered by the real service). */
export const WorkflowCreateSchema = lazy(() => z.strictObject({
  name: z.string().min(1),
  source_id: Uuid.nullish(),
  destination_id: Uuid.nullish(),
  workflow_type: WorkflowTypeSchema,
  workflow_nodes: z.array(WorkflowNodeSchema).nullish(),
  schedule: ScheduleSchema.nullish(),
  reprocess_all: z.boolean().nullish(),
}));
export type WorkflowCreate = z.infer<typeof WorkflowCreateSchema>;

const DateTime = lazy(() => z.string());

/** The service answers with the same shape for source and destination connectors. */
const ConnectorInformationSchema = lazy(() => z.looseObject({
  id: z.string(),
  name: z.string(),
  type: z.string(),
  config: z.record(z.string(), z.unknown()),
  created_at: DateTime,
  updated_at: DateTime.nullish(),
}));

export const SourceConnectorInformationSchema = ConnectorInformationSchema;
export type SourceConnectorInformation = z.infer<typeof SourceConnectorInformationSchema>;

export const WorkflowInformationSchema = lazy(() => z.looseObject({
  id: z.string(),
  name: z.string(),
  sources: z.array(z.string()),
  destinations: z.array(z.string()),
  workflow_type: z.string().nullish(),
  workflow_nodes: z.array(z.looseObject({ name: z.string(), type: z.string(), subtype: z.string() })),
  schedule: z.looseObject({ crontab_entries: z.array(z.looseObject({ cron_expression: z.string() })) }).nullish(),
  status: z.string(),
  created_at: DateTime,
  updated_at: DateTime.nullish(),
  reprocess_all: z.boolean().nullish(),
}));
export type WorkflowInformation = z.infer<typeof WorkflowInformationSchema>;

export const DestinationConnectorInformationSchema = ConnectorInformationSchema;
export type DestinationConnectorInformation = z.infer<typeof DestinationConnectorInformationSchema>;

// Status fields are plain strings here: a state a newer service adds must not make its answers unreadable.
// Callers compare against the values in constants.ts.

/** DagNodeConnectionCheck: the result of a connector's connection check. */
export const ConnectionCheckSchema = lazy(() => z.looseObject({
  id: z.string(),
  status: z.string(),
  reason: z.string().nullish(),
  created_at: DateTime,
  reported_at: DateTime.nullish(),
}));
export type ConnectionCheck = z.infer<typeof ConnectionCheckSchema>;

export const JobInformationSchema = lazy(() => z.looseObject({
  id: z.string(),
  workflow_id: z.string(),
  workflow_name: z.string(),
  status: z.string(),
  created_at: DateTime,
  runtime: z.string().nullish(),
  input_file_ids: z.array(z.string()).nullish(),
  output_node_files: z.array(z.looseObject({ node_id: z.string(), file_id: z.string() })).nullish(),
  job_type: z.string().nullish(),
}));
export type JobInformation = z.infer<typeof JobInformationSchema>;
