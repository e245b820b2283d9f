/**
 * How a refusal leaves the server, whoever refuses (the error handlers, the rate limits, the
 * Idempotency-Key handling): as the v1 error body (v1 §7) on v1 URLs, as a problem document
 * (src/api/v2/codec.ts) on v2 URLs. One place decides, so a v2 client never sees a v1 body.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { toV1Error } from './v1/codec';
import { sendProblem, V2_PREFIX } from './v2/codec';

export function isV2Request(request: Pick<FastifyRequest, 'url'>): boolean {
  return request.url === V2_PREFIX || request.url.startsWith(`${V2_PREFIX}/`) || request.url.startsWith(`${V2_PREFIX}?`);
}

export function sendRefusal(request: FastifyRequest, reply: FastifyReply, error: unknown): FastifyReply {
  if (isV2Request(request)) return sendProblem(request, reply, error);
  const refusal = toV1Error(error);
  if (refusal.status >= 500) request.log.error({ err: error }, 'request failed');
  else request.log.info({ code: refusal.code, param: refusal.param }, 'request refused');
  return reply.status(refusal.status).type('application/json; charset=utf-8').send(refusal.toV1());
}
