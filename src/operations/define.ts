/**
 * What an operation is, and who calls it. Below the features: they define their operations with
 * it, and src/api/operations.ts puts them in the registry.
 */
import type { Context } from '../engine/context';

/** Who runs an operation: the account and mode of the API key that authenticated, and its kind. */
export interface Caller {
  readonly accountId: string;
  readonly livemode: boolean;
  readonly kind: 'secret' | 'public';
}

/**
 * Runs one operation for an authenticated caller: returns the API-shaped object (v1 JSON) or
 * throws a KessaiError. `params` is raw input; the handler checks it (see params.ts).
 */
export type OperationHandler = (ctx: Context, caller: Caller, params: unknown) => Promise<object>;

export interface Operation {
  /** `<resource>.<verb>`, e.g. `customers.create`. */
  readonly name: string;
  /** Which API keys may call it: the public key only creates tokens (v1 §5). */
  readonly keys: 'secret' | 'secret_or_public';
  readonly handler: OperationHandler;
  /** The parts of a command operation (see defineCommandOperation); absent on a plain handler. */
  readonly parts?: CommandOperationParts<never, never>;
}

export interface OperationOptions {
  readonly keys?: Operation['keys'];
}

export function defineOperation(name: string, handler: OperationHandler, options: OperationOptions = {}): Operation {
  return { name, keys: options.keys ?? 'secret', handler };
}

/**
 * What a decode may read besides the parameters: who calls (a rule of the key's mode, such as
 * "test mode only", is a parameter refusal) and the clock (a card's expiry is checked against the
 * current month). Never the database.
 */
export interface DecodeRequest {
  readonly caller: Caller;
  readonly clock: Context['clock'];
}

/**
 * An operation split from its wire format: `decode` turns the API's parameters into a typed
 * command (all parameter checks, no database), `execute` carries it out and returns a domain
 * result, `encode` renders the result as the API's object. The v1 codec supplies `decode` and
 * `encode`; a v2 codec pairs other ones with the same `execute`.
 */
export interface CommandOperationParts<C, R> {
  readonly decode: (input: unknown, request: DecodeRequest) => C;
  readonly execute: (ctx: Context, caller: Caller, command: C) => Promise<R>;
  readonly encode: (result: R, command: C) => object;
}

export function defineCommandOperation<C, R>(name: string, parts: CommandOperationParts<C, R>, options: OperationOptions = {}): Operation {
  const operation = defineOperation(
    name,
    async (ctx, caller, input) => {
      const command = parts.decode(input, { caller, clock: ctx.clock });
      return parts.encode(await parts.execute(ctx, caller, command), command);
    },
    options,
  );
  return { ...operation, parts: parts as unknown as CommandOperationParts<never, never> };
}
