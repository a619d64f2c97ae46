// A webhook receiver on 127.0.0.1 for the notice tests: records every request (headers and body), answers with
// whatever status the test sets (or drops the connection), can be stopped and started again on the same port.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach } from 'vitest';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  path: string;
}

export interface Receiver {
  readonly url: string;
  readonly received: Received[];
  /** The status answered next; `drop` closes the connection without an answer. */
  status: number | 'drop';
  /** Distinct webhook-id values received with a 2xx answer, and how often each. */
  deliveredIds(): Map<string, number>;
  stop(): Promise<void>;
  start(): Promise<void>;
}

const open: Receiver[] = [];
afterEach(async () => {
  for (const receiver of open.splice(0)) await receiver.stop();
});

export async function startReceiver(port = 0): Promise<Receiver> {
  let server: Server | undefined;
  let boundPort = port;
  const received: Received[] = [];
  const answered = new Map<string, number>();
  const receiver: Receiver = {
    get url() {
      return `http://127.0.0.1:${boundPort}/hook`;
    },
    received,
    status: 200,
    deliveredIds: () => answered,
    async start() {
      server = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (chunk: Buffer) => chunks.push(chunk));
        req.on('end', () => {
          received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), path: req.url ?? '' });
          const status = receiver.status;
          if (status === 'drop') {
            req.socket.destroy();
            return;
          }
          if (status >= 200 && status < 300) {
            const id = String(req.headers['webhook-id']);
            answered.set(id, (answered.get(id) ?? 0) + 1);
          }
          res.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
        });
      });
      await new Promise<void>((resolve) => server?.listen(boundPort, '127.0.0.1', resolve));
      boundPort = (server.address() as AddressInfo).port;
    },
    async stop() {
      const s = server;
      server = undefined;
      if (!s) return;
      s.closeAllConnections();
      await new Promise((resolve) => s.close(resolve));
    },
  };
  await receiver.start();
  open.push(receiver);
  return receiver;
}
