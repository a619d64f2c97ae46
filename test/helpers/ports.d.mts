/** A TCP port on 127.0.0.1 that is free now and that no other test worker will be handed. */
export declare function freePort(): Promise<number>;
