/**
 * grownFileCapacity (src/db/connect.ts): how an in-memory PGlite file grows once the engine has
 * replaced Emscripten's 12.5 % steps.
 */
import { describe, expect, it } from 'vitest';
import { grownFileCapacity } from '../../src/db/connect';

const MB = 1024 * 1024;

describe('grownFileCapacity', () => {
  it('doubles a file up to 64 MB, then adds 64 MB at a time, and always fits what is wanted', () => {
    expect(grownFileCapacity(0, 100)).toBe(256);
    expect(grownFileCapacity(0, 10_000)).toBe(10_000);
    expect(grownFileCapacity(2 * MB, 2 * MB + 1)).toBe(4 * MB);
    expect(grownFileCapacity(32 * MB, 32 * MB + 8192)).toBe(64 * MB);
    expect(grownFileCapacity(64 * MB, 64 * MB + 8192)).toBe(128 * MB);
    expect(grownFileCapacity(400 * MB, 400 * MB + 8192)).toBe(464 * MB);
    expect(grownFileCapacity(400 * MB, 600 * MB)).toBe(600 * MB);
  });

  it('copies a file growing page by page to 400 MB a few dozen times, not hundreds', () => {
    let capacity = 0;
    let copies = 0;
    for (let size = 8192; size <= 400 * MB; size += 8192) {
      if (size > capacity) {
        capacity = grownFileCapacity(capacity, size);
        copies += 1;
      }
    }
    // Emscripten's own rule (×2 to 1 MB, then ×1.125) takes about 60 growths to get there.
    expect(copies).toBeLessThan(25);
  });
});
