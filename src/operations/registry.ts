/**
 * The one registry of operations (ARCHITECTURE.md): operation name → handler. The mechanism only:
 * the table of every operation is built above it, by src/api/operations.ts from the codec modules
 * and the features, so this module imports nothing from above it and knows no wire format.
 * Scenario timelines, tests and the HTTP routes all run operations through that one table, so
 * every entry point gets the same checks, the same objects and the same errors.
 */
import { reject } from '../domain/errors';
import type { Context } from '../engine/context';
import type { Caller, Operation } from './define';

export { defineOperation, type Caller, type Operation, type OperationHandler } from './define';

export class OperationRegistry {
  readonly #byName = new Map<string, Operation>();

  constructor(groups: readonly (readonly Operation[])[]) {
    for (const operation of groups.flat()) {
      // A second definition would silently shadow the first; fail at start-up instead.
      if (this.#byName.has(operation.name)) throw new Error(`operation ${operation.name} is defined twice`);
      this.#byName.set(operation.name, operation);
    }
  }

  /** Every operation name, sorted, for help texts and scenario validation. */
  names(): string[] {
    return [...this.#byName.keys()].sort();
  }

  find(name: string): Operation | undefined {
    return this.#byName.get(name);
  }

  /**
   * Runs an operation by name for an authenticated caller. An unknown name is `not_found` (404,
   * like an unknown URL in v1 §7) naming `op`; a public key may only run operations that allow it
   * (v1 §5: the public key is "used only for creating card tokens"), otherwise `invalid_api_key`
   * (401).
   */
  async run(ctx: Context, caller: Caller, name: string, params?: unknown): Promise<object> {
    const operation = this.#byName.get(name);
    if (!operation) return reject('not_found', 'op', `Unknown operation: ${name}`);
    if (caller.kind === 'public' && operation.keys !== 'secret_or_public') {
      return reject('invalid_api_key', undefined, `A public key cannot run ${name}; use the secret key.`);
    }
    return operation.handler(ctx, caller, params);
  }
}
