// The daemon bounds how far its heap grows past what it holds (V8 lets it grow up to fourfold, which made the
// first sweep's peak RSS of a 10,000-profile daemon some 1.7 times its settled RSS); an operator's own setting wins.
import v8 from 'node:v8';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { tuneHeapGrowth } from '../../src/cli/commands/daemon.js';

const nodeOptions = process.env.NODE_OPTIONS;

afterEach(() => {
  vi.restoreAllMocks();
  if (nodeOptions === undefined) delete process.env.NODE_OPTIONS;
  else process.env.NODE_OPTIONS = nodeOptions;
});

describe("the daemon's heap growth", () => {
  test('is set to 30 % past the live heap', () => {
    const set = vi.spyOn(v8, 'setFlagsFromString').mockImplementation(() => undefined);
    delete process.env.NODE_OPTIONS;
    tuneHeapGrowth();
    expect(set).toHaveBeenCalledWith('--heap-growing-percent=30');
  });

  test('is left alone when the operator set it in NODE_OPTIONS', () => {
    const set = vi.spyOn(v8, 'setFlagsFromString').mockImplementation(() => undefined);
    process.env.NODE_OPTIONS = '--heap-growing-percent=50';
    tuneHeapGrowth();
    expect(set).not.toHaveBeenCalled();
  });
});
