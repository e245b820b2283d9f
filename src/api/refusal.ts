/**
 * How a refusal leaves the server, whoever refuses (the error handlers, the rate limits, the
 * Idempotency-Key handling): as the v1 error body (v1 §7) on v1 URLs, as a problem document
 * (src/api/v2/codec.ts) on v2 URLs, as a page on the buyer's pages (src/api/hosted-checkout.ts).
 * One place decides, so a v2 client never sees a v1 body.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { sendRefusalPage } from './hosted-checkout';
import { withRetryAfter } from './retry-after';
import { toV1Error } from './v1/codec';
import { PROBLEM_MEDIA_TYPE } from '../domain/problem-details';
import { problemOf, V2_PREFIX } from './v2/codec';

export function isV2Request(request: Pick<FastifyRequest, 'url'>): boolean {
  return request.url === V2_PREFIX || request.url.startsWith(`${V2_PREFIX}/`) || request.url.startsWith(`${V2_PREFIX}?`);
}

/** A refusal as it leaves: status, content type and body (v1 error body or v2 problem document), logged. */
export function refusalOf(request: FastifyRequest, error: unknown): { readonly status: number; readonly contentType: string; readonly body: object } {
  if (isV2Request(request)) {
    const problem = problemOf(request, error);
    return { status: problem.status, contentType: PROBLEM_MEDIA_TYPE, body: problem };
  }
  const refusal = toV1Error(error);
  if (refusal.status >= 500) request.log.error({ err: error }, 'request failed');
  else request.log.info({ code: refusal.code, param: refusal.param }, 'request refused');
  return { status: refusal.status, contentType: 'application/json; charset=utf-8', body: refusal.toV1() };
}

export function sendRefusal(request: FastifyRequest, reply: FastifyReply, error: unknown): FastifyReply {
  if (request.routeOptions.config?.page === true) return sendRefusalPage(request, reply, error);
  const refusal = refusalOf(request, error);
  withRetryAfter(reply, refusal.status);
  return reply.status(refusal.status).type(refusal.contentType).send(refusal.body);
}
