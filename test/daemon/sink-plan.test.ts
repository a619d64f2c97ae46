// The sinks of a daemon run planned as one step (src/daemon/sink-plan.ts): each kind's settings checked and
// every bad one named at once, then a sink another process holds, then a port in use, and only then each sink
// placed; the plan's lock takes them for the run.
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseDaemonConfig } from '../../src/daemon/config-file.js';
import { planDaemonSinks, type SinkPlanInput } from '../../src/daemon/sink-plan.js';
import { ValidationError } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import { insidePrivateSubdir } from '../../src/publish/place.js';
import { tempDir } from '../helpers/cli.js';

const FIELDS = {
  tokenFile: '--token-file',
  tokenFilePath: '--token-file or SYNCAUTH_TOKEN_FILE',
  tokenFileMode: '--token-file-mode',
  tokenFileGroup: '--token-file-group',
  socket: '--socket',
  socketPath: '--socket or SYNCAUTH_SOCKET',
};

function input(dir: string, more: Partial<SinkPlanInput> = {}): SinkPlanInput & { lines: string[] } {
  const lines: string[] = [];
  return {
    names: ['a', 'b'],
    settings: { tokenFile: undefined, tokenFileMode: undefined, tokenFileGroup: undefined, socket: undefined },
    templates: [],
    socketMode: undefined,
    socketGroup: undefined,
    once: false,
    listen: [],
    config: undefined,
    fields: FIELDS,
    log: createLogger({ level: 'debug', destination: { write: (line: string) => void lines.push(line) } }),
    lines,
    ...more,
  };
}

async function issuesOf(promise: Promise<unknown>): Promise<string[]> {
  const error = await promise.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(ValidationError);
  return (error as ValidationError).issues.map((issue) => `${issue.field}: ${issue.message}`);
}

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

async function portInUse(): Promise<number> {
  const server = createServer();
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

describe('the sinks of a daemon run, planned', () => {
  it("places the daemon-wide sinks, the profiles' own and the socket, and locks them for the run; a second plan over them is refused", async () => {
    const dir = tempDir('syncauth-plan-');
    const source = path.join(dir, 'env.tmpl');
    writeFileSync(source, 'TOKEN={{ access_token }}\n', { mode: 0o600 });
    const config = parseDaemonConfig(`version: 1\nprofiles:\n  a:\n  b:\n    sinks:\n      token_file: {path: ${dir}/own-b}\n`, path.join(dir, 's.yaml'));
    const given = input(dir, {
      settings: { tokenFile: path.join(dir, 'token-{profile}'), tokenFileMode: '0640', tokenFileGroup: undefined, socket: path.join(dir, 's.sock') },
      templates: [`${source}:${dir}/{profile}.env`],
      config,
    });
    const plan = await planDaemonSinks(given);
    expect(plan.tokenFile).toBe(path.join(dir, 'token-{profile}'));
    expect(plan.tokenFileAccess).toMatchObject({ mode: 0o640 });
    expect(plan.templates.map((t) => t.dest)).toEqual([path.join(dir, '{profile}.env')]);
    expect(plan.profileSinks.get('b')?.tokenFile).toBe(path.join(dir, 'own-b'));
    expect(plan.profileSinks.has('a')).toBe(false);
    expect(plan.socket?.path).toBe(path.join(dir, 's.sock'));
    expect(plan.sharedTokenFile('a')).toBe(path.join(dir, 'token-a'));

    const locks = await plan.lock();
    try {
      // Another run over the same sinks is refused before anything of it is placed, naming the sink.
      const again = await issuesOf(planDaemonSinks(input(dir, { ...given, log: given.log })));
      expect(again.join('\n')).toContain(path.join(dir, 'token-a'));
    } finally {
      await locks.release();
    }
  });

  it('names every bad setting at once, before a port in use is tried', async () => {
    const dir = tempDir('syncauth-plan-');
    const port = await portInUse();
    const issues = await issuesOf(
      planDaemonSinks(input(dir, {
        settings: { tokenFile: path.join(dir, 'token'), tokenFileMode: '0666', tokenFileGroup: undefined, socket: undefined },
        templates: ['no-colon-here'],
        names: ['a'],
        listen: [{ listen: { host: '127.0.0.1', port }, field: '--listen' }],
      })),
    );
    expect(issues).toEqual([expect.stringMatching(/^--token-file-mode: /), expect.stringMatching(/^--template: /)]);
  });

  it('refuses a port in use before a sink in a shared directory gets its private subdirectory', async () => {
    const dir = tempDir('syncauth-plan-');
    const shared = path.join(dir, 'shared');
    mkdirSync(shared);
    chmodSync(shared, 0o1777);
    const port = await portInUse();
    const tokenFile = path.join(shared, 'token');
    const issues = await issuesOf(
      planDaemonSinks(input(dir, {
        names: ['a'],
        settings: { tokenFile, tokenFileMode: undefined, tokenFileGroup: undefined, socket: undefined },
        listen: [{ listen: { host: '127.0.0.1', port }, field: '--listen' }],
      })),
    );
    expect(issues).toEqual([expect.stringMatching(/^--listen: /)]);
    expect(existsSync(path.dirname(insidePrivateSubdir(tokenFile)))).toBe(false);

    // With the port free, the token file moves into the daemon's own subdirectory there, and says so.
    const given = input(dir, { names: ['a'], settings: { tokenFile, tokenFileMode: undefined, tokenFileGroup: undefined, socket: undefined } });
    const plan = await planDaemonSinks(given);
    expect(plan.tokenFile).toBe(insidePrivateSubdir(tokenFile));
    expect(given.lines.some((line) => line.includes('"event":"sink.moved"') && line.includes('--token-file'))).toBe(true);
  });

  it('plans no socket for one pass, and tries no port', async () => {
    const dir = tempDir('syncauth-plan-');
    const port = await portInUse();
    const plan = await planDaemonSinks(input(dir, {
      names: ['a'],
      once: true,
      settings: { tokenFile: path.join(dir, 'token'), tokenFileMode: undefined, tokenFileGroup: undefined, socket: path.join(dir, 's.sock') },
      listen: [{ listen: { host: '127.0.0.1', port }, field: '--listen' }],
    }));
    expect(plan.socket).toBeUndefined();
    expect(plan.tokenFile).toBe(path.join(dir, 'token'));
    const locks = await plan.lock();
    await locks.release();
  });
});
