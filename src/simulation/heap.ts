/**
 * How a simulation process uses memory. V8 lets the old generation grow to up to four times what
 * survived its last full collection before it collects again, and a simulation's sign-ups promote
 * a great deal that dies soon after (each bulk batch's documents and rows): a 1,000,000-subscription
 * book peaked at ~2 GB of RSS at the end of its sign-ups with about 1 GB alive. A simulation is a
 * batch run whose memory the analyst's machine sets, so it trades a few more full collections for
 * a heap kept near what is alive: the old generation may grow by HEAP_GROWING_PERCENT before V8
 * collects it again. (Figures in docs/decisions/performance.md, "A simulation's heap grows by a
 * fifth past its live data".)
 */
import { setFlagsFromString } from 'node:v8';

/** How far the old generation may grow past what survived the last full collection, in percent. */
export const HEAP_GROWING_PERCENT = 20;

/**
 * Keeps this process's heap near its live data for the rest of its life (a V8 flag read at every
 * full collection). For the simulation's own processes (`kessai simulate`, the benchmarks that run
 * it), not for a server: it favours memory over speed.
 */
export function keepHeapNearLiveData(): void {
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
}
