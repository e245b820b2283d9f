/**
 * HTTPS: given a certificate and key, the server speaks TLS only (v1 §5: "All traffic must use
 * HTTPS"). The SDK is not used here: it takes no CA option, and the certificate is self-signed.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildServer } from '../../src/api/server';
import { createTestDatabase, testContext, type TestDatabase } from '../support/database';

const dir = mkdtempSync(join(tmpdir(), 'kessai-tls-'));
let database: TestDatabase;
let close: () => Promise<void>;
let port: number;
let cert: Buffer;

beforeAll(async () => {
  const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1'], { encoding: 'utf8' });
  expect(made.status).toBe(0);
  cert = readFileSync(join(dir, 'cert.pem'));
  database = await createTestDatabase();
  const app = await buildServer({ ctx: testContext(database.store), https: { cert, key: readFileSync(join(dir, 'key.pem')) } });
  await app.listen({ port: 0, host: '127.0.0.1' });
  port = (app.server.address() as AddressInfo).port;
  close = () => app.close();
});
afterAll(async () => {
  await close?.();
  await database?.drop();
  rmSync(dir, { recursive: true, force: true });
});

function get(path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, ca: cert, method: 'GET' }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

it('answers over TLS and refuses plain HTTP', async () => {
  expect(await get('/health')).toEqual({ status: 200, body: '{"status":"ok"}' });
  const keyless = await get('/v1/charges');
  expect(keyless.status).toBe(401);
  expect(JSON.parse(keyless.body)).toMatchObject({ error: { code: 'no_api_key' } });
  await expect(fetch(`http://127.0.0.1:${port}/health`)).rejects.toThrow();
});
