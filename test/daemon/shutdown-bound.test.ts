// A stop always ends: a part that does not close (here a coordinator whose close never answers) is left
// behind after the shutdown timeout and a short grace, and said in the log; the parts before it are closed.
import { describe, expect, it } from 'vitest';
import type { Coordinator } from '../../src/daemon/coordinator.js';
import { startDaemon } from '../../src/daemon/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { captureLog, emulator, obtainGrant, profileOf, tempDir } from './helpers.js';

function hungCoordinator(): Coordinator {
  return {
    replicaId: 'hung',
    acquire: async () => undefined,
    lastReconcile: async () => undefined,
    recordReconcile: async () => undefined,
    isAvailable: () => true,
    close: () => new Promise<void>(() => undefined),
  };
}

describe('Daemon.close', () => {
  it('leaves a part that does not close behind, after the shutdown timeout and a grace, and says so', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const log = captureLog();
    const daemon = await startDaemon({
      profiles: [profileOf(emu, { name: 'bound', grant })],
      profileStore: openProfileStore(tempDir()),
      renewMarginMs: 60_000,
      schedule: false,
      shutdownTimeoutMs: 500,
      listen: { host: '127.0.0.1', port: 0 },
      coordinator: hungCoordinator(),
      logger: log.logger,
    });
    const url = daemon.url as string;
    const started = Date.now();
    const closed = await Promise.race([daemon.close().then(() => 'closed'), new Promise((resolve) => setTimeout(() => resolve('hung'), 8_000))]);
    expect(closed).toBe('closed');
    expect(Date.now() - started).toBeLessThan(500 + 2_000 + 1_000);
    expect(log.records().filter((r) => r.event === 'daemon.close_failed').map((r) => r.part)).toEqual(['coordinator']);
    // The health server, closed before it, is gone.
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
  });
});
