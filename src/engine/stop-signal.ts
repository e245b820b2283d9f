/**
 * How every command that runs jobs stops when asked to (`worker`, `worker --once`, `jobs run`,
 * `statements run`, and any later command that runs a scheduler in-process): the first SIGTERM or
 * SIGINT aborts `signal`; the scheduler given it (`new Scheduler(ctx, jobs, { stopSignal })`)
 * lets the current batch commit, hands its slot back as `pending` with the attempt not counted,
 * and starts nothing more; the command then closes the database and exits 0.
 *
 * Install it before anything else (opening the database included): until the handlers exist, the
 * signal's default action kills the process mid-batch. The handlers stay until `dispose()`, so a
 * repeated signal — an impatient operator, or a supervisor that sends SIGTERM then SIGINT — never
 * cuts the batch short; unless the command asks for `onRepeat: 'exit'` (`kessai serve`, whose
 * operator may not want to wait for slow requests): then a second signal exits at once with status
 * 1, which the engine survives as it survives a crash (leases lapse, transactions roll back).
 */
import type { Logger } from './logger';

export interface StopSignal {
  /** Aborted at the first stop signal; pass it to the Scheduler as `stopSignal`. */
  readonly signal: AbortSignal;
  /** Resolves with the signal's name at the first one (what a long-running command waits for). */
  readonly stopped: Promise<NodeJS.Signals>;
  /** Removes the handlers: call it once the command has finished its work. */
  dispose(): void;
}

/** The signals that ask kessai to stop politely. */
export const STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT'];

export interface StopOptions {
  /** What a second signal does: `wait` (the default: nothing, the work finishes) or `exit` at once. */
  readonly onRepeat?: 'wait' | 'exit';
}

export function listenForStop(log: Logger, signals: readonly NodeJS.Signals[] = STOP_SIGNALS, options: StopOptions = {}): StopSignal {
  const controller = new AbortController();
  let resolveStopped: (signal: NodeJS.Signals) => void = () => {};
  const stopped = new Promise<NodeJS.Signals>((resolve) => (resolveStopped = resolve));
  const onSignal = (signal: NodeJS.Signals): void => {
    if (controller.signal.aborted) {
      if (options.onRepeat === 'exit') {
        log.warn({ signal }, 'second stop signal: exiting now, without waiting for the requests in flight');
        process.exit(1);
      }
      log.warn({ signal }, 'already stopping: the current batch finishes first');
      return;
    }
    log.info({ signal }, 'stopping: the current batch finishes, its slot is handed back, nothing more starts');
    controller.abort(signal);
    resolveStopped(signal);
  };
  for (const signal of signals) process.on(signal, onSignal);
  return {
    signal: controller.signal,
    stopped,
    dispose: () => {
      for (const signal of signals) process.off(signal, onSignal);
    },
  };
}
