/**
 * The v1 codec of terms (service rules §4 "Term"): `terms.retrieve` by id and `terms.list` with
 * v1 pagination; term records → v1 term objects (end_at null while open, live counts).
 */
import { defineCommandOperation } from '../../operations/define';
import { listObject } from '../../operations/pagination';
import { listTerms, renderTermRecord, retrieveTerm, TERMS_URL } from '../../settlement/terms';
import { decodeId, decodePage } from './codec';

export const TERM_OPERATIONS = [
  defineCommandOperation('terms.retrieve', { decode: decodeId, execute: retrieveTerm, encode: renderTermRecord }),
  defineCommandOperation('terms.list', {
    decode: decodePage,
    execute: listTerms,
    encode: (records, page) => listObject(records.map(renderTermRecord), page, TERMS_URL),
  }),
];
