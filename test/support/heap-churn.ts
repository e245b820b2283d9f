/**
 * A process that keeps ~140 MB alive and churns garbage that lives long enough to be promoted to
 * V8's old generation, then prints its peak heap size and what is alive after a full collection
 * (the heap test). `near` as its argument: first keepHeapNearLiveData(), as `kessai simulate` does.
 * Run with `node --expose-gc --import tsx`.
 */
import { getHeapStatistics } from 'node:v8';
import { keepHeapNearLiveData } from '../../src/simulation/heap';

if (process.argv[2] === 'near') keepHeapNearLiveData();
const live: { k: number; i: number }[][] = [];
for (let i = 0; i < 150; i += 1) live.push(Array.from({ length: 16_384 }, (_, k) => ({ k, i })));
// Each array survives 64 rounds: several scavenges, so it is promoted before it dies.
const ring: unknown[] = new Array(64).fill(null);
let peak = 0;
for (let round = 0; round < 2_000; round += 1) {
  ring[round % ring.length] = Array.from({ length: 8_192 }, (_, k) => ({ k, round }));
  if (round % 25 === 0) peak = Math.max(peak, getHeapStatistics().total_heap_size);
}
(globalThis as { gc?: () => void }).gc!();
process.stdout.write(`${JSON.stringify({ peakMb: peak / 2 ** 20, liveMb: getHeapStatistics().used_heap_size / 2 ** 20, kept: live.length })}\n`);
