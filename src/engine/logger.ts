/**
 * Structured logs (pino), one event per line, with `job`, `slot` and `account` fields where they
 * apply. Secret keys, passwords and connection strings are redacted wherever they appear, and
 * every `url` field goes through redactUrl (card data, keys, tokens, client secrets).
 */
import { pino, type Logger, type DestinationStream } from 'pino';
import { redactUrl } from './redact-url';

export type { Logger };

/** Field paths that never reach a log line. */
export const REDACTED_PATHS = [
  'secretKey',
  '*.secretKey',
  'secret_key',
  '*.secret_key',
  'apiKey',
  '*.apiKey',
  'keys.*',
  '*.keys.*',
  'password',
  '*.password',
  'authorization',
  '*.authorization',
  'headers.authorization',
  'databaseUrl',
  '*.databaseUrl',
  'token',
  '*.token',
] as const;

export interface LoggerOptions {
  readonly level?: string;
  /** Where lines go (default stderr, so stdout stays for command output). */
  readonly destination?: DestinationStream;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  return pino(
    {
      level: options.level ?? 'info',
      base: { app: 'kessai' },
      redact: { paths: [...REDACTED_PATHS], censor: '[redacted]' },
      // Every `url` field (the access log's, any other) without the credentials a URL may carry.
      serializers: { url: (url: unknown) => (typeof url === 'string' ? redactUrl(url) : url) },
      // Log lines carry the wall-clock time they were written; business instants go in fields.
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.destination ?? pino.destination(2),
  );
}

/** A logger that writes nothing (tests, `--json` output). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
