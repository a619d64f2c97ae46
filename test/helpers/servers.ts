// HTTP servers on 127.0.0.1 that misbehave the way real ones do under trouble: accept a request and never
// answer, or answer at once and then trickle one byte at a time, forever. Closed after the test file.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll } from 'vitest';
import { waitFor } from './wait.js';

const servers: Server[] = [];

afterAll(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

export interface MisbehavingServer {
  url: string;
  /** Requests received so far. */
  requests(): number;
  /** Resolves once a request whose path starts with `prefix` has arrived. */
  arrived(prefix: string): Promise<void>;
}

/** A server whose every request goes to `handler`. */
export async function misbehavingServer(handler: (res: ServerResponse) => void): Promise<MisbehavingServer> {
  const paths: string[] = [];
  const server = createServer((req, res) => {
    paths.push(req.url ?? '');
    req.resume();
    handler(res);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => paths.length,
    arrived: async (prefix) => {
      await waitFor(`a request to ${prefix}`, () => (paths.some((p) => p.startsWith(prefix)) ? true : undefined), 15_000);
    },
  };
}

/** Takes the request and never answers. */
export function hang(): void {}

/** Answers 200 at once with the start of `body`, then one more space every `everyMs`, never finishing. */
export function trickle(everyMs: number, body = '{') {
  return (res: ServerResponse): void => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write(body);
    const timer = setInterval(() => res.write(' '), everyMs);
    res.on('close', () => clearInterval(timer));
  };
}
