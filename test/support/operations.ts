/**
 * A v1 operation as a function of raw v1 parameters, for tests that set up objects through the v1
 * API (decode → execute → encode, as a scenario step or an HTTP route runs it).
 */
import type { Caller } from '../../src/accounts/accounts';
import type { Context } from '../../src/engine/context';
import { runOperation } from '../../src/api/operations';

export function v1Operation<T extends object>(name: string): (ctx: Context, caller: Caller, params: object) => Promise<T> {
  return async (ctx, caller, params) => (await runOperation(ctx, caller, name, params)) as T;
}
