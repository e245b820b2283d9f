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
  const receiver = {
    url: '',
    port: 0,
    received,
    respond,
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
