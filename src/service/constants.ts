// The service's enumerations as plain values, without zod, so the command tree can list them in --help
// without loading the validation library.
export const SOURCE_TYPES = [
  'azure', 'box', 'confluence', 'couchbase', 'databricks_volumes', 'dropbox', 'elasticsearch', 'gcs',
  'google_drive', 'kafka-cloud', 'mongodb', 'onedrive', 'outlook', 'postgres', 's3', 'salesforce',
  'sharepoint', 'slack', 'snowflake', 'jira', 'zendesk',
] as const;
export type SourceType = (typeof SOURCE_TYPES)[number];
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

/** The destination connector types of the public document. */
export const DESTINATION_TYPES = [
  'astradb', 'azure_ai_search', 'couchbase', 'databricks_volumes', 'databricks_volume_delta_tables', 'delta_table',
  'elasticsearch', 'gcs', 'kafka-cloud', 'milvus', 'mongodb', 'motherduck', 'neo4j', 'onedrive', 'pinecone',
  'postgres', 'redis', 'qdrant-cloud', 's3', 'snowflake', 'weaviate-cloud', 'ibm_watsonx_s3',
] as const;
export type DestinationType = (typeof DESTINATION_TYPES)[number];

/** States of a job (upper case on the wire); the first two are still running. */
export const JOB_STATES = ['SCHEDULED', 'IN_PROGRESS', 'COMPLETED', 'STOPPED', 'FAILED'] as const;
export type JobState = (typeof JOB_STATES)[number];
export const RUNNING_JOB_STATES: readonly string[] = ['SCHEDULED', 'IN_PROGRESS'];

/** States of a connection check: SCHEDULED until the service has tried the connector. */
export const CONNECTION_CHECK_STATES = ['SCHEDULED', 'SUCCESS', 'FAILURE'] as const;
export type ConnectionCheckState = (typeof CONNECTION_CHECK_STATES)[number];
