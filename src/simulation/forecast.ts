/**
 * `kessai simulate --source`: the forecast of a live book. Opens the source's snapshot
 * (source-copy.ts), settles `--from`, and builds the scenario the simulation runs: the source's
 * accounts, with the `--scenario` file's entries (if any) on top. The simulation itself is the
 * scenario simulation's own (simulate.ts), started from the copied rows instead of an empty book.
 */
import { openSource, SourceError, type SourceSnapshot } from './source-copy';
import { overlayScenario, type Scenario } from './scenario';

export interface Forecast {
  readonly snapshot: SourceSnapshot;
  readonly from: Date;
  readonly scenario: Scenario;
  /** What the report says the forecast assumed (each run adds its decline rate: declineRateOf). */
  readonly assumptions: Readonly<Record<string, unknown>>;
}

export interface ForecastOptions {
  readonly source: string;
  readonly accounts?: readonly string[];
  /** `now`: the snapshot's newest instant. */
  readonly from: Date | 'now';
  readonly scenario?: Scenario;
}

/** Where a run's decline rate comes from: `--decline-rate` wins over the scenario's or what-if's `decline_rate`. */
export type DeclineRateSource = 'command line (--decline-rate)' | 'scenario (decline_rate)' | 'what-if (decline_rate)' | 'none';

/**
 * The decline rate a run assumes and where it comes from, for the simulation and the report's
 * assumptions. `overlay`: the what-if of a variant run (its `decline_rate` replaced the baseline's).
 */
export function declineRateOf(commandLine: number | undefined, scenario: Scenario, overlay?: Scenario): { readonly rate: number; readonly from: DeclineRateSource } {
  if (commandLine !== undefined) return { rate: commandLine, from: 'command line (--decline-rate)' };
  if (scenario.decline_rate === undefined) return { rate: 0, from: 'none' };
  return { rate: scenario.decline_rate, from: overlay?.decline_rate !== undefined ? 'what-if (decline_rate)' : 'scenario (decline_rate)' };
}

/**
 * Opens the source and settles the forecast. Refusals (an unreachable or mismatched source, an
 * unknown account, a `--from` before the snapshot) are SourceErrors raised before anything is
 * written; the caller closes `snapshot` once every run has copied it.
 */
export async function openForecast(options: ForecastOptions): Promise<Forecast> {
  const snapshot = await openSource(options.source, options.accounts ? { accounts: options.accounts } : {});
  const from = options.from === 'now' ? snapshot.instant : options.from;
  if (from.getTime() < snapshot.instant.getTime()) {
    await snapshot.close();
    throw new SourceError(
      `--from ${from.toISOString()} is before the snapshot of ${snapshot.name} (its newest instant is ${snapshot.instant.toISOString()}): a forecast starts at or after the state it copies; use --from now`,
    );
  }
  const book: Scenario = { name: `forecast of ${snapshot.name}`, accounts: snapshot.accounts.map((id) => ({ id })) };
  const scenario = options.scenario ? { ...overlayScenario(book, options.scenario), name: options.scenario.name ?? book.name } : book;
  return {
    snapshot,
    from,
    scenario,
    assumptions: {
      cards: 'the copied cards; a renewal after a card\'s expiry month fails with expired_card',
      from: options.from === 'now' ? 'now: the newest created_at/updated_at of the copied rows or job ledger slot' : 'given',
      accounts: snapshot.accounts,
    },
  };
}
