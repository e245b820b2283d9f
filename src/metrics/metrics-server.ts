/**
 * A plain HTTP listener that serves only /metrics: `kessai worker --metrics-port N` (the worker has
 * no other server) and `kessai serve --metrics-port N` (a separate bind, so Prometheus needs no
 * operator token). Loopback by default; the address is the operator's choice.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Context } from '../engine/context';
import type { Clock } from '../engine/clock';
import { METRICS_CONTENT_TYPE, type KessaiMetrics } from './metrics';

export async function startMetricsServer(options: { readonly metrics: KessaiMetrics; readonly ctx: Context; readonly clock: Clock; readonly host: string; readonly port: number }): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0];
    if (request.method !== 'GET' || path !== '/metrics') {
      response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('only GET /metrics here\n');
      return;
    }
    options.metrics.render(options.ctx, options.clock.now()).then(
      (text) => response.writeHead(200, { 'content-type': METRICS_CONTENT_TYPE }).end(text),
      () => response.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('metrics could not be rendered\n'),
    );
  });
  server.requestTimeout = 10_000;
  server.headersTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  return {
    url: `http://${host}:${address.port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
