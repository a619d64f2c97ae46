// /healthz, /readyz, /startupz and /metrics on a loopback address. node:http is enough for four read-only routes.
import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';
import { listenHttp } from '../net/listen.js';
import type { DaemonStatus } from './types.js';

export interface HealthServer {
  url: string;
  close(): Promise<void>;
}

export interface HealthSources {
  status(): DaemonStatus;
  /** Looks, before /readyz answers, whether what was published is still in place (a file removed is not ready). */
  checkPublished?: () => Promise<void>;
  /** Asked on the first scrape of /metrics only: probes of /healthz and /readyz never load prom-client. */
  registry: () => Registry;
}

export async function startHealthServer(listen: { host: string; port: number }, sources: HealthSources): Promise<HealthServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const send = (status: number, type: string, body: string): void => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      send(405, 'text/plain; charset=utf-8', 'method not allowed\n');
      return;
    }
    if (path === '/healthz') {
      send(200, 'application/json', '{"status":"ok"}\n');
      return;
    }
    const answerReady = (): void => {
      const status = sources.status();
      // /startupz: every profile holds its token as for /readyz, or waits for a person (a re-authorization is
      // needed), which no restart brings sooner; a start-up probe on it lets the page be served meanwhile.
      const ok = path === '/readyz' ? status.ready : status.profiles.length > 0 && status.profiles.every((p) => p.ready || p.terminal?.reason === 'reauthorization_needed');
      const body = {
        ready: status.ready,
        ...(status.coordinator ? { coordinator: status.coordinator.available ? 'available' : 'unreachable' } : {}),
        ...(status.checks ? { checks: status.checks } : {}),
        // A fleet replica's place in it: the replicas it counts live, its mode, how many shared profiles it serves.
        ...(status.fleet ? { fleet: status.fleet } : {}),
        profiles: Object.fromEntries(
          status.profiles.map((p) => [p.name, { ready: p.ready, ...(p.reason ? { reason: p.reason } : {}), expiresAt: p.expiresAt ?? null, ...(p.check?.off ? { checksOff: p.check.off } : {}) }]),
        ),
      };
      send(ok ? 200 : 503, 'application/json', `${JSON.stringify(body)}\n`);
    };
    if (path === '/readyz' || path === '/startupz') {
      // Each probe looks at the published files (probes that come during a look share the next one).
      void (sources.checkPublished?.() ?? Promise.resolve()).catch(() => undefined).then(() => answerReady());
      return;
    }
    if (path === '/metrics') {
      sources.registry().metrics().then(
        (text) => send(200, sources.registry().contentType, text),
        () => send(500, 'text/plain; charset=utf-8', 'metrics could not be collected\n'),
      );
      return;
    }
    send(404, 'text/plain; charset=utf-8', 'not found: try /healthz, /readyz, /startupz or /metrics\n');
  });
  // A scraper's idle keep-alive connection must not hold up shutdown.
  server.keepAliveTimeout = 5_000;
  return listenHttp(server, listen, 'listen');
}
