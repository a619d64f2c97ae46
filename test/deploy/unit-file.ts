// Reading a systemd unit file the way the tests need it: sections of keys, each key with every value it was
// given (Environment= repeats), and a command line split into its arguments.
import { readFileSync } from 'node:fs';

export type Unit = Map<string, Map<string, string[]>>;

export function parseUnit(text: string): Unit {
  const unit: Unit = new Map();
  let section: Map<string, string[]> | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      section = unit.get(header[1] as string) ?? new Map<string, string[]>();
      unit.set(header[1] as string, section);
      continue;
    }
    const eq = line.indexOf('=');
    if (!section || eq <= 0) throw new Error(`not a unit file line: ${raw}`);
    const key = line.slice(0, eq).trim();
    section.set(key, [...(section.get(key) ?? []), line.slice(eq + 1).trim()]);
  }
  return unit;
}

export function readUnit(file: string): Unit {
  return parseUnit(readFileSync(file, 'utf8'));
}

/** The last value of `key` in `section` (as systemd takes it for single-valued settings). */
export function valueOf(unit: Unit, section: string, key: string): string | undefined {
  return unit.get(section)?.get(key)?.at(-1);
}

/** Environment= lines as variables (no quoting is used in our units). */
export function environmentOf(unit: Unit): Record<string, string> {
  const env: Record<string, string> = {};
  for (const assignment of unit.get('Service')?.get('Environment') ?? []) {
    for (const part of assignment.split(/\s+/)) {
      const eq = part.indexOf('=');
      if (eq > 0) env[part.slice(0, eq)] = part.slice(eq + 1);
    }
  }
  return env;
}

/** A command line split on whitespace, double quotes grouping; systemd's own rules for what our units use. */
export function splitCommand(line: string): string[] {
  const args: string[] = [];
  const pattern = /"([^"]*)"|(\S+)/g;
  for (let match = pattern.exec(line); match; match = pattern.exec(line)) args.push(match[1] ?? (match[2] as string));
  return args;
}

/** Replaces the specifiers our units use (%t, %S) with directories of the test's choosing. */
export function expandSpecifiers(value: string, dirs: { runtime: string; state: string }): string {
  return value.replace(/%([tS%])/g, (_, c: string) => (c === 't' ? dirs.runtime : c === 'S' ? dirs.state : '%'));
}
