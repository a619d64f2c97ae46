// The defaults the service fills into a connector config it answers with. Its request models (the `…Input`
// schemas of the public document) declare these defaults, and its response models mark the same fields as
// required, so an answer always carries them even when the request left them out. test/emulator/config-defaults
// checks this table against the document.
import type { DestinationType, SourceType } from '../service/constants.js';

export const SOURCE_CONFIG_DEFAULTS: Readonly<Record<SourceType, Readonly<Record<string, unknown>>>> = {
  azure: { recursive: true },
  box: { recursive: true },
  // `spaces` has no default in the request model, but the response model requires it: pydantic answers null.
  confluence: { cloud: false, extract_images: false, extract_files: false, max_num_of_spaces: 500, max_num_of_docs_from_each_space: 150, spaces: null },
  couchbase: {},
  databricks_volumes: {},
  dropbox: { recursive: true },
  elasticsearch: {},
  gcs: { recursive: true },
  google_drive: { recursive: true },
  'kafka-cloud': { port: 9092, num_messages_to_consume: 100 },
  mongodb: {},
  onedrive: { recursive: false },
  outlook: { recursive: false },
  postgres: { id_column: 'id' },
  s3: { anonymous: false, recursive: true },
  salesforce: {},
  sharepoint: { authority_url: 'https://login.microsoftonline.com', recursive: false },
  // No model in the public document: the config is kept as given.
  slack: {},
  snowflake: { port: 443, batch_size: 100 },
  jira: { cloud: false, download_attachments: false },
  zendesk: { item_type: 'tickets', batch_size: 2 },
};

export const DESTINATION_CONFIG_DEFAULTS: Readonly<Record<DestinationType, Readonly<Record<string, unknown>>>> = {
  astradb: { keyspace: 'default_keyspace', batch_size: 20, flatten_metadata: false },
  azure_ai_search: {},
  couchbase: {},
  databricks_volumes: {},
  databricks_volume_delta_tables: { database: 'default' },
  delta_table: {},
  elasticsearch: {},
  gcs: {},
  'kafka-cloud': { port: 9092, batch_size: 100 },
  milvus: {},
  mongodb: {},
  motherduck: {},
  neo4j: { batch_size: 100 },
  onedrive: {},
  pinecone: { batch_size: 50 },
  postgres: {},
  redis: { port: 6379, database: 0, ssl: true, batch_size: 100 },
  'qdrant-cloud': { batch_size: 50 },
  s3: { anonymous: false },
  snowflake: { port: 443, table_name: 'elements', batch_size: 50, record_id_key: 'record_id' },
  'weaviate-cloud': {},
  ibm_watsonx_s3: { max_retries_connection: 10, max_retries: 50, record_id_key: 'record_id' },
};

/** The config as the service answers with it: the defaults of its type, then what was stored. */
export function withDefaults(defaults: Readonly<Record<string, Readonly<Record<string, unknown>>>>, type: string, config: Record<string, unknown>): Record<string, unknown> {
  const own = Object.hasOwn(defaults, type) ? defaults[type] : undefined;
  return { ...structuredClone(own ?? {}), ...structuredClone(config) };
}
