/**
 * Every 503 says when to try again: Retry-After, unless the refuser set its own (the drain's 1 s);
 * otherwise UNAVAILABLE_RETRY_AFTER_SECONDS, the wait for a database that could not be reached.
 * Used by both refusal paths (v1 bodies and v2 problem documents).
 */
import type { FastifyReply } from 'fastify';
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from '../db/errors';

export function withRetryAfter(reply: FastifyReply, status: number): FastifyReply {
  if (status === 503 && !reply.hasHeader('retry-after')) reply.header('retry-after', String(UNAVAILABLE_RETRY_AFTER_SECONDS));
  return reply;
}
