// Opening an HTTP listener the daemon serves (health and metrics, the re-authorization page): the address is
// the operator's choice, so a refusal names the setting and says why in words, and closing never waits on an
// idle keep-alive connection.
import type { Server } from 'node:http';
import type { AddressInfo, Server as NetServer } from 'node:net';
import { ValidationError } from '../errors.js';

export interface Listening {
  /** `http://HOST:PORT` as bound (port 0 resolved; an IPv6 host in brackets). */
  url: string;
  close(): Promise<void>;
}

/** Listens on `listen`; a refusal is a ValidationError on `field` (exit 2). */
export async function listenHttp(server: Server, listen: { host: string; port: number }, field: string): Promise<Listening> {
  await new Promise<void>((resolve, reject) => {
    const refuse = (error: NodeJS.ErrnoException): void => {
      const why: Record<string, string> = {
        EADDRINUSE: `port ${listen.port} on ${listen.host} is already in use by another program`,
        EACCES: `may not listen on port ${listen.port} of ${listen.host} (ports below 1024 need privileges)`,
        EADDRNOTAVAIL: `${listen.host} is not an address of this machine`,
      };
      reject(new ValidationError([{ field, message: why[error.code ?? ''] ?? `cannot listen on ${listen.host}:${listen.port} (${error.code ?? error.message})` }]));
    };
    server.once('error', refuse);
    server.listen(listen.port, listen.host, () => {
      server.off('error', refuse);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * Listens on the Unix socket at `address`, created under `umask`: umask is process-wide, but bind(2) happens
 * synchronously inside listen(), and a narrower umask for that moment only makes whatever else the process
 * creates meanwhile more private, never less. Rejects with the listen error as it came, for the caller to word.
 */
export function listenUnix(server: NetServer, address: string, umask: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    const previous = process.umask(umask);
    try {
      server.listen(address, () => {
        server.off('error', reject);
        resolve();
      });
    } finally {
      process.umask(previous);
    }
  });
}
