// Handing the access token to processes next to syncauth: shared files, templates and a Unix socket.
export { parseMode, parseSocketMode, PRIVATE_ACCESS, resolveGroup, writeSharedFile } from './file.js';
export type { FileAccess } from './file.js';
export { ACCOUNT_ID_TIMEOUT_MS, checkTemplate, parseTemplateFlag, renderTemplate, TEMPLATE_FIELDS, TemplateError, TemplateRenderer, templatesUse } from './template.js';
export type { TemplateSpec, TemplateValues } from './template.js';
export { startTokenSocket } from './socket.js';
export type { TokenSocket, TokenSocketOptions, TokenSource } from './socket.js';
