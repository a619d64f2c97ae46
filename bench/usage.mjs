// Loaded with `--import` into a measured child: at exit it writes the process's own resource usage (CPU of
// every thread, peak RSS) to BENCH_USAGE_FILE, which a parent cannot read once the child is gone.
import { writeFileSync } from 'node:fs';

const file = process.env.BENCH_USAGE_FILE;
if (file) process.on('exit', () => writeFileSync(file, JSON.stringify(process.resourceUsage())));
