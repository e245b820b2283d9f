/**
 * Operator tokens: the credential of the operator API, the console and /metrics, apart from every
 * merchant key. Each token has a name, recorded as who made a change. The server holds digests
 * only, compares them in constant time, and never logs a token.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { KessaiError } from '../../domain/errors';

/** The prefix of generated operator tokens (a leaked one is recognisable in a secret scan). */
export const OPERATOR_TOKEN_PREFIX = 'kop_';

const NAME = /^[A-Za-z0-9_.@-]{1,64}$/;

export interface NamedToken {
  readonly name: string;
  readonly token: string;
}

const digest = (token: string): Buffer => createHash('sha256').update(token).digest();

/** A new random operator token (composition roots only: it reads the operating system's randomness). */
export function newOperatorToken(): string {
  return OPERATOR_TOKEN_PREFIX + randomBytes(24).toString('base64url');
}

export class OperatorTokens {
  readonly #entries: readonly { readonly name: string; readonly digest: Buffer }[];

  constructor(tokens: readonly NamedToken[]) {
    for (const { name, token } of tokens) {
      if (!NAME.test(name)) throw new Error(`operator token name ${JSON.stringify(name)}: 1 to 64 letters, digits or _ . @ -`);
      if (token.length < 16) throw new Error(`operator token ${name}: at least 16 characters`);
    }
    this.#entries = tokens.map(({ name, token }) => ({ name, digest: digest(token) }));
  }

  /** The name of the operator a token belongs to, or undefined. */
  nameOf(token: string | undefined): string | undefined {
    if (token === undefined || token.length === 0 || token.length > 512) return undefined;
    const given = digest(token);
    let found: string | undefined;
    // Every entry is compared (no early exit), each in constant time.
    for (const entry of this.#entries) if (timingSafeEqual(entry.digest, given) && found === undefined) found = entry.name;
    return found;
  }
}

/** The bearer token of an Authorization header. */
export function bearerOf(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  return /^Bearer\s+(\S+)$/i.exec(header.trim())?.[1];
}

const LOOPBACK = /^(?:127\.|::1$|::ffff:127\.)/;

/**
 * Operator surfaces answer only over TLS or to a caller on this machine (loopback), as `kessai
 * serve` itself binds only loopback without TLS; behind a TLS proxy on another host they refuse.
 */
export function assertOperatorChannel(request: FastifyRequest): void {
  const encrypted = (request.socket as { encrypted?: boolean }).encrypted === true;
  if (encrypted || LOOPBACK.test(request.socket.remoteAddress ?? '')) return;
  throw new KessaiError('not_found', { message: 'The operator surfaces answer over TLS or on loopback only.' });
}

/** The operator of a request by its bearer token; refused with 401 otherwise (merchant keys included). */
export function operatorOf(tokens: OperatorTokens, request: FastifyRequest): string {
  assertOperatorChannel(request);
  const token = bearerOf(request.headers.authorization);
  const name = tokens.nameOf(token);
  if (name === undefined) throw new KessaiError(token === undefined ? 'no_api_key' : 'invalid_api_key', { message: token === undefined ? 'The operator API needs an operator token: Authorization: Bearer <token>.' : 'Invalid operator token.' });
  return name;
}
