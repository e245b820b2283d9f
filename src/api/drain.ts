/**
 * Stopping the server without dropping a request. `installDrain(app)` runs first thing in
 * buildServer (its hook must come before authentication); `drainServer(app)` then:
 * 1. stops listening (new connections are refused by the operating system) without closing any
 *    connection — Node's own `server.close()` would also close the connections it thinks idle,
 *    which include one whose request has arrived but not yet been read, and its client would see
 *    a reset mid-request;
 * 2. answers every request already received as usual, the last one received on a connection
 *    with `Connection: close`, so a keep-alive connection closes after its current request (and a
 *    request queued behind it on the same connection is still answered);
 * 3. refuses a request that arrives on an open connection meanwhile with 503 `service_unavailable`,
 *    `Retry-After: 1` and, as in 2, `Connection: close` (the catalogue's body for v1, a problem for v2);
 * 4. once nothing is in flight, closes the idle connections and, after `graceMs`, any left.
 * The caller then closes the app (its onClose hooks) and the database.
 */
import { Server as NetServer } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { KessaiError } from '../domain/errors';
import { sendRefusal } from './refusal';

type Drain = (options?: { readonly graceMs?: number }) => Promise<void>;
const DRAINS = new WeakMap<FastifyInstance, Drain>();

/**
 * Stops listening and resolves once every request received has been answered and every
 * connection has closed (after `graceMs` past the last answer, default 1 s, the remaining ones are
 * closed). Then close the app: `app.close()`.
 */
export async function drainServer(app: FastifyInstance, options: { readonly graceMs?: number } = {}): Promise<void> {
  const drain = DRAINS.get(app);
  if (drain === undefined) throw new Error('drainServer: this server was not built with installDrain');
  await drain(options);
}

export function installDrain(app: FastifyInstance): void {
  let draining = false;
  let inFlight = 0;
  let settled: (() => void) | null = null;
  const finished = (): void => {
    inFlight -= 1;
    if (inFlight === 0) settled?.();
  };
  // The last request received on each connection: a client may send the next request on a
  // keep-alive connection before the answer to the last (pipelining); Node answers them in order.
  const last = new WeakMap<object, object>();
  app.addHook('onRequest', async (request, reply) => {
    last.set(request.raw.socket, request.raw);
    inFlight += 1;
    // 'close' fires once the response is sent, and also when the client goes away first.
    reply.raw.once('close', finished);
    if (draining) {
      reply.header('retry-after', '1');
      return sendRefusal(request, reply, new KessaiError('service_unavailable'));
    }
  });
  // `Connection: close` only on the answer to a connection's last request: Node closes the
  // connection once that response is sent, and a request queued behind it would never be answered.
  app.addHook('onSend', async (request, reply) => {
    if (draining && last.get(request.raw.socket) === request.raw) reply.header('connection', 'close');
  });
  DRAINS.set(app, async (options = {}) => {
    if (draining) return;
    draining = true;
    const server = app.server;
    // net.Server's close: stop accepting only (http.Server's would also close "idle" connections).
    if (server.listening) NetServer.prototype.close.call(server);
    if (inFlight > 0) await new Promise<void>((resolve) => (settled = resolve));
    server.closeIdleConnections();
    const grace = setTimeout(() => server.closeAllConnections(), options.graceMs ?? 1_000);
    await new Promise<void>((resolve) => {
      const check = (): void => {
        server.getConnections((_error, count) => {
          if (count === 0) resolve();
          else setTimeout(check, 20);
        });
      };
      check();
    });
    clearTimeout(grace);
  });
}
