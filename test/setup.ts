// Runs in every test file: temporary directories made through the CLI helper are removed afterwards, and after
// each test no spawned syncauth may have printed Node's own warnings (`(node:…) …Warning`) on its stderr, whether a
// helper or the test itself spawned it.
import { afterAll, afterEach } from 'vitest';
import { checkNodeWarnings, forgetWatched, removeTempDirs, watchSpawnedCli } from './helpers/cli.js';

watchSpawnedCli();
afterEach(() => checkNodeWarnings());
afterAll(() => {
  forgetWatched();
  removeTempDirs();
});
