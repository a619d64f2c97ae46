// Every service call has an overall deadline, not only idle timeouts: a server that trickles its answer one
// byte at a time never trips an idle timeout, and must still end the call. cancel() ends calls at once.
import { describe, expect, it } from 'vitest';
import { ServiceClient, isServiceError } from '../../src/service/index.js';
import { hang, misbehavingServer as serve, trickle } from '../helpers/servers.js';

const API_KEY = 'deadline-test-key-0123456789';

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('the call succeeded');
    },
    (error: unknown) => error,
  );
}

describe('service client deadlines', () => {
  it('ends a call whose answer trickles within the overall deadline, though no idle timeout trips', async () => {
    const server = await serve(trickle(100, '['));
    const client = new ServiceClient({ baseUrl: server.url, apiKey: API_KEY, timeouts: { bodyMs: 1_000, totalMs: 1_500 }, retry: { retries: 0 } });
    const started = performance.now();
    const error = await failure(client.listSources());
    const elapsed = performance.now() - started;
    await client.close();
    expect(isServiceError(error, 'SERVICE_NETWORK')).toBe(true);
    expect((error as Error).message).toContain('did not finish answering within 1.5 s');
    expect(elapsed).toBeGreaterThanOrEqual(1_400);
    expect(elapsed).toBeLessThan(8_000);
  });

  it('retries an idempotent call after a deadline, each attempt bounded', async () => {
    const server = await serve(trickle(100, '['));
    const client = new ServiceClient({ baseUrl: server.url, apiKey: API_KEY, timeouts: { totalMs: 300 }, retry: { retries: 2, baseDelayMs: 1, maxDelayMs: 1 } });
    const error = await failure(client.listSources());
    await client.close();
    expect(isServiceError(error, 'SERVICE_NETWORK')).toBe(true);
    expect(server.requests()).toBe(3);
  });

  it('cancel() ends a call that hangs at once and does not retry it', async () => {
    const server = await serve(hang);
    const client = new ServiceClient({ baseUrl: server.url, apiKey: API_KEY, retry: { retries: 3, baseDelayMs: 1, maxDelayMs: 1 } });
    const pending = failure(client.listSources());
    await new Promise((resolve) => setTimeout(resolve, 200));
    const started = performance.now();
    client.cancel();
    const error = await pending;
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(isServiceError(error, 'SERVICE_NETWORK')).toBe(true);
    expect((error as Error).message).toContain('cancelled');
    expect(server.requests()).toBe(1);
    // A cancelled client refuses new calls instead of sending them.
    expect(isServiceError(await failure(client.listSources()), 'SERVICE_NETWORK')).toBe(true);
    expect(server.requests()).toBe(1);
    await client.close();
  });
});
