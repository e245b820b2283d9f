/**
 * The operator surfaces of `kessai serve` (/admin, /console, /metrics): their tokens (configured,
 * or generated and kept with the data), and on the embedded database the serve.json file through
 * which this machine's CLI reaches the operator API while the server holds the data folder.
 */
import { ALL_JOBS } from '../../jobs/index';
import { operatorSurfaces } from '../api/admin/operator-surfaces';
import { newOperatorToken, OperatorTokens } from '../api/admin/operator-tokens';
import type { Context } from '../engine/context';
import type { KessaiMetrics } from '../metrics/metrics';
import { workerName } from '../engine/runtime';
import { systemClock } from '../engine/system-clock';
import { operatorTokensOf, writeServeFile } from './operator-files';

export function operatorSetup(ctx: Context, storeKind: 'postgres' | 'pglite', dataDir: string, stopSignal: AbortSignal, metrics: KessaiMetrics) {
  const { tokens, file } = operatorTokensOf(dataDir);
  // The CLI's own token, only while this server holds the embedded database's folder.
  const cliToken = storeKind === 'pglite' && !dataDir.startsWith('memory://') ? newOperatorToken() : undefined;
  const all = cliToken === undefined ? tokens : [...tokens, { name: 'cli', token: cliToken }];
  return {
    surfaces: operatorSurfaces({ ctx, tokens: new OperatorTokens(all), jobs: ALL_JOBS, owner: workerName(), ledgerClock: systemClock, stopSignal, metrics }),
    /** Says where the operator surfaces are (never the token), and writes serve.json; returns it to remove at stop. */
    started(origin: string) {
      // The file first: once this line is printed, the CLI finds the server.
      const serveFile = cliToken === undefined ? undefined : writeServeFile(dataDir, origin, cliToken);
      console.log(`operator API on ${origin}/admin, console on ${origin}/console (operator token: ${file ?? 'KESSAI_OPERATOR_TOKEN'})`);
      return serveFile;
    },
  };
}
