// The sidecar's parts as one group (src/daemon/sidecar.ts): each part closed once, in reverse order of starting,
// whether a later part fails to start, a stop comes during the start, or the run ends.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/log.js';
import { PartGroup, startSidecar, type SidecarParts } from '../../src/daemon/sidecar.js';
import type { HeldSignals } from '../../src/daemon/signals.js';
import type { Coordinator } from '../../src/daemon/coordinator.js';
import type { RunningDaemon } from '../../src/daemon/types.js';
import type { SinkLocks } from '../../src/publish/sink-lock.js';

function logged(): { log: ReturnType<typeof createLogger>; lines: () => Record<string, unknown>[] } {
  const raw: string[] = [];
  const log = createLogger({ level: 'debug', destination: { write: (line: string) => void raw.push(line) } });
  return { log, lines: () => raw.map((line) => JSON.parse(line) as Record<string, unknown>) };
}

describe('PartGroup', () => {
  it('a part that fails to start closes the ones started, in reverse, and the error goes on', async () => {
    const { log } = logged();
    const group = new PartGroup(log);
    const closed: string[] = [];
    await group.start('a', () => 'A', (part) => void closed.push(part));
    await group.start('off', () => undefined, () => void closed.push('off'));
    await group.start('b', async () => 'B', async (part) => void closed.push(part));
    const failure = new Error('c cannot start');
    await expect(group.start('c', () => Promise.reject(failure), () => void closed.push('C'))).rejects.toBe(failure);
    expect(closed).toEqual(['B', 'A']);
    expect(group.started).toEqual([]);
  });

  it('a step that throws closes what was started', async () => {
    const { log } = logged();
    const group = new PartGroup(log);
    const closed: string[] = [];
    await group.start('a', () => 'A', (part) => void closed.push(part));
    await expect(group.step(() => { throw new Error('no'); })).rejects.toThrow('no');
    expect(closed).toEqual(['A']);
  });

  it('a stop closes every part once, in reverse, however often it is asked for; one failing to close does not keep the rest open', async () => {
    const { log, lines } = logged();
    const group = new PartGroup(log);
    const closed: string[] = [];
    for (const name of ['sinks', 'coordinator', 'notifier', 'daemon']) {
      await group.start(name, () => name, (part) => {
        closed.push(part);
        if (part === 'notifier') throw new Error('the outbox is gone');
      });
    }
    expect(group.started).toEqual(['sinks', 'coordinator', 'notifier', 'daemon']);
    await Promise.all([group.close(), group.close()]);
    await group.close();
    expect(closed).toEqual(['daemon', 'notifier', 'coordinator', 'sinks']);
    expect(lines().filter((line) => line.event === 'daemon.close_failed').map((line) => line.part)).toEqual(['notifier']);
  });
});

/** Parts that record their starts and closes; `failAt` makes that part's start throw. */
function fakeParts(order: string[], options: { failAt?: string; signals?: HeldSignals; once?: boolean } = {}): SidecarParts<{ close(): Promise<void> }, { close(): Promise<void>; tick(): Promise<void> }> {
  const { log } = logged();
  const opened = async <T>(what: string, part: T): Promise<T> => {
    if (options.failAt === what) throw new Error(`${what} failed`);
    order.push(`start ${what}`);
    return part;
  };
  const closes = (what: string) => async () => void order.push(`close ${what}`);
  const daemon = { close: closes('daemon'), status: () => ({ ready: true, profiles: [] }) } as unknown as RunningDaemon;
  return {
    log,
    once: options.once ?? false,
    signals: options.signals ?? { stopped: new Promise(() => undefined), reload: false, release: () => undefined },
    sinks: () => opened('sinks', { release: closes('sinks') } as unknown as SinkLocks),
    prepare: async () => void (await opened('prepare', undefined)),
    coordinator: () => opened('coordinator', { close: closes('coordinator'), ready: async () => undefined } as unknown as Coordinator),
    stores: () => opened('stores', { close: closes('stores') }),
    notifier: () => opened('notifier', { close: closes('notifier'), tick: async () => undefined }),
    page: () => opened('page', closes('page')),
    daemon: () => opened('daemon', daemon),
  };
}

describe('startSidecar', () => {
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });

  it('starts the parts in order, and closes them all in reverse once when stopped', async () => {
    const order: string[] = [];
    const sidecar = await startSidecar(fakeParts(order));
    expect(order).toEqual(['start sinks', 'start prepare', 'start coordinator', 'start stores', 'start notifier', 'start page', 'start daemon']);
    order.length = 0;
    await sidecar?.close();
    await sidecar?.close();
    expect(order).toEqual(['close daemon', 'close page', 'close notifier', 'close stores', 'close coordinator', 'close sinks']);
  });

  it.each(['sinks', 'prepare', 'coordinator', 'stores', 'notifier', 'page', 'daemon'])('%s failing to start closes what started before it, in reverse, and throws', async (failAt) => {
    const order: string[] = [];
    await expect(startSidecar(fakeParts(order, { failAt }))).rejects.toThrow(`${failAt} failed`);
    const started = order.filter((step) => step.startsWith('start ')).map((step) => step.slice('start '.length)).filter((what) => what !== 'prepare');
    expect(started).not.toContain(failAt);
    expect(order.filter((step) => step.startsWith('close '))).toEqual(started.reverse().map((what) => `close ${what}`));
  });

  it('a part a run does not have is skipped', async () => {
    const order: string[] = [];
    const parts = fakeParts(order);
    delete parts.coordinator;
    delete parts.notifier;
    parts.stores = async () => undefined;
    const sidecar = await startSidecar(parts);
    expect(sidecar?.notifier).toBeUndefined();
    await sidecar?.close();
    expect(order).toEqual(['start sinks', 'start prepare', 'start page', 'start daemon', 'close daemon', 'close page', 'close sinks']);
  });

  it('a stop asked for during the start ends it before the page and the daemon, with what started closed', async () => {
    // The stop's last step arms a timer that ends the process should a stray handle hold it: kept from firing here.
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    const order: string[] = [];
    const signals: HeldSignals = { stop: 'SIGTERM', stopped: Promise.resolve(), reload: false, release: () => undefined };
    const sidecar = await startSidecar(fakeParts(order, { signals }));
    expect(sidecar).toBeUndefined();
    expect(order).toEqual(['start sinks', 'start prepare', 'start coordinator', 'start stores', 'start notifier', 'close notifier', 'close stores', 'close coordinator', 'close sinks']);
    vi.clearAllTimers();
  });

  it('the page sees, while the daemon starts, a daemon that knows no profile, then the daemon', async () => {
    const order: string[] = [];
    const parts = fakeParts(order);
    let seen: RunningDaemon | undefined;
    let before: unknown;
    const page = parts.page as NonNullable<typeof parts.page>;
    parts.page = (starting, stores) => {
      seen = starting;
      before = starting.status();
      return page(starting, stores);
    };
    const sidecar = await startSidecar(parts);
    expect(before).toEqual({ ready: false, profiles: [] });
    // Once it runs, the daemon answers.
    expect(seen?.status()).toEqual({ ready: true, profiles: [] });
    await sidecar?.close();
  });
});
