// Models of the service's workflow and connector resources (SPEC §1), as zod schemas. Request schemas are
// strict: a field the service does not know is refused before sending. Response schemas insist on the
// required fields and tolerate added ones, so a newer service version does not break the client.
import { z } from 'zod';

export const SOURCE_TYPES = [
  'azure', 'box', 'confluence', 'couchbase', 'databricks_volumes', 'dropbox', 'elasticsearch', 'gcs',
  'google_drive', 'kafka-cloud', 'mongodb', 'onedrive', 'outlook', 'postgres', 's3', 'salesforce',
  'sharepoint', 'slack', 'snowflake', 'jira', 'zendesk',
] as const;
export type SourceType = (typeof SOURCE_TYPES)[number];
export const SourceTypeSchema = z.enum(SOURCE_TYPES, {
  error: () => `must be one of the 21 source types: ${SOURCE_TYPES.join(', ')}`,
});

export const WORKFLOW_TYPES = ['basic', 'advanced', 'platinum', 'custom'] as const;
export type WorkflowType = (typeof WORKFLOW_TYPES)[number];

/** Named schedules of the update request, and the cron expression the service stores for each. */
export const SCHEDULE_CRON = {
  'every 15 minutes': '*/15 * * * *',
  'every hour': '0 * * * *',
  'every 2 hours': '0 */2 * * *',
  'every 4 hours': '0 */4 * * *',
  'every 6 hours': '0 */6 * * *',
  'every 8 hours': '0 */8 * * *',
  'every 10 hours': '0 */10 * * *',
  'every 12 hours': '0 */12 * * *',
  daily: '0 0 * * *',
  weekly: '0 0 * * 0',
  monthly: '0 0 1 * *',
} as const;
export type Schedule = keyof typeof SCHEDULE_CRON;
export const SCHEDULES = Object.keys(SCHEDULE_CRON) as Schedule[];

export const WORKFLOW_STATES = ['active', 'inactive'] as const;

export const Uuid = z.uuid({ error: 'must be a UUID, like 3fa85f64-5717-4562-b3fc-2c963f66afa6' });

export const ScheduleSchema = z.enum(SCHEDULES as [Schedule, ...Schedule[]], {
  error: () => `must be one of: ${SCHEDULES.join(', ')}`,
});
export const WorkflowTypeSchema = z.enum(WORKFLOW_TYPES, {
  error: () => `must be one of: ${WORKFLOW_TYPES.join(', ')}`,
});

export const WorkflowNodeSchema = z.strictObject({
  id: Uuid.nullish(),
  name: z.string(),
  type: z.string(),
  subtype: z.string(),
  settings: z.record(z.string(), z.unknown()).nullish(),
});
export type WorkflowNode = z.infer<typeof WorkflowNodeSchema>;

/** PUT /api/v1/workflows/{id}: every field optional and nullable; an absent field is absent from the body. */
export const WorkflowUpdateSchema = z.strictObject({
  name: z.string().nullish(),
  source_id: Uuid.nullish(),
  destination_id: Uuid.nullish(),
  workflow_type: WorkflowTypeSchema.nullish(),
  workflow_nodes: z.array(WorkflowNodeSchema).nullish(),
  schedule: ScheduleSchema.nullish(),
  reprocess_all: z.boolean().nullish(),
});
export type WorkflowUpdate = z.infer<typeof WorkflowUpdateSchema>;

/** POST /api/v1/workflows/ (not in the described interface, but offered by the real service). */
export const WorkflowCreateSchema = z.strictObject({
  name: z.string().min(1),
  source_id: Uuid.nullish(),
  destination_id: Uuid.nullish(),
  workflow_type: WorkflowTypeSchema,
  workflow_nodes: z.array(WorkflowNodeSchema).nullish(),
  schedule: ScheduleSchema.nullish(),
  reprocess_all: z.boolean().nullish(),
});
export type WorkflowCreate = z.infer<typeof WorkflowCreateSchema>;

const DateTime = z.string();

export const SourceConnectorInformationSchema = z.looseObject({
  id: z.string(),
  name: z.string(),
  type: z.string(),
  config: z.record(z.string(), z.unknown()),
  created_at: DateTime,
  updated_at: DateTime.nullish(),
});
export type SourceConnectorInformation = z.infer<typeof SourceConnectorInformationSchema>;

export const WorkflowInformationSchema = z.looseObject({
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
});
export type WorkflowInformation = z.infer<typeof WorkflowInformationSchema>;
