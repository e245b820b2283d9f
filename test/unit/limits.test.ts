/**
 * The spec's limits table lives in src/domain/limits.ts and nowhere else. These tests quote the
 * rows (v1 §8, service rules §2) and then check that no other source file writes the numbers out
 * again: a copy would let two features disagree when one of them is changed.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  CARD_NAME_PATTERN,
  EMAIL_PATTERN,
  IDEMPOTENCY_KEY_PATTERN,
  MAX_AMOUNT,
  MAX_REFUND_REASON_LENGTH,
  MIN_CHARGE_AMOUNT,
  MIN_PLAN_AMOUNT,
  MIN_REFUND_AMOUNT,
  REFUND_WINDOW_MS,
  THREE_D_SECURE_WINDOW_MS,
} from '../../src/domain/limits';
import { MS_PER_DAY } from '../../src/domain/time';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

describe('v1 §8 and service rules §2, as written in src/domain/limits.ts', () => {
  it('"Charge amount 50 to 9,999,999 yen", "Refund amount 1 to 9,999,999 yen", "Plan amount 50 to 9,999,999 yen"', () => {
    expect([MIN_CHARGE_AMOUNT, MIN_REFUND_AMOUNT, MIN_PLAN_AMOUNT, MAX_AMOUNT]).toEqual([50, 1, 50, 9_999_999]);
  });

  it('"Refund window 180 days from the sale"; "a pending charge can be finished for 30 minutes after creation"', () => {
    expect(REFUND_WINDOW_MS).toBe(180 * 24 * 3_600_000);
    expect(THREE_D_SECURE_WINDOW_MS).toBe(30 * 60_000);
  });

  it('"refund_reason up to 255 characters"', () => {
    expect(MAX_REFUND_REASON_LENGTH).toBe(255);
  });

  it('"Card name 2 to 45 characters" of half-width letters, digits, space, period and hyphen', () => {
    expect(CARD_NAME_PATTERN.test('a'.repeat(2))).toBe(true);
    expect(CARD_NAME_PATTERN.test('a'.repeat(45))).toBe(true);
    expect(CARD_NAME_PATTERN.test('a')).toBe(false);
    expect(CARD_NAME_PATTERN.test('a'.repeat(46))).toBe(false);
    expect(CARD_NAME_PATTERN.test('TARO YAMADA-JR.')).toBe(true);
    expect(CARD_NAME_PATTERN.test('山田 太郎')).toBe(false);
  });

  it('an e-mail address and an Idempotency-Key are at most 255 characters', () => {
    const local = 'a'.repeat(255 - '@example.jp'.length);
    expect(EMAIL_PATTERN.test(`${local}@example.jp`)).toBe(true);
    expect(EMAIL_PATTERN.test(`${local}a@example.jp`)).toBe(false);
    expect(EMAIL_PATTERN.test('no at sign')).toBe(false);
    expect(IDEMPOTENCY_KEY_PATTERN.test('k'.repeat(255))).toBe(true);
    expect(IDEMPOTENCY_KEY_PATTERN.test('k'.repeat(256))).toBe(false);
    expect(IDEMPOTENCY_KEY_PATTERN.test('has space')).toBe(false);
  });
});

/** Source text that spells a limit of the table (or a day in ms) out again. */
const COPIES: readonly { readonly what: string; readonly pattern: RegExp }[] = [
  { what: 'the largest amount', pattern: /\b9_?999_?999\b/ },
  { what: 'a 30-minute window', pattern: /\b30 \* 60 \* 1000\b|\b30 \* 60_000\b|\b1_?800_?000\b/ },
  { what: 'a day in ms', pattern: /\b24 \* 60 \* 60 \* 1000\b|\b86_?400_?000\b/ },
  { what: 'a 255-character limit', pattern: /(?<![\d.])255(?![\d.])/ },
];

/** Where the numbers may be written: the table itself, the unit of time, generated types. */
const ALLOWED = new Set(['src/domain/limits.ts', 'src/domain/time.ts', 'src/db/schema.ts']);
/** A rule of its own that happens to have the same number: card-testing flags use a 30-minute window of their own. */
const SAME_NUMBER_OTHER_RULE = new Set(['src/domain/card-flags.ts: a 30-minute window']);

function sourceFiles(dir: string, found: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sourceFiles(path, found);
    else if (name.endsWith('.ts')) found.push(path);
  }
  return found;
}

/** Every `file:line: what` where code (comments dropped) writes a limit out again. */
function copiesIn(files: readonly string[]): string[] {
  const found: string[] = [];
  for (const file of files) {
    const name = relative(repoRoot, file).split('\\').join('/');
    if (ALLOWED.has(name)) continue;
    readFileSync(file, 'utf8').split('\n').forEach((line, index) => {
      const code = line.replace(/^\s*(\*|\/\*\*?|\/\/).*$/, '').replace(/\s\/\/.*$/, '');
      for (const copy of COPIES) if (copy.pattern.test(code) && !SAME_NUMBER_OTHER_RULE.has(`${name}: ${copy.what}`)) found.push(`${name}:${index + 1}: ${copy.what}`);
    });
  }
  return found;
}

describe('no copy of the limits table', () => {
  it('the copy finder sees a copy: in code it says yes, in a comment no', () => {
    expect(COPIES.map((copy) => copy.pattern.test('export const MAX = 9_999_999;'))).toEqual([true, false, false, false]);
    expect(COPIES.some((copy) => copy.pattern.test('const WINDOW = 30 * 60 * 1000;'))).toBe(true);
    expect(COPIES.some((copy) => copy.pattern.test('const DAY_MS = 24 * 60 * 60 * 1000;'))).toBe(true);
    expect(COPIES.some((copy) => copy.pattern.test("optionalText(params, 'name', 255)"))).toBe(true);
    expect(COPIES.some((copy) => copy.pattern.test('const rate = 0.255;'))).toBe(false);
  });

  it('src/ and jobs/ write no limit and no day in ms outside limits.ts and time.ts', () => {
    const files = [...sourceFiles(join(repoRoot, 'src')), ...sourceFiles(join(repoRoot, 'jobs'))];
    expect(files.length).toBeGreaterThan(100);
    expect(copiesIn(files)).toEqual([]);
    expect(MS_PER_DAY).toBe(86_400_000);
  });
});
