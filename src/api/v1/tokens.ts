/**
 * The v1 codec of the token operations added by issue 15 point 3: `tokens.retrieve`
 * (GET /v1/tokens/{id}), `tokens.tds_finish` (POST /v1/tokens/{id}/tds_finish, no parameters) and
 * the buyer's simulated authentication step `tokens.tds_authenticate` (no v1 route, like
 * `charges.tds_authenticate`: the buyer talks to the issuer, not to the merchant's server).
 * Operations return the token object already shaped as v1's, so encoding is the identity.
 */
import { defineCommandOperation } from '../../operations/define';
import { authenticateToken, finishTokenThreeDSecure, retrieveToken } from '../../customers/token-operations';
import type { TokenObject } from '../../customers/tokens';
import { decodeId } from './codec';

const asV1 = (token: TokenObject): TokenObject => token;

export const TOKEN_READ_OPERATIONS = [
  defineCommandOperation('tokens.retrieve', { decode: decodeId, execute: retrieveToken, encode: asV1 }),
  defineCommandOperation('tokens.tds_finish', { decode: decodeId, execute: finishTokenThreeDSecure, encode: asV1 }),
  // The buyer's step, run with the public key as the client library would.
  defineCommandOperation('tokens.tds_authenticate', { decode: decodeId, execute: authenticateToken, encode: asV1 }, { keys: 'secret_or_public' }),
];
