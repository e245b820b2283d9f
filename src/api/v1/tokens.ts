/**
 * The v1 codec of the token operations: `tokens.create` (POST /v1/tokens, the public key's one
 * route), and `tokens.retrieve`
 * (GET /v1/tokens/{id}), `tokens.tds_finish` (POST /v1/tokens/{id}/tds_finish, no parameters) and
 * the buyer's simulated authentication step `tokens.tds_authenticate` (no API route, like
 * `charges.tds_authenticate`: the buyer runs it on kessai's issuer page, src/api/v1-three-d-secure-page.ts).
 * Operations return the token object already shaped as v1's, so encoding is the identity.
 */
import { defineCommandOperation } from '../../operations/define';
import { isPlainObject, optionalBoolean } from '../../operations/params';
import { authenticateToken, finishTokenThreeDSecure, retrieveToken } from '../../customers/token-operations';
import { createToken, readTokenCard, type CreateTokenCommand, type TokenObject } from '../../customers/tokens';
import { decodeId } from './codec';

const asV1 = (token: TokenObject): TokenObject => token;

/**
 * `tokens.create`: `three_d_secure` (boolean) first, then `card` with `number`, `exp_month`,
 * `exp_year`, `cvc`, `name` (any other key refused); the card's values are checked when tokenized.
 */
export function decodeCreateToken(input: unknown): CreateTokenCommand {
  const { three_d_secure: tdsParam, ...cardInput } = isPlainObject(input) ? input : { three_d_secure: undefined };
  const threeDSecure = optionalBoolean({ three_d_secure: tdsParam }, 'three_d_secure') ?? false;
  return { card: readTokenCard(isPlainObject(input) ? cardInput : input), threeDSecure };
}

export const TOKEN_OPERATIONS = [defineCommandOperation('tokens.create', { decode: decodeCreateToken, execute: createToken, encode: asV1 }, { keys: 'secret_or_public' })];

export const TOKEN_READ_OPERATIONS = [
  defineCommandOperation('tokens.retrieve', { decode: decodeId, execute: retrieveToken, encode: asV1 }),
  defineCommandOperation('tokens.tds_finish', { decode: decodeId, execute: finishTokenThreeDSecure, encode: asV1 }),
  // The buyer's step, run with the public key as the client library would.
  defineCommandOperation('tokens.tds_authenticate', { decode: decodeId, execute: authenticateToken, encode: asV1 }, { keys: 'secret_or_public' }),
];
