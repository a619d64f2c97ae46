// One way to reach Redis for every part that keeps something there (the replicas' coordinator, the notices'
// outbox, the re-authorization page's links and rounds). Commands fail fast while Redis is away (no offline
// queue, no retries per request) and each connect and command has a deadline, so a caller is never held by an
// outage; the client reconnects by itself, backing off to 2 s. ioredis is loaded only here, when a Redis URL is
// given: a daemon without one never pays its ~20 MiB.
import type { Redis } from 'ioredis';

/** A client that has not connected yet (`lazyConnect`): the caller attaches its listeners, then connects. */
export async function newRedisClient(url: string, timeoutMs: number): Promise<Redis> {
  const { Redis: Client } = await import('ioredis');
  return new Client(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    retryStrategy: (attempt: number) => Math.min(250 * attempt, 2_000),
  });
}

/** Says goodbye when connected, else just drops the connection; never throws. */
export async function closeRedisClient(client: Redis): Promise<void> {
  if (client.status === 'ready') await client.quit().catch(() => client.disconnect());
  else client.disconnect();
}
