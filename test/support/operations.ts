/**
 * An operation as a function of raw parameters, for tests that set up objects through the API
 * (decode → execute → encode, as a scenario step or an HTTP route runs it): v1 operations and the
 * v2 operations whose codec lives in src/api/v2/.
 */
import type { Caller } from '../../src/accounts/accounts';
import type { Context } from '../../src/engine/context';
import { runOperation } from '../../src/api/operations';

export function v1Operation<T extends object>(name: string): (ctx: Context, caller: Caller, params: object) => Promise<T> {
  return async (ctx, caller, params) => (await runOperation(ctx, caller, name, params)) as T;
}

/** The same for a v2 operation (raw v2 parameters, the v2 object). */
export const v2Operation = v1Operation;
