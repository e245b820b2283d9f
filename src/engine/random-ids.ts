/**
 * The production id generator: random words from the operating system. Kept out of src/domain,
 * which has no randomness of its own.
 */
import { randomBytes } from 'node:crypto';
import { idGenerator, type IdGenerator } from '../domain/ids';

/** Buffer a few thousand words at a time: one syscall per batch instead of per id. */
const WORDS_PER_REFILL = 4096;

export function randomIds(): IdGenerator {
  let buffer = new Uint32Array(0);
  let position = 0;
  return idGenerator(() => {
    if (position + 4 > buffer.length) {
      const bytes = randomBytes(WORDS_PER_REFILL * 4);
      buffer = new Uint32Array(bytes.buffer, bytes.byteOffset, WORDS_PER_REFILL);
      position = 0;
    }
    const words = [buffer[position]!, buffer[position + 1]!, buffer[position + 2]!, buffer[position + 3]!] as const;
    position += 4;
    return words;
  });
}
