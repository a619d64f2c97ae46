// Loaded with `--import` (and node's --expose-gc) into a measured daemon: on SIGUSR2 it collects garbage a few
// times and writes process.memoryUsage() to BENCH_HEAP_FILE, so that a parent can read what a long-running
// process holds live (its heap after a collection) rather than what V8 has not yet given back (its RSS).
import { renameSync, writeFileSync } from 'node:fs';

const file = process.env.BENCH_HEAP_FILE;
if (file) {
  process.on('SIGUSR2', () => {
    void (async () => {
      for (let i = 0; i < 3; i += 1) {
        globalThis.gc?.();
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      // Written whole, then renamed: the parent never reads half a file.
      writeFileSync(`${file}.part`, JSON.stringify(process.memoryUsage()));
      renameSync(`${file}.part`, file);
    })();
  });
}
