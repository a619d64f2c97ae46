// Schemas built on first use. Building a zod schema costs a little; building every model at load costs each
// process that imports the service module, though a command reads one or two of them (`source list` parses
// connectors only, never a workflow or a job).

/**
 * `build()`'s value, built when first used and once only, standing in for it everywhere: property reads,
 * method calls, `in`, `instanceof` and `Object.keys` all go to the built value, so a schema made this way is
 * exported and typed exactly as the schema itself and can be composed into others (`z.array(lazy(…))`).
 */
export function lazy<T extends object>(build: () => T): T {
  let built: T | undefined;
  const value = (): T => (built ??= build());
  return new Proxy({} as T, {
    get: (_, key) => Reflect.get(value(), key),
    set: (_, key, next) => Reflect.set(value(), key, next),
    has: (_, key) => Reflect.has(value(), key),
    ownKeys: () => Reflect.ownKeys(value()),
    // The stand-in's own (empty) target cannot report a property as fixed that it does not have itself.
    getOwnPropertyDescriptor: (_, key) => {
      const descriptor = Reflect.getOwnPropertyDescriptor(value(), key);
      return descriptor && { ...descriptor, configurable: true };
    },
    defineProperty: (_, key, descriptor) => Reflect.defineProperty(value(), key, descriptor),
    deleteProperty: (_, key) => Reflect.deleteProperty(value(), key),
    getPrototypeOf: () => Reflect.getPrototypeOf(value()),
  });
}
