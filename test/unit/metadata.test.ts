import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KessaiError } from '../../src/domain/errors';
import { METADATA_LIMITS } from '../../src/domain/limits';
import {
  V1_METADATA_OBJECTS,
  createMetadata,
  mergeMetadata,
  metadataParam,
  validateMetadata,
  type Metadata,
  type MetadataFlavour,
} from '../../src/domain/metadata';
import { thrown } from '../support/rejections';


function keys(count: number, prefix = 'k'): Record<string, string> {
  return Object.fromEntries(Array.from({ length: count }, (_, i) => [`${prefix}${i}`, `v${i}`]));
}

const FLAVOURS: readonly MetadataFlavour[] = ['v1', 'v2'];

describe('metadata limits (v1 §2.10, v1 §8, v2 §2.6, v2 §8)', () => {
  it('both versions use 20 keys, 40-character keys, 500-character values', () => {
    expect(METADATA_LIMITS).toEqual({ maxKeys: 20, maxKeyLength: 40, maxValueLength: 500 });
  });

  it('v1 updatable objects: charge, customer, card, plan, subscription', () => {
    expect(V1_METADATA_OBJECTS).toEqual(['charge', 'customer', 'card', 'plan', 'subscription']);
  });

  for (const flavour of FLAVOURS) {
    describe(flavour, () => {
      it('"at most 20 keys per object": 20 pass, 21 give too_many_metadata_keys on metadata', () => {
        expect(Object.keys(validateMetadata(keys(20), flavour))).toHaveLength(20);
        const error = thrown(() => validateMetadata(keys(21), flavour));
        expect(error.code).toBe('too_many_metadata_keys');
        expect(error.param).toBe('metadata');
        expect(error.status).toBe(400);
      });

      it('"key up to 40 characters": 40 pass, 41 give invalid_metadata_key on metadata[<key>]', () => {
        const forty = 'a'.repeat(40);
        expect(validateMetadata({ [forty]: 'x' }, flavour)).toEqual({ [forty]: 'x' });
        const fortyOne = 'a'.repeat(41);
        const error = thrown(() => validateMetadata({ [fortyOne]: 'x' }, flavour));
        expect(error.code).toBe('invalid_metadata_key');
        expect(error.param).toBe(`metadata[${fortyOne}]`);
      });

      it('key length counts characters, not UTF-16 units: 40 kanji or emoji pass', () => {
        expect(() => validateMetadata({ ['注'.repeat(40)]: 'x' }, flavour)).not.toThrow();
        expect(() => validateMetadata({ ['😀'.repeat(40)]: 'x' }, flavour)).not.toThrow();
        expect(thrown(() => validateMetadata({ ['😀'.repeat(41)]: 'x' }, flavour)).code).toBe('invalid_metadata_key');
      });

      it('an empty key is refused with invalid_metadata_key', () => {
        const error = thrown(() => validateMetadata({ '': 'x' }, flavour));
        expect(error.code).toBe('invalid_metadata_key');
        expect(error.param).toBe('metadata[]');
      });

      it.each(['a[b]', 'a]', '[', 'line\nbreak', 'nul\u0000', 'tab\t'])('key %j is refused (square brackets, control characters)', (key) => {
        expect(thrown(() => validateMetadata({ [key]: 'x' }, flavour)).code).toBe('invalid_metadata_key');
      });

      it('keys may hold spaces, punctuation and Japanese', () => {
        const input = { 'order id': '1', 'order.id-2_x:y/z': '2', 注文番号: '3' };
        expect(validateMetadata(input, flavour)).toEqual(input);
      });

      it('"value a string up to 500 characters": 500 pass, 501 give invalid_metadata_value on metadata[<key>]', () => {
        expect(validateMetadata({ note: 'x'.repeat(500) }, flavour)).toEqual({ note: 'x'.repeat(500) });
        expect(() => validateMetadata({ note: 'あ'.repeat(500) }, flavour)).not.toThrow();
        const error = thrown(() => validateMetadata({ note: 'x'.repeat(501) }, flavour));
        expect(error.code).toBe('invalid_metadata_value');
        expect(error.param).toBe('metadata[note]');
      });

      it.each([[['a']], [{ nested: 'x' }], [null], [undefined], [1.5], [Number.NaN]])('value %j is refused with invalid_metadata_value', (value) => {
        const error = thrown(() => validateMetadata({ bad: value }, flavour));
        expect(error.code).toBe('invalid_metadata_value');
        expect(error.param).toBe('metadata[bad]');
      });

      it.each([[null], [['a', 'b']], ['text'], [42], [new Date(0)], [new Map()]])('metadata = %j (not a plain object) is refused on metadata', (input) => {
        const error = thrown(() => validateMetadata(input, flavour));
        expect(error.code).toBe('invalid_metadata_value');
        expect(error.param).toBe('metadata');
      });

      it('checks run in a fixed order: the key count before any entry', () => {
        const input = { ...keys(20), ['x'.repeat(41)]: 'v' };
        expect(thrown(() => validateMetadata(input, flavour)).code).toBe('too_many_metadata_keys');
      });

      it('within an entry the key is checked before the value', () => {
        expect(thrown(() => validateMetadata({ ['x'.repeat(41)]: 'v'.repeat(501) }, flavour)).code).toBe('invalid_metadata_key');
      });

      it('a key named __proto__ stays an ordinary key', () => {
        const input: unknown = JSON.parse('{"__proto__": "x", "a": "b"}');
        const result = validateMetadata(input, flavour);
        expect(Object.keys(result)).toEqual(['__proto__', 'a']);
        expect(Object.getPrototypeOf(result)).toBe(Object.prototype);
        expect(mergeMetadata(result, { __proto__x: 'y' }, flavour)).toHaveProperty('__proto__', 'x');
      });
    });
  }

  it('v1 "value a string": integers and booleans are refused in v1', () => {
    for (const value of [1, true, false]) {
      const error = thrown(() => validateMetadata({ count: value }, 'v1'));
      expect(error.code).toBe('invalid_metadata_value');
      expect(error.param).toBe('metadata[count]');
    }
  });

  it('v2 "string, integer, boolean (no arrays, no nested objects)"', () => {
    expect(validateMetadata({ s: 'x', i: 42, n: -7, z: 0, t: true, f: false }, 'v2')).toEqual({ s: 'x', i: 42, n: -7, z: 0, t: true, f: false });
    expect(thrown(() => validateMetadata({ a: [1] }, 'v2')).code).toBe('invalid_metadata_value');
    expect(thrown(() => validateMetadata({ o: { p: 1 } }, 'v2')).code).toBe('invalid_metadata_value');
  });

  it('v2 integers must be exact in JavaScript (safe integers)', () => {
    expect(validateMetadata({ big: Number.MAX_SAFE_INTEGER }, 'v2')).toEqual({ big: Number.MAX_SAFE_INTEGER });
    expect(thrown(() => validateMetadata({ big: Number.MAX_SAFE_INTEGER + 1 }, 'v2')).code).toBe('invalid_metadata_value');
    expect(thrown(() => validateMetadata({ inf: Number.POSITIVE_INFINITY }, 'v2')).code).toBe('invalid_metadata_value');
  });

  it('metadataParam names the object or one key in form syntax', () => {
    expect(metadataParam()).toBe('metadata');
    expect(metadataParam('order_id')).toBe('metadata[order_id]');
  });
});

describe('v2 §2.6 behaviour', () => {
  const stored: Metadata = { order: 'A-1', qty: 2, gift: false };

  it('rule 1: "metadata is set by sending metadata when the resource is created" — stored as sent, in order', () => {
    expect(createMetadata({ order: 'A-1', qty: 2, gift: false }, 'v2')).toEqual(stored);
    expect(Object.keys(createMetadata({ z: 1, a: 2, m: 3 }, 'v2'))).toEqual(['z', 'a', 'm']);
    expect(createMetadata({}, 'v2')).toEqual({});
  });

  it('on create, a key sent with the empty string is not stored', () => {
    expect(createMetadata({ a: '', b: 'x' }, 'v2')).toEqual({ b: 'x' });
  });

  it('rule 3: "a key that is sent overwrites the stored value, a new key is added, and keys not sent are kept"', () => {
    const result = mergeMetadata(stored, { qty: 3, note: 'hello' }, 'v2');
    expect(result).toEqual({ order: 'A-1', qty: 3, gift: false, note: 'hello' });
    // An overwritten key keeps its place; a new key goes to the end.
    expect(Object.keys(result)).toEqual(['order', 'qty', 'gift', 'note']);
  });

  it('rule 3: a value may change type on overwrite', () => {
    expect(mergeMetadata(stored, { qty: 'two', gift: true }, 'v2')).toEqual({ order: 'A-1', qty: 'two', gift: true });
  });

  it('rule 4: "sending the empty string as the value of a key deletes that key"', () => {
    expect(mergeMetadata(stored, { qty: '' }, 'v2')).toEqual({ order: 'A-1', gift: false });
  });

  it('rule 4: deleting a key that is not stored is not an error', () => {
    expect(mergeMetadata(stored, { missing: '' }, 'v2')).toEqual(stored);
  });

  it('rule 5: "sending metadata as an empty object deletes all metadata of the resource"', () => {
    expect(mergeMetadata(stored, {}, 'v2')).toEqual({});
  });

  it('merging into nothing stored (null) behaves as create', () => {
    expect(mergeMetadata(null, { a: 1, b: '' }, 'v2')).toEqual({ a: 1 });
    expect(mergeMetadata(undefined, { a: 1 }, 'v2')).toEqual({ a: 1 });
  });

  it('an update whose result would exceed 20 keys is refused and nothing changes', () => {
    const full = createMetadata(keys(20), 'v2');
    const error = thrown(() => mergeMetadata(full, { extra: 'x' }, 'v2'));
    expect(error.code).toBe('too_many_metadata_keys');
    expect(error.param).toBe('metadata');
    expect(full).toEqual(keys(20));
  });

  it('an update that deletes as many keys as it adds keeps a full object valid', () => {
    const full = createMetadata(keys(20), 'v2');
    const result = mergeMetadata(full, { k0: '', extra: 'x' }, 'v2');
    expect(Object.keys(result)).toHaveLength(20);
    expect(result).toHaveProperty('extra', 'x');
    expect(result).not.toHaveProperty('k0');
  });

  it('an invalid update changes nothing', () => {
    const before = { ...stored };
    expect(() => mergeMetadata(stored, { ok: 'x', bad: [1] }, 'v2')).toThrow(KessaiError);
    expect(stored).toEqual(before);
  });

  it('results are frozen, and the stored object is never mutated (property)', () => {
    const value = fc.oneof(fc.string({ maxLength: 5 }), fc.integer(), fc.boolean());
    const record = fc.dictionary(fc.constantFrom('a', 'b', 'c', 'd', 'e'), value, { maxKeys: 5 });
    fc.assert(
      fc.property(record, record, (storedInput, update) => {
        const current = createMetadata(storedInput, 'v2');
        const snapshot = { ...current };
        const result = mergeMetadata(current, update, 'v2');
        expect(Object.isFrozen(result)).toBe(true);
        expect(current).toEqual(snapshot);
        for (const v of Object.values(result)) expect(v).not.toBe('');
        if (Object.keys(update).length === 0) {
          expect(result).toEqual({});
          return;
        }
        for (const [key, sentValue] of Object.entries(update)) {
          if (sentValue === '') expect(result).not.toHaveProperty(key);
          else expect(result[key]).toBe(sentValue);
        }
        for (const [key, kept] of Object.entries(current)) {
          if (!(key in update)) expect(result[key]).toBe(kept);
        }
      }),
    );
  });
});

describe('v1 update (same merge rules; v1 §2.10 is silent)', () => {
  const stored: Metadata = { order: 'A-1', note: 'x' };

  it('sent keys overwrite, new keys are added, unsent keys are kept', () => {
    expect(mergeMetadata(stored, { note: 'y', extra: 'z' }, 'v1')).toEqual({ order: 'A-1', note: 'y', extra: 'z' });
  });

  it('metadata[<key>]= (empty value) deletes the key', () => {
    expect(mergeMetadata(stored, { note: '' }, 'v1')).toEqual({ order: 'A-1' });
  });

  it('metadata= (the empty string, form syntax for {}) clears all metadata', () => {
    expect(mergeMetadata(stored, '', 'v1')).toEqual({});
    expect(mergeMetadata(stored, {}, 'v1')).toEqual({});
    expect(createMetadata('', 'v1')).toEqual({});
  });

  it('v2 does not read the empty string as an empty object', () => {
    expect(thrown(() => mergeMetadata(stored, '', 'v2')).param).toBe('metadata');
  });

  it('a v1 update whose result exceeds 20 keys gives too_many_metadata_keys', () => {
    const full = createMetadata(keys(20), 'v1');
    expect(thrown(() => mergeMetadata(full, { extra: 'x' }, 'v1')).code).toBe('too_many_metadata_keys');
  });

  it('a single request may not carry more than 20 keys, even if some are deletions', () => {
    const request = { ...keys(20), gone: '' };
    expect(thrown(() => mergeMetadata({ gone: 'x' }, request, 'v1')).code).toBe('too_many_metadata_keys');
  });
});
