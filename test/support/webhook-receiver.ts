/**
 * A real HTTP receiver on 127.0.0.1 for webhook tests and the benchmark: it records every request
 * (path, headers, body) and answers as its `respond` function says.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** Answers a request; `hang` never answers (the sender must time out). */
export type Respond = (request: ReceivedRequest, res: ServerResponse) => void | 'hang';

export interface Receiver {
  readonly url: string;
  readonly port: number;
  readonly received: ReceivedRequest[];
  respond: Respond;
  /** Resolves once `count` requests have been received (a gate: no waiting on time). */
  until(count: number): Promise<void>;
  /** Drops the connections of the requests left hanging, and of every later one: the sender sees its connection fail. */
  dropHanging(): void;
  close(): Promise<void>;
}

export const answer =
  (status: number, body = '', headers: Record<string, string> = {}): Respond =>
  (_request, res) => {
    res.writeHead(status, headers);
    res.end(body);
  };

export async function startReceiver(respond: Respond = answer(200, 'ok')): Promise<Receiver> {
  const received: ReceivedRequest[] = [];
  const hanging = new Set<ServerResponse>();
  const waiters: { count: number; resolve: () => void }[] = [];
  const receiver: { -readonly [K in keyof Receiver]: Receiver[K] } = {
    url: '',
    port: 0,
    received,
    respond,
    until: (count) => (received.length >= count ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ count, resolve }))),
    dropHanging: () => {
      receiver.respond = (_request, res) => void res.socket?.destroy();
      for (const res of hanging) res.socket?.destroy();
      hanging.clear();
    },
    close: async () => {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      received.push(request);
      if (receiver.respond(request, res) === 'hang') hanging.add(res);
      for (const waiter of waiters.filter((w) => received.length >= w.count)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.port = (server.address() as AddressInfo).port;
  receiver.url = `http://127.0.0.1:${receiver.port}`;
  return receiver;
}

/** A port on 127.0.0.1 that refuses connections (a server was there and is gone). */
export async function refusedPort(): Promise<number> {
  const probe = await startReceiver();
  await probe.close();
  return probe.port;
}
