// Notices (webhooks) when a person is needed: signed as Standard Webhooks say, kept in an outbox until
// delivered, reminded while a profile waits for re-authorization. The daemon only reports transitions
// (src/daemon/events.ts); the CLI wires a Notifier in as its NoticeSink.
export { FileOutbox, OUTBOX_FILE } from './file-outbox.js';
export { OUTBOX_VERSION, type Delivery, type OutboxStore, type Reminder } from './outbox.js';
export { ASK_AFTER_MS, MAX_AGE_MS, Notifier, sendOnce, sendTestNotices, type AttemptResult, type NotifierOptions, type ReauthorizationLink } from './notifier.js';
export { NOTIFY_FORMATS, renderBody, TEST_TYPE, type NoticePayload, type NotifyFormat } from './payload.js';
export { RedisOutbox, type RedisOutboxOptions } from './redis-outbox.js';
export { noticeId, parseNotifySecret, SECRET_VARIABLE, signature, webhookHeaders } from './signing.js';
export { parseNotifyUrl, resolveNotifySettings, splitUrls, type NotifySettings, type NotifyTarget } from './targets.js';
