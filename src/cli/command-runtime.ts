/**
 * What every command that opens the database shares: the global options, the logger they ask for,
 * and the engine opened on the real clock with the environment's settings. Loaded only by the
 * commands that open the database (main.ts imports its type alone), so `--help`, `--version` and
 * bad arguments never load the database drivers.
 */
import type { EngineConfig, EngineObserver } from '../engine/context';
import { createLogger, silentLogger, type Logger } from '../engine/logger';
import { randomIds } from '../engine/random-ids';
import { openRuntime } from '../engine/runtime';
import { systemClock } from '../engine/system-clock';
import { closeDefaultWebhookTransport } from '../webhooks/delivery';
import { environmentConfig } from './environment';

export interface GlobalOptions {
  readonly databaseUrl?: string;
  readonly dataDir?: string;
  readonly verbose?: boolean;
  readonly logLevel: string;
}

export function logger(options: GlobalOptions): Logger {
  return options.logLevel === 'silent' ? silentLogger() : createLogger({ level: options.verbose ? 'debug' : options.logLevel });
}

export async function runtime(options: GlobalOptions, log: Logger, clock = systemClock, config: Partial<EngineConfig> = {}, observer?: EngineObserver) {
  return openRuntime({ databaseUrl: options.databaseUrl, dataDir: options.dataDir, clock, ids: randomIds(), log, config: { ...environmentConfig(), ...config }, ...(observer ? { observer } : {}), release: closeDefaultWebhookTransport });
}
